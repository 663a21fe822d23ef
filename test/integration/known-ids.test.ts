// The known-ids filter in the Workers runtime: ids that cannot exist never
// reach the origin, new products are never refused, and it fails open.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULTS } from "../../src/config/defaults";
import { pageRetryAfterSeconds } from "../../src/http/errorPage";
import { clearFaults, completeProducts, injectFault, originFetches, page } from "../support/faults";
import { buildFilter, filterState, waitUntilReady } from "../support/knownIds";
import { freePort } from "../../dev/harness/ports";
import { RedisProbe } from "../../dev/harness/redisProbe";
import { PURGE_TOKEN, startStack, type Stack } from "../support/stack";
import { startWorker, type WorkerInstance } from "../support/worker";

let stack: Stack;
let worker: WorkerInstance;

beforeAll(async () => {
  const port = await freePort();
  stack = await startStack({ catalogSize: 10_000, knownIdsUrl: `http://127.0.0.1:${port}/__known-ids`, purgeToken: PURGE_TOKEN });
  await buildFilter(stack);
  worker = await startWorker(stack.bindings, { port });
  await waitUntilReady(worker);
});

afterAll(async () => {
  await worker?.close();
  await stack?.close();
});

describe("the known-ids filter", () => {
  it("keeps 10,000 requests for distinct random ids away from the origin (≤ 2% get through)", async () => {
    await stack.admin("/__admin/counters/reset", { method: "POST" });
    const ids = Array.from({ length: 10_000 }, (_, i) => `p-${String(20_000 + i * 7 + Math.floor(Math.random() * 7)).padStart(6, "0")}`);
    const statuses = new Map<number, number>();
    for (let start = 0; start < ids.length; start += 100) {
      const responses = await Promise.all(ids.slice(start, start + 100).map((id) => worker.fetch(`/products/${id}`)));
      for (const response of responses) statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
    }
    expect([...statuses.keys()]).toEqual([404]);
    const productFetches = (await stack.counters()).services.product ?? 0;
    console.log(
      `known-ids: ${productFetches} of 10,000 random ids reached the origin (${(productFetches / 100).toFixed(2)}%, configured false-positive rate 1%)`,
    );
    expect(productFetches).toBeLessThanOrEqual(200);
  }, 120_000);

  it("a product the filter lists is asked for with its other parts: when its service fails, the page is a 503 and the other three were each asked once (the README's fault table)", async () => {
    const [id] = completeProducts(50, 1);
    await injectFault(stack, { service: "product", down: "500" });
    try {
      const failed = await page(worker, `/products/${id}`);
      expect(failed.status).toBe(503);
      expect(failed.headers.get("retry-after")).toBe(String(pageRetryAfterSeconds(DEFAULTS)));
      for (const service of ["product", "inventory", "reviews", "recommendations"]) expect(await originFetches(stack, service, id!), service).toBe(1);
    } finally {
      await clearFaults(stack);
    }
  });

  it("answers a filtered id with the 404 page and says so", async () => {
    const response = await worker.fetch("/products/zz-not-a-product");
    expect(response.status).toBe(404);
    expect(response.headers.get("cache-status")).toBe('pp-known-ids; hit; detail="product absent"');
    expect(await response.text()).toContain("Product not found");
  });

  it("never refuses every real product", async () => {
    await stack.admin("/__admin/counters/reset", { method: "POST" });
    for (let index = 1; index <= 10_000; index += 97) {
      const response = await worker.fetch(`/products/p-${String(index).padStart(6, "0")}`);
      expect(response.status).toBe(200);
    }
  });

  it("lets a product created at the origin through at once (origin → /__known-ids)", async () => {
    const created = await stack.admin("/__admin/products", { body: { id: "new-arrival-1", title: "Brand new", price: 4200 } });
    expect(created.knownIds.status).toBe(200);
    const response = await worker.fetch("/products/new-arrival-1");
    expect(response.status).toBe(200);
    expect(await response.text()).toContain("Brand new");
  });

  it("is loaded once per data center: a second isolate sharing the location tier reads no segment from Redis", async () => {
    const folder = mkdtempSync(join(tmpdir(), "pp-kid-location-"));
    const probe = await RedisProbe.connect(stack.redis.port);
    /** The filter's segment reads (MGETs of `pp:v1:kid:<version>:<n>`) Redis got while `during` ran. */
    const segmentReads = async (during: () => Promise<void>) =>
      Object.entries((await probe.census(during)).sentByKey)
        .filter(([shape]) => shape.startsWith("mget pp:v1:kid:"))
        .reduce((sum, [, n]) => sum + n, 0);
    const isolates: WorkerInstance[] = [];
    try {
      const first = await startWorker(stack.bindings, { cachePersist: folder });
      isolates.push(first);
      expect(await segmentReads(() => waitUntilReady(first))).toBeGreaterThan(0);
      const second = await startWorker(stack.bindings, { cachePersist: folder });
      isolates.push(second);
      expect(await segmentReads(() => waitUntilReady(second))).toBe(0);
      const status = await second.fetch("/__status.json", { headers: { authorization: `Bearer ${PURGE_TOKEN}` } });
      const { knownIds } = (await status.json()) as { knownIds: { location: { hits: number } | null } };
      expect(knownIds.location?.hits).toBe(1);
      expect((await second.fetch("/products/p-000042")).status).toBe(200);
      expect((await second.fetch("/products/zz-not-a-product")).headers.get("cache-status")).toContain("pp-known-ids");
    } finally {
      await Promise.all(isolates.map((instance) => instance.close()));
      probe.close();
      rmSync(folder, { recursive: true, force: true });
    }
  });

  it("fails open when no filter was ever built", async () => {
    const bare = await startStack({ catalogSize: 100 });
    const instance = await startWorker(bare.bindings);
    try {
      await instance.fetch("/products/p-000001");
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await filterState(instance)).toBe("missing");
      expect((await instance.fetch("/products/p-000050")).status).toBe(200);
      const unknown = await instance.fetch("/products/p-009999");
      expect(unknown.status).toBe(404);
      expect(unknown.headers.get("cache-status")).toContain("pp-origin");
    } finally {
      await instance.close();
      await bare.close();
    }
  });
});
