// One request's fills share their Redis calls (src/cache/fillBatch.ts): the
// claims made in one turn go out together, the writes of fills that run
// together once the last of them ended.
import { describe, expect, it } from "vitest";
import { createFillBatch } from "../../src/cache/fillBatch";
import type { ClaimOptions, FillClaimRequest, FillWrite, L2 } from "../../src/cache/l2";

const OPTIONS: ClaimOptions = { token: "t", lockTtlMs: 3000, freshBeyond: 0, notBefore: 0, freshAfter: 0 };

function write(key: string): FillWrite {
  return { key, lock: `lock:${key}`, purgeMarker: `purged:${key}`, value: "1|1|1|1|j|{}", version: 1, fetchedAt: 1, ttlMs: 1000, lockToken: "t" };
}

/** An L2 that records the batch calls it gets; `unavailable` answers as an L2 with its breaker open. */
function recordingL2(unavailable = false) {
  const calls: { claims: string[][]; writes: string[][] } = { claims: [], writes: [] };
  const l2 = {
    async claimFills(claims: readonly FillClaimRequest[]) {
      calls.claims.push(claims.map((c) => c.key));
      return claims.map((c) => (unavailable ? undefined : c.key.endsWith("taken") ? ({ kind: "lost" } as const) : ({ kind: "won" } as const)));
    },
    async writeFills(writes: readonly FillWrite[]) {
      calls.writes.push(writes.map((w) => w.key));
      return writes.map(() => (unavailable ? undefined : true));
    },
  } as unknown as L2;
  return { l2, calls };
}

const turn = () => new Promise((resolve) => setTimeout(resolve, 0));

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

  it("holds a write until the fills under way with it have ended, then sends them as one call; later fills write on their own", async () => {
    const { l2, calls } = recordingL2();
    const background: Promise<unknown>[] = [];
    const batch = createFillBatch(l2, (work) => void background.push(work));
    batch.begin();
    batch.begin();
    const first = batch.writeFill(write("a"));
    batch.end();
    await turn();
    expect(calls.writes).toEqual([]);
    const second = batch.writeFill(write("b"));
    batch.end();
    expect(await Promise.all([first, second])).toEqual([true, true]);
    expect(calls.writes).toEqual([["a", "b"]]);
    expect(background).toHaveLength(1);
    // A fill that starts after them (a cold page's other resources, after its product) is not held back by them, nor they by it.
    batch.begin();
    const third = batch.writeFill(write("c"));
    batch.end();
    expect(await third).toBe(true);
    expect(calls.writes).toEqual([["a", "b"], ["c"]]);
  });

  it("answers undefined to every claim and write when L2 is unavailable", async () => {
    const { l2 } = recordingL2(true);
    const batch = createFillBatch(l2, () => {});
    expect(await Promise.all([batch.claimFill("a", "lock:a", OPTIONS), batch.claimFill("b", "lock:b", OPTIONS)])).toEqual([undefined, undefined]);
    expect(await batch.writeFill(write("a"))).toBeUndefined();
  });
});
