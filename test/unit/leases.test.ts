// Leases (src/shared/leases.ts): what any request holds on behalf of the
// isolate is given back by its holder or reclaimed once past its deadline.
import { afterEach, describe, expect, it, vi } from "vitest";
import { createLeaseTable, currentLagMs, noticedLate, within } from "../../src/shared/leases";
import { fakeClock } from "../support/fakes";

afterEach(() => {
  vi.useRealTimers();
});

describe("lease table", () => {
  it("a live holder keeps the key; past its deadline the next caller takes it, and the reclaim is counted", () => {
    const clock = fakeClock();
    const table = createLeaseTable<string, string>({ clock });
    expect(table.take("k", clock.now() + 100, "first")).toBe(true);
    expect(table.take("k", clock.now() + 100, "second")).toBe(false);
    expect(table.holder("k")).toBe("first");
    clock.advance(100);
    expect(table.holder("k")).toBeUndefined();
    expect(table.reclaimed).toBe(1);
    expect(table.take("k", clock.now() + 100, "second")).toBe(true);
  });

  it("a reclaimed holder's late release leaves the new holder alone", () => {
    const clock = fakeClock();
    const table = createLeaseTable<string, string>({ clock });
    table.take("k", clock.now() + 10, "vanished");
    clock.advance(10);
    table.take("k", clock.now() + 10, "current");
    table.release("k", "vanished");
    expect(table.holder("k")).toBe("current");
  });

  it("with a capacity, refuses while every lease is live and frees the ones past due", () => {
    const clock = fakeClock();
    const table = createLeaseTable<number, true>({ clock, capacity: 2 });
    expect(table.take(1, clock.now() + 50, true)).toBe(true);
    expect(table.take(2, clock.now() + 80, true)).toBe(true);
    expect(table.take(3, clock.now() + 80, true)).toBe(false);
    expect(table.nextDeadline()).toBe(clock.now() + 50);
    clock.advance(50);
    expect(table.take(3, clock.now() + 80, true)).toBe(true);
    expect(table.size()).toBe(2);
  });

  it("visits the live leases oldest first, skips those past due, and stops where the visitor says", () => {
    const clock = fakeClock();
    const table = createLeaseTable<string, number>({ clock });
    table.take("a", clock.now() + 100, 1);
    table.take("b", clock.now() + 10, 2);
    table.take("c", clock.now() + 100, 3);
    table.take("d", clock.now() + 100, 4);
    clock.advance(20);
    const all: string[] = [];
    table.each((key, value) => void all.push(`${key}${value}`));
    expect(all).toEqual(["a1", "c3", "d4"]);
    const some: string[] = [];
    table.each((key) => (some.push(key), key !== "c"));
    expect(some).toEqual(["a", "c"]);
  });
});

describe("within", () => {
  it("gives up on work that never settles at its own deadline", async () => {
    vi.useFakeTimers();
    const waiting = within(new Promise<string>(() => undefined), 200, () => "gave up");
    await vi.advanceTimersByTimeAsync(200);
    await expect(waiting).resolves.toBe("gave up");
    expect(vi.getTimerCount()).toBe(0);
  });

  it("returns the work's result when it comes first, and leaves no timer behind", async () => {
    vi.useFakeTimers();
    await expect(within(Promise.resolve("done"), 200, () => "gave up")).resolves.toBe("done");
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe("noticedLate", () => {
  it("tells a time-out noticed on time (the service's) from one noticed long after (the isolate's)", () => {
    expect(noticedLate(1_000, 100, 1_105)).toBe(false); // a hung service, an isolate with time to spare
    expect(noticedLate(1_000, 100, 1_200)).toBe(true); // the isolate got to it 100 ms late
    expect(noticedLate(1_000, 1_000, 2_200)).toBe(false); // 20% late on a long budget: still on time
    expect(noticedLate(1_000, 1_000, 2_300)).toBe(true);
    expect(noticedLate(0, 100, 5_000)).toBe(false); // never started: not a time-out of its own
  });
});

describe("currentLagMs", () => {
  it("is near 0 when the isolate is idle, and the length of the work queued ahead when it is busy", async () => {
    expect(await currentLagMs()).toBeLessThan(20);
    // Work queued before the probe's timer (another request rendering): the probe waits behind it.
    setTimeout(() => {
      const until = Date.now() + 80;
      while (Date.now() < until);
    }, 0);
    expect(await currentLagMs()).toBeGreaterThanOrEqual(60);
  });
});
