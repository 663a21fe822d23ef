// Each isolate reports its most requested products to Redis once a minute,
// so that warming (cron or `npm run warm`) knows what the whole fleet finds
// hot: a sorted set `pp:v1:hot` of ids scored by requests, bounded to the
// top 1,000 and expiring a day after the last report.
import type { Clock } from "../shared/clock";
import type { L2 } from "../cache/l2/l2";
import { createTopK } from "../observability/topK";
import { DEFAULTS } from "../config/defaults";
import type { Background } from "../shared/subrequests";

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
  offer(id: string, background: Background): void;
}

export function createHotReport({ l2, keyPrefix, clock }: { l2: L2; keyPrefix: string; clock: Clock }): HotReport {
  const { counted, reported, everyMs, kept, ttlMs } = DEFAULTS.hotReport;
  const counts = createTopK<string>(counted);
  let periodEnds = clock.now() + everyMs;

  return {
    offer(id, background) {
      counts.offer(id);
      if (clock.now() < periodEnds) return;
      periodEnds = clock.now() + everyMs;
      const top = counts.top(reported);
      counts.clear();
      const args = top.flatMap((item) => [String(item.count - item.error), item.key]);
      background(l2.run((redis) => redis.eval(REPORT, [hotKey(keyPrefix)], [...args, String(kept), String(ttlMs)]), { isWrite: true }));
    },
  };
}

/** The `n` hottest products across the fleet, hottest first; [] when L2 is unavailable. */
export async function hottestIds(l2: L2, keyPrefix: string, n: number): Promise<string[]> {
  return (await l2.run((redis) => redis.zrange<string[]>(hotKey(keyPrefix), 0, n - 1, { rev: true }))) ?? [];
}
