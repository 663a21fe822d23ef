// What a shop does when a product changes: it tells the tier, through the
// tier's /__purge and /__known-ids (docs/origin-contract.md, "Change
// notifications"), retrying what may succeed later.
//
// A few quick attempts first, so that the admin call that made the change
// can say what came of it; then, while the tier answers 503 (Redis could not
// record the purge: nothing was acknowledged) or cannot be reached, on in
// the background at the pace its Retry-After asks, for up to
// NOTIFY_GIVE_UP_MS. A change made during a Redis outage of a minute is
// everywhere once Redis is back, not only once the old copies expire.
import { delay } from "./state";

const NOTIFY_RETRIES = 3;
const NOTIFY_BACKOFF_MS = 100;
const NOTIFY_TIMEOUT_MS = 2_000;
/** How long the background retries go on after the quick ones failed. */
const NOTIFY_GIVE_UP_MS = 5 * 60_000;
/** Their pace without a Retry-After: from 1 s, doubling, at most 30 s (and at most 30 s whatever Retry-After says). */
const BACKGROUND_BACKOFF_MS = { first: 1_000, max: 30_000 };

/** What came of telling the tier about a change; status null when no HTTP answer came. */
interface NotifyResult {
  status: number | null;
  error?: string;
  /** The quick attempts failed and the notifier goes on in the background (see above). */
  retrying?: true;
}

interface Attempt extends NotifyResult {
  /** ms the tier asked to wait (its Retry-After), when it said. */
  retryAfterMs?: number;
}

/** Whether another attempt may succeed: no answer, 429 or 5xx. */
const retryable = (attempt: Attempt) => attempt.status === null || attempt.status === 429 || attempt.status >= 500;

async function attempt(url: string, headers: Record<string, string>, body: string, closing: AbortSignal): Promise<Attempt> {
  try {
    const response = await fetch(url, { method: "POST", headers, body, signal: AbortSignal.any([closing, AbortSignal.timeout(NOTIFY_TIMEOUT_MS)]) });
    await response.body?.cancel();
    const { status } = response;
    if (response.ok) return { status };
    const seconds = Number(response.headers.get("retry-after"));
    return { status, error: `HTTP ${status}`, ...(Number.isFinite(seconds) && seconds >= 0 ? { retryAfterMs: seconds * 1000 } : {}) };
  } catch (err) {
    return { status: null, error: err instanceof Error ? err.message : String(err) };
  }
}

/** The background retries, until one succeeds or is refused for good, NOTIFY_GIVE_UP_MS pass, or `closing` aborts. */
async function keepTrying(url: string, headers: Record<string, string>, body: string, id: string, last: Attempt, closing: AbortSignal): Promise<void> {
  const giveUpAt = Date.now() + NOTIFY_GIVE_UP_MS;
  let backoff = BACKGROUND_BACKOFF_MS.first;
  while (retryable(last) && !closing.aborted) {
    const wait = Math.min(last.retryAfterMs ?? backoff, BACKGROUND_BACKOFF_MS.max);
    if (Date.now() + wait > giveUpAt) {
      console.error(`notify ${url} for ${id}: gave up after ${NOTIFY_GIVE_UP_MS / 1000} s (${last.error})`);
      return;
    }
    await delay(wait, closing);
    backoff = Math.min(backoff * 2, BACKGROUND_BACKOFF_MS.max);
    if (closing.aborted) return;
    last = await attempt(url, headers, body, closing);
  }
  if (!closing.aborted) console.log(`notify ${url} for ${id}: ${last.error ?? `HTTP ${last.status}`} after retrying in the background`);
}

/**
 * POSTs `{ids: [id]}` to `url` with the bearer token, retrying network
 * errors, 429 and 5xx: quickly (exponential backoff from 100 ms) a few
 * times, then in the background (see above). null when `url` is unset.
 */
export async function notifyTier(url: string | undefined, token: string | undefined, id: string, closing: AbortSignal): Promise<NotifyResult | null> {
  if (!url) return null;
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  const body = JSON.stringify({ ids: [id] });
  let last: Attempt = { status: null };
  for (let tries = 0; tries <= NOTIFY_RETRIES; tries++) {
    if (tries > 0) await delay(NOTIFY_BACKOFF_MS * 2 ** (tries - 1), closing);
    if (closing.aborted) break;
    last = await attempt(url, headers, body, closing);
    if (!retryable(last)) break;
  }
  const { status, error } = last;
  if (!retryable(last) || closing.aborted) return error ? { status, error } : { status };
  void keepTrying(url, headers, body, id, last, closing);
  return { status, ...(error ? { error } : {}), retrying: true };
}
