// The consistent-hash ring that places keys on L2 shards, and the L2 over them.
import { describe, expect, it } from "vitest";
import { createRing } from "../../src/cache/l2/ring";
import { createShardedL2, routingKeyOf } from "../../src/cache/l2/shardedL2";
import type { ClaimCallOptions, FillClaim, FillClaimRequest, FillWrite, L2 } from "../../src/cache/l2/l2";

const ids = Array.from({ length: 1_000_000 }, (_, i) => `p-${String(i + 1).padStart(6, "0")}`);

describe("consistent-hash ring", () => {
  it("balances 1,000,000 ids over 3 shards: the most loaded holds ≤ 1.10× the mean", () => {
    const ring = createRing([{ name: "a" }, { name: "b" }, { name: "c" }]);
    const counts = [0, 0, 0];
    for (const id of ids) counts[ring.ownerOf(id)]!++;
    const ratio = Math.max(...counts) / (ids.length / 3);
    console.log(`ring: 3 shards, most loaded ${ratio.toFixed(3)}× the mean (${counts.join(" / ")})`);
    expect(ratio).toBeLessThanOrEqual(1.1);
  });

  it("adding a 4th shard moves 25% ± 3% of ids, and none between two old shards", () => {
    const three = createRing([{ name: "a" }, { name: "b" }, { name: "c" }]);
    const four = createRing([{ name: "a" }, { name: "b" }, { name: "c" }, { name: "d" }]);
    let moved = 0;
    let movedBetweenOld = 0;
    for (const id of ids) {
      const before = three.ownerOf(id);
      const after = four.ownerOf(id);
      if (before !== after) {
        moved++;
        if (after !== 3) movedBetweenOld++;
      }
    }
    console.log(`ring: adding a 4th shard moved ${((moved / ids.length) * 100).toFixed(2)}% of ids`);
    expect(moved / ids.length).toBeGreaterThanOrEqual(0.22);
    expect(moved / ids.length).toBeLessThanOrEqual(0.28);
    expect(movedBetweenOld).toBe(0);
  });

  it("gives a shard of weight 2 about twice the keys", () => {
    const ring = createRing([{ name: "a", weight: 2 }, { name: "b" }]);
    let heavy = 0;
    for (const id of ids.slice(0, 300_000)) if (ring.ownerOf(id) === 0) heavy++;
    expect(heavy / 300_000).toBeGreaterThan(0.6);
    expect(heavy / 300_000).toBeLessThan(0.73);
  });

  it("places all of one product's keys (entries, lock, purge marker) on one shard", () => {
    expect(routingKeyOf("pp:v1:p:p-000123")).toBe("p-000123");
    expect(routingKeyOf("pp:v1:l:i:p-000123")).toBe("p-000123");
    expect(routingKeyOf("pp:v1:x:c:p-000123")).toBe("p-000123");
  });

  it("is the same ring for the same members in any process (placement depends only on names)", () => {
    const a = createRing([{ name: "eu" }, { name: "us" }]);
    const b = createRing([{ name: "eu" }, { name: "us" }]);
    for (const id of ids.slice(0, 1000)) expect(a.ownerOf(id)).toBe(b.ownerOf(id));
  });
});

describe("L2 over shards", () => {
  it("a claim call on each shard carries the writes of that shard only; a shard's writes with no claim of it go alone", async () => {
    const ring = createRing([{ name: "a" }, { name: "b" }]);
    const shardName = (id: string) => ["a", "b"][ring.ownerOf(id)]!;
    const idsOn = (name: string) => ids.filter((id) => shardName(id) === name).slice(0, 3);
    const [onA, onB] = [idsOn("a"), idsOn("b")];
    const key = (id: string) => `pp:v1:i:${id}`;
    const carriedBy: Record<string, string[]> = { a: [], b: [] };
    const aloneOn: Record<string, string[]> = { a: [], b: [] };
    const shard = (name: string) =>
      ({
        async claimFills(claims: readonly FillClaimRequest[], options?: ClaimCallOptions) {
          carriedBy[name]!.push(...(options?.writes ?? []).map((write) => write.key));
          return claims.map((): FillClaim => ({ kind: "won" }));
        },
        async writeFills(writes: readonly FillWrite[]) {
          aloneOn[name]!.push(...writes.map((write) => write.key));
          return writes.map(() => true);
        },
      }) as unknown as L2;
    const l2 = createShardedL2([shard("a"), shard("b")], ring);
    const waiting: FillWrite[] = [...onA.slice(1), ...onB.slice(1)].map((id) => ({
      key: key(id),
      lock: "",
      purgeMarker: "",
      value: "v",
      version: 1,
      fetchedAt: 0,
      ttlMs: 1000,
      lockToken: "",
    }));
    const claim = (id: string): FillClaimRequest => ({
      key: key(id),
      lock: "",
      claim: { token: "t", lockTtlMs: 1000, freshBeyond: 0, notBefore: 0, freshAfter: 0 },
    });
    const background: Promise<unknown>[] = [];
    // Claims on shard a only: shard a's writes ride with them, shard b's go alone.
    await l2.claimFills([claim(onA[0]!)], { writes: waiting, background: (work) => void background.push(work) });
    await Promise.all(background);
    expect(carriedBy).toEqual({ a: onA.slice(1).map(key), b: [] });
    expect(aloneOn).toEqual({ a: [], b: onB.slice(1).map(key) });
    // Claims on both: each shard's call carries its own.
    await l2.claimFills([claim(onA[0]!), claim(onB[0]!)], { writes: waiting });
    expect(carriedBy).toEqual({ a: [...onA.slice(1), ...onA.slice(1)].map(key), b: onB.slice(1).map(key) });
  });
});
