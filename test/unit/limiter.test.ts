// The per-isolate cap on work in flight (src/shared/limiter.ts; origin fetches, cold pages): a fixed
// number of slots (fewer while a `limit` says so), a bounded FIFO queue with
// a bounded wait, and an immediate LimiterFull past either bound.
import { afterEach, describe, expect, it, vi } from "vitest";
import { createLimiter, LimiterFull, type Limiter } from "../../src/shared/limiter";

/** A task the test finishes by hand, recording when it started. */
interface HeldTask {
  started: boolean;
  finish(value?: string): void;
  fail(error: Error): void;
  run: () => Promise<string>;
}

function heldTask(name: string, log: string[] = []): HeldTask {
  let resolve!: (value: string) => void;
  let reject!: (error: Error) => void;
  const done = new Promise<string>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  const task: HeldTask = {
    started: false,
    finish: (value = name) => resolve(value),
    fail: (error) => reject(error),
    run: () => {
      task.started = true;
      log.push(name);
      return done;
    },
  };
  return task;
}

/** Lets every pending promise callback run (slot hand-overs take a few microtasks). */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

/** Lets queued callers look for the freed slot: they do so on timers of their own (at most every 16 ms). */
async function handedOver(): Promise<void> {
  if (vi.isFakeTimers()) await vi.advanceTimersByTimeAsync(40);
  else await new Promise((resolve) => setTimeout(resolve, 40));
}

function limiter(maxConcurrent: number, maxQueued: number, maxWaitMs = 60_000): Limiter {
  return createLimiter({ maxConcurrent, maxQueued, maxWaitMs, maxHoldMs: 10_000 });
}

/** One slot, two places in the queue, waiters ranked by what `holding` says of their key (on fake timers). */
function rankedLimiter(holding: Record<string, number>): Limiter {
  return createLimiter({
    maxConcurrent: 1,
    maxQueued: 2,
    maxWaitMs: 5_000,
    maxHoldMs: 10_000,
    rank: (key) => holding[key] ?? 0,
    clock: { now: () => Date.now() },
  });
}

afterEach(() => {
  vi.useRealTimers();
});

describe("origin fetch limiter", () => {
  it("runs at most maxConcurrent tasks at once and queues the rest", async () => {
    const limit = limiter(2, 10);
    const tasks = ["a", "b", "c", "d", "e"].map((name) => heldTask(name));
    const results = tasks.map((task) => limit.run(task.run));
    await settle();
    expect(tasks.map((task) => task.started)).toEqual([true, true, false, false, false]);
    expect(limit.inFlight).toBe(2);
    expect(limit.queued).toBe(3);
    for (const task of tasks) task.finish();
    expect(await Promise.all(results)).toEqual(["a", "b", "c", "d", "e"]);
    expect(limit.inFlight).toBe(0);
    expect(limit.queued).toBe(0);
  });

  it("hands a freed slot to the longest waiting caller (FIFO), keeping inFlight at the cap", async () => {
    const limit = limiter(1, 10);
    const order: string[] = [];
    const tasks = ["first", "second", "third", "fourth"].map((name) => heldTask(name, order));
    const results = tasks.map((task) => limit.run(task.run));
    await settle();
    expect(order).toEqual(["first"]);

    tasks[0]!.finish();
    await handedOver();
    expect(order).toEqual(["first", "second"]);
    expect(limit.inFlight).toBe(1);
    expect(limit.queued).toBe(2);

    // Finishing out of order changes nothing: the queue is served oldest first.
    tasks[1]!.finish();
    await handedOver();
    expect(order).toEqual(["first", "second", "third"]);
    expect(limit.inFlight).toBe(1);
    expect(limit.queued).toBe(1);

    tasks[2]!.finish();
    tasks[3]!.finish();
    await Promise.all(results);
    expect(order).toEqual(["first", "second", "third", "fourth"]);
    expect(limit.inFlight).toBe(0);
    expect(limit.queued).toBe(0);
  });

  it("refuses a caller at once with LimiterFull when the queue is full, without running its task", async () => {
    const limit = limiter(1, 2);
    const held = [heldTask("a"), heldTask("b"), heldTask("c")];
    const accepted = held.map((task) => limit.run(task.run));
    await settle();
    expect(limit.inFlight).toBe(1);
    expect(limit.queued).toBe(2);

    const refusedTask = vi.fn(async () => "never");
    const refused = limit.run(refusedTask);
    // Rejected before any time passes: no timer involved.
    await expect(Promise.race([refused, settle().then(() => "still pending")])).rejects.toBeInstanceOf(LimiterFull);
    await expect(refused).rejects.toThrow(/queue full/);
    expect(refusedTask).not.toHaveBeenCalled();
    // The refusal took no slot and no place in the queue.
    expect(limit.inFlight).toBe(1);
    expect(limit.queued).toBe(2);

    for (const task of held) task.finish();
    await Promise.all(accepted);
    expect(limit.inFlight).toBe(0);
  });

  it("with maxQueued 0, refuses every caller beyond the slots", async () => {
    const limit = limiter(2, 0);
    const held = [heldTask("a"), heldTask("b")];
    const accepted = held.map((task) => limit.run(task.run));
    await expect(limit.run(async () => "x")).rejects.toBeInstanceOf(LimiterFull);
    for (const task of held) task.finish();
    await Promise.all(accepted);
    // A free slot again: accepted at once.
    await expect(limit.run(async () => "later")).resolves.toBe("later");
  });

  it("lets a waiter whose caller left give up its place at once, and never runs its task", async () => {
    vi.useFakeTimers();
    const limit = limiter(1, 5, 5_000);
    const holder = heldTask("holder");
    const holding = limit.run(holder.run);
    const visitor = new AbortController();
    const waiterTask = vi.fn(async () => "late");
    const outcome = limit.run(waiterTask, { caller: visitor.signal }).catch((error: unknown) => error);
    await settle();
    expect(limit.queued).toBe(1);
    visitor.abort();
    // Its place goes as it leaves, before any timer of its own (a cancelled request's may never fire).
    expect(limit.queued).toBe(0);
    await vi.advanceTimersByTimeAsync(20);
    const error = await outcome;
    expect(error).toBeInstanceOf(LimiterFull);
    expect((error as Error).message).toMatch(/left/);
    expect(limit.queued).toBe(0);
    holder.finish();
    await holding;
    expect(waiterTask).not.toHaveBeenCalled();
  });

  it("grants no slot while `limit` is 0, even with every slot free, and the waiters' turn comes when it rises", async () => {
    vi.useFakeTimers();
    let allowed = 0;
    const limit = createLimiter({ maxConcurrent: 4, maxQueued: 4, maxWaitMs: 5_000, maxHoldMs: 10_000, limit: () => allowed });
    const task = vi.fn(async () => "ran");
    const waiting = limit.run(task);
    await vi.advanceTimersByTimeAsync(500);
    expect(task).not.toHaveBeenCalled();
    expect(limit.inFlight).toBe(0);
    expect(limit.queued).toBe(1);
    allowed = 1;
    // Nobody wakes the waiter: it finds the room on its next look (at most 16 ms on).
    await vi.advanceTimersByTimeAsync(20);
    await expect(waiting).resolves.toBe("ran");
    expect(task).toHaveBeenCalledTimes(1);
    expect(limit.queued).toBe(0);
  });

  it("holds at most `limit` slots, oldest waiters first as it grows; a lowered limit hands out no slot until the holders are below it", async () => {
    vi.useFakeTimers({ now: 0 });
    let allowed = 2;
    const limit = createLimiter({
      maxConcurrent: 64,
      maxQueued: 64,
      maxWaitMs: 5_000,
      maxHoldMs: 10_000,
      limit: () => allowed,
      clock: { now: () => Date.now() },
    });
    const started: number[] = [];
    const tasks = Array.from({ length: 8 }, (_, i) => heldTask(`t${i}`));
    const runs = tasks.map((task, i) => limit.run(() => (started.push(i), task.run())));
    await vi.advanceTimersByTimeAsync(100);
    expect(started).toEqual([0, 1]);
    expect(limit.inFlight).toBe(2);
    expect(limit.queued).toBe(6);
    // Grown: as many more as it allows go, the oldest first, on their next look.
    allowed = 5;
    await vi.advanceTimersByTimeAsync(20);
    expect(started).toEqual([0, 1, 2, 3, 4]);
    expect(limit.inFlight).toBe(5);
    expect(limit.queued).toBe(3);
    // Lowered to 3 with 5 held: nobody's slot is taken back, and the first two to finish free no slot for a waiter.
    allowed = 3;
    tasks[0]!.finish();
    tasks[1]!.finish();
    await vi.advanceTimersByTimeAsync(40);
    expect(started).toEqual([0, 1, 2, 3, 4]);
    expect(limit.inFlight).toBe(3);
    // The next one to finish brings the holders below the limit: the oldest waiter goes.
    tasks[2]!.finish();
    await vi.advanceTimersByTimeAsync(40);
    expect(started).toEqual([0, 1, 2, 3, 4, 5]);
    expect(limit.inFlight).toBe(3);
    // Raised to all of them at once: every waiter goes on its next look.
    allowed = 64;
    await vi.advanceTimersByTimeAsync(20);
    expect(started).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(limit.queued).toBe(0);
    for (const task of tasks) task.finish();
    await Promise.all(runs);
    expect(limit.inFlight).toBe(0);
  });

  it("never holds more than maxConcurrent slots, whatever `limit` says", async () => {
    const limit = createLimiter({ maxConcurrent: 2, maxQueued: 4, maxWaitMs: 5_000, maxHoldMs: 10_000, limit: () => 100 });
    const tasks = ["a", "b", "c"].map((name) => heldTask(name));
    const runs = tasks.map((task) => limit.run(task.run));
    await settle();
    expect(tasks.map((task) => task.started)).toEqual([true, true, false]);
    expect(limit.inFlight).toBe(2);
    expect(limit.queued).toBe(1);
    for (const task of tasks) task.finish();
    expect(await Promise.all(runs)).toEqual(["a", "b", "c"]);
  });

  it("sheds a waiter kept out by `limit` once its wait is over, and never runs its task; a full queue refuses at once", async () => {
    vi.useFakeTimers();
    const limit = createLimiter({ maxConcurrent: 4, maxQueued: 1, maxWaitMs: 500, maxHoldMs: 10_000, limit: () => 0 });
    const task = vi.fn(async () => "never");
    const outcome = limit.run(task).catch((error: unknown) => error);
    await settle();
    expect(limit.queued).toBe(1);
    // The queue (one place) is full: the next caller is refused before any time passes.
    await expect(limit.run(task)).rejects.toThrow(/queue full/);
    await vi.advanceTimersByTimeAsync(499);
    expect(limit.queued).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    const error = await outcome;
    expect(error).toBeInstanceOf(LimiterFull);
    expect((error as Error).message).toMatch(/no slot within its wait/);
    expect(limit.queued).toBe(0);
    expect(limit.inFlight).toBe(0);
    expect(task).not.toHaveBeenCalled();
  });

  it("with a rank, a caller finding the queue full takes the place of the oldest waiter of the key ranking highest, if that ranks higher than its own", async () => {
    vi.useFakeTimers({ now: 0 });
    const holding: Record<string, number> = { flood: 5, visitor: 1, other: 2 };
    const limit = rankedLimiter(holding);
    const log: string[] = [];
    const holder = heldTask("holder", log);
    const held = limit.run(holder.run, { key: "flood" });
    const floodTasks = ["flood 1", "flood 2"].map((name) => heldTask(name, log));
    const flood = floodTasks.map((task) => limit.run(task.run, { key: "flood" }).catch((error: unknown) => error));
    await settle();
    // The queue is full; one more of the flood's is refused at once: it cannot push out its own.
    await expect(limit.run(async () => "flood 3", { key: "flood" })).rejects.toBeInstanceOf(LimiterFull);
    expect(limit.pushedOut).toBe(0);
    // Another client's page takes the place of the flood's oldest waiter, which gives up on its next look.
    const visitor = heldTask("visitor", log);
    const visiting = limit.run(visitor.run, { key: "visitor" });
    await vi.advanceTimersByTimeAsync(20);
    expect(await flood[0]).toBeInstanceOf(LimiterFull);
    expect(limit.pushedOut).toBe(1);
    expect(limit.queued).toBe(2);
    // A caller ranking no lower than every waiter is refused, as before.
    holding.flood = 2;
    await expect(limit.run(async () => "other", { key: "other" })).rejects.toBeInstanceOf(LimiterFull);
    holder.finish();
    await vi.advanceTimersByTimeAsync(40);
    expect(log).toEqual(["holder", "visitor"]);
    visitor.finish();
    await vi.advanceTimersByTimeAsync(40);
    floodTasks[1]!.finish();
    expect(await Promise.all([held, visiting, flood[1]])).toEqual(["holder", "visitor", "flood 2"]);
    expect(floodTasks[0]!.started).toBe(false);
  });

  it("waiters with nothing to show if refused go before sheddable ones, whatever their rank; a full queue gives a sheddable waiter's place to one that is not", async () => {
    vi.useFakeTimers({ now: 0 });
    const holding: Record<string, number> = { crawler: 5, visitor: 1 };
    const limit = rankedLimiter(holding);
    const log: string[] = [];
    const holder = heldTask("holder", log);
    const held = limit.run(holder.run, { key: "visitor" });
    // The visitor's page has a copy to fall back on; the crawler's, though its client holds more, has none.
    const withCopy = heldTask("visitor with a copy", log);
    const sheddable = limit.run(withCopy.run, { key: "visitor", sheddable: true }).catch((error: unknown) => error);
    const bare = heldTask("crawler without", log);
    const critical = limit.run(bare.run, { key: "crawler" });
    await settle();
    holder.finish();
    await handedOver();
    expect(log).toEqual(["holder", "crawler without"]);
    // The queue is full again; a page with nothing to show takes the sheddable one's place, which gives up on its next look.
    const second = heldTask("visitor without", log);
    const another = limit.run(second.run, { key: "visitor" });
    const third = limit.run(async () => "one more", { key: "visitor" }).catch((error: unknown) => error);
    await handedOver();
    expect(await sheddable).toBeInstanceOf(LimiterFull);
    expect(limit.pushedOut).toBe(1);
    // A sheddable caller never takes the place of one that is not.
    await expect(limit.run(async () => "late", { key: "visitor", sheddable: true })).rejects.toBeInstanceOf(LimiterFull);
    bare.finish();
    await handedOver();
    second.finish();
    await handedOver();
    expect(await Promise.all([held, critical, another, third])).toEqual(["holder", "crawler without", "visitor without", "one more"]);
    expect(withCopy.started).toBe(false);
  });

  it("gives up on a waiter after maxWaitMs with LimiterFull, and its task never runs", async () => {
    vi.useFakeTimers();
    const limit = limiter(1, 5, 500);
    const holder = heldTask("holder");
    const holding = limit.run(holder.run);
    const waiterTask = vi.fn(async () => "late");
    const waiting = limit.run(waiterTask);
    const outcome = waiting.then(
      () => "resolved",
      (error: unknown) => error,
    );
    await settle();
    expect(limit.queued).toBe(1);

    await vi.advanceTimersByTimeAsync(499);
    expect(limit.queued).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    const error = await outcome;
    expect(error).toBeInstanceOf(LimiterFull);
    expect((error as Error).message).toBe("no slot within its wait");
    expect(limit.queued).toBe(0);

    // The slot, when freed, goes back to the pool, not to the departed waiter.
    holder.finish();
    await holding;
    expect(waiterTask).not.toHaveBeenCalled();
    expect(limit.inFlight).toBe(0);
  });

  it("times out only the waiter whose time is up; the others keep their place", async () => {
    vi.useFakeTimers();
    const limit = limiter(1, 5, 500);
    const order: string[] = [];
    const holder = heldTask("holder", order);
    const holding = limit.run(holder.run);
    const early = limit.run(heldTask("early", order).run).catch((error: unknown) => error);
    await vi.advanceTimersByTimeAsync(300);
    const lateTask = heldTask("late", order);
    const late = limit.run(lateTask.run);
    await settle();
    expect(limit.queued).toBe(2);

    await vi.advanceTimersByTimeAsync(200); // "early" has waited 500 ms, "late" 200 ms
    expect(await early).toBeInstanceOf(LimiterFull);
    expect(limit.queued).toBe(1);

    holder.finish();
    await holding;
    await handedOver();
    expect(order).toEqual(["holder", "late"]);
    lateTask.finish();
    await expect(late).resolves.toBe("late");
    expect(limit.inFlight).toBe(0);
  });

  it("a waiter served before its deadline is not rejected later", async () => {
    vi.useFakeTimers();
    const limit = limiter(1, 5, 500);
    const holder = heldTask("holder");
    const holding = limit.run(holder.run);
    const waiter = heldTask("waiter");
    const waiting = limit.run(waiter.run);
    await vi.advanceTimersByTimeAsync(100);
    holder.finish();
    await holding;
    await handedOver();
    expect(waiter.started).toBe(true);
    await vi.advanceTimersByTimeAsync(1000); // well past the wait bound
    waiter.finish();
    await expect(waiting).resolves.toBe("waiter");
    expect(limit.inFlight).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("a failing task releases its slot, and its error reaches the caller unchanged", async () => {
    const limit = limiter(1, 5);
    const failing = heldTask("failing");
    const next = heldTask("next");
    const failed = limit.run(failing.run);
    const following = limit.run(next.run);
    await settle();
    expect(next.started).toBe(false);

    const boom = new Error("boom");
    failing.fail(boom);
    await expect(failed).rejects.toBe(boom);
    await handedOver();
    expect(next.started).toBe(true);
    expect(limit.inFlight).toBe(1);
    next.finish();
    await following;
    expect(limit.inFlight).toBe(0);
  });

  it("a task that throws synchronously also releases its slot", async () => {
    const limit = limiter(1, 0);
    await expect(
      limit.run(() => {
        throw new Error("sync");
      }),
    ).rejects.toThrow("sync");
    expect(limit.inFlight).toBe(0);
    await expect(limit.run(async () => "ok")).resolves.toBe("ok");
  });

  it("counts inFlight and queued through a burst of many callers", async () => {
    const limit = limiter(3, 4);
    const tasks = Array.from({ length: 10 }, (_, i) => heldTask(`t${i}`));
    const outcomes = tasks.map((task) =>
      limit.run(task.run).then(
        () => "ran",
        (error: unknown) => (error instanceof LimiterFull ? "refused" : "other"),
      ),
    );
    await settle();
    expect(limit.inFlight).toBe(3);
    expect(limit.queued).toBe(4);
    // Seven accepted (3 running + 4 queued), three refused; finish them in the order they started.
    for (let finished = 1; finished <= 7; finished++) {
      tasks[finished - 1]!.finish();
      await handedOver();
      expect(limit.inFlight).toBe(Math.min(3, 7 - finished));
      expect(limit.queued).toBe(Math.max(0, 4 - finished));
    }
    expect(await Promise.all(outcomes)).toEqual([...Array(7).fill("ran"), ...Array(3).fill("refused")]);
    expect(limit.inFlight).toBe(0);
    expect(limit.queued).toBe(0);
  });

  // The Workers rules (docs/architecture.md#sharing-work-across-requests-in-one-isolate): a request
  // cancelled while it holds a slot never runs its `finally`. Such a holder
  // is a task that never settles here.
  it("takes back a slot whose holder never finishes once its hold deadline passes, and hands it to a waiter", async () => {
    vi.useFakeTimers();
    const limit = createLimiter({ maxConcurrent: 1, maxQueued: 5, maxWaitMs: 5_000, maxHoldMs: 1_000 });
    void limit.run(() => new Promise<string>(() => undefined)); // vanished holder
    const waiter = heldTask("waiter");
    const waiting = limit.run(waiter.run);
    await settle();
    expect(limit.queued).toBe(1);

    await vi.advanceTimersByTimeAsync(999);
    expect(waiter.started).toBe(false);
    await vi.advanceTimersByTimeAsync(20); // reclaimed at 1,000 ms, taken at the waiter's next look
    expect(waiter.started).toBe(true);
    expect(limit.reclaimed).toBe(1);
    waiter.finish();
    await expect(waiting).resolves.toBe("waiter");
    expect(limit.inFlight).toBe(0);
  });

  it("a caller's own hold deadline, shorter than maxHoldMs, bounds its slot", async () => {
    vi.useFakeTimers();
    const limit = createLimiter({ maxConcurrent: 1, maxQueued: 0, maxWaitMs: 1_000, maxHoldMs: 60_000 });
    void limit.run(() => new Promise<string>(() => undefined), { waitMs: 1_000, holdMs: 300 });
    await settle();
    await expect(limit.run(async () => "refused")).rejects.toBeInstanceOf(LimiterFull);
    await vi.advanceTimersByTimeAsync(301);
    expect(limit.inFlight).toBe(0);
    await expect(limit.run(async () => "served")).resolves.toBe("served");
  });

  it("64 vanished holders cannot shut the limiter for good: after their deadline every slot is free again", async () => {
    vi.useFakeTimers();
    const limit = createLimiter({ maxConcurrent: 64, maxQueued: 256, maxWaitMs: 1_000, maxHoldMs: 1_500 });
    for (let i = 0; i < 64; i++) void limit.run(() => new Promise<string>(() => undefined));
    // Queued callers that are cancelled too: their place lapses with their wait.
    for (let i = 0; i < 256; i++) void limit.run(() => new Promise<string>(() => undefined)).catch(() => undefined);
    await settle();
    expect(limit.inFlight).toBe(64);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(limit.inFlight).toBe(0);
    expect(limit.queued).toBe(0);
    await expect(limit.run(async () => "served")).resolves.toBe("served");
  });

  it("with freeWhenCallerLeaves, a holder whose caller left gives its slot back then, long before its deadline", async () => {
    vi.useFakeTimers();
    const options = { maxConcurrent: 1, maxQueued: 5, maxWaitMs: 5_000, maxHoldMs: 60_000 };
    for (const freeWhenCallerLeaves of [true, false]) {
      const limit = createLimiter({ ...options, freeWhenCallerLeaves });
      const visitor = new AbortController();
      // A cancelled request's task: it never settles, and its caller is gone.
      void limit.run(() => new Promise<string>(() => undefined), { caller: visitor.signal });
      await settle();
      expect(limit.inFlight).toBe(1);
      const waiter = heldTask("waiter");
      const waiting = limit.run(waiter.run);
      await vi.advanceTimersByTimeAsync(100);
      expect(waiter.started).toBe(false);
      visitor.abort();
      await vi.advanceTimersByTimeAsync(40);
      // Without the option the slot stays taken until its 60-s deadline.
      expect(waiter.started).toBe(freeWhenCallerLeaves);
      if (!freeWhenCallerLeaves) {
        waiting.catch(() => undefined);
        continue;
      }
      waiter.finish();
      await expect(waiting).resolves.toBe("waiter");
      expect(limit.inFlight).toBe(0);
      expect(limit.reclaimed).toBe(0);
    }
  });

  it("a slot handed to a waiter that never runs again comes back at the waiter's hold deadline", async () => {
    vi.useFakeTimers();
    const limit = createLimiter({ maxConcurrent: 1, maxQueued: 5, maxWaitMs: 5_000, maxHoldMs: 500 });
    const holder = heldTask("holder");
    const holding = limit.run(holder.run);
    // The waiter's task never settles: as if its request died right after it got the slot.
    void limit.run(() => new Promise<string>(() => undefined));
    await settle();
    holder.finish();
    await holding;
    await handedOver();
    expect(limit.inFlight).toBe(1);
    await vi.advanceTimersByTimeAsync(501);
    await expect(limit.run(async () => "served")).resolves.toBe("served");
  });

  it("a refresh never queues and leaves the last quarter of the slots to visitors", async () => {
    const limit = createLimiter({ maxConcurrent: 4, maxQueued: 10, maxWaitMs: 1_000, maxHoldMs: 10_000 });
    const held = [heldTask("r1"), heldTask("r2"), heldTask("r3")];
    const refreshes = held.map((task) => limit.run(task.run, { waitMs: 1_000, holdMs: 1_000, priority: "refresh" }));
    await settle();
    expect(limit.inFlight).toBe(3);
    expect(limit.refreshRoom()).toBe(0);
    await expect(limit.run(async () => "r4", { waitMs: 1_000, holdMs: 1_000, priority: "refresh" })).rejects.toBeInstanceOf(LimiterFull);
    expect(limit.queued).toBe(0);
    // The slot kept back goes to a visitor at once.
    await expect(limit.run(async () => "visitor")).resolves.toBe("visitor");
    for (const task of held) task.finish();
    await Promise.all(refreshes);
    expect(limit.refreshRoom()).toBe(3);
  });
});
