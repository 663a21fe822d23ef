// The purge log against a real Redis (through the gateway): what one sync
// reads stays bounded however many purges were recorded, and the isolate
// that recorded a purge does not read it back.
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Redis as IORedis } from "ioredis";
import { startGateway, type Gateway } from "../../dev/gateway";
import { productId } from "../../dev/origin/catalog";
import { createBreaker } from "../../src/shared/breaker";
import { systemClock } from "../../src/shared/clock";
import { entryKey, purgeLogKeys, purgeMarkerKey } from "../../src/cache/keys";
import { createL2, type L2 } from "../../src/cache/l2/l2";
import { createPurgeLog, PAGE_MAX_BYTES, PAGE_MAX_PURGES, SEQ_TTL_MS } from "../../src/invalidation/log";
import { DEFAULTS } from "../../src/config/defaults";
import { recordFrom } from "../../src/invalidation/record";
import { createPurgeWatcher } from "../../src/invalidation/watcher";
import { RESOURCE_NAMES } from "../../src/origin/resources";
import { startRedis, type RedisServer } from "../../dev/harness/redis";
import { fakeClock } from "../support/fakes";

const TOKEN = "purge-log-test-token";
let redisServer: RedisServer;
let gateway: Gateway;
let l2: L2;

beforeAll(async () => {
  redisServer = await startRedis();
  gateway = await startGateway({ redisPort: redisServer.port, token: TOKEN, log: () => {} });
  l2 = createL2({ url: gateway.url, token: TOKEN, timeoutMs: 2000, breaker: createBreaker({ failureThreshold: 3, coolDownMs: 60_000, clock: systemClock }) });
});

afterAll(async () => {
  await gateway?.close();
  await redisServer?.stop();
});

const idPurge = (ids: string[]) => recordFrom({ ids, resources: ["product"], mode: "hard" }, Date.now());

describe("the purge log", () => {
  it("hands a reader that fell far behind the purges it missed page by page, each read bounded; a reader that cannot follow starts over", async () => {
    const log = createPurgeLog({ l2, keyPrefix: "bulk", wideRetentionMs: 60_000 });
    const first = await log.record(idPurge(["p-000001"]));
    expect(first).toBe(1);
    await log.record(recordFrom({ tags: ["brand:acme"], mode: "hard" }, Date.now()));
    // A bulk re-price: 150 purges of 1,000 ids each (≈ 1.7 MB of records).
    for (let n = 0; n < 150; n++) {
      expect(await log.record(idPurge(Array.from({ length: 1000 }, (_, i) => productId(n * 1000 + i))))).toBeDefined();
    }

    const era = (await log.readSince(0, null))!.era;
    const read: number[] = [];
    let pages = 0;
    for (let seen = first!; seen < 152; pages++) {
      const page = await log.readSince(seen, era);
      expect(page).toMatchObject({ follows: true, seq: 152, marks: [] });
      // Each page follows on from the last, within one read's bounds.
      expect(page!.records[0]!.seq).toBe(seen + 1);
      expect(page!.upTo).toBe(page!.records.at(-1)!.seq);
      expect(page!.records.length).toBeLessThanOrEqual(PAGE_MAX_PURGES);
      expect(JSON.stringify(page!.records).length).toBeLessThan(PAGE_MAX_BYTES * 1.05);
      read.push(...page!.records.map((record) => record.seq));
      seen = page!.upTo;
    }
    expect(read).toEqual(Array.from({ length: 151 }, (_, i) => i + 2));
    expect(pages).toBeGreaterThan(1);

    // A reader of no era (a new isolate) starts over: the marks and the latest records, within the same bounds.
    const fresh = await log.readSince(0, null);
    expect(fresh!.follows).toBe(false);
    expect(fresh!.marks).toEqual([
      { resource: "product", tag: "brand:acme", hard: expect.any(Number), soft: 0 },
      ...["inventory", "reviews", "recommendations", "listing"].map((resource) => ({ resource, tag: "brand:acme", hard: expect.any(Number), soft: 0 })),
    ]);
    expect(JSON.stringify(fresh).length).toBeLessThan(PAGE_MAX_BYTES);
  });

  it("hands a reader a page behind the tag and all purges after its page, and says when it cannot have them all", async () => {
    const log = createPurgeLog({ l2, keyPrefix: "ahead", wideRetentionMs: 60_000 });
    const first = (await log.record(idPurge(["p-000001"])))!;
    const bulk = (n: number) => idPurge(Array.from({ length: 1000 }, (_, i) => productId(n * 1000 + i)));
    for (let n = 0; n < 40; n++) await log.record(bulk(n));
    const tagged = (await log.record(recordFrom({ tags: ["brand:late"], mode: "soft" }, Date.now())))!;
    const everything = (await log.record(recordFrom({ all: true, resources: ["reviews"], mode: "hard" }, Date.now())))!;
    for (let n = 40; n < 50; n++) await log.record(bulk(n));

    const era = (await log.readSince(0, null))!.era;
    const page = (await log.readSince(first, era))!;
    expect(page.upTo).toBeLessThan(tagged);
    expect(page.wideAhead?.map((record) => record.seq)).toEqual([tagged, everything]);
    expect(page.wideAhead![0]).toMatchObject({ tags: ["brand:late"], mode: "soft" });
    // The last page has nothing after it.
    let last = page;
    while (last.upTo < last.seq) last = (await log.readSince(last.upTo, era))!;
    expect(last.wideAhead ?? null).toBeNull();

    // A wide log that does not hold every number after the page (written before it existed): none is known.
    await l2.run((redis) => redis.zremrangebyscore(purgeLogKeys("ahead").wideLog, everything + 1, everything + 1), { isWrite: true });
    expect((await log.readSince(first, era))!.wideAhead ?? null).toBeNull();
  });

  it("brings a watcher that follows the log through a bulk re-price in one sync: L1 loses only what was purged", async () => {
    const log = createPurgeLog({ l2, keyPrefix: "reprice", wideRetentionMs: 60_000 });
    const forgotten = new Set<string>();
    let startedOver = 0;
    const watcher = createPurgeWatcher({
      log,
      l1: { forget: (key) => forgotten.add(key), markStale: () => undefined, keepOnlyForErrors: () => startedOver++ },
      clock: systemClock,
      keyPrefix: "reprice",
      pollMs: 1000,
      wideRetentionMs: 60_000,
      blindMaxAgeMs: 60_000,
      l1MaxBytes: DEFAULTS.l1MaxBytes,
      syncWaitMs: 1000,
    });
    await log.record(idPurge(["p-000001"]));
    await watcher.sync(() => undefined);
    expect(startedOver).toBe(1); // a new isolate starts over once
    const before = watcher.status();

    // 300 purges of 1,000 ids each, none of them p-999999 (≈ 3.4 MB: fourteen pages).
    for (let n = 0; n < 300; n++) {
      expect(await log.record(idPurge(Array.from({ length: 1000 }, (_, i) => productId(n * 1000 + i))))).toBeDefined();
    }
    const background: Promise<unknown>[] = [];
    // Due in the background (half a poll old): the whole backlog in one sync, page after page.
    await new Promise((resolve) => setTimeout(resolve, 500));
    await watcher.sync((work) => background.push(work));
    await Promise.all(background);
    expect(watcher.status().seq).toBe(before.seq + 300);
    expect(watcher.status().lastSyncAt).toBeGreaterThan(before.lastSyncAt);
    expect(startedOver).toBe(1);
    expect(forgotten.size).toBe(300_000);
    expect(forgotten.has(entryKey("reprice", "product", productId(299_999)))).toBe(true);
    expect(forgotten.has(entryKey("reprice", "product", productId(999_999)))).toBe(false);
    // What it holds of other products is still vouched for: it knows every purge since.
    expect(watcher.vouches(watcher.stamp()!)).toBe(true);
  });

  it("is read with the background budget: a Redis slower than the page path's budget still answers a sync", async () => {
    const slow = await startGateway({ redisPort: redisServer.port, token: TOKEN, log: () => {}, latencyMs: 250 });
    try {
      const pagePathBudget = createL2({
        url: slow.url,
        token: TOKEN,
        timeoutMs: 100,
        writeTimeoutMs: 1000,
        breaker: createBreaker({ failureThreshold: 3, coolDownMs: 60_000, clock: systemClock }),
      });
      const log = createPurgeLog({ l2: pagePathBudget, keyPrefix: "slow", wideRetentionMs: 60_000 });
      const seq = await log.record(idPurge(["p-000011"]));
      expect(seq).toBeDefined();
      const read = await log.readSince(0, null);
      expect(read).toMatchObject({ seq });
      // An MGET on the page path, with its 100 ms, does not get its answer.
      expect(await pagePathBudget.readMany(["slow:p:p-000011"])).toEqual([undefined]);
    } finally {
      await slow.close();
    }
  });

  it("is read with a read-only script sent by its hash (EVALSHA_RO), which a replica may answer", async () => {
    const log = createPurgeLog({ l2, keyPrefix: "readonly", wideRetentionMs: 60_000 });
    await log.record(idPurge(["p-000009"]));
    const direct = new IORedis({ port: redisServer.port, protocol: 2, lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      await direct.config("RESETSTAT");
      for (let i = 0; i < 3; i++) expect((await log.readSince(0, null))?.seq).toBe(1);
      const stats = await direct.info("commandstats");
      const calls = (command: string) => Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, "m").exec(stats)?.[1] ?? 0);
      // The first run may load the script (EVAL_RO after a NOSCRIPT); the others go by hash.
      expect(calls("evalsha_ro")).toBe(3);
      expect(calls("eval_ro")).toBeLessThanOrEqual(1);
      expect(calls("eval") + calls("evalsha")).toBe(0);
    } finally {
      direct.disconnect();
    }
  });

  it("gives a new isolate the latest mark per resource and tag, not every tag purge ever recorded", async () => {
    const log = createPurgeLog({ l2, keyPrefix: "marks", wideRetentionMs: 3_600_000 });
    const started = Date.now();
    // 600 purges of the same three tags, hard and soft, and one purge of everything.
    for (let n = 0; n < 600; n++) {
      await log.record(recordFrom({ tags: ["brand:acme", "cat:shoes", "sale"], mode: n % 2 ? "soft" : "hard", resources: ["product"] }, started + n));
    }
    await log.record(recordFrom({ all: true, mode: "soft", resources: ["inventory"] }, started + 1000));

    const fresh = await log.readSince(0, null);
    expect(fresh!.follows).toBe(false);
    expect(fresh!.seq).toBe(601);
    const byKey = Object.fromEntries(fresh!.marks.map((mark) => [`${mark.resource}|${mark.tag}`, [mark.hard, mark.soft]]));
    expect(byKey).toEqual({
      "product|brand:acme": [started + 598, started + 599],
      "product|cat:shoes": [started + 598, started + 599],
      "product|sale": [started + 598, started + 599],
      "inventory|null": [0, started + 1000],
    });
    expect(fresh!.floor).toBe(0);
    // What a new isolate reads does not grow with the number of purges: the
    // marks, and the log's latest records (what they say of id purges), at most one sync's worth.
    expect(JSON.stringify(fresh!.marks).length).toBeLessThan(1000);
    expect(fresh!.records.map((record) => record.seq)).toEqual(Array.from({ length: PAGE_MAX_PURGES }, (_, i) => 601 - i));

    // A watcher starting from them judges as the purges say.
    const watcher = createPurgeWatcher({
      log,
      l1: { forget: () => undefined, markStale: () => undefined, keepOnlyForErrors: () => undefined },
      clock: systemClock,
      keyPrefix: "marks",
      pollMs: 1000,
      wideRetentionMs: 3_600_000,
      blindMaxAgeMs: 60_000,
      l1MaxBytes: DEFAULTS.l1MaxBytes,
      syncWaitMs: 1000,
    });
    await watcher.sync(() => undefined);
    const entry = (fetchedAt: number) => ({
      data: {},
      version: 1,
      fetchedAt,
      freshUntil: Date.now() + 60_000,
      staleUntil: Date.now() + 60_000,
      errorUntil: Date.now() + 60_000,
    });
    expect(watcher.judge(entry(started + 597), "p-1", "product", ["sale"])).toBe("gone");
    expect(watcher.judge(entry(started + 598), "p-1", "product", ["sale"])).toBe("stale");
    expect(watcher.judge(entry(started + 599), "p-1", "product", ["sale"])).toBe("ok");
    expect(watcher.judge(entry(started + 10), "p-1", "product", ["brand:other"])).toBe("ok");
    expect(watcher.judge(entry(started + 999), "p-1", "inventory", [])).toBe("stale");
    expect(watcher.purgedAt("p-1", "product", ["cat:shoes"])).toEqual({ hard: started + 598, any: started + 599 });
  });

  it("starts an isolate over that was idle while Redis lost the log and a new era recorded purges: none of them is skipped", async () => {
    const log = createPurgeLog({ l2, keyPrefix: "idle", wideRetentionMs: 60_000 });
    const keys = purgeLogKeys("idle");
    const direct = new IORedis({ port: redisServer.port, lazyConnect: true });
    const forgotten: string[] = [];
    let startedOver = 0;
    const clock = fakeClock(Date.now());
    const watcher = createPurgeWatcher({
      log,
      l1: { forget: (key) => forgotten.push(key), markStale: () => undefined, keepOnlyForErrors: () => void startedOver++ },
      clock,
      keyPrefix: "idle",
      pollMs: 1000,
      wideRetentionMs: 60_000,
      blindMaxAgeMs: 60_000,
      l1MaxBytes: DEFAULTS.l1MaxBytes,
      syncWaitMs: 1000,
    });
    const sync = async () => {
      clock.advance(1000);
      await watcher.sync(() => undefined);
    };
    try {
      for (const id of ["p-000001", "p-000002", "p-000003"]) await log.record(idPurge([id]));
      await sync();
      const before = watcher.stamp()!;
      expect(before.seq).toBe(3);
      expect(startedOver).toBe(1); // its first sync, as a new isolate
      // Redis loses the log; the new era takes numbers 1-3 again (the same count: nothing to read "since 3")...
      await direct.del(keys.seq, keys.log, keys.wide, keys.era);
      for (const id of ["p-000011", "p-000012", "p-000013"]) await log.record(idPurge([id]));
      await sync();
      expect(startedOver).toBe(2);
      expect(watcher.stamp()).toEqual({ era: expect.not.stringMatching(`^${before.era}$`), seq: 3 });
      // ...and 1-5, of which 4-5 would have looked like the next ones.
      await direct.del(keys.seq, keys.log, keys.wide, keys.era);
      for (const id of ["p-000021", "p-000022", "p-000023", "p-000024", "p-000025"]) await log.record(idPurge([id]));
      clock.advance(1);
      await sync();
      expect(startedOver).toBe(3);
      expect(watcher.stamp()?.seq).toBe(5);
      // Starting over, it knows the log's latest id purges: a copy stamped before them is judged against them.
      expect(watcher.vouches({ era: watcher.stamp()!.era, seq: 0 })).toBe(true);
      // Within its era, a reader at 0 (a deployment's first purge) catches up instead of starting over.
      await direct.del(keys.seq, keys.log, keys.wide, keys.era);
      await sync();
      expect(startedOver).toBe(4);
      expect(watcher.stamp()).toMatchObject({ seq: 0 });
      await log.record(idPurge(["p-000031"]));
      await sync();
      expect(startedOver).toBe(4);
      expect(forgotten).toContain("idle:p:p-000031");
    } finally {
      direct.disconnect();
    }
  });

  it("lets the isolate that recorded a purge advance its own sequence", async () => {
    const log = createPurgeLog({ l2, keyPrefix: "own", wideRetentionMs: 60_000 });
    const forgotten: string[] = [];
    const watcher = createPurgeWatcher({
      log,
      l1: { forget: (key) => forgotten.push(key), markStale: () => undefined, keepOnlyForErrors: () => undefined },
      clock: systemClock,
      keyPrefix: "own",
      pollMs: 1000,
      wideRetentionMs: 60_000,
      blindMaxAgeMs: 60_000,
      l1MaxBytes: DEFAULTS.l1MaxBytes,
      syncWaitMs: 1000,
    });
    await watcher.sync(() => undefined);
    expect(watcher.status().seq).toBe(0);
    const record = idPurge(["p-000002"]);
    const seq = await log.record(record);
    watcher.apply({ ...record, seq: seq! });
    expect(watcher.status().seq).toBe(seq);
    expect(forgotten).toEqual(["own:p:p-000002"]);
    // Another isolate's purge meanwhile leaves a gap: this one does not skip past it.
    await log.record(idPurge(["p-000003"]));
    const mine = idPurge(["p-000004"]);
    const next = await log.record(mine);
    watcher.apply({ ...mine, seq: next! });
    expect(watcher.status().seq).toBe(seq);
    expect(RESOURCE_NAMES).toContain("product");
  });

  it("skips records it cannot read, in the log and in the marks, and never applies them", async () => {
    const log = createPurgeLog({ l2, keyPrefix: "foreign", wideRetentionMs: 60_000 });
    const keys = purgeLogKeys("foreign");
    const redis = new Redis({ url: gateway.url, token: TOKEN, automaticDeserialization: false, enableTelemetry: false });
    const now = Date.now();
    const good = { seq: 3, at: now, ids: [], tags: ["brand:acme"], all: false, mode: "hard", resources: ["product"] };
    const unreadable = [
      "not json",
      JSON.stringify({ seq: 1, at: now }), // no lists: every read would search them
      JSON.stringify({ ...good, seq: 2, ids: ["../../x"] }), // ids build keys
      JSON.stringify({ ...good, seq: 4, tags: "brand:acme" }),
      JSON.stringify({ ...good, seq: 5, mode: "nuke" }),
      JSON.stringify({ ...good, seq: 6, all: true, at: now + 365 * 86_400_000 }), // "everything fetched before next year is gone"
    ];
    await redis.set(keys.seq, "7");
    for (const [index, record] of [...unreadable, JSON.stringify(good)].entries()) {
      await redis.zadd(keys.log, { score: index + 1, member: record });
    }
    await redis.hset(keys.wide, {
      "product|brand:acme": `${now}|0`,
      "product|sale": "garbage",
      "nonsense|brand:acme": `${now}|0`,
      "product|brand:later": `${now + 365 * 86_400_000}|0`, // "everything of the brand fetched before next year is gone"
      "~floor": `${now + 365 * 86_400_000}|0`,
    });
    // A reader starting over takes the marks: only what it can read.
    const fresh = await log.readSince(0, null);
    // And the log's latest records it can read, for what they say of id purges.
    expect(fresh).toMatchObject({ seq: 7, follows: false, records: [good], floor: 0 });
    expect(fresh!.marks).toEqual([{ resource: "product", tag: "brand:acme", hard: now, soft: 0 }]);
    // A reader catching up takes the log: only what it can read.
    // (Of the log's era: it has none, its counter written by hand.)
    const behind = await log.readSince(1, "");
    expect(behind).toMatchObject({ seq: 7, follows: true, marks: [] });
    expect(behind!.records).toEqual([good]);
  });

  it("starts the log over when its keys hold what no purge wrote, so that purges are recorded again", async () => {
    const log = createPurgeLog({ l2, keyPrefix: "reset", wideRetentionMs: 60_000 });
    const keys = purgeLogKeys("reset");
    const redis = new Redis({ url: gateway.url, token: TOKEN, automaticDeserialization: false, enableTelemetry: false });
    expect(await log.record(recordFrom({ ids: ["p-000006"], resources: ["product"], mode: "hard" }, 1_000))).toBe(1);
    expect((await log.readSince(0, null))?.era).toBe("1000");
    await redis.set(keys.seq, "garbage");
    expect(await log.record(recordFrom({ ids: ["p-000007"], resources: ["product"], mode: "hard" }, 2_000))).toBe(1);
    // The numbers start again, in a new era: a copy stamped with the old era's numbers is not taken for this one's.
    expect((await log.readSince(0, null))?.era).toBe("2000");
    await redis.set(keys.log, "not a sorted set");
    expect(await log.record(idPurge(["p-000008"]))).toBe(1);
    await redis.set(keys.wide, "not a hash");
    expect(await log.record(recordFrom({ tags: ["brand:acme"], mode: "hard", resources: ["product"] }, Date.now()))).toBe(1);
    // A reader takes the sequence that went back as a reset: it starts over from the marks.
    expect(await log.readSince(5, null)).toMatchObject({
      seq: 1,
      follows: false,
      marks: [expect.objectContaining({ resource: "product", tag: "brand:acme" })],
    });
  });

  it("gives a log without an era one at a reader's asking, which its purges go on in; a log that lost its keys gets another", async () => {
    const clock = fakeClock(5_000);
    const log = createPurgeLog({ l2, keyPrefix: "era", wideRetentionMs: 60_000, clock });
    const keys = purgeLogKeys("era");
    const direct = new IORedis({ port: redisServer.port, lazyConnect: true });
    try {
      expect(await log.readSince(0, null)).toMatchObject({ seq: 0, era: "" });
      expect(await log.startEra()).toEqual({ seq: 0, era: "5000" });
      clock.advance(1_000);
      expect(await log.startEra()).toEqual({ seq: 0, era: "5000" }); // another reader's came first: that one stands
      expect(await log.readSince(0, null)).toMatchObject({ seq: 0, era: "5000" });
      // Kept as an append keeps them, not forever.
      for (const key of [keys.seq, keys.era]) expect(await direct.pttl(key)).toBeGreaterThan(SEQ_TTL_MS - 60_000);
      // The first purge goes on in that era: a copy stamped "5000|0" is judged against it.
      expect(await log.record(recordFrom({ ids: ["p-000001"], resources: ["product"], mode: "hard" }, 6_000))).toBe(1);
      expect(await log.readSince(0, null)).toMatchObject({ seq: 1, era: "5000" });
      // The log itself is kept as long as an entry lives (wideRetentionMs), its counter and era longer.
      for (const key of [keys.log, keys.wideLog]) expect(await direct.pttl(key)).toBeLessThanOrEqual(60_000);
      // Redis lost the log (a restart without persistence, FLUSHALL): the next era is another one, never the empty one again.
      await direct.del(keys.seq, keys.log, keys.wide, keys.era);
      expect(await log.readSince(1, null)).toMatchObject({ seq: 0, era: "" });
      clock.advance(1_000);
      expect(await log.startEra()).toEqual({ seq: 0, era: "7000" });
      expect(await log.readSince(0, null)).toMatchObject({ seq: 0, era: "7000" });
      // The counter lost alone (evicted): its era goes with it (its numbers start again, in a new era).
      await direct.del(keys.seq);
      expect(await log.readSince(1, "7000")).toMatchObject({ seq: 0, era: "", follows: false });
      expect(await log.record(recordFrom({ ids: ["p-000002"], resources: ["product"], mode: "hard" }, 8_000))).toBe(1);
      expect(await log.readSince(0, null)).toMatchObject({ seq: 1, era: "8000" });
      // The era lost alone: a new one at the counter's number.
      await direct.del(keys.era);
      clock.advance(2_000);
      expect(await log.startEra()).toEqual({ seq: 1, era: "9000" });
      expect(await log.readSince(0, null)).toMatchObject({ seq: 1, era: "9000" });
      expect(await log.record(recordFrom({ ids: ["p-000003"], resources: ["product"], mode: "hard" }, 10_000))).toBe(2);
      expect(await log.readSince(0, null)).toMatchObject({ seq: 2, era: "9000" });
      // An era that is an empty string is none: replaced.
      await direct.set(keys.era, "");
      clock.advance(1_000);
      expect(await log.readSince(2, "9000")).toMatchObject({ seq: 2, era: "", follows: false });
      expect(await log.startEra()).toEqual({ seq: 2, era: "10000" });
    } finally {
      direct.disconnect();
    }
  });

  it("records a soft purge of ids whose keys hold what no fill wrote: another type, or not an entry", async () => {
    const log = createPurgeLog({ l2, keyPrefix: "soft", wideRetentionMs: 60_000 });
    const redis = new Redis({ url: gateway.url, token: TOKEN, automaticDeserialization: false, enableTelemetry: false });
    await redis.hset(entryKey("soft", "product", "p-000005"), { title: "x" });
    await redis.set(entryKey("soft", "product", "p-000006"), "not an entry");
    const seq = await log.record(recordFrom({ ids: ["p-000005", "p-000006"], resources: ["product"], mode: "soft" }, Date.now()));
    expect(seq).toBe(1);
    // Left for the next fill to replace; the purge markers are set.
    expect(await redis.get(entryKey("soft", "product", "p-000006"))).toBe("not an entry");
    expect(await redis.exists(purgeMarkerKey("soft", entryKey("soft", "product", "p-000005")))).toBe(1);
  });
});
