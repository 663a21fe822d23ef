// Each isolate reports its most requested products to Redis once a minute,
// so that warming (cron or `npm run warm`) knows what the whole fleet finds
// hot: a sorted set `pp:v1:hot` of ids scored by requests, bounded to the
// top 1,000 and expiring a day after the last report.
import type { Clock } from "../shared/clock";
import type { L2 } from "../cache/l2/l2";
import { createTopK } from "../observability/topK";

/** Products counted per report period: a bounded top-K, whatever the traffic. */
const COUNTED = 50;
/** Products sent per report. */
const REPORTED = 20;
const REPORT_EVERY_MS = 60_000;
const KEPT = 1000;
const TTL_MS = 86_400_000;

const REPORT = `
for i = 1, #ARGV - 2, 2 do redis.call('ZINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(tonumber(ARGV[#ARGV - 1]) + 1))
redis.call('PEXPIRE', KEYS[1], ARGV[#ARGV])
return 1
`;

export function hotKey(keyPrefix: string): string {
  return `${keyPrefix}:hot`;
}

export interface HotReport {
  /** Counts one page view; sends the period's top products in the background when a period ended. */
  offer(id: string, background: (work: Promise<unknown>) => void): void;
}

export function createHotReport({ l2, keyPrefix, clock }: { l2: L2; keyPrefix: string; clock: Clock }): HotReport {
  const counts = createTopK<string>(COUNTED);
  let periodEnds = clock.now() + REPORT_EVERY_MS;

  return {
    offer(id, background) {
      counts.offer(id);
      if (clock.now() < periodEnds) return;
      periodEnds = clock.now() + REPORT_EVERY_MS;
      const top = counts.top(REPORTED);
      counts.clear();
      const args = top.flatMap((item) => [String(item.count - item.error), item.key]);
      background(l2.run((redis) => redis.eval(REPORT, [hotKey(keyPrefix)], [...args, String(KEPT), String(TTL_MS)]), { isWrite: true }));
    },
  };
}

/** The `n` hottest products across the fleet, hottest first; [] when L2 is unavailable. */
export async function hottestIds(l2: L2, keyPrefix: string, n: number): Promise<string[]> {
  return (await l2.run((redis) => redis.zrange<string[]>(hotKey(keyPrefix), 0, n - 1, { rev: true }))) ?? [];
}
