// The consistent-hash ring that places keys on L2 shards.
import { describe, expect, it } from "vitest";
import { createRing } from "../../src/cache/l2/ring";
import { routingKeyOf } from "../../src/cache/l2/shardedL2";

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
