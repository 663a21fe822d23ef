// Lock claims of several requests in one call (src/cache/l2/claimOutbox.ts):
// gathered only while claims are frequent, each request answered with its
// own, and a joiner never waits past its lease for a call that is not made.
import { describe, expect, it } from "vitest";
import { createClaimOutbox } from "../../src/cache/l2/claimOutbox";
import type { ClaimCallOptions, FillClaim, FillClaimRequest, L2, ReadAlong } from "../../src/cache/l2/l2";
import { DEFAULTS } from "../../src/config/defaults";

/** A claim of `key` (its answer, from the fake L2 below, is a copy whose value is the key). */
function claim(key: string): FillClaimRequest {
  return { key, lock: `lock:${key}`, claim: { token: "t", lockTtlMs: 3000, freshBeyond: 0, notBefore: 0, freshAfter: 0 } };
}

/** An outbox over an L2 that records each call's keys, on a clock the test moves, with sleeps that end when the test says. */
function outboxWith(readAlong?: () => ReadAlong | null) {
  let offset = 0;
  const clock = { now: () => Date.now() + offset };
  const calls: string[][] = [];
  const carried: unknown[] = [];
  const alongs: unknown[] = [];
  const l2 = {
    async claimFills(requests: readonly FillClaimRequest[], options?: ClaimCallOptions) {
      calls.push(requests.map(({ key }) => key));
      carried.push(options?.carry);
      alongs.push(options?.readAlong);
      return requests.map(({ key }): FillClaim => ({ kind: "copy", value: key }));
    },
  } as unknown as L2;
  const sleeping: (() => void)[] = [];
  const carry = { take: () => [] };
  const outbox = createClaimOutbox(l2, {
    clock,
    sleep: () => new Promise<void>((resolve) => sleeping.push(resolve)),
    carry,
    ...(readAlong ? { readAlong } : {}),
  });
  const background: Promise<unknown>[] = [];
  const request = () => (work: Promise<unknown>) => void background.push(work);
  const values = (answers: (FillClaim | undefined)[]) => answers.map((answer) => (answer?.kind === "copy" ? answer.value : answer?.kind));
  return { outbox, calls, carried, alongs, carry, sleeping, request, values, advance: (ms: number) => (offset += ms) };
}

describe("a claim outbox", () => {
  it("sends a claim at once while claims are rare, in a call of its own that carries waiting writes", async () => {
    const { outbox, calls, carried, carry, sleeping, request, values, advance } = outboxWith();
    expect(values(await outbox.claim([claim("a"), claim("b")], request()))).toEqual(["a", "b"]);
    advance(DEFAULTS.claimGatherWhenWithinMs);
    expect(values(await outbox.claim([claim("c")], request()))).toEqual(["c"]);
    expect(calls).toEqual([["a", "b"], ["c"]]);
    expect(carried).toEqual([carry, carry]);
    expect(sleeping).toHaveLength(0);
    expect(outbox.stats()).toEqual({ calls: 2, claims: 3, joined: 0, lapsed: 0 });
  });

  it("while claims are frequent, the first waits for others, which join its call; each request gets its own answers", async () => {
    const { outbox, calls, sleeping, request, values, advance } = outboxWith();
    await outbox.claim([claim("first")], request());
    advance(1);
    const leader = outbox.claim([claim("p"), claim("i")], request());
    advance(1);
    const joiner = outbox.claim([claim("x")], request());
    const another = outbox.claim([claim("y"), claim("z")], request());
    expect(calls).toEqual([["first"]]); // gathering
    sleeping.splice(0).forEach((wake) => wake());
    expect(values(await leader)).toEqual(["p", "i"]);
    expect(values(await joiner)).toEqual(["x"]);
    expect(values(await another)).toEqual(["y", "z"]);
    expect(calls).toEqual([["first"], ["p", "i", "x", "y", "z"]]);
    expect(outbox.stats()).toEqual({ calls: 2, claims: 6, joined: 3, lapsed: 0 });
  });

  it("asks what to read along when a call goes out, once per call, and sends it with that call only", async () => {
    const along: ReadAlong = { keys: ["seq"], read: () => undefined };
    const asked: number[] = [];
    const { outbox, alongs, sleeping, request, advance } = outboxWith(() => (asked.push(asked.length), asked.length === 2 ? along : null));
    await outbox.claim([claim("first")], request()); // at once: nothing to read along (null)
    advance(1);
    const leader = outbox.claim([claim("p")], request());
    advance(1);
    const joiner = outbox.claim([claim("x")], request());
    expect(asked).toHaveLength(1); // not while the call gathers
    sleeping.splice(0).forEach((wake) => wake());
    await Promise.all([leader, joiner]);
    expect(asked).toHaveLength(2);
    expect(alongs).toEqual([undefined, along]);
  });

  it("does not let a call grow past claimsPerCall: the claim that would overflow it gathers a call of its own", async () => {
    const { outbox, calls, sleeping, request, advance } = outboxWith();
    await outbox.claim([claim("first")], request());
    advance(1);
    const many = Array.from({ length: DEFAULTS.claimsPerCall }, (_, i) => claim(`k${i}`));
    const leader = outbox.claim(many, request());
    const other = outbox.claim([claim("over")], request());
    sleeping.splice(0).forEach((wake) => wake());
    await Promise.all([leader, other]);
    expect(calls).toEqual([["first"], many.map(({ key }) => key), ["over"]]);
  });

  it("gives a joiner unanswered claims at the lease's end when the call it joined is never made (its request vanished); later claims are not held by it", async () => {
    const { outbox, calls, sleeping, request, values, advance } = outboxWith();
    await outbox.claim([claim("first")], request());
    advance(1);
    void outbox.claim([claim("lost")], () => {}); // its request is gone: its wait never ends
    const joiner = outbox.claim([claim("x")], request());
    // The joiner sleeps until the call is due (its own timer), then looks for answers until its lease ends.
    expect(sleeping).toHaveLength(2);
    advance(DEFAULTS.claimGatherMs + DEFAULTS.l2ClaimTimeoutMs + DEFAULTS.l2GateGraceMs + 1);
    sleeping.splice(1, 1)[0]!();
    expect(values(await joiner)).toEqual([undefined]);
    expect(outbox.stats().lapsed).toBe(1);
    // Past the gathering's due time, a new claim goes on its own (claims are rare again by then).
    expect(values(await outbox.claim([claim("later")], request()))).toEqual(["later"]);
    expect(calls).toEqual([["first"], ["later"]]);
    expect(sleeping).toHaveLength(1);
  });
});
