// The purge watcher's blind mode (src/invalidation/watcher.ts): with no news
// of purges for longer than a poll and a sync's lease (the purge log in L2 not
// answering), purges may have been missed, so entries older than
// `blindMaxAgeMs` are no longer taken as fresh; once the log answers again,
// the watcher trusts its knowledge again. A fake clock throughout, and a fake
// purge log that answers or fails as the test says.
import { describe, expect, it } from "vitest";
import type { Entry } from "../../src/cache/entry";
import { createReadThrough, type L1Purging } from "../../src/cache/readThrough";
import { DEFAULTS } from "../../src/config/defaults";
import { PAGE_MAX_BYTES, type PurgeLog, type PurgesSince } from "../../src/invalidation/log";
import { PURGES_REMEMBERED } from "../../src/invalidation/knownPurges";
import { createPurgeWatcher, knowledgeOf, SYNC_LEASE_MS, type PurgeWatcher, type PurgeWatcherOptions } from "../../src/invalidation/watcher";
import { sha256Hex } from "../../src/shared/hash";
import { createLogShelf, type LogShelf, type SharedPage, type SharedPosition, type SharedReading } from "../../src/invalidation/sharedReads";
import type { PurgeRecord } from "../../src/invalidation/record";
import type { ResourceName } from "../../src/origin/resources";
import { fakeClock, fakeOrigin, fakeStore, type FakeClock, type FakeOrigin, testConfig } from "../support/fakes";

const POLL_MS = 1000;
/** Blind past the bound and the lease of the sync then due (watcher.ts, `blind`). */
const BLIND_AFTER_MS = POLL_MS + SYNC_LEASE_MS;
const BLIND_MAX_AGE_MS = DEFAULTS.softPurgeGraceMs;
/** Pages of the log one sync reads before it starts over: as many as L1's bytes (watcherWith's l1MaxBytes). */
const CATCH_UP_PAGES = 32;
const PRODUCT: ResourceName[] = ["product"];

/** A purge log with no purges in it, that answers while `up` and fails (L2 unavailable: undefined) otherwise. */
function fakeLog() {
  /** `era`: set anew to stand for a log that was reset (Redis lost its data): the next read is not caught up. */
  const state = { up: true, reads: 0, era: "e0", readEra: "e0" };
  const log = {
    async readSince(seen: number): Promise<PurgesSince | undefined> {
      state.reads++;
      if (!state.up) return undefined;
      const follows = state.era === state.readEra;
      state.readEra = state.era;
      const seq = follows ? seen : 0;
      return { seq, era: state.era, follows, records: [], upTo: seq, marks: [], floor: 0 };
    },
    record: async () => undefined,
    startEra: async () => ({ seq: 0, era: state.era }),
  } satisfies PurgeLog;
  return { log, state };
}

const noL1: L1Purging = { forget: () => undefined, markStale: () => undefined, keepOnlyForErrors: () => undefined };

function watcherWith(clock: FakeClock, log: PurgeLog | null, l1: L1Purging = noL1, more: Partial<PurgeWatcherOptions> = {}): PurgeWatcher {
  return createPurgeWatcher({
    log,
    l1,
    clock,
    keyPrefix: "pp:v1",
    pollMs: POLL_MS,
    wideRetentionMs: 3_600_000,
    blindMaxAgeMs: BLIND_MAX_AGE_MS,
    l1MaxBytes: CATCH_UP_PAGES * PAGE_MAX_BYTES,
    syncWaitMs: 200,
    // The background sync's random part at its most: due at half a poll, as these tests count.
    random: () => 1,
    ...more,
  });
}

/** An entry fetched at `fetchedAt` and fresh by its own deadlines for an hour from now. */
function entryFetchedAt(clock: FakeClock, fetchedAt: number): Entry {
  const now = clock.now();
  return { data: {}, version: 1, fetchedAt, freshUntil: now + 3_600_000, staleUntil: now + 7_200_000, errorUntil: now + 86_400_000 };
}

const sync = (watcher: PurgeWatcher) => watcher.sync(() => undefined);

/**
 * The read path with a watcher of `log` judging what it serves, as src/tier.ts
 * wires them. L2 is left out (l2: null): a refresh goes straight to the fake
 * origin, and a failing purge log stands for a failing L2. The product is
 * fresh for an hour by its own deadlines: only what the watcher knows can
 * make it stale within a test.
 */
function readPathOf(clock: FakeClock, log: PurgeLog, origin: FakeOrigin): { cache: ReturnType<typeof createReadThrough>; watcher: PurgeWatcher } {
  let watcher: PurgeWatcher | undefined;
  const cache = createReadThrough({
    config: testConfig({ CACHE_POLICIES: JSON.stringify({ product: { ttl: 3600, swr: 600, staleIfError: 86_400 } }) }),
    origin,
    l2: null,
    clock,
    purges: knowledgeOf(() => watcher!),
  });
  watcher = watcherWith(clock, log, cache);
  return { cache, watcher };
}

/** From now on each read of `log` waits until the returned function is called (a slow Redis), then answers as before. */
function holdReads(log: ReturnType<typeof fakeLog>["log"]): () => void {
  let release!: () => void;
  const answer = log.readSince.bind(log);
  log.readSince = async (seen: number) => {
    await new Promise<void>((resolve) => (release = resolve));
    return answer(seen);
  };
  return () => release();
}

/** A sync, and whatever it left in the background, awaited. */
async function syncAll(watcher: PurgeWatcher): Promise<void> {
  const work: Promise<unknown>[] = [];
  await watcher.sync((w) => work.push(w));
  await Promise.all(work);
}

describe("the purge watcher's blind mode", () => {
  it("counts itself blind only once the log has not answered for longer than a poll and a sync's lease", async () => {
    const clock = fakeClock();
    const { log, state } = fakeLog();
    const watcher = watcherWith(clock, log);
    await sync(watcher);
    expect(watcher.status().blind).toBe(false);

    state.up = false;
    // Failed syncs, one per poll, up to a poll and a sync's lease after the last answer: not blind yet.
    let waited = 0;
    for (; waited + POLL_MS <= BLIND_AFTER_MS; waited += POLL_MS) {
      clock.advance(POLL_MS);
      await syncAll(watcher);
      expect(watcher.status().blind, `${waited + POLL_MS} ms without news`).toBe(false);
    }
    expect(state.reads).toBe(1 + Math.floor(BLIND_AFTER_MS / POLL_MS));
    clock.advance(BLIND_AFTER_MS - waited);
    expect(watcher.status().blind, `${BLIND_AFTER_MS} ms without news`).toBe(false);
    clock.advance(1);
    expect(watcher.status().blind).toBe(true);
  });

  it("while blind, judges stale an entry fetched longer than blindMaxAgeMs ago, and leaves younger ones alone", async () => {
    const clock = fakeClock();
    const { log, state } = fakeLog();
    const watcher = watcherWith(clock, log);
    await sync(watcher);
    const oldOne = entryFetchedAt(clock, clock.now() - BLIND_MAX_AGE_MS - 1);
    const youngOne = entryFetchedAt(clock, clock.now() - BLIND_MAX_AGE_MS + BLIND_AFTER_MS + 1000);
    // Not blind: age alone changes nothing.
    expect(watcher.judge(oldOne, "p-1", "product", [])).toBe("ok");

    state.up = false;
    clock.advance(BLIND_AFTER_MS + 1);
    await sync(watcher);
    expect(watcher.status().blind).toBe(true);
    expect(watcher.judge(oldOne, "p-1", "product", [])).toBe("stale");
    expect(watcher.judge(youngOne, "p-1", "product", [])).toBe("ok");
    // Stale, not gone: there is no purge to say it must not be served at all.
    expect(watcher.judge(oldOne, "p-1", "inventory", ["brand:acme"])).toBe("stale");
  });

  it("leaves blind mode as soon as the log answers again, and judges old entries ok once more", async () => {
    const clock = fakeClock();
    const { log, state } = fakeLog();
    const watcher = watcherWith(clock, log);
    await sync(watcher);
    state.up = false;
    clock.advance(BLIND_MAX_AGE_MS + 1);
    await sync(watcher);
    const oldOne = entryFetchedAt(clock, clock.now() - BLIND_MAX_AGE_MS - 1);
    expect(watcher.status().blind).toBe(true);
    expect(watcher.judge(oldOne, "p-1", "product", [])).toBe("stale");

    state.up = true;
    clock.advance(POLL_MS);
    await sync(watcher);
    expect(watcher.status()).toMatchObject({ blind: false, lastSyncAt: clock.now() });
    expect(watcher.judge(oldOne, "p-1", "product", [])).toBe("ok");
  });

  it("while Redis does not answer the log, keeps no visitor waiting for a sync: they go on in the background, one at a time", async () => {
    const clock = fakeClock();
    const { log, state } = fakeLog();
    const watcher = watcherWith(clock, log);
    await sync(watcher);
    state.up = false;
    clock.advance(POLL_MS);
    await syncAll(watcher); // the visitor's own sync, waited for: Redis does not answer it
    expect(state.reads).toBe(2);

    // Redis hangs now: a visitor's sync returns at once, and starts the one read under way.
    let release!: (answer: undefined) => void;
    log.readSince = () => {
      state.reads++;
      return new Promise((resolve) => (release = resolve));
    };
    clock.advance(POLL_MS);
    const work: Promise<unknown>[] = [];
    let returned = false;
    const visitor = watcher.sync((w) => work.push(w)).then(() => (returned = true));
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(returned).toBe(true);
    await watcher.sync((w) => work.push(w));
    expect(state.reads).toBe(3);
    release(undefined);
    await Promise.all([visitor, ...work]);
  });

  it("waits for another request's sync only within syncWaitMs of its start: the visitors after that do not wait for a slow read in turn", async () => {
    const clock = fakeClock();
    const { log } = fakeLog();
    const watcher = watcherWith(clock, log);
    await sync(watcher);
    const release = holdReads(log);
    clock.advance(POLL_MS);
    const first = sync(watcher); // starts the read, and waits for it
    clock.advance(100);
    const done = { second: false, third: false };
    const second = sync(watcher).then(() => (done.second = true));
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(done.second).toBe(false); // within syncWaitMs of the read's start: it waits
    clock.advance(101); // the read is now older than syncWaitMs (200)
    const third = sync(watcher).then(() => (done.third = true));
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(done.third).toBe(true);
    release();
    await Promise.all([first, second, third]);
  });

  it("once the log answers again, a visitor waits for a due sync as before (the bound)", async () => {
    const clock = fakeClock();
    const { log, state } = fakeLog();
    const watcher = watcherWith(clock, log);
    await sync(watcher);
    state.up = false;
    clock.advance(POLL_MS);
    await syncAll(watcher);
    state.up = true;
    clock.advance(POLL_MS);
    await syncAll(watcher); // in the background: it answers
    const release = holdReads(log);
    clock.advance(POLL_MS);
    let returned = false;
    const visitor = sync(watcher).then(() => (returned = true));
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(returned).toBe(false);
    release();
    await visitor;
    expect(watcher.status().lastSyncAt).toBe(clock.now());
  });

  it("counts what a read found from when it was sent, not from its late reply: a purge recorded while it was out is due a poll after the send", async () => {
    const clock = fakeClock();
    const { log, state } = fakeLog();
    const watcher = watcherWith(clock, log);
    await sync(watcher);
    // Redis paused: the due read goes out and is answered 900 ms later (after purges recorded meanwhile, which it does not hold).
    const answering = log.readSince;
    const release = holdReads(log);
    clock.advance(POLL_MS);
    const sentAt = clock.now();
    const visitor = sync(watcher);
    clock.advance(900);
    release();
    await visitor;
    log.readSince = answering;
    expect(watcher.status().lastSyncAt).toBe(sentAt);
    // A poll after the send, not after the reply, the next visitor waits for a read of its own.
    const readsBefore = state.reads;
    clock.advance(POLL_MS - 900);
    await sync(watcher);
    expect(state.reads).toBe(readsBefore + 1);
  });

  it("keeps a purge it recorded itself while a read of the log was out: the read's older position takes nothing back", async () => {
    const clock = fakeClock();
    const { log } = fakeLog();
    const watcher = watcherWith(clock, log);
    await sync(watcher);
    expect(watcher.status().seq).toBe(0);
    const release = holdReads(log);
    clock.advance(POLL_MS);
    const visitor = sync(watcher);
    // This isolate's /__purge recorded purge 1 while the read (sent before it, at position 0) was out.
    watcher.apply({ seq: 1, at: clock.now(), ids: ["p-1"], tags: [], all: false, mode: "hard", resources: ["product"] });
    release();
    await visitor;
    expect(watcher.status().seq).toBe(1);
    expect(watcher.stamp()).toEqual({ era: "e0", seq: 1 });
  });

  it("is never blind without a purge log (no L2: no purges to miss)", async () => {
    const clock = fakeClock();
    const watcher = watcherWith(clock, null);
    await sync(watcher);
    clock.advance(BLIND_MAX_AGE_MS * 10);
    expect(watcher.status().blind).toBe(false);
    expect(watcher.judge(entryFetchedAt(clock, clock.now() - BLIND_MAX_AGE_MS * 10), "p-1", "product", [])).toBe("ok");
  });
});

describe("a bulk re-price, read page by page", () => {
  /**
   * A log of one-id purges (p-<n>) that hands a follower at most `perPage` of
   * them a read, as READ_PURGES does. Those numbered in `tagged` also purge
   * the tag "sale"; with `aheadKnown`, a page with more after it comes with
   * them (wideAhead). `hold`: reads after the first wait for `release()`.
   */
  function pagedLog(perPage: number, more: { tagged?: ReadonlySet<number>; aheadKnown?: boolean } = {}) {
    /** `failRead`: the number of the read that fails (L2 unavailable). */
    const state = { seq: 1, reads: 0, startOvers: 0, failRead: 0, at: 1, hold: false, release: () => {} };
    const tagged = more.tagged ?? new Set<number>();
    const record = (seq: number) => ({
      seq,
      at: state.at,
      ids: [`p-${seq}`],
      tags: tagged.has(seq) ? ["sale"] : [],
      all: false,
      mode: "hard" as const,
      resources: PRODUCT,
    });
    const log = {
      async readSince(seen: number, era: string | null): Promise<PurgesSince | undefined> {
        if (state.hold && state.reads > 0 && seen > 1) await new Promise<void>((resolve) => (state.release = resolve));
        if (++state.reads === state.failRead) return undefined;
        if (era !== "e1") {
          state.startOvers++;
          return { seq: state.seq, era: "e1", follows: false, records: [], upTo: state.seq, marks: [], floor: 0 };
        }
        const upTo = Math.min(state.seq, seen + perPage);
        const records = Array.from({ length: upTo - seen }, (_, i) => record(seen + 1 + i));
        const ahead = Array.from({ length: state.seq - upTo }, (_, i) => upTo + 1 + i).filter((seq) => tagged.has(seq));
        const wideAhead = more.aheadKnown && upTo < state.seq ? ahead.map(record) : null;
        return { seq: state.seq, era: "e1", follows: true, records, upTo, wideAhead, marks: [], floor: 0 };
      },
      record: async () => undefined,
      startEra: async () => ({ seq: state.seq, era: "e1" }),
    } satisfies PurgeLog;
    return { log, state };
  }

  function l1Recorder() {
    const l1 = { forgotten: new Set<string>(), keptOnlyForErrors: 0 };
    const purging: L1Purging = {
      forget: (key) => void l1.forgotten.add(key),
      markStale: () => undefined,
      keepOnlyForErrors: () => void l1.keptOnlyForErrors++,
    };
    return { l1, purging };
  }

  /** One background sync (due at half a poll), awaited to its end. */
  async function backgroundSync(clock: FakeClock, watcher: PurgeWatcher): Promise<void> {
    const work: Promise<unknown>[] = [];
    clock.advance(POLL_MS / 2);
    await watcher.sync((w) => work.push(w));
    await Promise.all(work);
  }

  it("reads every page of the backlog in one sync and keeps L1 for the products not purged", async () => {
    const clock = fakeClock();
    const { log, state } = pagedLog(3);
    const { l1, purging } = l1Recorder();
    const watcher = watcherWith(clock, log, purging);
    await sync(watcher);
    expect(l1.keptOnlyForErrors).toBe(1); // a new isolate starts over, once

    state.seq = 61;
    await backgroundSync(clock, watcher);
    expect(watcher.status()).toMatchObject({ seq: 61, lastSyncAt: clock.now() });
    expect(state.reads).toBe(1 + 20);
    expect(l1.keptOnlyForErrors).toBe(1);
    expect(l1.forgotten).toEqual(new Set(Array.from({ length: 60 }, (_, i) => `pp:v1:p:p-${i + 2}`)));
    expect(watcher.vouches(watcher.stamp()!)).toBe(true);
  });

  it("tells the fleet of a sync's purges once, together, when it ends", async () => {
    const clock = fakeClock();
    const { log, state } = pagedLog(4);
    const reaches: number[] = [];
    const watcher = watcherWith(clock, log, noL1, { reached: (batch) => void reaches.push(batch.length) });
    await sync(watcher);
    state.seq = 11;
    await backgroundSync(clock, watcher);
    expect(watcher.status()).toMatchObject({ seq: 11, lastSyncAt: clock.now() });
    expect(reaches).toEqual([10]);
  });

  it(`remembers only the ids it keeps (the newest ${PURGES_REMEMBERED}) of a page that holds more, and vouches for no copy stamped before the others`, async () => {
    const clock = fakeClock();
    const perPurge = 1000;
    const purges = Math.ceil(PURGES_REMEMBERED / perPurge) + 3;
    const record = (seq: number) => ({
      seq,
      at: clock.now(),
      ids: Array.from({ length: perPurge }, (_, i) => `p-${seq}-${i}`),
      tags: [],
      all: false,
      mode: "hard" as const,
      resources: PRODUCT,
    });
    const log = {
      async readSince(seen: number, era: string | null): Promise<PurgesSince | undefined> {
        if (era !== "e1") return { seq: 0, era: "e1", follows: false, records: [], upTo: 0, marks: [], floor: 0 };
        const records = Array.from({ length: purges - seen }, (_, i) => record(seen + 1 + i));
        return { seq: purges, era: "e1", follows: true, records, upTo: purges, marks: [], floor: 0 };
      },
      record: async () => undefined,
      startEra: async () => ({ seq: 0, era: "e1" }),
    } satisfies PurgeLog;
    const { l1, purging } = l1Recorder();
    const watcher = watcherWith(clock, log, purging);
    await sync(watcher);
    const before = { era: "e1", seq: 0 };
    expect(watcher.vouches(before)).toBe(true);
    clock.advance(1);
    const fetchedEarlier = entryFetchedAt(clock, clock.now() - 10);
    clock.advance(POLL_MS);
    await syncAll(watcher);
    // Every purged id left L1, the first purges' as the last's...
    expect(l1.forgotten.size).toBe(purges * perPurge);
    // ...the last purge's ids are remembered (a copy from before it is gone), the first's not, and a copy stamped before them is not vouched for.
    expect(watcher.judge(fetchedEarlier, `p-${purges}-0`, "product", [])).toBe("gone");
    expect(watcher.judge(fetchedEarlier, "p-1-0", "product", [])).toBe("ok");
    expect(watcher.vouches(before)).toBe(false);
    expect(watcher.vouches(watcher.stamp()!)).toBe(true);
  });

  it(`starts over past L1's bytes of log (${CATCH_UP_PAGES} pages) in one sync, where reading on would cost more than L1's pages`, async () => {
    const clock = fakeClock();
    const { log, state } = pagedLog(2);
    const { l1, purging } = l1Recorder();
    const watcher = watcherWith(clock, log, purging);
    await sync(watcher);
    state.seq = 1 + 2 * (CATCH_UP_PAGES + 5);
    await backgroundSync(clock, watcher);
    expect(state.startOvers).toBe(2);
    expect(state.reads).toBe(1 + CATCH_UP_PAGES + 1);
    expect(l1.keptOnlyForErrors).toBe(2);
    expect(watcher.status()).toMatchObject({ seq: state.seq, lastSyncAt: clock.now() });
  });

  it("keeps a visitor due for a sync waiting for one page only: the rest is read in the background, and meanwhile L1's older copies are unsure", async () => {
    const clock = fakeClock();
    const { log, state } = pagedLog(3, { tagged: new Set([50]), aheadKnown: true });
    const watcher = watcherWith(clock, log);
    await sync(watcher);
    expect(watcher.unsureBefore()).toBe(0);
    const fetchedBefore = entryFetchedAt(clock, clock.now());
    const stampedBefore = watcher.stamp()!;

    // 60 purges (one tagged "sale"), recorded since; the first page is read, the others wait.
    state.seq = 61;
    state.at = clock.now() + 1;
    state.hold = true;
    clock.advance(POLL_MS);
    const sentAt = clock.now();
    const background: Promise<unknown>[] = [];
    await watcher.sync((work) => void background.push(work));
    expect(watcher.status().seq).toBe(4);
    // Copies fetched before that read may have been purged by what is not read yet: not from L1 as they are...
    expect(watcher.unsureBefore()).toBe(sentAt);
    // ...nor a location copy stamped before where the log stood then...
    expect(watcher.vouches(stampedBefore)).toBe(false);
    expect(watcher.vouches({ era: "e1", seq: 61 })).toBe(true);
    // ...and the tag purge ahead, which came with the page, already judges them.
    expect(watcher.judge(fetchedBefore, "p-9", "product", ["sale"])).toBe("gone");
    expect(watcher.judge(fetchedBefore, "p-9", "product", [])).toBe("ok");

    // The rest, in the background: then all is known, and nothing is unsure.
    state.hold = false;
    while (watcher.status().seq < 61) {
      state.release();
      await new Promise((resolve) => setImmediate(resolve));
    }
    await Promise.all(background);
    expect(watcher.unsureBefore()).toBe(0);
    expect(watcher.vouches(watcher.stamp()!)).toBe(true);
    expect(watcher.judge(fetchedBefore, "p-60", "product", [])).toBe("gone");
  });

  it("keeps the visitor waiting for the whole sync, as before, when the page does not come with every tag and all purge ahead", async () => {
    const clock = fakeClock();
    const { log, state } = pagedLog(3, { tagged: new Set([50]), aheadKnown: false });
    const watcher = watcherWith(clock, log);
    await sync(watcher);
    state.seq = 61;
    state.hold = true;
    clock.advance(POLL_MS);
    let served = false;
    const visitor = watcher.sync(() => undefined).then(() => (served = true));
    for (let read = 0; read < 5; read++) {
      await new Promise((resolve) => setImmediate(resolve));
      expect(served).toBe(false);
      expect(watcher.unsureBefore()).toBe(0);
      state.release();
    }
    state.hold = false;
    state.release();
    await visitor;
    expect(watcher.status().seq).toBe(61);
  });

  it("while it reads the rest, the read path does not serve L1's older copies as they are: a product the rest may purge is read again, and L1 serves once all is read", async () => {
    const clock = fakeClock();
    const origin = fakeOrigin();
    const { log, state } = pagedLog(3, { aheadKnown: true });
    const { cache, watcher } = readPathOf(clock, log, origin);
    const background: Promise<unknown>[] = [];
    const page = async () => {
      await watcher.sync((work) => void background.push(work));
      return (await cache.read("p-90", PRODUCT, (work) => void background.push(work))).data.product!;
    };
    expect(await page()).toMatchObject({ tier: "origin" });
    expect(await page()).toMatchObject({ tier: "l1" });

    state.seq = 61;
    state.hold = true;
    clock.advance(POLL_MS);
    // Not purged by the first page, but maybe by the rest: not served from L1 as it is (here, with no L2, from the origin).
    expect(await page()).toMatchObject({ tier: "origin" });
    expect(origin.calls.product).toBe(2);

    state.hold = false;
    while (watcher.status().seq < 61) {
      state.release();
      await new Promise((resolve) => setImmediate(resolve));
    }
    await Promise.all(background.splice(0));
    expect(await page()).toMatchObject({ tier: "l1" });
    expect(origin.calls.product).toBe(2);
  });

  it("stays due while a page cannot be read: its knowledge is as old as its last complete read", async () => {
    const clock = fakeClock();
    const { log, state } = pagedLog(3);
    const watcher = watcherWith(clock, log);
    await sync(watcher);
    const synced = watcher.status().lastSyncAt;
    state.seq = 31;
    state.failRead = 4; // the third page's
    await backgroundSync(clock, watcher);
    expect(watcher.status()).toMatchObject({ seq: 7, lastSyncAt: synced });
    // The next sync goes on from there.
    await backgroundSync(clock, watcher);
    expect(watcher.status()).toMatchObject({ seq: 31, lastSyncAt: clock.now() });
  });
});

// The watcher as the read path uses it (as src/tier.ts wires them). L2 is
// left out of the read path here (l2: null), so a refresh goes straight to
// the fake origin; the failing purge log stands for the failing L2.
describe("the read path when purges may have been missed: blind, or after the log was reset", () => {
  function setup() {
    const clock = fakeClock();
    const origin = fakeOrigin();
    const { log, state } = fakeLog();
    const { cache, watcher } = readPathOf(clock, log, origin);
    const background: Promise<unknown>[] = [];
    const page = async (id = "p-1") => {
      await watcher.sync((work) => void background.push(work));
      return (await cache.read(id, PRODUCT, (work) => void background.push(work))).data.product!;
    };
    const settle = async () => {
      while (background.length > 0) await Promise.all(background.splice(0));
    };
    return { clock, origin, state, page, settle, watcher };
  }

  it("serves an entry older than blindMaxAgeMs stale while one background refresh from the origin runs, then fresh", async () => {
    const { clock, origin, state, page, settle } = setup();
    expect(await page()).toMatchObject({ tier: "origin", freshness: "fresh" });
    expect(origin.calls.product).toBe(1);

    state.up = false;
    clock.advance(BLIND_MAX_AGE_MS + 1);
    origin.version = 2;
    // The refresh is held open at the origin until the ten pages are served.
    let answer!: () => void;
    origin.gate = new Promise((resolve) => (answer = resolve));
    const whileBlind = await Promise.all(Array.from({ length: 10 }, () => page()));
    for (const served of whileBlind) {
      expect(served).toMatchObject({ tier: "l1", freshness: "stale" });
      expect(served.entry?.version).toBe(1);
    }
    // One refresh for the ten pages, in the background.
    expect(origin.calls.product).toBe(2);
    origin.gate = null;
    answer();
    await settle();

    const refreshed = await page();
    expect(refreshed).toMatchObject({ tier: "l1", freshness: "fresh" });
    expect(refreshed.entry?.version).toBe(2);
    // Refreshed once: the new copy is young, and still blind the next pages take it as fresh.
    for (let i = 0; i < 10; i++) expect(await page()).toMatchObject({ tier: "l1", freshness: "fresh" });
    expect(origin.calls.product).toBe(2);
  });

  it("after the log was reset under it (Redis lost its data), serves nothing L1 held while the origin answers, and L1's copy when the origin fails", async () => {
    const { clock, origin, state, page } = setup();
    await page("p-1");
    await page("p-2");
    expect(origin.calls.product).toBe(2);
    // Purges recorded before the loss may never reach this isolate: what it holds is not served as it was.
    state.era = "after-the-loss";
    clock.advance(POLL_MS);
    origin.version = 2;
    const refetched = await page("p-1");
    expect(refetched).toMatchObject({ tier: "origin", freshness: "fresh" });
    expect(refetched.entry?.version).toBe(2);
    expect(origin.calls.product).toBe(3);
    // The origin failing: the copy L1 had, as a last resort (stale-if-error), not a failed page.
    origin.behaviour.product = "fail";
    const fallback = await page("p-2");
    expect(fallback).toMatchObject({ tier: "l1", freshness: "stale-if-error" });
    expect(fallback.entry?.version).toBe(1);
    expect(origin.calls.product).toBe(4);
  });

  it("serves the same old entry fresh, without asking the origin, while the purge log answers", async () => {
    const { clock, origin, page } = setup();
    await page();
    clock.advance(BLIND_MAX_AGE_MS + 1);
    expect(await page()).toMatchObject({ tier: "l1", freshness: "fresh" });
    expect(origin.calls.product).toBe(1);
  });

  it("once the log answers again, serves an old entry it has not refreshed as fresh again", async () => {
    const { clock, origin, state, page, watcher } = setup();
    await page("p-2");
    state.up = false;
    clock.advance(BLIND_MAX_AGE_MS + 1);
    await page("p-other"); // a page while blind: its sync fails
    expect(watcher.status().blind).toBe(true);
    const callsBefore = origin.calls.product;

    state.up = true;
    clock.advance(POLL_MS);
    expect(await page("p-2")).toMatchObject({ tier: "l1", freshness: "fresh" });
    expect(watcher.status().blind).toBe(false);
    expect(origin.calls.product).toBe(callsBefore);
  });
});

describe("the purge log's position, read along a lock claim", () => {
  it("is asked for only once the isolate has synced, and its knowledge is a quarter of pollMs old", async () => {
    const clock = fakeClock();
    const { log } = fakeLog();
    const watcher = watcherWith(clock, log);
    expect(watcher.readAlong()).toBeNull(); // never synced: the first request syncs anyway
    await sync(watcher);
    clock.advance(POLL_MS / 4 - 1);
    expect(watcher.readAlong()).toBeNull();
    clock.advance(1);
    expect(watcher.readAlong()?.keys).toEqual(["pp:v1:purge:seq", "pp:v1:purge:era"]);
    expect(watcherWith(clock, null).readAlong()).toBeNull(); // no log, no position
  });

  it("where the log stands where the isolate has read it up to, counts as a sync at the claim's sending: no read of the log until it is due from then", async () => {
    const clock = fakeClock();
    const { log, state } = fakeLog();
    const watcher = watcherWith(clock, log);
    await sync(watcher);
    clock.advance(POLL_MS / 2 - 100);
    const along = watcher.readAlong()!;
    clock.advance(20); // the claim's round trip
    along.read(["0", "e0"]); // no purge yet: the counter a reader started at 0, and its era
    clock.advance(POLL_MS / 2 - 21); // just short of half pollMs after the claim went (the log was read 899 ms ago)
    await sync(watcher);
    expect(state.reads).toBe(1);
    clock.advance(1);
    await sync(watcher);
    expect(state.reads).toBe(2); // due again: a background read, as usual
  });

  it("leaves the next read of the log due as before when the log stands elsewhere: a purge not read yet, another era, a counter that is not a count", async () => {
    for (const values of [
      ["3", null],
      [null, "1764300000000"],
      ["x1", null],
    ] as const) {
      const clock = fakeClock();
      const { log, state } = fakeLog();
      const watcher = watcherWith(clock, log);
      await sync(watcher);
      clock.advance(POLL_MS / 4);
      watcher.readAlong()!.read(values);
      clock.advance(POLL_MS / 4);
      await sync(watcher);
      expect(state.reads, `position ${JSON.stringify(values)}`).toBe(2);
    }
  });
});

/** The data center's shelf of reads of the log (sharedReads.ts), as plain variables: what each put shares, each lookup answers. */
function fakeShelf() {
  const state = {
    position: undefined as SharedPosition | undefined,
    reading: undefined as SharedReading | undefined,
    pages: new Map<string, SharedPage>(),
    lookups: 0,
    puts: [] as SharedPosition[],
    readings: [] as SharedReading[],
  };
  const shelf: LogShelf = {
    async read() {
      state.lookups++;
      return state.position && { ...state.position };
    },
    put(position) {
      state.puts.push(position);
      state.position = { ...position };
    },
    async reading() {
      return state.reading && { ...state.reading };
    },
    putReading(reading) {
      state.readings.push(reading);
      state.reading = { ...reading };
    },
    async page(era, from) {
      return state.pages.get(`${era}:${from}`);
    },
    async putPage(era, page) {
      state.pages.set(`${era}:${page.from}`, { upTo: page.upTo, records: page.members.map((member) => JSON.parse(member) as PurgeRecord) });
    },
  };
  return { shelf, state };
}

/**
 * A log of era e0 that purges are added to (`purge`), read as READ_PURGES
 * reads it: the records after the reader's, at most `perPage` (and at most
 * the reader's `maxRecords`), with their members; `reads` lists where each read began.
 */
function movingLog(clock: FakeClock, perPage = Number.POSITIVE_INFINITY) {
  const records: PurgeRecord[] = [];
  const state = { reads: 0, from: [] as number[] };
  const log = {
    async readSince(seen: number, _era?: string | null, maxRecords = Number.POSITIVE_INFINITY): Promise<PurgesSince | undefined> {
      state.reads++;
      state.from.push(seen);
      const after = records.filter((record) => record.seq > seen).slice(0, Math.min(perPage, maxRecords));
      const seq = records.length;
      const upTo = after.at(-1)?.seq ?? seq;
      return { seq, era: "e0", follows: true, records: after, upTo, marks: [], floor: 0, members: after.map((record) => JSON.stringify(record)) };
    },
    record: async () => undefined,
    startEra: async () => ({ seq: records.length, era: "e0" }),
  } satisfies PurgeLog;
  const purge = (id: string) =>
    records.push({ seq: records.length + 1, at: clock.now(), ids: [id], tags: [], all: false, mode: "hard", resources: ["product"] });
  return { log, state, purge };
}

/** One isolate of a data center, synced once with a moving log: the keys it forgets, the shelf its data center shares. */
async function oneIsolateOnTheShelf() {
  const clock = fakeClock();
  const { shelf, state: shared } = fakeShelf();
  const { log, state, purge } = movingLog(clock);
  const forgotten: string[] = [];
  const watcher = watcherWith(clock, log, { ...noL1, forget: (key) => void forgotten.push(key) }, { shared: shelf });
  await syncAll(watcher);
  return { clock, shared, log, state, purge, forgotten, watcher };
}

describe("reads of the log shared by the isolates of a data center", () => {
  it("shares each read as of its sending, and an isolate at that position takes it for its own: no Redis read until it is due from then", async () => {
    const clock = fakeClock();
    const { shelf, state: shared } = fakeShelf();
    const first = fakeLog();
    const second = fakeLog();
    const a = watcherWith(clock, first.log, noL1, { shared: shelf });
    const b = watcherWith(clock, second.log, noL1, { shared: shelf });
    await syncAll(a);
    await syncAll(b); // new isolates read the log themselves (no era yet: nothing to look up), and share their reads
    expect(shared.puts.map((p) => p.readAt)).toEqual([clock.now(), clock.now()]);
    clock.advance(POLL_MS / 2);
    await syncAll(a); // due: the shared read is no newer than its own: reads Redis, and shares
    expect(first.state.reads).toBe(2);
    const readAt = clock.now();
    clock.advance(100);
    await syncAll(b); // due: takes a's read, sent 100 ms ago
    expect(second.state.reads).toBe(1);
    expect(b.status()).toMatchObject({ lastSyncAt: readAt, logReads: 1, sharedReadsTaken: 1 });
    clock.advance(POLL_MS / 2 - 101);
    await syncAll(b); // not yet due from a's read
    expect(second.state.reads + b.status().sharedReadsTaken).toBe(2);
  });

  it("reads Redis itself when the shared read is further on without the pages, not its era, no newer than its own, or in its future", async () => {
    // Each case: the shared read, given now and when the isolate read the log itself.
    const cases: [string, (now: number, own: number) => SharedPosition][] = [
      ["a purge it has not read, with no page to it", (now) => ({ era: "e0", seq: 1, readAt: now, from: 0 })],
      ["another era", (now) => ({ era: "e1", seq: 0, readAt: now, from: 0 })],
      ["no newer than its own read", (_now, own) => ({ era: "e0", seq: 0, readAt: own, from: 0 })],
      ["in the future", (now) => ({ era: "e0", seq: 0, readAt: now + 1, from: 0 })],
    ];
    for (const [what, position] of cases) {
      const clock = fakeClock();
      const { shelf, state: shared } = fakeShelf();
      const { log, state } = fakeLog();
      const watcher = watcherWith(clock, log, noL1, { shared: shelf });
      await syncAll(watcher);
      clock.advance(POLL_MS / 2);
      await syncAll(watcher);
      const own = clock.now();
      clock.advance(POLL_MS / 2);
      shared.position = position(clock.now(), own);
      await syncAll(watcher);
      expect(state.reads, what).toBe(3);
      expect(watcher.status().sharedReadsTaken, what).toBe(0);
    }
  });

  it("while purges come, an isolate behind a read shared here follows its page from the shelf: the log is read from Redis once for both, and both apply the purges", async () => {
    const clock = fakeClock();
    const { shelf, state: shared } = fakeShelf();
    const { log, state, purge } = movingLog(clock);
    const forgotten: [string, string][] = [];
    const l1Of = (name: string): L1Purging => ({ ...noL1, forget: (key) => void forgotten.push([name, key]) });
    const a = watcherWith(clock, log, l1Of("a"), { shared: shelf });
    const b = watcherWith(clock, log, l1Of("b"), { shared: shelf });
    await syncAll(a);
    await syncAll(b);
    expect(state.reads).toBe(2);
    const fetchedBefore = entryFetchedAt(clock, clock.now());
    clock.advance(10);
    purge("p-1");
    purge("p-2");
    clock.advance(POLL_MS / 2);
    await syncAll(a); // reads Redis: the two purges, shared as a page after 0 and the position 2
    expect(state.reads).toBe(3);
    expect(shared.pages.get("e0:0")?.upTo).toBe(2);
    clock.advance(50);
    await syncAll(b); // behind a's read: follows its page, no Redis read
    expect(state.reads).toBe(3);
    expect(b.status()).toMatchObject({ seq: 2, sharedReadsTaken: 1 });
    expect(forgotten.filter(([name]) => name === "b").map(([, key]) => key)).toEqual(["pp:v1:p:p-1", "pp:v1:p:p-2"]);
    expect(b.judge(fetchedBefore, "p-2", "product", [])).toBe("gone");
  });

  it("an isolate further on than where a shared read began takes the rest of that read's page", async () => {
    const { clock, shared, log, state, purge, forgotten, watcher } = await oneIsolateOnTheShelf();
    purge("p-1");
    clock.advance(POLL_MS / 2);
    await syncAll(watcher); // reads p-1 itself
    expect(watcher.status().seq).toBe(1);
    purge("p-2");
    purge("p-3");
    // Another isolate read from 0, before this one's read: its page holds 1 to 3.
    const records = (await log.readSince(0))!.records;
    shared.pages.set("e0:0", { upTo: 3, records });
    shared.position = { era: "e0", seq: 3, readAt: clock.now() + 10, from: 0 };
    clock.advance(POLL_MS / 2);
    const reads = state.reads;
    await syncAll(watcher);
    expect(state.reads).toBe(reads);
    expect(watcher.status()).toMatchObject({ seq: 3, sharedReadsTaken: 1 });
    expect(forgotten).toEqual(["pp:v1:p:p-1", "pp:v1:p:p-2", "pp:v1:p:p-3"]);
  });

  it("a shared read half a poll old is followed from the shelf all the same: the isolate reads from Redis only the purges after it", async () => {
    const { clock, shared, log, state, purge, forgotten, watcher } = await oneIsolateOnTheShelf();
    const ownSync = clock.now();
    purge("p-1");
    purge("p-2");
    clock.advance(10);
    // Another isolate read 1 and 2 just after this one's knowledge, and shared them; then came 3.
    shared.pages.set("e0:0", { upTo: 2, records: (await log.readSince(0))!.records });
    shared.position = { era: "e0", seq: 2, readAt: clock.now(), from: 0 };
    purge("p-3");
    clock.advance(POLL_MS / 2);
    const reads = state.reads;
    await syncAll(watcher);
    expect(state.reads).toBe(reads + 1);
    expect(state.from.at(-1)).toBe(2);
    expect(watcher.status()).toMatchObject({ seq: 3, sharedReadsTaken: 1 });
    expect(watcher.status().lastSyncAt).toBeGreaterThan(ownSync + POLL_MS / 2);
    expect(forgotten).toEqual(["pp:v1:p:p-1", "pp:v1:p:p-2", "pp:v1:p:p-3"]);
  });

  it("a sync that reads the log in several pages shares each under the number its read began after: another isolate follows them all, no Redis read", async () => {
    const clock = fakeClock();
    const { shelf, state: shared } = fakeShelf();
    const { log, state, purge } = movingLog(clock, 2);
    const a = watcherWith(clock, log, noL1, { shared: shelf });
    const b = watcherWith(clock, log, noL1, { shared: shelf });
    await syncAll(a);
    await syncAll(b);
    for (let i = 1; i <= 5; i++) purge(`p-${i}`);
    clock.advance(POLL_MS / 2);
    await syncAll(a); // three pages: 1-2, 3-4, 5
    expect(state.from.slice(-3)).toEqual([0, 2, 4]);
    expect([...shared.pages.entries()].map(([key, page]) => [key, page.upTo])).toEqual([
      ["e0:0", 2],
      ["e0:2", 4],
      ["e0:4", 5],
    ]);
    const reads = state.reads;
    clock.advance(50);
    await syncAll(b);
    expect(state.reads).toBe(reads);
    expect(b.status()).toMatchObject({ seq: 5, sharedReadsTaken: 1 });
  });

  it("an isolate behind where a shared read began reads from Redis only the purges up to that start, follows the shared page from there, and shares what it read", async () => {
    const { clock, shared, log, state, purge, forgotten, watcher } = await oneIsolateOnTheShelf();
    for (let i = 1; i <= 4; i++) purge(`p-${i}`);
    // Another isolate, which stood at 2, read 3 and 4 and shared them.
    shared.pages.set("e0:2", { upTo: 4, records: (await log.readSince(2))!.records });
    shared.position = { era: "e0", seq: 4, readAt: clock.now() + 10, from: 2 };
    const reads = state.reads;
    clock.advance(POLL_MS / 2);
    await syncAll(watcher);
    expect(state.reads).toBe(reads + 1);
    expect(state.from.at(-1)).toBe(0);
    expect(shared.pages.get("e0:0")?.upTo).toBe(2);
    expect(watcher.status()).toMatchObject({ seq: 4, sharedReadsTaken: 1 });
    expect(forgotten).toEqual(["pp:v1:p:p-1", "pp:v1:p:p-2", "pp:v1:p:p-3", "pp:v1:p:p-4"]);
  });

  it("a background sync that finds an isolate here reading from where it stands waits for that read and takes it; with none by the bound, it reads Redis", async () => {
    for (const arrives of [true, false]) {
      const clock = fakeClock();
      const { shelf, state: shared } = fakeShelf();
      const { log, state, purge } = movingLog(clock);
      const lookupsAt: number[] = [];
      const sleep = async (ms: number) => {
        clock.advance(ms);
        lookupsAt.push(clock.now());
        // The other isolate's read lands 25 ms after it began: its page, then its position.
        if (arrives && shared.reading && clock.now() >= shared.reading.since + 25 && !shared.pages.has("e0:0")) {
          shared.pages.set("e0:0", {
            upTo: 1,
            records: [{ seq: 1, at: shared.reading.since - 5, ids: ["p-1"], tags: [], all: false, mode: "hard", resources: ["product"] }],
          });
          shared.position = { era: "e0", seq: 1, readAt: shared.reading.since, from: 0 };
        }
      };
      const watcher = watcherWith(clock, log, noL1, { shared: shelf, sleep, syncWaitMs: 200 });
      await syncAll(watcher);
      const ownSync = clock.now();
      clock.advance(POLL_MS / 2);
      purge("p-1");
      shared.reading = { era: "e0", from: 0, since: clock.now() };
      await syncAll(watcher);
      if (arrives) {
        expect(state.reads, "waited and took the other's read").toBe(1);
        expect(watcher.status()).toMatchObject({ seq: 1, sharedReadsTaken: 1 });
        expect(lookupsAt.length).toBe(2); // looked again at 10 ms, then at 30 ms
      } else {
        expect(state.reads, "read Redis once the wait was over").toBe(2);
        expect(watcher.status()).toMatchObject({ seq: 1, sharedReadsTaken: 0 });
        // Looked again as a lock's loser polls (10, 20, 40, 80 ms, then the L2 budget, 100 ms), until the bound: a
        // poll after its own knowledge, less a visitor's wait for a sync (200 ms); then it read Redis itself, and said so here.
        expect(lookupsAt.map((at) => at - ownSync)).toEqual([510, 530, 570, 650, 750, 800]);
        expect(shared.readings.map((reading) => reading.since - ownSync)).toEqual([POLL_MS - 200]);
      }
    }
  });

  it("a visitor's sync (knowledge past the bound) waits for no other isolate's read: it reads Redis at once", async () => {
    const clock = fakeClock();
    const { shelf, state: shared } = fakeShelf();
    const { log, state } = movingLog(clock);
    let slept = 0;
    const watcher = watcherWith(clock, log, noL1, { shared: shelf, sleep: async () => void slept++ });
    await sync(watcher);
    clock.advance(POLL_MS);
    shared.reading = { era: "e0", from: 0, since: clock.now() };
    await sync(watcher);
    expect(state.reads).toBe(2);
    expect(slept).toBe(0);
  });

  it("spreads the background syncs of isolates over the quarter of a poll before the half, so that the first due reads and the others take its read", async () => {
    for (const [random, dueAfter] of [
      [0, POLL_MS / 4],
      [0.5, (POLL_MS * 3) / 8],
      [0.999, Math.ceil(POLL_MS * 0.49975)],
    ] as const) {
      const clock = fakeClock();
      const { log, state } = fakeLog();
      const watcher = watcherWith(clock, log, noL1, { random: () => random });
      await syncAll(watcher);
      clock.advance(dueAfter - 1);
      await syncAll(watcher);
      expect(state.reads, `random ${random}: ${dueAfter - 1} ms after`).toBe(1);
      clock.advance(1);
      await syncAll(watcher);
      expect(state.reads, `random ${random}: ${dueAfter} ms after`).toBe(2);
    }
  });

  it("takes no shared read without a location tier, and still serves the bound: a visitor waits for a due sync", async () => {
    const clock = fakeClock();
    const { log, state } = fakeLog();
    const watcher = watcherWith(clock, log);
    await sync(watcher);
    clock.advance(POLL_MS);
    await sync(watcher);
    expect(state.reads).toBe(2);
    expect(watcher.status()).toMatchObject({ logReads: 2, sharedReadsTaken: 0 });
  });
});

describe("the location tier's shelf for shared reads (sharedReads.ts)", () => {
  it("reads back the read it put, and takes anything else under its URL for no position", async () => {
    const { store, stored } = fakeStore();
    const shelf = createLogShelf({ publicUrl: "https://shop.example", keyPrefix: "pp:v1", open: async () => store });
    expect(await shelf.read()).toBeUndefined();
    const work: Promise<unknown>[] = [];
    shelf.put({ era: "1764300000000", seq: 42, readAt: 1_764_300_001_234, from: 40 }, (w) => void work.push(w));
    await Promise.all(work);
    expect(await shelf.read()).toEqual({ era: "1764300000000", seq: 42, readAt: 1_764_300_001_234, from: 40 });
    const [url] = [...stored.keys()];
    for (const header of ["", "1764300000000|42|5", "x|42|1|40", "1764300000000|-1|5|0", `1|${"9".repeat(17)}|1|0`, "1764300000000|42|5|43"]) {
      stored.set(url!, { body: "", headers: [["pp-purge-position", header]] });
      expect(await shelf.read(), header).toBeUndefined();
    }
    const failing = createLogShelf({ publicUrl: "https://shop.example", keyPrefix: "pp:v1", open: async () => Promise.reject(new Error("no cache")) });
    expect(await failing.read()).toBeUndefined();
  });

  it("answers no position when the location tier does not answer in time, so that a sync goes on to Redis rather than wait for it", async () => {
    const { store } = fakeStore();
    const hanging = { ...store, match: () => new Promise<Response | undefined>(() => undefined) };
    const shelf = createLogShelf({ publicUrl: "https://shop.example", keyPrefix: "pp:v1", open: async () => hanging as typeof store });
    expect(await shelf.read()).toBeUndefined();
  });

  it("reads back a page it put whole, and takes a page that is not whole, not in order, or not purges for none", async () => {
    const { store, stored } = fakeStore();
    const now = Date.now();
    const shelf = createLogShelf({ publicUrl: "https://shop.example", keyPrefix: "pp:v1", open: async () => store, now: () => now });
    const record = (seq: number, id: string) => JSON.stringify({ seq, at: now - 1000, ids: [id], tags: [], all: false, mode: "hard", resources: ["product"] });
    const work: Promise<unknown>[] = [];
    shelf.putPage("e0", { from: 4, upTo: 6, members: [record(5, "p-5"), record(6, "p-6")] }, (w) => void work.push(w));
    await Promise.all(work);
    expect((await shelf.page("e0", 4))?.records.map((r) => [r.seq, r.ids])).toEqual([
      [5, ["p-5"]],
      [6, ["p-6"]],
    ]);
    expect((await shelf.page("e0", 4))?.upTo).toBe(6);
    expect(await shelf.page("e1", 4), "another era's").toBeUndefined();
    expect(await shelf.page("e0", 5), "another start's").toBeUndefined();
    const [url] = [...stored.keys()].filter((key) => key.includes("page"));
    const good = stored.get(url!)!;
    const header = (value: string): [string, string][] => [["pp-purge-page", value]];
    const digestOf = async (text: string) => sha256Hex(new TextEncoder().encode(text));
    const forged: [string, { body: string; headers: [string, string][] }][] = [
      ["a body that is not its digest's", { body: `${good.body}x`, headers: good.headers }],
      ["one member missing", { body: record(5, "p-5"), headers: header(`6|2|${await digestOf(record(5, "p-5"))}`) }],
      [
        "out of order",
        { body: `${record(6, "p-6")}\n${record(5, "p-5")}`, headers: header(`6|2|${await digestOf(`${record(6, "p-6")}\n${record(5, "p-5")}`)}`) },
      ],
      ["past its end", { body: record(7, "p-7"), headers: header(`6|1|${await digestOf(record(7, "p-7"))}`) }],
      ["not a purge", { body: '{"seq":5}', headers: header(`6|1|${await digestOf('{"seq":5}')}`) }],
      ["no header", { body: good.body, headers: [] }],
    ];
    for (const [what, value] of forged) {
      stored.set(url!, value);
      expect(await shelf.page("e0", 4), what).toBeUndefined();
    }
  });

  it("puts a position only once what it waits for (its pages' puts) settled", async () => {
    const { store } = fakeStore();
    const shelf = createLogShelf({ publicUrl: "https://shop.example", keyPrefix: "pp:v1", open: async () => store });
    let pagesPut!: () => void;
    const work: Promise<unknown>[] = [];
    shelf.put(
      { era: "1764300000000", seq: 9, readAt: 1_764_300_001_234, from: 7 },
      (w) => void work.push(w),
      new Promise<void>((resolve) => (pagesPut = resolve)),
    );
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(await shelf.read()).toBeUndefined();
    pagesPut();
    await Promise.all(work);
    expect(await shelf.read()).toEqual({ era: "1764300000000", seq: 9, readAt: 1_764_300_001_234, from: 7 });
  });

  it("reads back the reading it put", async () => {
    const { store } = fakeStore();
    const shelf = createLogShelf({ publicUrl: "https://shop.example", keyPrefix: "pp:v1", open: async () => store });
    expect(await shelf.reading()).toBeUndefined();
    const work: Promise<unknown>[] = [];
    shelf.putReading({ era: "1764300000000", from: 7, since: 1_764_300_001_234 }, (w) => void work.push(w));
    await Promise.all(work);
    expect(await shelf.reading()).toEqual({ era: "1764300000000", from: 7, since: 1_764_300_001_234 });
  });
});
