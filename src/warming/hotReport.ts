// Each isolate reports its most requested products to Redis once a minute,
// so that warming (cron or `npm run warm`) knows what the whole fleet finds
// hot: a sorted set `pp:v1:hot` of ids scored by requests, bounded to the
// top 1,000. Its scores halve once a report period, as an isolate's sketch
// does (cache/hotness.ts), so that it follows what is hot now: a product no
// longer reported falls off once its score is below one request, and the
// list expires when that would have emptied it.
import type { Clock } from "../shared/clock";
import type { L2 } from "../cache/l2/l2";
import { HALVING_MS } from "../cache/hotness";
import { ADMIN_LIMITS } from "../config/defaults";
import { HOT_COUNTERS, HOT_PRODUCTS } from "../observability/metrics";
import { createTopK } from "../observability/topK";
import type { Background } from "../shared/subrequests";

/** Products each isolate reports a period: the hot products its status page shows, counted as it counts them. */
export const REPORTED = HOT_PRODUCTS;
/** The period an isolate counts before it reports = HALVING_MS: one report per halving of the fleet's list, as of an isolate's sketch. */
const REPORT_EVERY_MS = HALVING_MS;
/** Products the fleet's list keeps = ADMIN_LIMITS.ids: what one bounded Lua call handles (a report's halving rewrites the whole list). */
export const KEPT = ADMIN_LIMITS.ids;

// KEYS: the list, the time of its last halving. ARGV: count, id pairs, then KEPT, now, the period.
const REPORT = `
local n = #ARGV
local now, period = tonumber(ARGV[n - 1]), tonumber(ARGV[n])
local last = tonumber(redis.call('GET', KEYS[2]) or 0)
if now - last >= period then
  redis.call('ZUNIONSTORE', KEYS[1], 1, KEYS[1], 'WEIGHTS', 2 ^ -math.floor((now - last) / period))
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(1')
  redis.call('SET', KEYS[2], now)
end
for i = 1, n - 3, 2 do redis.call('ZINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(tonumber(ARGV[n - 2]) + 1))
local top = redis.call('ZREVRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]
if not top then return 0 end
local ttl = period * (math.floor(math.log(math.max(1, tonumber(top))) / math.log(2)) + 1)
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
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
      const args = [...top.flatMap((item) => [String(item.count - item.error), item.key]), String(KEPT), String(clock.now()), String(REPORT_EVERY_MS)];
      const keys = [hotKey(keyPrefix), `${hotKey(keyPrefix)}:halved`];
      background(l2.run((redis) => redis.eval(REPORT, keys, args), { isWrite: true }));
    },
  };
}

/** The `n` hottest products across the fleet, hottest first; [] when L2 is unavailable. */
export async function hottestIds(l2: L2, keyPrefix: string, n: number): Promise<string[]> {
  return (await l2.run((redis) => redis.zrange<string[]>(hotKey(keyPrefix), 0, n - 1, { rev: true }))) ?? [];
}
