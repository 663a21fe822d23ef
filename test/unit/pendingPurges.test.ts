// Purges a sync has read but not yet applied to L1 (src/invalidation/pendingPurges.ts):
// judged by id from the moment they are read, applied one record at a time
// with the isolate's other requests between, at most two pages waiting, and
// an application whose request vanished taken over once its lease lapses.
import { describe, expect, it } from "vitest";
import type { Entry } from "../../src/cache/entry";
import { createPendingPurges } from "../../src/invalidation/pendingPurges";
import type { PurgeRecord } from "../../src/invalidation/record";
import { fakeClock } from "../support/fakes";

const LEASE_MS = 2000;

function purge(seq: number, ids: string[], mode: "hard" | "soft" = "hard", at = 1000): PurgeRecord {
  return { seq, at, ids, tags: [], all: false, mode, resources: ["product"] };
}

function entryFetchedAt(fetchedAt: number): Entry {
  return { data: {}, version: 1, fetchedAt, freshUntil: fetchedAt + 60_000, staleUntil: fetchedAt + 120_000, errorUntil: fetchedAt + 600_000 };
}

/** Steps of the application released by hand: each `yieldNow` waits until `step()` is called. */
function stepped() {
  const waiters: (() => void)[] = [];
  return {
    yieldNow: () => new Promise<void>((resolve) => waiters.push(resolve)),
    step: async () => {
      waiters.shift()?.();
      await new Promise((resolve) => setTimeout(resolve, 0));
    },
    waiting: () => waiters.length,
  };
}

function setup() {
  const clock = fakeClock();
  const applied: string[] = [];
  const steps = stepped();
  const work: Promise<unknown>[] = [];
  const pending = createPendingPurges({
    clock,
    applyOne: (record, keepIds) => void applied.push(`${record.seq}${keepIds ? "" : " (ids not kept)"}`),
    leaseMs: LEASE_MS,
    yieldNow: steps.yieldNow,
  });
  return { clock, applied, steps, work, pending, background: (w: Promise<unknown>) => void work.push(w) };
}

describe("purges read but not applied yet", () => {
  it("judge an entry by id from the moment they are read: hard gone, soft stale, only what was fetched before them, only their resources", () => {
    const { pending } = setup();
    pending.add([purge(1, ["p-1"], "hard", 1000), purge(2, ["p-2"], "soft", 1000)], () => true);
    expect(pending.judge(entryFetchedAt(999), "p-1", "product")).toBe("gone");
    expect(pending.judge(entryFetchedAt(999), "p-2", "product")).toBe("stale");
    expect(pending.judge(entryFetchedAt(1000), "p-1", "product")).toBe("ok");
    expect(pending.judge(entryFetchedAt(999), "p-1", "inventory")).toBe("ok");
    expect(pending.judge(entryFetchedAt(999), "p-3", "product")).toBe("ok");
    expect(pending.purgedAt("p-1", "product")).toEqual({ hard: 1000, any: 1000 });
    expect(pending.purgedAt("p-2", "product")).toEqual({ hard: 0, any: 1000 });
  });

  it("are applied one record at a time, in order, the isolate's other work between two, and judged no more once applied", async () => {
    const { applied, steps, pending, background } = setup();
    pending.add([purge(1, ["p-1"]), purge(2, ["p-2"]), purge(3, ["p-3"])], (index) => index > 0);
    pending.apply(background);
    expect(applied).toEqual(["1 (ids not kept)"]);
    expect(pending.judge(entryFetchedAt(0), "p-1", "product")).toBe("ok"); // applied: L1 and what the isolate remembers answer for it now
    expect(pending.judge(entryFetchedAt(0), "p-3", "product")).toBe("gone");
    pending.apply(background); // under way already: nothing more
    expect(applied).toHaveLength(1);
    await steps.step();
    expect(applied).toEqual(["1 (ids not kept)", "2"]);
    await steps.step();
    expect(applied).toEqual(["1 (ids not kept)", "2", "3"]);
    expect(pending.size()).toBe(0);
    expect(pending.judge(entryFetchedAt(0), "p-3", "product")).toBe("ok");
  });

  it("hold at most two pages: a sync with a third waits until the first is applied", async () => {
    const { steps, pending, background } = setup();
    pending.add([purge(1, ["a"]), purge(2, ["b"])], () => true);
    pending.add([purge(3, ["c"])], () => true);
    let room = false;
    const waited = pending.whenRoom(background).then(() => (room = true));
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(room).toBe(false); // purge 1 applied, purge 2 of the first page still waits
    await steps.step();
    await waited;
    expect(room).toBe(true);
    expect(pending.size()).toBe(1);
  });

  it("are taken over by the next request once an application whose request vanished has outlived its lease", async () => {
    const { clock, applied, steps, pending, background } = setup();
    pending.add([purge(1, ["a"]), purge(2, ["b"]), purge(3, ["c"])], () => true);
    pending.apply(background);
    expect(applied).toEqual(["1"]);
    // Its request vanished: its next step never comes. Within the lease, nobody else starts one.
    clock.advance(LEASE_MS - 1);
    pending.apply(background);
    expect(applied).toEqual(["1"]);
    clock.advance(1);
    pending.apply(background);
    expect(applied).toEqual(["1", "2"]);
    // The vanished one, should it wake after all, stops: each record is applied once.
    await steps.step();
    await steps.step();
    expect(applied).toEqual(["1", "2", "3"]);
  });

  it("are applied all at once when a visitor waits for them, and the application under way stops at its next step", async () => {
    const { applied, steps, pending, background } = setup();
    pending.add([purge(1, ["a"]), purge(2, ["b"])], () => true);
    pending.add([purge(3, ["c"])], () => true);
    pending.apply(background);
    expect(applied).toEqual(["1"]);
    pending.applyNow();
    expect(applied).toEqual(["1", "2", "3"]);
    expect(pending.size()).toBe(0);
    await steps.step();
    expect(applied).toEqual(["1", "2", "3"]);
  });

  it("are forgotten when the isolate starts over", () => {
    const { pending } = setup();
    pending.add([purge(1, ["p-1"])], () => true);
    pending.clear();
    expect(pending.size()).toBe(0);
    expect(pending.judge(entryFetchedAt(0), "p-1", "product")).toBe("ok");
  });
});
