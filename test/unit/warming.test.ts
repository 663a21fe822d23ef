// Warming: the fleet's hot products reported to Redis, and rate-limited
// warming through the tier's own read path.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, type Gateway } from "../../dev/gateway";
import { startDemoOrigin, type DemoOrigin } from "../../dev/origin";
import { createBreaker } from "../../src/shared/breaker";
import { createL2 } from "../../src/cache/l2/l2";
import { parseConfig } from "../../src/config";
import { createTier } from "../../src/tier";
import { createHotReport, hotKey, hottestIds } from "../../src/warming/hotReport";
import { warmOne } from "../../src/scheduled";
import { idsListed, warmProducts } from "../../src/warming/warm";
import { fakeClock } from "../support/fakes";
import { startRedis, type RedisServer } from "../../dev/harness/redis";

const TOKEN = "warm-token";
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
let redis: RedisServer;
let gateway: Gateway;
let origin: DemoOrigin;

beforeAll(async () => {
  redis = await startRedis();
  gateway = await startGateway({ redisPort: redis.port, token: TOKEN, log: () => {} });
  origin = await startDemoOrigin({ latencyMs: 1, jitterMs: 0 });
});

afterAll(async () => {
  await origin?.close();
  await gateway?.close();
  await redis?.stop();
});

describe("warming", () => {
  it("starts at most `perSecond` products a second, `concurrency` at a time", async () => {
    let now = 0;
    const started: number[] = [];
    let running = 0;
    let peak = 0;
    const result = await warmProducts({
      ids: Array.from({ length: 50 }, (_, i) => `p-${i}`),
      perSecond: 10,
      concurrency: 3,
      now: () => now,
      sleep: async (ms) => void (now += ms),
      warmOne: async () => {
        started.push(now);
        peak = Math.max(peak, ++running);
        await Promise.resolve();
        running--;
        return true;
      },
    });
    expect(result).toMatchObject({ warmed: 50, failed: 0 });
    expect(peak).toBeLessThanOrEqual(3);
    // 50 products at 10 a second: the last starts 4.9 s after the first, not earlier.
    expect(Math.max(...started) - Math.min(...started)).toBeGreaterThanOrEqual(4900);
  });

  it("isolates report their hottest products once a minute; the fleet's top comes back hottest first", async () => {
    const clock = fakeClock();
    const l2 = createL2({ url: gateway.url, token: TOKEN, timeoutMs: 1000, breaker: createBreaker({ failureThreshold: 3, coolDownMs: 1000, clock }) });
    const reports = [createHotReport({ l2, keyPrefix: "pp:v1", clock }), createHotReport({ l2, keyPrefix: "pp:v1", clock })];
    const writes: Promise<unknown>[] = [];
    const background = (work: Promise<unknown>) => void writes.push(work);
    for (const [i, report] of reports.entries()) {
      for (let n = 0; n < 30; n++) report.offer("p-000001", background);
      for (let n = 0; n < 10 + i * 15; n++) report.offer("p-000002", background);
      report.offer("p-000003", background);
    }
    expect(writes).toHaveLength(0); // nothing before the minute is over
    clock.advance(60_000);
    for (const report of reports) report.offer("p-000003", background);
    await Promise.all(writes);
    expect(await hottestIds(l2, "pp:v1", 3)).toEqual(["p-000001", "p-000002", "p-000003"]);
  });

  it("the fleet's list follows what is hot now: its scores halve each minute, a product no longer reported falls off, and the list expires", async () => {
    const { clock, l2, report, writes, background } = await emptyHotList();
    const minute = async (views: string[]) => {
      for (const id of views) report.offer(id, background);
      clock.advance(60_000);
      await Promise.all(writes);
    };
    await minute(Array(100).fill("p-000001")); // hot then, reported at the next minute's first view
    for (let i = 0; i < 3; i++) await minute(["p-000002"]);
    expect(await hottestIds(l2, "pp:v1", 3)).toEqual(["p-000001", "p-000002"]);
    const scores = await l2.run((redis) => redis.zrange<string[]>(hotKey("pp:v1"), 0, -1, { rev: true, withScores: true }));
    expect(Number(scores![1])).toBeLessThan(100); // halved since its report
    for (let i = 0; i < 8; i++) await minute(["p-000002"]);
    expect(await hottestIds(l2, "pp:v1", 3)).toEqual(["p-000002"]);
    const ttl = await l2.run((redis) => redis.pttl(hotKey("pp:v1")));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(2 * 60_000); // scores of 1-2 requests: gone within two halvings
  });

  it("fills L2 through the tier's read path, so that the next isolate finds the product there", async () => {
    const config = parseConfig({
      ORIGIN_URL: origin.url,
      PUBLIC_URL: "https://shop.example",
      UPSTASH_REDIS_REST_URL: gateway.url,
      UPSTASH_REDIS_REST_TOKEN: TOKEN,
      KNOWN_IDS: "off",
    });
    const warmer = createTier(config);
    const writes: Promise<unknown>[] = [];
    expect(await warmOne(warmer, "p-000777", (work) => void writes.push(work))).toBe(true);
    await Promise.all(writes);
    const visitor = createTier(config);
    const { data } = await visitor.cache.read("p-000777", ["product", "inventory"], () => {});
    expect(data.product?.tier).toBe("l2");
    expect(data.inventory?.tier).toBe("l2");
  });

  it("npm run warm -- --top 500 says why it warms fewer: the fleet's hot list holds what the isolates reported, 20 products here", async () => {
    const { clock, l2, report, writes, background } = await emptyHotList();
    // One isolate's minute of traffic over 30 products: it reports its 20 most requested.
    for (let i = 1; i <= 30; i++) for (let n = 0; n < i; n++) report.offer(`p-${String(i).padStart(6, "0")}`, background);
    clock.advance(60_000);
    report.offer("p-000030", background);
    await Promise.all(writes);
    expect(await hottestIds(l2, "pp:v1", 500)).toHaveLength(20);

    const { stdout } = await promisify(execFile)(
      "node_modules/.bin/tsx",
      ["dev/warm.ts", "--top", "500", "--rate", "1000", "--origin", origin.url, "--redis-url", gateway.url, "--token", TOKEN],
      { cwd: ROOT },
    );
    expect(stdout).toContain(
      "warm: asked for 500, the fleet's hot list holds 20 (each isolate reports its 20 most requested products a minute, halved each minute): warming 20",
    );
    expect(stdout).toMatch(/^warmed 20, failed 0, in /m);
  });
});

describe("a --ids file", () => {
  it("is read one id per line, spaces around a line and blank lines ignored, a line never split into ids", () => {
    expect(idsListed("p-000001\n  p-000002  \r\n\n\np-000003\n")).toEqual(["p-000001", "p-000002", "p-000003"]);
    // Whole lines: refused as what they are (dev/warm.ts names the invalid ids), never half taken.
    expect(idsListed("p-000001\nnot valid!\n")).toEqual(["p-000001", "not valid!"]);
    expect(idsListed("")).toEqual([]);
  });
});

/** An empty fleet hot list in the test's Redis, and one isolate's report of it on a fake clock, its writes collected. */
async function emptyHotList() {
  const clock = fakeClock();
  const l2 = createL2({ url: gateway.url, token: TOKEN, timeoutMs: 1000, breaker: createBreaker({ failureThreshold: 3, coolDownMs: 1000, clock }) });
  await l2.run((redis) => redis.del(hotKey("pp:v1")));
  const writes: Promise<unknown>[] = [];
  return { clock, l2, report: createHotReport({ l2, keyPrefix: "pp:v1", clock }), writes, background: (work: Promise<unknown>) => void writes.push(work) };
}
