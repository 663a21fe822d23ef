// Warming: read a list of products through the tier's own read path, so that
// their entries are in L2 (and fresh) before visitors ask. Rate-limited, so
// that warming never floods the origin: at most `perSecond` products started
// a second, at most `concurrency` at once (each costs up to four origin
// fetches, and only for what is missing or stale).
import { COUNTERS_PER_KEY } from "../observability/topK";
import { KEPT } from "./hotReport";

/**
 * Products started a second by default (cron, `npm run warm`): warming never
 * floods the origin, 10 products a second being at most 40 fetches a second
 * (a page's four), a tenth of what one isolate's origin slots carry
 * (ORIGIN_MAX_CONCURRENT); at most FILLS_AT_ONCE at a time (shared/subrequests.ts).
 */
export const WARM_PER_SECOND = 10;
/**
 * Products a run warms at most (cron, `npm run warm`'s default) = the
 * fleet's list (KEPT) over COUNTERS_PER_KEY: it keeps as many candidates
 * for them as a top-K keeps counters for the keys it reports (topK.ts), so
 * that a product near the cut keeps its score across reports.
 */
export const WARM_TOP = KEPT / COUNTERS_PER_KEY;

export interface WarmOptions {
  ids: readonly string[];
  /** Reads one product through the tier; true when its page could be built. */
  warmOne: (id: string) => Promise<boolean>;
  perSecond: number;
  concurrency: number;
  onProgress?: (done: number, total: number, failed: number) => void;
  sleep?: (ms: number) => Promise<void>;
  now?: () => number;
}

export async function warmProducts(options: WarmOptions) {
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const now = options.now ?? (() => Date.now());
  const started = now();
  const interval = 1000 / options.perSecond;
  let next = 0;
  let done = 0;
  let failed = 0;

  async function worker(): Promise<void> {
    while (next < options.ids.length) {
      const index = next++;
      // Start times are spaced `interval` apart, whatever the number of workers.
      const startAt = started + index * interval;
      if (startAt > now()) await sleep(startAt - now());
      const ok = await options.warmOne(options.ids[index]!).catch(() => false);
      done++;
      if (!ok) failed++;
      options.onProgress?.(done, options.ids.length, failed);
    }
  }

  await Promise.all(Array.from({ length: Math.max(1, Math.min(options.concurrency, options.ids.length)) }, worker));
  return { warmed: done - failed, failed, ms: now() - started };
}

/**
 * The ids of a `--ids` file: one per line, spaces around it and blank lines
 * ignored. A line is an id whole: `not valid!` stays one id, refused as such.
 */
export function idsListed(text: string): string[] {
  return text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== "");
}
