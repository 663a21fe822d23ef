// One request's fills share their lock claims (src/cache/fillBatch.ts): the
// claims made in one turn go out together. (Writes: sendQueue.test.ts.)
import { describe, expect, it } from "vitest";
import { createFillBatch } from "../../src/cache/fillBatch";
import type { ClaimOptions, FillClaimRequest, L2 } from "../../src/cache/l2";

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
    const batch = createFillBatch(l2, () => {});
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
    const batch = createFillBatch(l2, () => {});
    expect(await Promise.all([batch.claimFill("a", "lock:a", OPTIONS), batch.claimFill("b", "lock:b", OPTIONS)])).toEqual([undefined, undefined]);
  });
});
