// What a shop does when a product changes: it tells the tier, through the
// tier's /__purge and /__known-ids (docs/origin-contract.md, "Change
// notifications"), retrying what may succeed later.
import { delay } from "./state";

const NOTIFY_RETRIES = 3;
const NOTIFY_BACKOFF_MS = 100;
const NOTIFY_TIMEOUT_MS = 2_000;

/** What came of telling the tier about a change; status null when no HTTP answer came. */
interface NotifyResult {
  status: number | null;
  error?: string;
}

/**
 * POSTs `{ids: [id]}` to `url` with the bearer token, retrying network
 * errors, 429 and 5xx with exponential backoff; gives up when `closing`
 * aborts. null when `url` is unset.
 */
export async function notifyTier(url: string | undefined, token: string | undefined, id: string, closing: AbortSignal): Promise<NotifyResult | null> {
  if (!url) return null;
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  let result: NotifyResult = { status: null };
  for (let attempt = 0; attempt <= NOTIFY_RETRIES; attempt++) {
    if (attempt > 0) await delay(NOTIFY_BACKOFF_MS * 2 ** (attempt - 1), closing);
    if (closing.aborted) break;
    try {
      const response = await fetch(url, {
        method: "POST",
        headers,
        body: JSON.stringify({ ids: [id] }),
        signal: AbortSignal.any([closing, AbortSignal.timeout(NOTIFY_TIMEOUT_MS)]),
      });
      await response.body?.cancel();
      const { status } = response;
      result = response.ok ? { status } : { status, error: `HTTP ${status}` };
      if (status < 500 && status !== 429) break;
    } catch (err) {
      result = { status: null, error: err instanceof Error ? err.message : String(err) };
    }
  }
  return result;
}
