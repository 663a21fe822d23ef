// L2 over several Redis databases, placed by a consistent-hash ring on the product id. Where each thing lives:
//
//   entries, fill locks, purge markers   their product id's shard: a product's keys share a shard, so fill and purge scripts stay atomic
//   purge log, known-ids filter          the home shard (the first listed)
//
// Each shard has its own breaker: one shard down costs only its keys their L2, never a page. A page's reads cost one round trip per
// shard involved, in parallel.
import { emptyStats, type L2, type L2Stats } from "./l2";
import type { Ring } from "./ring";

/** The part of a key the ring places by: the product id (keys end with it, and ids hold no ':'). */
export function routingKeyOf(key: string): string {
  return key.slice(key.lastIndexOf(":") + 1);
}

/** Items by their group (a shard, an outbox's lane), each group with its items' positions in `items`. */
function inGroups<T, G>(items: readonly T[], groupOf: (item: T) => G): Map<G, { items: T[]; positions: number[] }> {
  const groups = new Map<G, { items: T[]; positions: number[] }>();
  items.forEach((item, position) => {
    const group = groupOf(item);
    let members = groups.get(group);
    if (!members) groups.set(group, (members = { items: [], positions: [] }));
    members.items.push(item);
    members.positions.push(position);
  });
  return groups;
}

/** `call` once per group with that group's items, in parallel; the answers back in the items' order. */
export async function perGroup<T, G, A>(items: readonly T[], groupOf: (item: T) => G, call: (group: G, items: T[]) => Promise<A[]>): Promise<A[]> {
  const answers: A[] = new Array(items.length);
  await Promise.all(
    [...inGroups(items, groupOf)].map(async ([group, members]) => {
      const found = await call(group, members.items);
      members.positions.forEach((position, i) => (answers[position] = found[i]!));
    }),
  );
  return answers;
}

export function createShardedL2(shards: readonly L2[], ring: Ring): L2 {
  if (shards.length !== ring.size) throw new Error("one ring member per shard");
  const home = shards[0]!;
  const shardOf = (key: string) => shards[ring.ownerOf(routingKeyOf(key))]!;
  /** The shard of a claim's or a write's key. */
  const shardOfItem = (item: { key: string }) => shardOf(item.key);

  return {
    shards: shards.flatMap((shard) => shard.shards),
    breaker: home.breaker,
    get stats() {
      const sum = emptyStats();
      for (const shard of shards) {
        for (const name of Object.keys(sum) as (keyof L2Stats)[]) sum[name] += shard.stats[name];
      }
      return sum;
    },
    readMany: (keys, options) => perGroup(keys, shardOf, (shard, group) => shard.readMany(group, options)),
    async claimFills(claims, options) {
      // Each shard's claim call carries the writes of that shard; those of a shard with no claim here go on their own.
      const writes = inGroups(options?.writes ?? [], shardOfItem);
      const answers = await perGroup(claims, shardOfItem, (shard, group) => {
        const ofShard = writes.get(shard)?.items ?? [];
        writes.delete(shard);
        // What is read along (the purge log's position) lives on the home shard.
        const readAlong = shard === home ? options?.readAlong : undefined;
        return shard.claimFills(group, { ...options, writes: ofShard, readAlong });
      });
      const alone = Promise.all([...writes].map(([shard, group]) => shard.writeFills(group.items)));
      options?.background?.(alone);
      return answers;
    },
    writeFills: (writes) => perGroup(writes, shardOfItem, (shard, group) => shard.writeFills(group)),
    async flushBacklog() {
      await Promise.all(shards.map((shard) => shard.flushBacklog()));
    },
    backlogSize: () => shards.reduce((sum, shard) => sum + shard.backlogSize(), 0),
    recoverIfDue: (background) => {
      for (const shard of shards) shard.recoverIfDue(background);
    },
    accepts: (key) => shardOf(key).accepts(key),
    shardOf: (key) => shardOf(key).shardOf(key),
    answered: (key) => shardOf(key).answered(key),
    run: (call, options) => home.run(call, options),
    async runOnKeys(keys, call, options) {
      const results = await Promise.all([...inGroups(keys, shardOf)].map(([shard, group]) => shard.runOnKeys(group.items, call, options)));
      return results.some((result) => result === undefined) ? undefined : results.flatMap((result) => result!);
    },
  };
}
