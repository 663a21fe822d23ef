// The purge log against a real Redis (through the gateway): what one sync
// reads stays bounded however many purges were recorded, and the isolate
// that recorded a purge does not read it back.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, type Gateway } from "../../dev/gateway";
import { productId } from "../../dev/origin/catalog";
import { createBreaker } from "../../src/cache/breaker";
import { systemClock } from "../../src/cache/clock";
import { createL2, type L2 } from "../../src/cache/l2";
import { createPurgeLog, SYNC_MAX_BYTES, SYNC_MAX_RECORDS } from "../../src/invalidation/log";
import { recordFrom } from "../../src/invalidation/record";
import { createPurgeWatcher } from "../../src/invalidation/watcher";
import { RESOURCE_NAMES } from "../../src/origin/types";
import { startRedis, type RedisServer } from "../support/redis";

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
  it("hands a reader that fell far behind a bounded answer: start over, not megabytes of records", async () => {
    const log = createPurgeLog({ l2, keyPrefix: "bulk", wideRetentionMs: 60_000 });
    const first = await log.record(idPurge(["p-000001"]));
    expect(first).toBe(1);
    await log.record(recordFrom({ tags: ["brand:acme"], mode: "hard" }, Date.now()));
    // A bulk re-price: 150 purges of 1,000 ids each (≈ 2.3 MB of records).
    for (let n = 0; n < 150; n++) {
      expect(await log.record(idPurge(Array.from({ length: 1000 }, (_, i) => productId(n * 1000 + i))))).toBeDefined();
    }

    const behind = await log.readSince(first!);
    expect(behind).toBeDefined();
    expect(behind!.caughtUp).toBe(false);
    expect(behind!.seq).toBe(152);
    expect(behind!.marks).toEqual([{ resource: "product", tag: "brand:acme", hard: expect.any(Number), soft: 0 }, ...["inventory", "reviews", "recommendations", "listing"].map((resource) => ({ resource, tag: "brand:acme", hard: expect.any(Number), soft: 0 }))]);
    expect(JSON.stringify(behind).length).toBeLessThan(SYNC_MAX_BYTES);

    // A reader a few purges behind still gets them one by one.
    const near = await log.readSince(150);
    expect(near!.caughtUp).toBe(true);
    expect(near!.records.map((record) => record.seq)).toEqual([151, 152]);
    expect(SYNC_MAX_RECORDS).toBeGreaterThanOrEqual(2);
  });

  it("gives a new isolate the latest mark per resource and tag, not every tag purge ever recorded", async () => {
    const log = createPurgeLog({ l2, keyPrefix: "marks", wideRetentionMs: 3_600_000 });
    const started = Date.now();
    // 600 purges of the same three tags, hard and soft, and one purge of everything.
    for (let n = 0; n < 600; n++) {
      await log.record(recordFrom({ tags: ["brand:acme", "cat:shoes", "sale"], mode: n % 2 ? "soft" : "hard", resources: ["product"] }, started + n));
    }
    await log.record(recordFrom({ all: true, mode: "soft", resources: ["inventory"] }, started + 1000));

    const fresh = await log.readSince(0);
    expect(fresh!.caughtUp).toBe(false);
    expect(fresh!.seq).toBe(601);
    const byKey = Object.fromEntries(fresh!.marks.map((mark) => [`${mark.resource}|${mark.tag}`, [mark.hard, mark.soft]]));
    expect(byKey).toEqual({
      "product|brand:acme": [started + 598, started + 599],
      "product|cat:shoes": [started + 598, started + 599],
      "product|sale": [started + 598, started + 599],
      "inventory|null": [0, started + 1000],
    });
    expect(fresh!.floor).toBe(0);
    // What a new isolate reads does not grow with the number of purges.
    expect(JSON.stringify(fresh).length).toBeLessThan(1000);

    // A watcher starting from them judges as the purges say.
    const watcher = createPurgeWatcher({
      log,
      l1: { forget: () => undefined, markStale: () => undefined, forgetAll: () => undefined },
      clock: systemClock,
      keyPrefix: "marks",
      pollMs: 1000,
      wideRetentionMs: 3_600_000,
      blindAfterMs: 5000,
      blindMaxAgeMs: 60_000,
      syncWaitMs: 1000,
    });
    await watcher.sync(() => undefined);
    const entry = (fetchedAt: number) => ({ data: {}, version: 1, fetchedAt, freshUntil: Date.now() + 60_000, staleUntil: Date.now() + 60_000, errorUntil: Date.now() + 60_000, size: 1 });
    expect(watcher.judge(entry(started + 597), "p-1", "product", ["sale"])).toBe("gone");
    expect(watcher.judge(entry(started + 598), "p-1", "product", ["sale"])).toBe("stale");
    expect(watcher.judge(entry(started + 599), "p-1", "product", ["sale"])).toBe("ok");
    expect(watcher.judge(entry(started + 10), "p-1", "product", ["brand:other"])).toBe("ok");
    expect(watcher.judge(entry(started + 999), "p-1", "inventory", [])).toBe("stale");
    expect(watcher.purgedAt("p-1", "product", ["cat:shoes"])).toEqual({ hard: started + 598, any: started + 599 });
  });

  it("lets the isolate that recorded a purge advance its own sequence", async () => {
    const log = createPurgeLog({ l2, keyPrefix: "own", wideRetentionMs: 60_000 });
    const forgotten: string[] = [];
    const watcher = createPurgeWatcher({
      log,
      l1: { forget: (key) => forgotten.push(key), markStale: () => undefined, forgetAll: () => undefined },
      clock: systemClock,
      keyPrefix: "own",
      pollMs: 1000,
      wideRetentionMs: 60_000,
      blindAfterMs: 5000,
      blindMaxAgeMs: 60_000,
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
});
