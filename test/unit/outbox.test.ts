// The isolate's claims and writes on their way to Redis (src/cache/l2/outbox.ts):
// a claim goes at once unless a claim call of its shard is out (Nagle), then with
// the others when it comes back; a write rides with the next claim call, or goes
// on its own after its hold, at once when others may wait for it, and with a
// call's worth. Fake clock, sleeps that end when the test says.
import { describe, expect, it } from "vitest";
import type { ClaimCallOptions, FillClaim, FillClaimRequest, FillWrite, L2 } from "../../src/cache/l2/l2";
import { createOutbox } from "../../src/cache/l2/outbox";
import { fakeClock } from "../support/fakes";

const HOLD_MS = 1000;
const MAX_ITEMS = 4;
const MAX_BYTES = 100;
const MAX_WAIT_MS = 3000;

function claim(key: string, patient?: () => boolean): FillClaimRequest {
  return { key, lock: `lock:${key}`, claim: { token: "t", lockTtlMs: 3000, freshBeyond: 0, notBefore: 0, freshAfter: 0 }, patient };
}

function write(key: string, patient = true, value = "v"): FillWrite {
  return { key, lock: `lock:${key}`, purgeMarker: `purged:${key}`, value, version: 1, fetchedAt: 0, ttlMs: 60_000, lockToken: `t-${key}`, patient };
}

/**
 * An outbox over an L2 whose calls the test answers (`answer()`), each recorded
 * with its claims, carried writes and reads along; keys starting "b:" are on
 * shard b, the rest on shard a.
 */
function setup(readAlong?: ClaimCallOptions["readAlong"], sleepsEnd = true) {
  const clock = fakeClock();
  const calls: { claims: string[]; writes: string[]; along: boolean; answer: () => void }[] = [];
  const writeCalls: string[][] = [];
  const l2 = {
    claimFills(requests: readonly FillClaimRequest[], options?: ClaimCallOptions) {
      return new Promise<(FillClaim | undefined)[]>((resolve) =>
        calls.push({
          claims: requests.map(({ key }) => key),
          writes: (options?.writes ?? []).map(({ key }) => key),
          along: options?.readAlong !== undefined,
          answer: () => resolve(requests.map(({ key }): FillClaim => ({ kind: "copy", value: key }))),
        }),
      );
    },
    async writeFills(writes: readonly FillWrite[]) {
      writeCalls.push(writes.map(({ key }) => key));
      return writes.map(() => true);
    },
    shardOf: (key: string) => (key.startsWith("b:") ? "b" : "a"),
  } as unknown as L2;
  /** Sleeps end when the test moves the clock past them (`advance`). */
  let sleepers: { until: number; wake: () => void }[] = [];
  const sleep = (ms: number) => new Promise<void>((wake) => void (sleepsEnd && sleepers.push({ until: clock.now() + ms, wake })));
  const outbox = createOutbox(l2, {
    clock,
    sleep,
    holdMs: HOLD_MS,
    maxItems: MAX_ITEMS,
    maxBytes: MAX_BYTES,
    maxWaitMs: MAX_WAIT_MS,
    ...(readAlong ? { readAlong: () => readAlong } : {}),
  });
  const background: Promise<unknown>[] = [];
  const request = (work: Promise<unknown>) => void background.push(work);
  /** Moves the clock in 1-ms steps, waking the sleeps due and letting their turns run. */
  async function advance(ms: number) {
    for (let i = 0; i < ms; i++) {
      clock.advance(1);
      const due = sleepers.filter((sleeper) => sleeper.until <= clock.now());
      sleepers = sleepers.filter((sleeper) => sleeper.until > clock.now());
      for (const sleeper of due) sleeper.wake();
      for (let turn = 0; turn < 5; turn++) await Promise.resolve();
    }
  }
  const keysOf = (answers: (FillClaim | undefined)[]) => answers.map((answer) => (answer?.kind === "copy" ? answer.value : answer));
  return { outbox, calls, writeCalls, request, advance, keysOf };
}

describe("the outbox's claims", () => {
  it("go at once when no claim call of their shard is out, carrying the writes waiting there", async () => {
    const { outbox, calls, writeCalls, request, keysOf } = setup();
    outbox.write(write("w1"), request);
    outbox.write(write("b:w2"), request);
    const answers = outbox.claim([claim("p"), claim("i")], request);
    expect(calls.map(({ claims, writes }) => ({ claims, writes }))).toEqual([{ claims: ["p", "i"], writes: ["w1"] }]);
    calls[0]!.answer();
    expect(keysOf(await answers)).toEqual(["p", "i"]);
    expect(writeCalls).toEqual([]);
    expect(outbox.stats()).toMatchObject({ claimCalls: 1, claims: 2, joined: 0, carried: 1, queued: 1 });
  });

  it("wait while a claim call is out, then go together in one call when it comes back; each request gets its own answers", async () => {
    const { outbox, calls, request, advance, keysOf } = setup();
    const first = outbox.claim([claim("first")], request);
    const second = outbox.claim([claim("x")], request);
    const third = outbox.claim([claim("y"), claim("z")], request);
    await advance(5);
    expect(calls.map(({ claims }) => claims)).toEqual([["first"]]);
    calls[0]!.answer();
    await advance(20);
    expect(calls.map(({ claims }) => claims)).toEqual([["first"], ["x", "y", "z"]]);
    calls[1]!.answer();
    await advance(20);
    expect(keysOf(await first)).toEqual(["first"]);
    expect(keysOf(await second)).toEqual(["x"]);
    expect(keysOf(await third)).toEqual(["y", "z"]);
    // The request that sent the second call awaited its own; the other one's claims went in it.
    expect(outbox.stats()).toMatchObject({ claimCalls: 2, claims: 4, joined: 2, lapsed: 0 });
  });

  it("of another shard do not wait for a call out on this one", async () => {
    const { outbox, calls, request } = setup();
    void outbox.claim([claim("a1")], request);
    void outbox.claim([claim("b:1")], request);
    expect(calls.map(({ claims }) => claims)).toEqual([["a1"], ["b:1"]]);
  });

  it("go `maxItems` at most in one call, whole requests' worth; the rest with the next", async () => {
    const { outbox, calls, request, advance } = setup();
    void outbox.claim([claim("first")], request);
    void outbox.claim([claim("1"), claim("2"), claim("3")], request);
    void outbox.claim([claim("4"), claim("5")], request);
    calls[0]!.answer();
    await advance(20);
    expect(calls.map(({ claims }) => claims)).toEqual([["first"], ["1", "2", "3"]]);
    calls[1]!.answer();
    await advance(20);
    expect(calls.map(({ claims }) => claims)).toEqual([["first"], ["1", "2", "3"], ["4", "5"]]);
  });

  it("taken by another request's call that never comes back are answered as unanswered once its lease ends", async () => {
    const { outbox, calls, request, advance, keysOf } = setup();
    void outbox.claim([claim("lost")], request);
    void outbox.claim([claim("x")], request);
    const taken = outbox.claim([claim("y")], request);
    // Past the lease of the call out, the first waiting request sends what waits: its claim and the other's.
    await advance(1300);
    expect(calls.map(({ claims }) => claims)).toEqual([["lost"], ["x", "y"]]);
    // That call never comes back either: the other request's claim is unanswered at its lease's end.
    await advance(1300);
    expect(keysOf(await taken)).toEqual([undefined]);
    expect(outbox.stats().lapsed).toBe(1);
  });

  it("nobody waits for (a refresh nobody here joined): ride with the next claim call, or go after the hold, or at once once somebody joins", async () => {
    const { outbox, calls, request, advance, keysOf } = setup();
    const carried = outbox.claim([claim("refresh", () => true)], request);
    await advance(100);
    expect(calls).toHaveLength(0);
    void outbox.claim([claim("visitor")], request);
    expect(calls.map(({ claims }) => claims)).toEqual([["refresh", "visitor"]]);
    calls[0]!.answer();
    await advance(20);
    expect(keysOf(await carried)).toEqual(["refresh"]);

    const alone = outbox.claim([claim("refresh-2", () => true)], request);
    await advance(HOLD_MS - 10);
    expect(calls).toHaveLength(1);
    await advance(30);
    expect(calls.map(({ claims }) => claims)).toEqual([["refresh", "visitor"], ["refresh-2"]]);
    calls[1]!.answer();
    await advance(20);
    expect(keysOf(await alone)).toEqual(["refresh-2"]);

    let joined = false;
    void outbox.claim([claim("refresh-3", () => !joined)], request);
    await advance(50);
    expect(calls).toHaveLength(2);
    joined = true;
    await advance(20);
    expect(calls.map(({ claims }) => claims)).toEqual([["refresh", "visitor"], ["refresh-2"], ["refresh-3"]]);
  });

  it("read along with each claim call, never with writes alone", async () => {
    const along = { keys: ["seq"], read: () => undefined };
    const { outbox, calls, writeCalls, request, advance } = setup(along);
    void outbox.claim([claim("p")], request);
    outbox.write(write("w", false), request);
    calls[0]!.answer();
    await advance(5);
    expect(calls.map(({ along }) => along)).toEqual([true]);
    expect(writeCalls).toEqual([["w"]]);
  });
});

describe("the outbox's writes", () => {
  it("held: ride with the next claim call of their shard, or go on their own `holdMs` after they came", async () => {
    const { outbox, calls, writeCalls, request, advance } = setup();
    outbox.write(write("w1"), request);
    await advance(HOLD_MS - 10);
    expect(writeCalls).toEqual([]);
    await advance(10);
    expect(writeCalls).toEqual([["w1"]]);
    // The next: a claim call comes within the hold and carries it; nothing goes at the hold's end.
    outbox.write(write("w2"), request);
    await advance(100);
    void outbox.claim([claim("p")], request);
    expect(calls.map(({ writes }) => writes)).toEqual([["w2"]]);
    await advance(HOLD_MS);
    expect(writeCalls).toEqual([["w1"]]);
    expect(outbox.stats()).toMatchObject({ writeCalls: 1, carried: 1, queued: 0 });
  });

  it("held: those that came after a claim call carried the first wait out their own hold", async () => {
    const { outbox, calls, writeCalls, request, advance } = setup();
    outbox.write(write("w1"), request);
    await advance(500);
    void outbox.claim([claim("p")], request);
    calls[0]!.answer();
    await advance(400);
    outbox.write(write("w2"), request);
    // The send scheduled for w1 comes at 1,000 ms: w2 came at 900 and waits until 1,900.
    await advance(HOLD_MS - 50);
    expect(writeCalls).toEqual([]);
    await advance(50);
    expect(writeCalls).toEqual([["w2"]]);
  });

  it("somebody may wait for: go at once, with the writes waiting; while a claim call is out, as soon as it comes back", async () => {
    const { outbox, calls, writeCalls, request, advance } = setup();
    outbox.write(write("held"), request);
    outbox.write(write("awaited", false), request);
    expect(writeCalls).toEqual([["held", "awaited"]]);
    void outbox.claim([claim("p")], request);
    outbox.write(write("awaited-2", false), request);
    expect(writeCalls).toHaveLength(1);
    calls[0]!.answer();
    await advance(1);
    expect(writeCalls).toEqual([["held", "awaited"], ["awaited-2"]]);
  });

  it("go at once when a call's worth waits, by count or by their values' size (one larger value alone)", async () => {
    const { outbox, writeCalls, request } = setup();
    for (const key of ["1", "2", "3", "4"]) outbox.write(write(key), request);
    expect(writeCalls).toEqual([["1", "2", "3", "4"]]);
    outbox.write(write("big", true, "x".repeat(MAX_BYTES + 1)), request);
    expect(writeCalls).toEqual([["1", "2", "3", "4"], ["big"]]);
  });

  it("that waited past `maxWaitMs` are dropped, not sent late; a write of one key and token waits once", async () => {
    // The scheduled send's request vanished (its timers never fire), and no claim comes for a while.
    const { outbox, calls, request, advance } = setup(undefined, false);
    outbox.write(write("old"), request);
    outbox.write(write("old"), request);
    expect(outbox.stats().queued).toBe(1);
    await advance(MAX_WAIT_MS + 1);
    void outbox.claim([claim("p")], request);
    expect(calls.map(({ writes }) => writes)).toEqual([[]]);
    expect(outbox.stats()).toMatchObject({ expired: 1, queued: 0 });
  });
});
