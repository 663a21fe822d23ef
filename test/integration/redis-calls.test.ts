// What a page costs Redis, counted by Redis itself (INFO commandstats), in the
// Workers runtime: the calls the tier sends, each a round trip (and, on
// Upstash, a billed command). Calls made inside a script are Redis's own
// work, counted there too, and left out here.
import { Redis as IORedis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildFilter, filterState, waitUntilReady } from "../support/knownIds";
import { startStack, type Stack } from "../support/stack";
import { logFaults, startWorker, type WorkerInstance } from "../support/worker";
import { RedisProbe } from "../../dev/harness/redisProbe";
import { DEFAULTS } from "../../src/config/defaults";

let stack: Stack;
let worker: WorkerInstance;
let direct: IORedis;

beforeAll(async () => {
  stack = await startStack({ latencyMs: 20, jitterMs: 0 });
  // No known-ids filter, and a purge sync once a minute: their reads are not
  // the page's (known-ids.test.ts and purge.test.ts count them).
  worker = await startWorker({ ...stack.bindings, KNOWN_IDS: "off", PURGE_POLL_MS: "60000" });
  direct = new IORedis({ port: stack.redis.port, protocol: 2, lazyConnect: true, maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  direct?.disconnect();
  await worker?.close();
  await stack?.close();
  expect(logFaults(worker)).toEqual([]);
});

/**
 * Calls sent to Redis since the last reset, by command, without the
 * harness's own. Each run of a fill's script (EVALSHA, or EVAL when Redis
 * did not have it yet) makes one MGET of its own, which commandstats counts
 * with the MGETs sent (cache/l2/l2.ts): those are taken out of `mget`.
 */
async function calls(): Promise<Record<string, number>> {
  const counted: Record<string, number> = {};
  for (const [, command, n] of (await direct.info("commandstats")).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (["mget", "eval", "evalsha", "eval_ro", "evalsha_ro"].includes(command!)) counted[command!] = Number(n);
  }
  if (counted.mget !== undefined) counted.mget -= (counted.evalsha ?? 0) + (counted.eval ?? 0);
  return counted;
}

/** Until the worker's background writes for `id` have landed (all four resources stored). */
async function stored(id: string): Promise<void> {
  const keys = ["p", "i", "r", "c"].map((code) => `pp:v1:${code}:${id}`);
  for (let i = 0; i < 100 && (await direct.exists(...keys)) < 4; i++) await new Promise((resolve) => setTimeout(resolve, 20));
  expect(await direct.exists(...keys)).toBe(4);
}

/** The commands the worker sent while `during` ran (MONITOR: a script's own calls are not among them), MGETs and script runs. */
async function sentDuring(during: () => Promise<void>): Promise<{ mget: number; scripts: number; kinds: string[] }> {
  const probe = await RedisProbe.connect(stack.redis.port);
  try {
    const census = await probe.census(during);
    const scripts = Object.entries(census.sentByKey).filter(([shape]) => shape.startsWith("eval"));
    return {
      mget: census.sent.mget ?? 0,
      scripts: scripts.reduce((sum, [, n]) => sum + n, 0),
      kinds: scripts.map(([shape, n]) => `${n} × ${shape}`).sort(),
    };
  } finally {
    probe.close();
  }
}

describe("Redis calls of a page", () => {
  it("a cold page makes four: its MGET, the product's claim, the other three's claims together carrying the product's write, and their writes together", async () => {
    // First page: loads the scripts and syncs purges (not again within the minute).
    expect((await worker.fetch("/products/p-000001")).status).toBe(200);
    await stored("p-000001");
    const sent = await sentDuring(async () => {
      const cold = await worker.fetch("/products/p-000002");
      expect(cold.status).toBe(200);
      expect(cold.headers.get("cache-status")).toMatch(/pp-origin/);
      await stored("p-000002");
    });
    // Scripts are sent by their SHA (EVALSHA); their inner GET/SET/DEL are not the tier's calls.
    expect(sent).toEqual({
      mget: 1,
      scripts: 3,
      kinds: ["1 × evalsha pp:v1:i:<id> (write)", "1 × evalsha pp:v1:p:<id> (claim carrying writes)", "1 × evalsha pp:v1:p:<id> (claim)"],
    });
  });

  it("cold pages of many products at once share their claim calls: every page 200, every part fetched once, fewer claim calls than pages", async () => {
    const ids = Array.from({ length: 40 }, (_, i) => `p-${String(300 + i).padStart(6, "0")}`);
    await stack.admin("/__admin/counters/reset", { method: "POST" });
    const sent = await sentDuring(async () => {
      const pages = await Promise.all(ids.map((id) => worker.fetch(`/products/${id}`)));
      expect(pages.map((page) => page.status)).toEqual(ids.map(() => 200));
      for (const id of ids) await stored(id);
    });
    const claimCalls = sent.kinds.filter((kind) => kind.includes("(claim")).reduce((sum, kind) => sum + Number(kind.split(" ")[0]), 0);
    // Each page claims at least twice on its own (its product, then its other three parts): 80 calls or more
    // without sharing (96 in one run with gathering off); shared, 43–47 in runs beside a busy core.
    expect(claimCalls).toBeGreaterThan(0);
    expect(claimCalls).toBeLessThan(ids.length * 1.5);
    expect((await stack.counters()).services).toMatchObject({ product: ids.length, inventory: ids.length, reviews: ids.length, recommendations: ids.length });
  });

  it("a page served from L1 makes none", async () => {
    await direct.config("RESETSTAT");
    expect((await worker.fetch("/products/p-000002")).headers.get("cache-status")).not.toMatch(/pp-l2|pp-origin/);
    const counted = await calls();
    expect((counted.mget ?? 0) + (counted.evalsha ?? 0) + (counted.eval ?? 0)).toBe(0);
  });
});

/**
 * Until the worker has sent Redis nothing for longer than a write may wait
 * for a claim to carry it (a write's budget, DEFAULTS.backgroundCallMs): a held write is
 * background work too, and a shorter silence let one land in the next
 * test's count.
 */
async function quiet(): Promise<void> {
  const silentChecks = Math.ceil(DEFAULTS.backgroundCallMs / 300) + 1;
  let last = JSON.stringify(await calls());
  let silent = 0;
  for (let i = 0; i < 40; i++) {
    await new Promise((resolve) => setTimeout(resolve, 300));
    const now = JSON.stringify(await calls());
    silent = now === last ? silent + 1 : 0;
    if (silent === silentChecks) return;
    last = now;
  }
  throw new Error("the worker kept calling Redis");
}

describe("Redis calls of requests that are not pages", () => {
  it("malformed ids and unknown paths cost Redis nothing, even with purges synced every 100 ms; a page does", async () => {
    const eager = await startWorker({ ...stack.bindings, KNOWN_IDS: "off", PURGE_POLL_MS: "100" });
    try {
      expect((await eager.fetch("/products/p-000001")).status).toBe(200); // loads the scripts
      await quiet(); // its background work (refreshes, writes) done
      await direct.config("RESETSTAT");
      for (const path of ["/products/-leading-dash", "/products/%00%ff", "/products/p-1;drop", `/products/${"p".repeat(300)}`, "/products/p-000001/extra"]) {
        expect((await eager.fetch(path)).status).toBeGreaterThanOrEqual(400);
        await new Promise((resolve) => setTimeout(resolve, 120)); // past the poll interval each time
      }
      const none = await calls();
      expect(none).toEqual({});
      // The same wait before a real page: its purge sync reaches Redis.
      expect((await eager.fetch("/products/p-000001")).status).toBe(200);
      const some = await calls();
      expect((some.evalsha_ro ?? 0) + (some.eval_ro ?? 0)).toBeGreaterThan(0);
    } finally {
      await eager.close();
      expect(logFaults(eager)).toEqual([]);
    }
  });
});

describe("Redis calls of a page whose product the known-ids filter lists", () => {
  it("a cold page makes two: the four claims together (no MGET before them) and the four writes together; one origin round trip", async () => {
    await buildFilter(stack);
    const listing = await startWorker({ ...stack.bindings, PURGE_POLL_MS: "60000" });
    try {
      await waitUntilReady(listing); // loads the filter and the scripts, syncs purges
      await quiet();
      await direct.config("RESETSTAT");
      await stack.admin("/__admin/counters/reset", { method: "POST" });
      const cold = await listing.fetch("/products/p-000003");
      expect(cold.status).toBe(200);
      expect(cold.headers.get("cache-status")).toMatch(/pp-origin/);
      await stored("p-000003");
      const counted = await calls();
      // On failure, what else ran: the filter's state, and every command Redis counted.
      const context = `filter ${await filterState(listing)}; ${(await direct.info("commandstats")).replace(/\r?\n/g, " ")}`;
      expect({ mget: counted.mget ?? 0, scripts: (counted.evalsha ?? 0) + (counted.eval ?? 0) }, context).toEqual({ mget: 0, scripts: 2 });
      // Each part asked once.
      expect((await stack.counters()).services).toMatchObject({ product: 1, inventory: 1, reviews: 1, recommendations: 1 });
    } finally {
      await listing.close();
      expect(logFaults(listing)).toEqual([]);
    }
  });
});
