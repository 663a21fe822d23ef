// One request's fills share their lock claims (src/cache/l2/fillBatch.ts): the
// claims made in one turn go out together. (Writes: sendQueue.test.ts.)
import { describe, expect, it } from "vitest";
import { createFillBatch } from "../../src/cache/l2/fillBatch";
import type { ClaimOptions, FillClaimRequest, L2 } from "../../src/cache/l2/l2";

const OPTIONS: ClaimOptions = { token: "t", lockTtlMs: 3000, freshBeyond: 0, notBefore: 0, freshAfter: 0 };

/** An L2 that records the batch calls it gets; `unavailable` answers as an L2 with its breaker open. */
function recordingL2(unavailable = false) {
  const calls: { claims: string[][] } = { claims: [] };
  const l2 = {
    async claimFills(claims: readonly FillClaimRequest[]) {
      calls.claims.push(claims.map((c) => c.key));
      return claims.map((c) => (unavailable ? undefined : c.key.endsWith("taken") ? ({ kind: "lost" } as const) : ({ kind: "won" } as const)));
    },
  } as unknown as L2;
  return { l2, calls };
}

describe("a fill batch", () => {
  it("sends the claims of one turn as one call, each answered as its own", async () => {
    const { l2, calls } = recordingL2();
    const batch = createFillBatch(
      l2,
      async () => {},
      () => {},
    );
    const answers = await Promise.all([
      batch.claimFill("a", "lock:a", OPTIONS),
      batch.claimFill("b-taken", "lock:b", OPTIONS),
      batch.claimFill("c", "lock:c", OPTIONS),
    ]);
    expect(answers.map((a) => a?.kind)).toEqual(["won", "lost", "won"]);
    const later = await batch.claimFill("d", "lock:d", OPTIONS);
    expect(later?.kind).toBe("won");
    expect(calls.claims).toEqual([["a", "b-taken", "c"], ["d"]]);
  });

  it("answers undefined to every claim when L2 is unavailable", async () => {
    const { l2 } = recordingL2(true);
    const batch = createFillBatch(
      l2,
      async () => {},
      () => {},
    );
    expect(await Promise.all([batch.claimFill("a", "lock:a", OPTIONS), batch.claimFill("b", "lock:b", OPTIONS)])).toEqual([undefined, undefined]);
  });
});

describe("the lock waits of a batch", () => {
  it("poll together: one MGET a round for every key and lock asked for in it, each wait answered with its own pair", async () => {
    const reads: string[][] = [];
    const l2 = {
      async readMany(keys: string[]) {
        reads.push(keys);
        return keys.map((key) => (key.startsWith("lock:") ? "winner" : `value of ${key}`));
      },
    } as unknown as L2;
    const batch = createFillBatch(
      l2,
      async () => {},
      () => {},
    );
    const answers = await Promise.all([batch.pollLock("a", "lock:a", 10), batch.pollLock("b", "lock:b", 10), batch.pollLock("c", "lock:c", 10)]);
    expect(answers).toEqual([
      ["value of a", "winner"],
      ["value of b", "winner"],
      ["value of c", "winner"],
    ]);
    expect(reads).toEqual([["a", "lock:a", "b", "lock:b", "c", "lock:c"]]);
    // The next round is a call of its own.
    await batch.pollLock("a", "lock:a", 20);
    expect(reads).toHaveLength(2);
  });

  it("answers every wait of a round whose read failed as a failed poll, never leaving one hanging", async () => {
    const l2 = { readMany: async () => Promise.reject(new Error("gone")) } as unknown as L2;
    const batch = createFillBatch(
      l2,
      async () => {},
      () => {},
    );
    expect(await Promise.all([batch.pollLock("a", "lock:a", 10), batch.pollLock("b", "lock:b", 10)])).toEqual([
      [undefined, undefined],
      [undefined, undefined],
    ]);
  });
});
