// The location tier in the Workers runtime (docs/architecture.md#the-location-tier):
// two workerd processes given the same Cache API folder stand for two
// isolates of one data center; a worker started again on that folder is an
// isolate after a deploy (a fresh L1 and a fresh view of purges, the same
// location cache). Redis's own count of the calls it got (INFO commandstats)
// says whether a page reached it.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis as IORedis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { member } from "../../dev/harness/cacheStatus";
import { PURGE_TOKEN, startStack, type Stack } from "../support/stack";
import { logFaults, startWorker, type WorkerInstance } from "../support/worker";
import { COLD_PAGE_PUTS, locationStats, pageParts } from "../support/location";

const PARTS = ["product", "inventory", "reviews", "recommendations"];

let stack: Stack;
let direct: IORedis;
let folder: string;
const started: WorkerInstance[] = [];

beforeAll(async () => {
  stack = await startStack({ latencyMs: 5, jitterMs: 0 });
  direct = new IORedis({ port: stack.redis.port, protocol: 2, lazyConnect: true, maxRetriesPerRequest: 1 });
  folder = mkdtempSync(join(tmpdir(), "pp-location-"));
});

afterAll(async () => {
  await Promise.all(started.map((worker) => worker.close()));
  direct?.disconnect();
  await stack?.close();
  rmSync(folder, { recursive: true, force: true });
  expect(logFaults(...started)).toEqual([]);
});

/** An isolate of the data center: the known-ids filter off (its reads are not the page's). */
async function isolate(bindings: Record<string, string> = {}): Promise<WorkerInstance> {
  const worker = await startWorker({ ...stack.bindings, KNOWN_IDS: "off", ...bindings }, { cachePersist: folder });
  started.push(worker);
  return worker;
}

/**
 * Calls about entries the tier sent Redis since the last reset (MGETs, and
 * the fills' scripts), as Redis counted them; not the purge log's read-only
 * sync (EVALSHA_RO), which runs on its own clock.
 */
async function redisCalls(): Promise<number> {
  let total = 0;
  // Reads (MGET) and the fills' scripts (EVALSHA: the first isolate loaded them). Not EVAL: here, only an
  // isolate's once-a-minute report of its hot products, which a slow start can bring into the measured page.
  for (const [, command, n] of (await direct.info("commandstats")).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (["mget", "evalsha"].includes(command!)) total += Number(n);
  }
  return total;
}

const putsMade = async (worker: WorkerInstance) => (await locationStats(worker)).puts;

/** A cold page of `id` in `worker`, once its four parts are in the location cache. */
async function coldPage(worker: WorkerInstance, id: string): Promise<Record<string, string>> {
  const before = await putsMade(worker);
  const parts = await pageParts(worker, id);
  for (let i = 0; i < 100 && (await putsMade(worker)) < before + COLD_PAGE_PUTS; i++) await new Promise((resolve) => setTimeout(resolve, 20));
  expect(await putsMade(worker)).toBe(before + COLD_PAGE_PUTS);
  // And in L2: the fills' writes go in a send of their own, after the puts (they must not land in a later test's count).
  const keys = ["p", "i", "r", "c"].map((code) => `pp:v1:${code}:${id}`);
  for (let i = 0; i < 100 && (await direct.exists(...keys)) < keys.length; i++) await new Promise((resolve) => setTimeout(resolve, 20));
  expect(await direct.exists(...keys)).toBe(keys.length);
  return parts;
}

async function purge(worker: WorkerInstance, body: unknown): Promise<void> {
  const response = await worker.fetch("/__purge", {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${PURGE_TOKEN}` },
    body: JSON.stringify(body),
  });
  expect(response.status).toBe(202);
}

const fromLocation = (parts: Record<string, string>) => Object.values(parts).every((line) => line.startsWith("pp-location; hit"));

describe("the location tier", () => {
  let first: WorkerInstance;
  let second: WorkerInstance;

  beforeAll(async () => {
    first = await isolate();
    second = await isolate();
  });

  it("serves a second isolate a page the first one fetched, with no Redis command for its parts", async () => {
    const cold = await coldPage(first, "p-000101");
    expect(cold.product).toMatch(/^pp-origin/);
    // The second isolate's first page syncs purges: a page after it is the one measured (and its own fills' writes land before).
    await coldPage(second, "p-000999");
    await direct.config("RESETSTAT");
    const shared = await pageParts(second, "p-000101");
    expect(shared, JSON.stringify(shared)).toSatisfy(fromLocation);
    expect(await redisCalls()).toBe(0);
  });

  it("makes a copy purged by id, by tag and of everything a miss in an isolate that learned of the purge", async () => {
    for (const [id, body] of [
      ["p-000102", { ids: ["p-000102"] }],
      ["p-000103", { tags: [] as string[], all: true }],
    ] as const) {
      await coldPage(first, id);
      await purge(first, body);
      // The second isolate learns of it within PURGE_POLL_MS (it syncs before the page).
      await new Promise((resolve) => setTimeout(resolve, 1100));
      const after = await pageParts(second, id);
      expect(after.product, `${JSON.stringify(body)}: ${after.product}`).not.toMatch(/^pp-location/);
    }
    // A tag the product carries, read from its copy.
    await coldPage(first, "p-000104");
    const tags = (((await await stack.admin("/products/p-000104")) as { tags?: string[] }).tags ?? []).slice(0, 1);
    if (tags.length > 0) {
      await purge(first, { tags });
      await new Promise((resolve) => setTimeout(resolve, 1100));
      expect((await pageParts(second, "p-000104")).product).not.toMatch(/^pp-location/);
    }
    // Found there, and turned down as purged (not merely missing): the id, the all and the tag purge.
    expect((await locationStats(second)).purged).toBeGreaterThanOrEqual(tags.length > 0 ? 3 : 2);
  });

  it("serves a restarted isolate what the location holds, and never a copy purged before it started", async () => {
    await coldPage(first, "p-000105");
    await coldPage(first, "p-000106");
    await purge(first, { ids: ["p-000106"] });
    await first.close();
    const restarted = await isolate();
    await pageParts(restarted, "p-000998");
    expect(await pageParts(restarted, "p-000105"), "not purged").toSatisfy(fromLocation);
    expect((await pageParts(restarted, "p-000106")).product, "purged before it started").not.toMatch(/^pp-location/);
  });

  it("keeps a cold page within the subrequest limit: at MAX_SUBREQUESTS' floor (20) every part still comes from the origin", async () => {
    // A cold page's location lookups, L2 read and claim, origin fetches and its
    // puts and writes in the background all count against the invocation's
    // budget (shared/subrequests.ts): past it, a call is refused and its part
    // would be a 503 or a default, not a 200 from the origin.
    const tight = await isolate({ MAX_SUBREQUESTS: "20" });
    const response = await tight.fetch("/products/p-000107");
    expect(response.status).toBe(200);
    expect(response.headers.get("cache-degraded")).toBeNull();
    const status = response.headers.get("cache-status") ?? "";
    for (const part of PARTS) expect(member(status, part), part).toMatch(/^pp-origin; fwd=uri-miss; fwd-status=200/);
    // And its puts went out: the background did not run out of budget either.
    for (let i = 0; i < 100 && (await putsMade(tight)) < COLD_PAGE_PUTS; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await putsMade(tight)).toBe(COLD_PAGE_PUTS);
  });

  it("is bypassed with LOCATION_CACHE=off", async () => {
    const off = await isolate({ LOCATION_CACHE: "off" });
    const parts = await pageParts(off, "p-000105");
    expect(Object.values(parts).some((line) => line.startsWith("pp-location"))).toBe(false);
  });

  it("shares reads of the purge log: an isolate takes the read another one sent less than half a poll ago, and a purge still reaches it within the bound", async () => {
    const purgeStatus = async (worker: WorkerInstance) =>
      (
        (await (await worker.fetch("/__status.json", { headers: { authorization: `Bearer ${PURGE_TOKEN}` } })).json()) as {
          purges: { logReads: number; sharedReadsTaken: number };
        }
      ).purges;
    const [first, second] = [await isolate(), await isolate()];
    await coldPage(first, "p-000110");
    await pageParts(second, "p-000110");
    // A second read of each finds the log where it stood (a new isolate's first read gave it its era): from then on they share.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    await pageParts(first, "p-000110");
    await pageParts(second, "p-000110");
    // Both isolates' knowledge a whole poll old (PURGE_POLL_MS, 1 s): the next page of each waits for a sync.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    await pageParts(first, "p-000110"); // reads Redis, shares the read
    await new Promise((resolve) => setTimeout(resolve, 50)); // its put lands (in the background)
    const before = await purgeStatus(second);
    await pageParts(second, "p-000110");
    const after = await purgeStatus(second);
    expect(after.sharedReadsTaken - before.sharedReadsTaken, JSON.stringify({ before, after })).toBe(1);
    expect(after.logReads).toBe(before.logReads);

    // A purge recorded by the first isolate after that read: the second, holding the page in L1, sees it within a poll (and the L2 round trip).
    await purge(first, { ids: ["p-000110"] });
    const purgedAt = Date.now();
    let product = "";
    while (Date.now() - purgedAt < 1500) {
      product = (await pageParts(second, "p-000110")).product!;
      if (product.startsWith("pp-origin")) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(product, "the purged product is fetched anew within the bound").toMatch(/^pp-origin/);
  });

  // Last: it empties Redis.
  it("never vouches, after Redis lost its data, for a copy stamped before it: not even one put before the log's first purge", async () => {
    // A log never written: the isolate's first read gives it an era, and its copies carry it.
    await direct.flushall();
    const before = await isolate();
    await coldPage(before, "p-000108");
    await coldPage(before, "p-000109");
    // Applied in Redis; the location copy stays, to be judged.
    await purge(before, { ids: ["p-000108"] });
    await before.close();
    // Redis loses everything, the purge included (a restart without persistence).
    await direct.flushall();
    const after = await isolate();
    expect((await pageParts(after, "p-000108")).product, "purged, then lost with Redis's data").not.toMatch(/^pp-location/);
    expect((await pageParts(after, "p-000109")).product, "of the era Redis lost").not.toMatch(/^pp-location/);
    // Found there, and turned down: the two pages' four parts each.
    expect((await locationStats(after)).unvouched).toBe(8);
  });
});
