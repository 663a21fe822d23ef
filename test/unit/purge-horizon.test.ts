// What an isolate can vouch for in a copy another isolate wrote (the location
// tier's, src/cache/location/): every id purge recorded after the copy's
// stamp must be known here, or the copy is not judged at all. A fake clock,
// and a fake purge log whose answers the test writes.
import { describe, expect, it } from "vitest";
import type { Entry } from "../../src/cache/entry";
import type { L1Purging } from "../../src/cache/readThrough";
import type { PurgeLog, PurgesSince } from "../../src/invalidation/log";
import type { PurgeRecord } from "../../src/invalidation/record";
import { createPurgeWatcher, type PurgeWatcher, SYNC_LEASE_MS } from "../../src/invalidation/watcher";
import { fakeClock, type FakeClock } from "../support/fakes";

const POLL_MS = 1000;
const noL1: L1Purging = { forget: () => undefined, markStale: () => undefined, keepOnlyForErrors: () => undefined };

/**
 * A purge log that answers whatever `next` holds; one without an era gets
 * "e0" when asked to start one, as Redis would, at `next`'s number plus
 * `appendedBeforeEra` (purges recorded between the read and the start).
 */
function scriptedLog() {
  const state: { next: PurgesSince; asked: number[]; erasStarted: number; appendedBeforeEra: number } = {
    next: { seq: 0, era: "", follows: true, upTo: 0, records: [], marks: [], floor: 0 },
    asked: [],
    erasStarted: 0,
    appendedBeforeEra: 0,
  };
  const log = {
    async readSince(seen: number) {
      state.asked.push(seen);
      return state.next;
    },
    record: async () => undefined,
    async startEra() {
      if (state.next.era === "") state.erasStarted++;
      state.next = { ...state.next, seq: state.next.seq + state.appendedBeforeEra, era: state.next.era || "e0" };
      return { seq: state.next.seq, era: state.next.era };
    },
  } satisfies PurgeLog;
  return { log, state };
}

function watcherWith(clock: FakeClock, log: PurgeLog, l1: L1Purging = noL1): PurgeWatcher {
  return createPurgeWatcher({
    log,
    l1,
    clock,
    keyPrefix: "pp:v1",
    pollMs: POLL_MS,
    wideRetentionMs: 3_600_000,
    blindMaxAgeMs: 60_000,
    l1MaxBytes: 32 * 1024 * 1024,
    syncWaitMs: 200,
  });
}

function idPurge(seq: number, at: number, ids: string[], overrides: Partial<PurgeRecord> = {}): PurgeRecord {
  return { seq, at, ids, tags: [], all: false, mode: "hard", resources: ["product"], ...overrides };
}

function copyFetchedAt(clock: FakeClock, fetchedAt: number): Entry {
  const now = clock.now();
  return { data: {}, version: 1, fetchedAt, freshUntil: now + 60_000, staleUntil: now + 120_000, errorUntil: now + 600_000 };
}

const sync = (watcher: PurgeWatcher) => watcher.sync(() => undefined);

describe("what a fresh isolate can vouch for", () => {
  it("vouches for nothing before it has read the log", () => {
    const clock = fakeClock();
    const watcher = watcherWith(clock, scriptedLog().log);
    expect(watcher.stamp()).toBeNull();
    expect(watcher.vouches({ era: "", seq: 0 })).toBe(false);
  });

  it("reaches back over the unbroken run of the log's latest records, and judges copies by the id purges in them", async () => {
    const clock = fakeClock();
    const { log, state } = scriptedLog();
    const t = clock.now();
    // Purges 1..10 were recorded; the log still holds 4..10, newest first.
    const latest = [10, 9, 8, 7, 6, 5, 4].map((seq) => idPurge(seq, t - 60_000 + seq * 1000, [`p-${seq}`]));
    state.next = { seq: 10, era: "e1", follows: false, upTo: 10, records: latest, marks: [], floor: 0 };
    const watcher = watcherWith(clock, log);
    await sync(watcher);

    expect(watcher.stamp()).toEqual({ era: "e1", seq: 10 });
    expect(watcher.vouches({ era: "e1", seq: 3 })).toBe(true);
    expect(watcher.vouches({ era: "e1", seq: 10 })).toBe(true);
    // Purges 1..3 are not known here: a copy stamped before them might be one they purged.
    expect(watcher.vouches({ era: "e1", seq: 2 })).toBe(false);
    // Another era's numbers name other purges.
    expect(watcher.vouches({ era: "e0", seq: 10 })).toBe(false);
    // A copy of p-7 fetched before its purge is gone; one fetched after it is not.
    expect(watcher.judge(copyFetchedAt(clock, t - 60_000), "p-7", "product", [])).toBe("gone");
    expect(watcher.judge(copyFetchedAt(clock, t - 60_000 + 7001), "p-7", "product", [])).toBe("ok");
  });

  it("stops at a number the log did not give back (a record it could not read)", async () => {
    const clock = fakeClock();
    const { log, state } = scriptedLog();
    const latest = [10, 9, 7, 6].map((seq) => idPurge(seq, clock.now(), [`p-${seq}`]));
    state.next = { seq: 10, era: "e1", follows: false, upTo: 10, records: latest, marks: [], floor: 0 };
    const watcher = watcherWith(clock, log);
    await sync(watcher);
    expect(watcher.vouches({ era: "e1", seq: 8 })).toBe(true);
    expect(watcher.vouches({ era: "e1", seq: 7 })).toBe(false);
  });

  it("gives a log without an era one, and vouches for every copy of it while the log holds no purge; never for a copy stamped without one", async () => {
    const clock = fakeClock();
    const { log, state } = scriptedLog();
    const watcher = watcherWith(clock, log);
    await sync(watcher);
    expect(state.erasStarted).toBe(1);
    expect(watcher.stamp()).toEqual({ era: "e0", seq: 0 });
    expect(watcher.vouches({ era: "e0", seq: 0 })).toBe(true);
    // Stamped before the log had an era: it may predate purges Redis lost with its data.
    expect(watcher.vouches({ era: "", seq: 0 })).toBe(false);
  });

  it("takes no era started after a purge it has not read: neither stamps nor vouches until the next sync reads both", async () => {
    const clock = fakeClock();
    const { log, state } = scriptedLog();
    state.appendedBeforeEra = 1;
    const watcher = watcherWith(clock, log);
    await sync(watcher);
    expect(watcher.stamp()).toBeNull();
    expect(watcher.vouches({ era: "", seq: 0 })).toBe(false);
    expect(watcher.vouches({ era: "e0", seq: 1 })).toBe(false);
    state.appendedBeforeEra = 0;
    state.next = { seq: 1, era: "e0", follows: false, upTo: 1, records: [idPurge(1, clock.now(), ["a"])], marks: [], floor: 0 };
    clock.advance(POLL_MS);
    await sync(watcher);
    expect(watcher.stamp()).toEqual({ era: "e0", seq: 1 });
    expect(watcher.vouches({ era: "e0", seq: 0 })).toBe(true);
  });
});

describe("a log without an era", () => {
  const answer = (seq: number, era: string): PurgesSince => ({ seq, era, follows: false, upTo: seq, records: [], marks: [], floor: 0 });

  it("while its era cannot be started (Redis refusing writes), keeps the isolate syncing: no claim reads the position along for it", async () => {
    const clock = fakeClock();
    const log = { readSince: async () => answer(0, ""), record: async () => undefined, startEra: async () => undefined } satisfies PurgeLog;
    const watcher = watcherWith(clock, log);
    await sync(watcher);
    expect(watcher.stamp()).toBeNull();
    clock.advance(POLL_MS / 2);
    // A claim reading (0, "") along would count as a sync, and the era would never be asked for again.
    expect(watcher.readAlong()).toBeNull();
  });

  it("drops a sync that a newer one outran (its era's start waiting on a slow Redis): the isolate never goes back", async () => {
    const clock = fakeClock();
    const answers = [answer(0, ""), answer(7, "e1")];
    let release!: (position: { seq: number; era: string }) => void;
    const log = {
      readSince: async () => answers.shift()!,
      record: async () => undefined,
      startEra: () => new Promise<{ seq: number; era: string } | undefined>((resolve) => (release = resolve)),
    } satisfies PurgeLog;
    const watcher = watcherWith(clock, log);
    await sync(watcher); // gives up waiting after syncWaitMs; the sync goes on
    clock.advance(SYNC_LEASE_MS); // past its lease: the next page starts another
    await sync(watcher);
    expect(watcher.stamp()).toEqual({ era: "e1", seq: 7 });
    release({ seq: 0, era: "e0" });
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(watcher.stamp()).toEqual({ era: "e1", seq: 7 });
  });

  it("starts a new isolate over once, however many of its first syncs overlap (a burst on a slow Redis)", async () => {
    const clock = fakeClock();
    let startedOver = 0;
    const reads: ((answer: PurgesSince) => void)[] = [];
    const log = {
      readSince: () => new Promise<PurgesSince>((resolve) => reads.push(resolve)),
      record: async () => undefined,
      startEra: async () => undefined,
    } satisfies PurgeLog;
    const watcher = watcherWith(clock, log, { ...noL1, keepOnlyForErrors: () => void startedOver++ });
    const first = sync(watcher);
    clock.advance(SYNC_LEASE_MS); // past the first sync's lease: the next page starts another
    const second = sync(watcher);
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(reads).toHaveLength(2);
    reads[0]!({ seq: 4, era: "e1", follows: false, upTo: 4, records: [], marks: [], floor: 0 });
    reads[1]!({ seq: 4, era: "e1", follows: false, upTo: 4, records: [], marks: [], floor: 0 });
    await Promise.all([first, second]);
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(startedOver).toBe(1);
    expect(watcher.stamp()).toEqual({ era: "e1", seq: 4 });
  });
});

describe("what an isolate that follows the log can vouch for", () => {
  async function followingFrom(seq: number) {
    const clock = fakeClock();
    const { log, state } = scriptedLog();
    state.next = { seq, era: "e1", follows: false, upTo: seq, records: [], marks: [], floor: 0 };
    const watcher = watcherWith(clock, log);
    await sync(watcher);
    return { clock, state, watcher };
  }

  it("keeps vouching from where it started while it reads every record", async () => {
    const { clock, state, watcher } = await followingFrom(5);
    state.next = { seq: 7, era: "e1", follows: true, upTo: 7, records: [idPurge(6, clock.now(), ["a"]), idPurge(7, clock.now(), ["b"])], marks: [], floor: 0 };
    clock.advance(POLL_MS);
    await sync(watcher);
    expect(state.asked).toEqual([0, 5]);
    expect(watcher.vouches({ era: "e1", seq: 5 })).toBe(true);
    expect(watcher.vouches({ era: "e1", seq: 4 })).toBe(false);
  });

  it("moves its horizon past a record it could not read", async () => {
    const { clock, state, watcher } = await followingFrom(5);
    state.next = { seq: 8, era: "e1", follows: true, upTo: 8, records: [idPurge(6, clock.now(), ["a"]), idPurge(8, clock.now(), ["b"])], marks: [], floor: 0 };
    clock.advance(POLL_MS);
    await sync(watcher);
    expect(watcher.vouches({ era: "e1", seq: 6 })).toBe(false);
    expect(watcher.vouches({ era: "e1", seq: 7 })).toBe(true);
  });

  it("takes a new era as knowing nothing of it before now", async () => {
    const { clock, state, watcher } = await followingFrom(5);
    state.next = { seq: 5, era: "e2", follows: true, upTo: 5, records: [], marks: [], floor: 0 };
    clock.advance(POLL_MS);
    await sync(watcher);
    expect(watcher.vouches({ era: "e1", seq: 5 })).toBe(false);
    expect(watcher.vouches({ era: "e2", seq: 4 })).toBe(false);
    expect(watcher.vouches({ era: "e2", seq: 5 })).toBe(true);
  });

  it("moves its horizon past id purges it forgets (past the 10,000 it remembers)", async () => {
    const { clock, state, watcher } = await followingFrom(0);
    const records = Array.from({ length: 11 }, (_, n) =>
      idPurge(
        n + 1,
        clock.now(),
        Array.from({ length: 1000 }, (_, i) => `p-${n}-${i}`),
      ),
    );
    state.next = { seq: 11, era: "e1", follows: true, upTo: 11, records, marks: [], floor: 0 };
    clock.advance(POLL_MS);
    await sync(watcher);
    expect(watcher.vouches({ era: "e1", seq: 0 })).toBe(false);
    expect(watcher.vouches({ era: "e1", seq: 1 })).toBe(true);
  });

  it("keeps a hard purge of one resource when a soft purge of another follows for the same id", async () => {
    const { clock, state, watcher } = await followingFrom(0);
    const fetchedAt = clock.now() - 10_000;
    state.next = {
      seq: 2,
      era: "e1",
      follows: true,
      upTo: 2,
      records: [idPurge(1, clock.now() - 5000, ["p-1"]), idPurge(2, clock.now() - 4000, ["p-1"], { mode: "soft", resources: ["inventory"] })],
      marks: [],
      floor: 0,
    };
    clock.advance(POLL_MS);
    await sync(watcher);
    expect(watcher.judge(copyFetchedAt(clock, fetchedAt), "p-1", "product", [])).toBe("gone");
    expect(watcher.judge(copyFetchedAt(clock, fetchedAt), "p-1", "inventory", [])).toBe("stale");
  });
});
