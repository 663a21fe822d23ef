// L2 over several Redis databases, placed by a consistent-hash ring on the
// product id (issue: scale out). Where each thing lives:
//
//   entries, fill locks, purge markers   the shard of their product id: one
//                                        product's keys share a shard, so the
//                                        fill and purge scripts stay atomic
//   purge log, known-ids filter          the home shard (the first listed)
//
// Each shard keeps its own breaker: one shard down costs only its keys their
// L2, never a page. A page's reads cost one round trip per shard involved,
// all in parallel.
import type { Redis } from "@upstash/redis/cloudflare";
import type { L2, L2CallOptions, L2Stats } from "./l2";
import type { Ring } from "./ring";

/** The part of a key the ring places by: the product id (keys end with it, and ids hold no ':'). */
export function routingKeyOf(key: string): string {
  return key.slice(key.lastIndexOf(":") + 1);
}

export function createShardedL2(shards: readonly L2[], ring: Ring): L2 {
  if (shards.length !== ring.size) throw new Error("one ring member per shard");
  const home = shards[0]!;
  const shardOf = (key: string) => shards[ring.ownerOf(routingKeyOf(key))]!;

  /** Keys by the shard holding them, each with its positions in `keys`. */
  function byShard(keys: readonly string[]): Map<L2, { keys: string[]; positions: number[] }> {
    const groups = new Map<L2, { keys: string[]; positions: number[] }>();
    keys.forEach((key, position) => {
      const shard = shardOf(key);
      let group = groups.get(shard);
      if (!group) groups.set(shard, (group = { keys: [], positions: [] }));
      group.keys.push(key);
      group.positions.push(position);
    });
    return groups;
  }

  return {
    shards: shards.flatMap((shard) => shard.shards),
    get breaker() {
      return home.breaker;
    },
    get stats() {
      const sum: L2Stats = { skipped: 0, failures: 0, droppedWrites: 0, isolateErrors: 0, replayedWrites: 0 };
      for (const shard of shards) {
        for (const name of Object.keys(sum) as (keyof L2Stats)[]) sum[name] += shard.stats[name];
      }
      return sum;
    },
    async readMany(keys, options) {
      const values: (string | null | undefined)[] = new Array(keys.length);
      await Promise.all(
        [...byShard(keys)].map(async ([shard, group]) => {
          const found = await shard.readMany(group.keys, options);
          group.positions.forEach((position, i) => (values[position] = found[i]));
        }),
      );
      return values;
    },
    claimFill: (key, ...rest) => shardOf(key).claimFill(key, ...rest),
    writeFill: (write) => shardOf(write.key).writeFill(write),
    async flushBacklog() {
      await Promise.all(shards.map((shard) => shard.flushBacklog()));
    },
    backlogSize: () => shards.reduce((sum, shard) => sum + shard.backlogSize(), 0),
    releaseLock: (lock, token) => shardOf(lock).releaseLock(lock, token),
    run: (call, options) => home.run(call, options),
    async runOnKeys<T>(keys: string[], call: (redis: Redis, keys: string[]) => Promise<T>, options?: L2CallOptions) {
      const results = await Promise.all([...byShard(keys)].map(([shard, group]) => shard.runOnKeys(group.keys, call, options)));
      return results.some((result) => result === undefined) ? undefined : results.flatMap((result) => result!);
    },
  };
}
