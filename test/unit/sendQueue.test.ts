// Background Redis work of many requests sent together (src/cache/l2/sendQueue.ts):
// one send per window, bounded, and a send whose request vanished is taken
// over by the next request that queues something. Then the two queues that
// use it, through the read path: background refreshes and fill writes.
import { describe, expect, it } from "vitest";
import { createReadThrough } from "../../src/cache/readThrough";
import { createSendQueue } from "../../src/cache/l2/sendQueue";
import { DEFAULTS } from "../../src/config/defaults";
import type { ClaimCallOptions, FillClaim, FillClaimRequest, FillWrite, L2 } from "../../src/cache/l2/l2";
import type { ResourceName } from "../../src/origin/resources";
import { fakeClock, fakeOrigin, healthyL2Parts, testConfig } from "../support/fakes";

interface Item {
  key: string;
  size: number;
}

/** A queue on a fake clock whose sleeps end when the test says (`wake`). */
function queueWith(
  limits: { maxPerSend?: number; maxQueued?: number; maxWaitMs?: number; maxBytesPerSend?: number; holdWhileTakenMs?: number; patientHoldMs?: number } = {},
) {
  const clock = fakeClock();
  const sleeping: (() => void)[] = [];
  const slept: number[] = [];
  const sent: string[][] = [];
  const queue = createSendQueue<Item>({
    clock,
    sleep: (ms) => {
      slept.push(ms);
      return new Promise<void>((resolve) => sleeping.push(resolve));
    },
    windowMs: 20,
    maxPerSend: limits.maxPerSend ?? 8,
    maxQueued: limits.maxQueued ?? 100,
    maxWaitMs: limits.maxWaitMs ?? 2000,
    keyOf: (item) => item.key,
    sizeOf: (item) => item.size,
    maxBytesPerSend: limits.maxBytesPerSend,
    holdWhileTakenMs: limits.holdWhileTakenMs,
    // Items whose key starts with "r" are patient (a refresh's write).
    patient: (item) => item.key.startsWith("r"),
    patientHoldMs: limits.patientHoldMs,
    send: (batch) => sent.push(batch.map(({ key }) => key)),
  });
  const background: Promise<unknown>[] = [];
  const request = () => (work: Promise<unknown>) => void background.push(work);
  const wake = async () => {
    sleeping.splice(0).forEach((resolve) => resolve());
    await Promise.all(background.splice(0));
  };
  const refresh = (key: string, size = 1): Item => ({ key, size });
  return { clock, queue, sent, request, wake, refresh, sleeping, slept };
}

describe("a send queue", () => {
  it("sends the refreshes of several requests in one window together, each key once, scheduled by the first request only", async () => {
    const { queue, sent, request, wake, refresh, sleeping } = queueWith();
    for (const key of ["a", "b", "a", "c"]) queue.add(refresh(key), request());
    expect(sleeping).toHaveLength(1);
    expect(sent).toEqual([]);
    await wake();
    expect(sent).toEqual([["a", "b", "c"]]);
  });

  it("sends a send's worth at once, from the request that completes it, without waiting for the window", async () => {
    const { queue, sent, request, wake, refresh } = queueWith({ maxPerSend: 3 });
    for (const key of ["a", "b", "c", "d"]) queue.add(refresh(key), request());
    expect(sent).toEqual([["a", "b", "c"]]);
    await wake();
    expect(sent).toEqual([["a", "b", "c"], ["d"]]);
  });

  it("stops a send short of maxBytesPerSend, one item always going", async () => {
    const { queue, sent, request, wake, refresh } = queueWith({ maxBytesPerSend: 10 });
    queue.add(refresh("a", 4), request());
    queue.add(refresh("b", 4), request());
    queue.add(refresh("c", 4), request());
    await wake();
    queue.add(refresh("big", 50), request());
    await wake();
    queue.add(refresh("d", 1), request());
    await wake();
    // c brings 12 bytes: a send's worth, at once, of what fits ([a, b]); c waits for the window; big is a send's worth alone.
    expect(sent).toEqual([["a", "b"], ["c"], ["big"], ["d"]]);
    expect(queue.stats().queued).toBe(0);
  });

  it("refuses what would overflow it (add says so), and drops what waited past maxWaitMs", async () => {
    const { clock, queue, sent, request, wake, refresh } = queueWith({ maxQueued: 2, maxWaitMs: 1000 });
    expect(["a", "b", "c"].map((key) => queue.add(refresh(key), request()))).toEqual([true, true, false]);
    expect(queue.stats()).toMatchObject({ queued: 2, refused: 1 });
    clock.advance(1500);
    await wake();
    expect(sent).toEqual([]);
    expect(queue.stats()).toMatchObject({ queued: 0, refused: 1, expired: 2 });
  });

  it("lets another call take the oldest waiting items it accepts, within its limits, dropping those past maxWaitMs on the way", async () => {
    const { clock, queue, sent, request, wake, refresh } = queueWith({ maxWaitMs: 1000 });
    queue.add(refresh("old"), request());
    clock.advance(1500);
    for (const [key, size] of [
      ["a", 4],
      ["b:skip", 1],
      ["c", 4],
      ["d", 4],
      ["e", 1],
    ] as const)
      queue.add(refresh(key, size), request());
    const taken = queue.take((item) => !item.key.endsWith(":skip"), 3, 10);
    // "old" waited too long; "b:skip" is not accepted; "d" would bring 12 bytes: the take stops there.
    expect(taken.map(({ key }) => key)).toEqual(["a", "c"]);
    expect(queue.stats()).toMatchObject({ queued: 3, expired: 1, carried: 2 });
    await wake();
    expect(sent).toEqual([["b:skip", "d", "e"]]);
  });

  it("puts off the window's send while other calls take items, until its oldest item waited holdWhileTakenMs; not once takes stopped that long ago", async () => {
    const { clock, queue, sent, request, wake, refresh } = queueWith({ holdWhileTakenMs: 100 });
    queue.add(refresh("a"), request());
    clock.advance(5);
    expect(queue.take(() => true, 8, 1000).map(({ key }) => key)).toEqual(["a"]);
    queue.add(refresh("b"), request());
    clock.advance(15);
    await wake(); // the window ends: a take came within it, "b" waited 15 ms: held a window more
    expect(sent).toEqual([]);
    clock.advance(20);
    queue.take(() => true, 8, 1000); // takes "b"
    queue.add(refresh("c"), request());
    for (let i = 0; i < 4; i++) {
      clock.advance(20);
      await wake();
    }
    // No take since "b", 80 ms ago: still held (the next claim may come yet).
    expect(sent).toEqual([]);
    clock.advance(20);
    await wake();
    // The last take is 100 ms old: claims have stopped, "c" goes on its own.
    expect(sent).toEqual([["c"]]);
    // A take in every window: held, but not past 100 ms of waiting.
    queue.add(refresh("d"), request());
    for (let i = 0; i < 6; i++) {
      clock.advance(20);
      queue.add(refresh(`x${i}`), request());
      queue.take((item) => item.key === `x${i}`, 1, 1000);
      await wake();
    }
    expect(sent).toEqual([["c"], ["d"]]);
  });

  it("holds an item that came in the middle of a window no longer than holdWhileTakenMs: the last hold is what is left of it, not a whole window", async () => {
    const { clock, queue, sent, request, wake, refresh, slept } = queueWith({ holdWhileTakenMs: 100 });
    const start = clock.now();
    queue.add(refresh("a"), request()); // schedules the window's send, due at 20
    clock.advance(10);
    queue.take((item) => item.key === "a", 1, 1000);
    clock.advance(5);
    queue.add(refresh("b"), request()); // at 15, mid-window
    // Claims keep coming (each takes an item of its own), never "b".
    let untilDue = 5;
    for (let i = 0; sent.length === 0 && i < 20; i++) {
      clock.advance(untilDue);
      queue.add(refresh(`x${i}`), request());
      queue.take((item) => item.key === `x${i}`, 1, 1000);
      await wake();
      untilDue = slept.at(-1)!;
    }
    expect(sent).toEqual([["b"]]);
    // Sent when "b" had waited exactly 100 ms (windows ending at 20, 40, 60, 80, 100, then 15 ms more), not at 120.
    expect(clock.now() - start - 15).toBe(100);
    expect(slept).toEqual([20, 20, 20, 20, 20, 15]);
  });

  it("holds the window's send for a take as far back as holdWhileTakenMs, not only within the window; not for an older one", async () => {
    for (const [sinceTake, held] of [
      [30, true],
      [100, false],
    ] as const) {
      const { clock, queue, sent, request, wake, refresh } = queueWith({ holdWhileTakenMs: 100 });
      queue.add(refresh("a"), request());
      queue.take(() => true, 8, 1000); // takes "a"
      clock.advance(sinceTake - 20);
      queue.add(refresh("b"), request()); // schedules the window's send: 20 ms from now
      clock.advance(20);
      await wake(); // "b"'s window ends `sinceTake` ms after the last take
      expect(sent).toEqual(held ? [] : [["b"]]);
    }
  });

  it("sends patient items alone patientHoldMs after the oldest came, leaving them meanwhile for a take to carry", async () => {
    const { clock, queue, sent, request, wake, slept, sleeping } = queueWith({ patientHoldMs: 800 });
    queue.add({ key: "r1", size: 1 }, request());
    expect(slept).toEqual([800]);
    clock.advance(400);
    queue.add({ key: "r2", size: 1 }, request()); // patient too: no send of its own scheduled
    expect(sleeping).toHaveLength(1);
    clock.advance(400);
    await wake();
    expect(sent).toEqual([["r1", "r2"]]); // r1's hold is up: both go
  });

  it("leaves an item that came after the one a take carried its own hold, not what was left of the first one's", async () => {
    const { clock, queue, sent, request, wake, slept } = queueWith({ patientHoldMs: 800 });
    queue.add({ key: "r1", size: 1 }, request());
    clock.advance(400);
    queue.add({ key: "r2", size: 1 }, request());
    expect(queue.take((item) => item.key === "r1", 8, 1000).map(({ key }) => key)).toEqual(["r1"]);
    clock.advance(400);
    await wake(); // the send scheduled for r1: r2 has waited 400 ms, and waits 400 more
    expect(sent).toEqual([]);
    expect(slept).toEqual([800, 400]);
    clock.advance(400);
    await wake();
    expect(sent).toEqual([["r2"]]);
  });

  it("with a clock that does not move, puts a send off once at most: nothing waits for ever", async () => {
    const { queue, sent, request, wake, slept } = queueWith({ patientHoldMs: 800 });
    queue.add({ key: "r1", size: 1 }, request());
    queue.add({ key: "r2", size: 1 }, request());
    queue.take((item) => item.key === "r1", 8, 1000);
    await wake();
    await wake();
    expect(sent).toEqual([["r2"]]);
    expect(slept.length).toBeLessThanOrEqual(2);
  });

  it("sends patient items with the first impatient one, at its window, not at theirs", async () => {
    const { clock, queue, sent, request, wake, slept } = queueWith({ patientHoldMs: 800 });
    queue.add({ key: "r1", size: 1 }, request());
    clock.advance(100);
    queue.add({ key: "v1", size: 1 }, request()); // a visitor's fill's write: its window, 20 ms
    expect(slept).toEqual([800, 20]);
    clock.advance(20);
    await wake();
    expect(sent).toEqual([["r1", "v1"]]);
  });

  it("takes over a send whose request vanished: the next request past its deadline sends, the vanished one never does", async () => {
    const { clock, queue, sent, request, wake, refresh, sleeping } = queueWith();
    queue.add(refresh("a"), () => {}); // its request is gone: the send it scheduled never runs
    const lost = sleeping.splice(0);
    clock.advance(10);
    queue.add(refresh("b"), request()); // within the lease: waits for it
    expect(sleeping).toHaveLength(0);
    clock.advance(40);
    queue.add(refresh("c"), request());
    expect(queue.stats().takenOver).toBe(1);
    await wake();
    expect(sent).toEqual([["a", "b", "c"]]);
    // The vanished request's timer fires late after all: its lease was taken, it sends nothing.
    lost.forEach((resolve) => resolve());
    await Promise.resolve();
    expect(sent).toHaveLength(1);
  });
});

/**
 * A read path over an L2 that holds nothing, grants every lock, and counts
 * the items of each claim and write call; with `carrying`, each claim takes
 * the waiting writes along (`carried`: how many, per claim), as l2.ts does.
 */
function readPathCountingCalls({ carrying = false } = {}) {
  const calls = { claims: [] as number[], writes: [] as number[], carried: [] as number[] };
  const l2 = {
    ...healthyL2Parts,
    readMany: async (keys: readonly string[]) => keys.map(() => null),
    async claimFills(claims: readonly FillClaimRequest[], options?: ClaimCallOptions) {
      calls.claims.push(claims.length);
      if (carrying) calls.carried.push(options?.carry?.take(() => true, 8, 32_768).length ?? 0);
      return claims.map((): FillClaim => ({ kind: "won" }));
    },
    async writeFills(writes: readonly FillWrite[]) {
      calls.writes.push(writes.length);
      return writes.map(() => true);
    },
  } as unknown as L2;
  const clock = fakeClock();
  const origin = fakeOrigin();
  const config = testConfig({ CACHE_POLICIES: JSON.stringify({ inventory: { ttl: 10, swr: 30, staleIfError: 600, negativeTtl: 10 } }) });
  const cache = createReadThrough({ config, origin, l2, clock });
  const background: Promise<unknown>[] = [];
  /** One request's read of a product's inventory. */
  const read = (id: string) => cache.read(id, ["inventory"] satisfies ResourceName[], (work) => void background.push(work));
  /** Runs the background work to its end, the clock moving `stepMs` (a send window) per round (a held send waits for time to pass). */
  const settle = async (stepMs: number = DEFAULTS.sendWindowMs) => {
    while (background.length > 0) {
      const round = background.splice(0);
      clock.advance(stepMs);
      await Promise.all(round);
    }
  };
  return { calls, clock, origin, read, settle };
}

describe("through the read path", () => {
  const ids = ["p-1", "p-2", "p-3", "p-4", "p-5"];

  it("five requests filling five products: a claim each (their visitors wait for it), the five writes in one call", async () => {
    const { calls, clock, origin, read, settle } = readPathCountingCalls();
    for (const id of ids) {
      expect((await read(id)).data.inventory).toMatchObject({ tier: "origin" });
      clock.advance(DEFAULTS.claimGatherWhenWithinMs); // claims this far apart go at once (claimOutbox.ts), no gathering
    }
    await settle();
    expect(calls).toEqual({ claims: [1, 1, 1, 1, 1], writes: [5], carried: [] });
    expect(origin.calls.inventory).toBe(5);
  });

  it("five requests filling five products in turn, where claims take writes along: each claim carries the write before it, the last goes on its own", async () => {
    const { calls, clock, origin, read, settle } = readPathCountingCalls({ carrying: true });
    for (const id of ids) {
      expect((await read(id)).data.inventory).toMatchObject({ tier: "origin" });
      clock.advance(5); // the next visitor comes 5 ms later
    }
    await settle();
    expect(calls).toEqual({ claims: [1, 1, 1, 1, 1], carried: [0, 1, 1, 1, 1], writes: [1] });
    expect(origin.calls.inventory).toBe(5);
  });

  it("stale copies of five products read by five requests: one claim call and one write call for the five refreshes", async () => {
    const { calls, clock, origin, read, settle } = readPathCountingCalls();
    for (const id of ids) await read(id);
    await settle();
    calls.claims.length = 0;
    calls.writes.length = 0;

    clock.advance(15_000); // stale: past ttl, within swr
    for (const id of ids) expect((await read(id)).data.inventory).toMatchObject({ tier: "l1", freshness: "stale" });
    // The refreshes' writes wait for a claim to carry them (patientWriteHoldMs); none comes: they go on their own after it.
    await settle(DEFAULTS.patientWriteHoldMs);
    expect(calls).toEqual({ claims: [5], writes: [5], carried: [] });
    expect(origin.calls.inventory).toBe(10);
    // Refreshed: fresh again from L1.
    for (const id of ids) expect((await read(id)).data.inventory).toMatchObject({ tier: "l1", freshness: "fresh" });
  });
});
