// Each isolate reports its most requested products to Redis once a minute,
// so that warming (cron or `npm run warm`) knows what the whole fleet finds
// hot: a sorted set `pp:v1:hot` of ids scored by requests, bounded to the
// top 1,000 and expiring a day after the last report.
import type { Clock } from "../shared/clock";
import type { L2 } from "../cache/l2/l2";
import { HOT_COUNTERS, HOT_PRODUCTS } from "../observability/metrics";
import { COUNTERS_PER_KEY, createTopK } from "../observability/topK";
import { WARM_TOP } from "./warm";
import type { Background } from "../shared/subrequests";

/** Products each isolate reports a period: the hot products its status page shows, counted as it counts them. */
export const REPORTED = HOT_PRODUCTS;
/** The period an isolate counts before it reports. */
const REPORT_EVERY_MS = 60_000;
/**
 * The fleet's list keeps as many candidates for the most a warm run reads
 * (WARM_TOP) as a top-K keeps counters for the keys it reports
 * (topK.ts): a product near the cut keeps its score across reports.
 */
export const KEPT = COUNTERS_PER_KEY * WARM_TOP;
/** The list expires a day after the last report: a deployment that stopped leaves nothing behind for long. */
const LIST_TTL_MS = 86_400_000;

const REPORT = `
for i = 1, #ARGV - 2, 2 do redis.call('ZINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(tonumber(ARGV[#ARGV - 1]) + 1))
redis.call('PEXPIRE', KEYS[1], ARGV[#ARGV])
return 1
`;

export function hotKey(keyPrefix: string): string {
  return `${keyPrefix}:hot`;
}

export type HotReport = ReturnType<typeof createHotReport>;

export function createHotReport({ l2, keyPrefix, clock }: { l2: L2; keyPrefix: string; clock: Clock }) {
  const counts = createTopK<string>(HOT_COUNTERS);
  let periodEnds = clock.now() + REPORT_EVERY_MS;

  return {
    /** Counts one page view; sends the period's top products in the background when a period ended. */
    offer(id: string, background: Background): void {
      counts.offer(id);
      if (clock.now() < periodEnds) return;
      periodEnds = clock.now() + REPORT_EVERY_MS;
      const top = counts.top(REPORTED);
      counts.clear();
      const args = top.flatMap((item) => [String(item.count - item.error), item.key]);
      background(l2.run((redis) => redis.eval(REPORT, [hotKey(keyPrefix)], [...args, String(KEPT), String(LIST_TTL_MS)]), { isWrite: true }));
    },
  };
}

/** The `n` hottest products across the fleet, hottest first; [] when L2 is unavailable. */
export async function hottestIds(l2: L2, keyPrefix: string, n: number): Promise<string[]> {
  return (await l2.run((redis) => redis.zrange<string[]>(hotKey(keyPrefix), 0, n - 1, { rev: true }))) ?? [];
}
