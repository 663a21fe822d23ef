// The known-ids filter against a real redis-server behind the Upstash REST
// gateway, built from the demo origin's listing: no false negatives, the
// false-positive rate, key shapes and TTLs, adds seen by other isolates,
// failing open, and versions that switch atomically.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { Redis as IORedis } from "ioredis";
import { startGateway, type Gateway } from "../../dev/gateway";
import { startDemoOrigin, type DemoOrigin } from "../../dev/origin";
import { productId } from "../../dev/origin/catalog";
import { createBreaker } from "../../src/shared/breaker";
import { systemClock } from "../../src/shared/clock";
import { MAX_KEY_LENGTH } from "../../src/cache/keys";
import { createL2, type L2 } from "../../src/cache/l2/l2";
import { createOriginClient, type OriginClient } from "../../src/origin/client";
import { DEFAULT_POLICIES, DEFAULTS } from "../../src/config/defaults";
import { Bloom, positionsOf, redisBitOf, SEGMENT_BYTES } from "../../src/knownIds/bloom";
import { KEY_TTL_MS, KNOWN_IDS_DEFAULTS, KNOWN_IDS_LIMITS } from "../../src/knownIds/limits";
import { knownIdsKeys, newVersion } from "../../src/knownIds/keys";
import { parseMeta } from "../../src/knownIds/meta";
import { KnownIdsRebuildError, listingOf, type ListIds } from "../../src/knownIds/rebuild";
import { createFilterShelf } from "../../src/knownIds/locationShelf";
import { createKnownIds, type KnownIds, type KnownIdsOptions } from "../../src/knownIds/store";
import { fakeClock, fakeStore, type FakeClock } from "../support/fakes";
import { startRedis, type RedisServer } from "../../dev/harness/redis";

const TOKEN = "known-ids-test-token";
const PREFIX = "pp:v1";
const CATALOG = 20_000;
const REFRESH_MS = 60_000;
const keys = knownIdsKeys(PREFIX);

let redisServer: RedisServer;
let gateway: Gateway;
let demo: DemoOrigin;
let origin: OriginClient;
let direct: IORedis;
const catalog = Array.from({ length: CATALOG }, (_, i) => productId(i + 1));

beforeAll(async () => {
  redisServer = await startRedis();
  gateway = await startGateway({ redisPort: redisServer.port, token: TOKEN, log: () => {} });
  demo = await startDemoOrigin({ latencyMs: 0, jitterMs: 0, catalogSize: CATALOG });
  origin = createOriginClient({ baseUrl: demo.url, policies: DEFAULT_POLICIES });
  direct = new IORedis({ port: redisServer.port, protocol: 2, lazyConnect: true, maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  direct?.disconnect();
  await demo?.close();
  await gateway?.close();
  await redisServer?.stop();
});

/** One isolate's L2 client: its own breaker, as in the Worker. */
function isolateL2(timeoutMs = 1000): L2 {
  return createL2({ url: gateway.url, token: TOKEN, timeoutMs, breaker: createBreaker({ failureThreshold: 3, coolDownMs: 500, clock: systemClock }) });
}

/** One isolate's filter. */
function isolate(clock: FakeClock, options: Partial<KnownIdsOptions> = {}): KnownIds {
  return createKnownIds({
    l2: isolateL2(),
    keyPrefix: PREFIX,
    clock,
    room: CATALOG,
    refreshMs: REFRESH_MS,
    retryMs: DEFAULTS.breakerCoolDownMs,
    log: () => {},
    ...options,
  });
}

/** Collects what `lookup` hands to the background (ctx.waitUntil) and waits for all of it. */
function backgroundWork() {
  const work: Promise<unknown>[] = [];
  return {
    background: (promise: Promise<unknown>) => void work.push(promise),
    async settle(): Promise<number> {
      let count = 0;
      while (work.length > 0) {
        const batch = work.splice(0);
        count += batch.length;
        await Promise.all(batch);
      }
      return count;
    },
  };
}

/** Asks once (which starts a check if one is due) and waits for that check. */
async function refreshed(store: KnownIds): Promise<void> {
  const work = backgroundWork();
  store.lookup("p-000001", work.background);
  await work.settle();
}

/** Whether `id` might be a product (the filter answered "listed" or could not answer). */
function ask(store: KnownIds, id: string): boolean {
  return store.lookup(id, () => {}) !== "absent";
}

/** Ids that look like the catalog's but are not in it. */
function nonMembers(count: number, seed: number): string[] {
  let state = seed;
  const ids = new Set<string>();
  while (ids.size < count) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    ids.add(productId(CATALOG + 1 + (state % 900_000)));
  }
  return [...ids];
}

async function filterKeys(): Promise<string[]> {
  // KEYS is fine on a test server; the product never uses it.
  return direct.keys(`${PREFIX}:kid:*`);
}

async function buildFresh(clock: FakeClock, options: Partial<KnownIdsOptions> = {}) {
  const builder = isolate(clock, options);
  const progress: { ids: number; pages: number }[] = [];
  const result = await builder.rebuild(listingOf(origin), (p) => progress.push(p));
  return { builder, result, progress };
}

describe("a filter built from the origin's listing", () => {
  const clock = fakeClock();
  let built: Awaited<ReturnType<typeof buildFresh>>;
  let reader: KnownIds;

  beforeAll(async () => {
    await direct.flushall();
    built = await buildFresh(clock);
    reader = isolate(clock);
    await refreshed(reader);
  });

  it("lists every page and reports progress", () => {
    expect(built.result).toMatchObject({ count: CATALOG, pages: CATALOG / 1000, passes: 1, k: 7, overCapacity: false, mergedAdds: 0 });
    expect(built.progress.at(-1)).toMatchObject({ ids: CATALOG, pages: CATALOG / 1000 });
    expect(built.result.segments).toBe(Math.ceil(built.result.bytes / SEGMENT_BYTES));
  });

  it("accepts every real id, in the isolate that built it and in one that loaded it (no false negatives)", () => {
    expect(reader.status()).toMatchObject({ state: "ready", serving: true, version: built.result.version });
    expect(catalog.filter((id) => !ask(built.builder, id))).toEqual([]);
    expect(catalog.filter((id) => !ask(reader, id))).toEqual([]);
  });

  it("refuses nearly all ids that do not exist (false-positive rate ≤ 2% over 10,000 look-alikes)", () => {
    const others = nonMembers(10_000, 7);
    const passed = others.filter((id) => ask(reader, id)).length;
    console.log(
      `known-ids: ${CATALOG} ids, a filter sized for ${CATALOG}, p=1%: measured false-positive rate ${((passed / others.length) * 100).toFixed(2)}% (${passed}/10000)`,
    );
    expect(passed / others.length).toBeLessThanOrEqual(0.02);
  });

  it("keeps segments small, keys short, and the bytes exactly as Redis holds them (SETBIT bit order)", async () => {
    const stored = await Promise.all(
      Array.from({ length: built.result.segments }, async (_, i) => {
        const bytes = await direct.getBuffer(keys.segment(built.result.version, i));
        expect(bytes).not.toBeNull();
        expect(bytes!.length).toBeLessThanOrEqual(SEGMENT_BYTES);
        return new Uint8Array(bytes!);
      }),
    );
    // Byte for byte what the building isolate holds, and a filter that knows the catalog.
    const copy = new Bloom(built.result, new Uint8Array(Buffer.concat(stored)));
    expect(catalog.every((id) => copy.has(id))).toBe(true);
    // GETBIT at each of an id's positions, straight from Redis.
    for (const bit of positionsOf("p-000123", built.result)) {
      const { segment, offset } = redisBitOf(bit);
      expect(await direct.getbit(keys.segment(built.result.version, segment), offset)).toBe(1);
    }
    for (const key of await filterKeys()) expect(key.length).toBeLessThanOrEqual(MAX_KEY_LENGTH);
  });

  it("gives every key a TTL", async () => {
    const all = await filterKeys();
    expect(all).toContain(keys.meta);
    for (const key of all) expect(await direct.pttl(key), key).toBeGreaterThan(0);
    // Kept while the filter may be trusted, and a build's time more: no longer.
    expect(await direct.pttl(keys.meta)).toBeGreaterThan(KNOWN_IDS_DEFAULTS.maxAgeMs);
    for (const key of all) expect(await direct.pttl(key), key).toBeLessThanOrEqual(KEY_TTL_MS);
  });

  it("writes meta as JSON naming the current version", async () => {
    const meta = parseMeta((await direct.get(keys.meta))!);
    expect(meta?.current).toMatchObject({ version: built.result.version, capacity: CATALOG, fpRate: 0.01, segmentCount: built.result.segments, changedAt: 0 });
    expect(meta?.next).toBeNull();
  });
});

describe("adding ids", () => {
  const clock = fakeClock();
  let builder: KnownIds;
  let other: KnownIds;

  beforeAll(async () => {
    await direct.flushall();
    ({ builder } = await buildFresh(clock));
    other = isolate(clock);
    await refreshed(other);
  });

  it("is visible at once in the adding isolate, in others after their refresh interval", async () => {
    expect(ask(builder, "n-fresh-1")).toBe(false);
    expect(await builder.add(["n-fresh-1", "n-fresh-2"])).toBe(true);
    expect(ask(builder, "n-fresh-1")).toBe(true);
    expect(ask(other, "n-fresh-1")).toBe(false);

    clock.advance(REFRESH_MS / 2);
    await refreshed(other);
    expect(ask(other, "n-fresh-1")).toBe(false);

    clock.advance(REFRESH_MS / 2);
    await refreshed(other);
    expect(ask(other, "n-fresh-1")).toBe(true);
    expect(ask(other, "n-fresh-2")).toBe(true);
    expect(other.status().changedAt).toBe(2);
  });

  it("sets the bits in Redis, so that an isolate loading later has them too", async () => {
    const late = isolate(clock);
    await refreshed(late);
    expect(ask(late, "n-fresh-1")).toBe(true);
    expect(ask(late, "n-fresh-2")).toBe(true);
    expect(ask(late, "n-never")).toBe(false);
    const meta = parseMeta((await direct.get(keys.meta))!);
    expect(meta?.current?.changedAt).toBe(2);
    expect(await direct.pttl(keys.log(meta!.current!.version))).toBeGreaterThan(0);
  });

  it("past 10,000 adds, lets other isolates catch up from the log's window instead of reloading the filter", async () => {
    const loadsBefore = other.status().loads;
    // Segments are read with MGET and nothing else of the filter uses it: Redis counts the reloads.
    const segmentReads = async () => Number(/cmdstat_mget:calls=(\d+)/.exec(await direct.info("commandstats"))?.[1] ?? 0);
    const mgetsBefore = await segmentReads();
    // 11,000 adds to this version, in batches of 1,000; the other isolate keeps up every 2,000.
    for (let batch = 0; batch < 11; batch++) {
      expect(await builder.add(Array.from({ length: 1000 }, (_, i) => `n-bulk-${batch}-${i}`))).toBe(true);
      if (batch % 2 === 1) {
        clock.advance(REFRESH_MS);
        await refreshed(other);
      }
    }
    clock.advance(REFRESH_MS);
    await refreshed(other);
    expect(ask(other, "n-bulk-10-999")).toBe(true);
    expect(ask(other, "n-bulk-0-0")).toBe(true);
    expect(other.status().changedAt).toBe(parseMeta((await direct.get(keys.meta))!)!.current!.changedAt);
    // Every catch-up came from the log: no segment was read again.
    expect(await segmentReads()).toBe(mgetsBefore);
    expect(other.status().loads).toBe(loadsBefore);
    // The log keeps the window, not every add.
    expect(await direct.llen(keys.log(parseMeta((await direct.get(keys.meta))!)!.current!.version))).toBeLessThanOrEqual(10_000);
  });

  it("refuses invalid ids and oversized batches", async () => {
    await expect(builder.add(["../etc"])).rejects.toThrow(RangeError);
    await expect(builder.add(Array.from({ length: 1001 }, (_, i) => `n-${i}`))).rejects.toThrow(RangeError);
  });

  it("marks the filter damaged, never half-writes, when a segment key has vanished", async () => {
    const filter = parseMeta((await direct.get(keys.meta))!)!.current!;
    const version = filter.version;
    const { segment } = redisBitOf(positionsOf("n-after-eviction", filter)[0]!);
    await direct.del(keys.segment(version, segment));
    // Recorded as far as safety goes: every isolate now fails open until a rebuild.
    expect(await builder.add(["n-after-eviction"])).toBe(true);
    expect(await direct.exists(keys.segment(version, segment))).toBe(0);
    expect(parseMeta((await direct.get(keys.meta))!)).toMatchObject({ current: null, damaged: true });
    clock.advance(REFRESH_MS);
    await refreshed(other);
    expect(other.status().state).toBe("damaged");
    expect(ask(other, "n-never")).toBe(true);
  });
});

describe("failing open", () => {
  let clock: FakeClock;
  let reader: KnownIds;
  const absent = "n-absent-id";

  beforeEach(async () => {
    clock = fakeClock();
    await direct.flushall();
    await buildFresh(clock);
    reader = isolate(clock);
    await refreshed(reader);
    expect(ask(reader, absent)).toBe(false);
  });

  it("lets everything through while the first load runs, and before it", async () => {
    const cold = isolate(clock);
    expect(cold.status().state).toBe("cold");
    const work = backgroundWork();
    expect(cold.lookup(absent, work.background)).toBe("unknown");
    expect(cold.status().state).toBe("loading");
    expect(cold.lookup(absent, work.background)).toBe("unknown");
    expect(await work.settle()).toBe(1);
    expect(cold.lookup(absent, () => {})).toBe("absent");
    // Only a loaded filter vouches for an id (a cold page then fills all its parts at once).
    expect(cold.lookup("p-000001", () => {})).toBe("listed");
  });

  it("when the filter was never built", async () => {
    await direct.flushall();
    const fresh = isolate(clock);
    await refreshed(fresh);
    expect(fresh.status().state).toBe("missing");
    expect(ask(fresh, absent)).toBe(true);
  });

  it("when meta disappears", async () => {
    await direct.del(keys.meta);
    clock.advance(REFRESH_MS);
    await refreshed(reader);
    expect(reader.status()).toMatchObject({ state: "missing", serving: false, version: null });
    expect(ask(reader, absent)).toBe(true);
  });

  it("when meta is not ours", async () => {
    await direct.set(keys.meta, '{"version":"x","m":1e12}', "PX", 60_000);
    clock.advance(REFRESH_MS);
    await refreshed(reader);
    expect(reader.status().state).toBe("damaged");
    expect(ask(reader, absent)).toBe(true);
  });

  it("when the filter is older than maxAgeMs", async () => {
    clock.advance(KNOWN_IDS_DEFAULTS.maxAgeMs + 1);
    await refreshed(reader);
    expect(reader.status().state).toBe("stale");
    expect(ask(reader, absent)).toBe(true);
  });

  it("when Redis hangs (paused), and recovers after", async () => {
    redisServer.pause();
    try {
      clock.advance(REFRESH_MS);
      const work = backgroundWork();
      // The answer at hand, at once; the check runs in the background and times out.
      expect(reader.lookup(absent, work.background)).toBe("absent");
      await work.settle();
      expect(reader.status().state).toBe("unavailable");
      expect(ask(reader, absent)).toBe(true);
    } finally {
      redisServer.resume();
    }
    clock.advance(DEFAULTS.breakerCoolDownMs);
    await refreshed(reader);
    expect(reader.status().state).toBe("ready");
    expect(ask(reader, absent)).toBe(false);
  });

  it("when the L2 breaker is open, without waiting for a check", async () => {
    const l2 = isolateL2();
    const store = createKnownIds({ l2, keyPrefix: PREFIX, clock, room: CATALOG, refreshMs: REFRESH_MS, retryMs: DEFAULTS.breakerCoolDownMs, log: () => {} });
    await refreshed(store);
    expect(ask(store, absent)).toBe(false);
    for (let i = 0; i < 3; i++) l2.breaker.failure();
    expect(ask(store, absent)).toBe(true);
    expect(store.status().state).toBe("unavailable");
  });

  it("when a segment is gone (evicted)", async () => {
    const version = parseMeta((await direct.get(keys.meta))!)!.current!.version;
    await direct.del(keys.segment(version, 1));
    const fresh = isolate(clock);
    await refreshed(fresh);
    expect(fresh.status().state).toBe("damaged");
    expect(ask(fresh, absent)).toBe(true);
  });

  it("and keeps an add that Redis missed, to record it at a later check", async () => {
    redisServer.pause();
    try {
      expect(await reader.add(["n-during-outage"])).toBe(false);
    } finally {
      redisServer.resume();
    }
    expect(reader.status().pendingAdds).toBe(1);
    expect(ask(reader, "n-during-outage")).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 600)); // the breaker's cool-down
    clock.advance(REFRESH_MS);
    await refreshed(reader);
    expect(reader.status().pendingAdds).toBe(0);
    const late = isolate(clock);
    await refreshed(late);
    expect(ask(late, "n-during-outage")).toBe(true);
  });
});

describe("the location tier's copy (isolates of one data center)", () => {
  const clock = fakeClock();
  const PUBLIC = "https://shop.example";
  let location: ReturnType<typeof fakeStore>;

  /** An isolate of this data center: its filter takes the location's copy when there is one; `random` picks its wait on a miss. */
  function neighbour(random = () => 0, spreadMs = 0) {
    const shelf = createFilterShelf({
      publicUrl: PUBLIC,
      keyPrefix: PREFIX,
      open: async () => location.store,
      callMs: DEFAULTS.backgroundCallMs,
      spreadMs,
      random,
    });
    return { filter: isolate(clock, { shelf }), shelf };
  }
  /** Redis's MGET calls so far (the segments' reads: the meta is a GET, the adds a script). */
  const mgets = async () => Number(/cmdstat_mget:calls=(\d+)/.exec(await direct.info("commandstats"))?.[1] ?? 0);

  beforeEach(async () => {
    await direct.flushall();
    await buildFresh(clock);
    location = fakeStore();
  });

  it("is put by the first isolate that reads Redis; the next ones read no segment from Redis, and refuse no product", async () => {
    const first = neighbour();
    await refreshed(first.filter);
    expect(first.shelf.stats).toMatchObject({ misses: 1, puts: 1 });
    const before = await mgets();
    for (let i = 0; i < 3; i++) {
      const next = neighbour();
      await refreshed(next.filter);
      expect(next.shelf.stats).toMatchObject({ hits: 1, misses: 0, refused: 0 });
      expect(next.filter.status()).toMatchObject({ state: "ready", serving: true });
      expect(catalog.every((id) => ask(next.filter, id))).toBe(true);
      expect(ask(next.filter, "n-never")).toBe(false);
    }
    expect(await mgets()).toBe(before);
  });

  it("is brought up to date from the add log: an id added after the copy was put is listed", async () => {
    const first = neighbour();
    await refreshed(first.filter);
    expect(await first.filter.add(["n-after-copy"])).toBe(true);
    const next = neighbour();
    await refreshed(next.filter);
    expect(next.shelf.stats.hits).toBe(1);
    expect(ask(next.filter, "n-after-copy")).toBe(true);
    expect(next.filter.status().changedAt).toBe(1);
  });

  it("is refused when it is not what this tier wrote (changed bytes, digest, a byte with its top bit set, more adds than Redis knows): Redis is read instead", async () => {
    const first = neighbour();
    await refreshed(first.filter);
    const [url, copy] = [...location.stored.entries()][0]!;
    const header = (name: string, value: string): [string, string][] => copy.headers.map(([k, v]) => [k, k === name ? value : v]);
    const flipped = `${copy.body.slice(0, 100)}${String.fromCharCode(copy.body.charCodeAt(100) ^ 1)}${copy.body.slice(101)}`;
    const bad = [
      { body: flipped, headers: copy.headers },
      { body: copy.body, headers: header("pp-kid-digest", "0".repeat(64)) },
      { body: copy.body.slice(0, -1), headers: copy.headers },
      { body: copy.body, headers: header("pp-kid-synced", "5") },
      { body: copy.body, headers: header("pp-kid-synced", "-1") },
    ];
    for (const forged of bad) {
      location.stored.set(url, forged);
      const before = await mgets();
      const next = neighbour();
      await refreshed(next.filter);
      expect(next.shelf.stats).toMatchObject({ hits: 0, refused: 1 });
      expect(await mgets()).toBeGreaterThan(before);
      expect(catalog.every((id) => ask(next.filter, id))).toBe(true);
    }
  });

  it("spreads isolates that start together: on a miss each waits a random part of the spread, and only the first reads Redis", async () => {
    const before = await mgets();
    const fleet = [0, 0.25, 0.5, 0.75, 1].map((draw) => neighbour(() => draw, 400));
    await Promise.all(fleet.map((n) => refreshed(n.filter)));
    expect(fleet.map((n) => n.shelf.stats.hits)).toEqual([0, 1, 1, 1, 1]);
    // One load's worth of segment reads (20,000 ids at 1%: a few segments, one MGET of up to sixteen).
    expect((await mgets()) - before).toBe(1);
    expect(fleet.every((n) => n.filter.status().serving)).toBe(true);
  });
});

describe("rebuilding", () => {
  const clock = fakeClock();

  beforeEach(async () => {
    await direct.flushall();
  });

  /** The origin's listing, held before page `holdAt` until released. */
  function heldListing(holdAt: number) {
    let release!: () => void;
    let reached!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const atGate = new Promise<void>((resolve) => (reached = resolve));
    let page = 0;
    const list: ListIds = async (cursor) => {
      if (++page === holdAt) {
        reached();
        await Promise.race([gate, new Promise((resolve) => setTimeout(resolve, 20_000))]);
      }
      return origin.listProductIds(cursor, 1000);
    };
    return { list, release, atGate };
  }

  /** An isolate's L2 that runs `before` ahead of each of its writes: a window onto every intermediate state. */
  function interceptedL2(before: () => Promise<void>): L2 {
    const l2 = isolateL2();
    return {
      ...l2,
      breaker: l2.breaker,
      stats: l2.stats,
      run: async (call, options) => {
        if (options?.isWrite) await before();
        return l2.run(call, options);
      },
    };
  }

  it("switches versions atomically: before each of its writes, readers see the whole old filter", async () => {
    const { result: first } = await buildFresh(clock);
    const seen: string[] = [];
    const builder = createKnownIds({
      l2: interceptedL2(async () => {
        const reader = isolate(clock);
        await refreshed(reader);
        expect(reader.status().state).toBe("ready");
        expect(catalog.every((id) => ask(reader, id))).toBe(true);
        seen.push(reader.status().version!);
      }),
      keyPrefix: PREFIX,
      clock,
      room: CATALOG,
      retryMs: DEFAULTS.breakerCoolDownMs,
      log: () => {},
    });
    const second = await builder.rebuild(listingOf(origin));
    // announce, segment writes, switch, retiring the old keys: the reader ran before each.
    expect(seen.length).toBeGreaterThanOrEqual(4);
    const switchedAt = seen.indexOf(second.version);
    expect(seen.slice(0, switchedAt === -1 ? undefined : switchedAt).every((version) => version === first.version)).toBe(true);
    expect(seen.slice(switchedAt === -1 ? seen.length : switchedAt).every((version) => version === second.version)).toBe(true);
    const after = isolate(clock);
    await refreshed(after);
    expect(after.status().version).toBe(second.version);
    expect(catalog.every((id) => ask(after, id))).toBe(true);
    // The old version is let go after a short grace, never deleted under a reader.
    const oldTtl = await direct.pttl(keys.segment(first.version, 0));
    expect(oldTtl).toBeGreaterThan(0);
    expect(oldTtl).toBeLessThanOrEqual(KNOWN_IDS_LIMITS.checkLeaseMs);
    expect(await direct.pttl(keys.segment(second.version, 0))).toBeGreaterThan(KNOWN_IDS_LIMITS.checkLeaseMs);
  });

  it("keeps a product created mid-build: announced, logged, merged into the new version", async () => {
    const { result: first } = await buildFresh(clock);
    const held = heldListing(10);
    const rebuilt = isolate(clock).rebuild(held.list);
    await held.atGate;

    // Mid-build: meta announces the new version but still names the old one as current.
    const meta = parseMeta((await direct.get(keys.meta))!)!;
    expect(meta.current?.version).toBe(first.version);
    expect(meta.next?.version).toBeDefined();
    expect(await isolate(clock).add(["n-created-mid-build"])).toBe(true);
    held.release();

    const second = await rebuilt;
    expect(second.mergedAdds).toBe(1);
    const after = isolate(clock);
    await refreshed(after);
    expect(after.status().version).toBe(second.version);
    expect(ask(after, "n-created-mid-build")).toBe(true);
  });

  it("merges ids created between its merge and its switch", async () => {
    await buildFresh(clock);
    const adder = isolate(clock);
    let writes = 0;
    const builder = createKnownIds({
      // Write 1 is the announce, write 2 the first segments: the build has merged its log by then.
      l2: interceptedL2(async () => {
        if (++writes === 2) expect(await adder.add(["n-last-moment"])).toBe(true);
      }),
      keyPrefix: PREFIX,
      clock,
      room: CATALOG,
      retryMs: DEFAULTS.breakerCoolDownMs,
      log: () => {},
    });
    const result = await builder.rebuild(listingOf(origin));
    expect(result.mergedAdds).toBe(1);
    const reader = isolate(clock);
    await refreshed(reader);
    expect(reader.status().version).toBe(result.version);
    expect(ask(reader, "n-last-moment")).toBe(true);
  });

  it("loses to a newer build that started meanwhile, and leaves it intact", async () => {
    await buildFresh(clock);
    const held = heldListing(2);
    const slow = isolate(clock).rebuild(held.list);
    await held.atGate;
    const slowVersion = parseMeta((await direct.get(keys.meta))!)!.next!.version;
    const { result: fast } = await buildFresh(clock);
    held.release();
    await expect(slow).rejects.toMatchObject({ failure: "superseded" });
    expect(parseMeta((await direct.get(keys.meta))!)).toMatchObject({ current: { version: fast.version }, next: null });
    // What the loser wrote goes at once (-2: already gone).
    const leftover = await direct.pttl(keys.segment(slowVersion, 0));
    expect(leftover).toBe(-2);
  });

  it("grows the filter when the catalog outgrew its room, keeping the room beyond it", async () => {
    const { result } = await buildFresh(clock, { room: 5000 });
    expect(result).toMatchObject({ passes: 2, capacity: CATALOG + 5000, count: CATALOG, overCapacity: false });
    // The next build starts at the size the last one needed.
    const { result: next } = await buildFresh(clock, { room: 5000 });
    expect(next).toMatchObject({ passes: 1, capacity: CATALOG + 5000 });
  });

  it("fails cleanly when the listing fails, leaving the current filter in place", async () => {
    const { result: first } = await buildFresh(clock);
    const failing: ListIds = async (cursor) => {
      if (cursor) throw new Error("origin down");
      return origin.listProductIds(cursor, 1000);
    };
    const error = await isolate(clock)
      .rebuild(failing)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KnownIdsRebuildError);
    expect((error as KnownIdsRebuildError).failure).toBe("origin-listing");
    expect(parseMeta((await direct.get(keys.meta))!)).toMatchObject({ current: { version: first.version }, next: null });
  });
});

describe("when Redis dies", () => {
  it("fails open, and stays open on an empty Redis until a rebuild", async () => {
    const clock = fakeClock();
    await direct.flushall();
    await buildFresh(clock);
    const reader = isolate(clock);
    await refreshed(reader);
    expect(ask(reader, "n-absent-id")).toBe(false);

    await redisServer.kill();
    clock.advance(REFRESH_MS);
    await refreshed(reader);
    expect(reader.status().state).toBe("unavailable");
    expect(ask(reader, "n-absent-id")).toBe(true);

    await redisServer.restart();
    await new Promise((resolve) => setTimeout(resolve, 600)); // the breaker's cool-down
    let state = reader.status().state;
    // The gateway reconnects in the background: a few bounded attempts.
    for (let attempt = 0; attempt < 20 && state !== "missing"; attempt++) {
      clock.advance(REFRESH_MS);
      await refreshed(reader);
      state = reader.status().state;
      if (state !== "missing") await new Promise((resolve) => setTimeout(resolve, 250));
    }
    expect(state).toBe("missing");
    expect(ask(reader, "n-absent-id")).toBe(true);
  });

  it("says a filter needs building when Redis lost it, unless a build was announced within buildUnderWayMs", async () => {
    const clock = fakeClock();
    await direct.flushall();
    const store = isolate(clock);
    expect(await store.needsBuilding()).toBe(true);
    await store.rebuild(listingOf(origin));
    expect(await store.needsBuilding()).toBe(false);

    // Lost with Redis's data, and another isolate's build announced meanwhile: under way, then given up on.
    await direct.flushall();
    await direct.set(keys.meta, JSON.stringify({ next: { version: newVersion(clock.now()), startedAt: clock.now() } }));
    expect(await store.needsBuilding()).toBe(false);
    clock.advance(KNOWN_IDS_LIMITS.buildUnderWayMs);
    expect(await store.needsBuilding()).toBe(true);

    // Redis not answering: nothing to decide on (the next quarter hour asks again).
    await redisServer.kill();
    try {
      expect(await isolate(clock).needsBuilding()).toBe(false);
    } finally {
      await redisServer.restart();
    }
  });
});
