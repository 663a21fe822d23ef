// The rendered-page cache (src/http/productPage.ts, TierServices.renderedPages,
// src/http/headers.ts pageIdentity): a page is rendered once per isolate for
// the same parts in the same versions and states, and anew when any of them
// changes. The real page handler, read path and templates, in process: a
// tier put together by hand around a fake origin and a fake clock, without
// L2 (so without the worker runtime); renderProductPage is wrapped to count
// the renders.
import { Hono } from "hono";
import { timing } from "hono/timing";
import { LRUCache } from "lru-cache";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { entryKey } from "../../src/cache/keys";
import { createReadThrough } from "../../src/cache/readThrough";
import { DEFAULTS } from "../../src/config/defaults";
import { productPage } from "../../src/http/productPage";
import { createPurgeWatcher } from "../../src/invalidation/watcher";
import { createMetrics } from "../../src/observability/metrics";
import { createOverload } from "../../src/overload";
import { createLimiter } from "../../src/shared/limiter";
import { PAGE_RESOURCES } from "../../src/origin/resources";
import { renderProductPage } from "../../src/render";
import { AVAILABILITY_UNKNOWN_TEXT } from "../../src/render/format";
import { recordPages, type PageRead } from "../../src/observability/wiring";
import { createFleet } from "../../src/observability/fleet";
import type { RenderedPage, TierServices } from "../../src/tier";
import { fakeClock, fakeOrigin, testConfig } from "../support/fakes";

vi.mock("../../src/render", async (importOriginal) => {
  const actual = await importOriginal<typeof import("../../src/render")>();
  return { ...actual, renderProductPage: vi.fn(actual.renderProductPage) };
});
const renders = vi.mocked(renderProductPage);

beforeEach(() => {
  renders.mockClear();
});

function setup() {
  const clock = fakeClock();
  const origin = fakeOrigin();
  const config = testConfig({
    KNOWN_IDS: "off",
    // Inventory: fresh 10 s, stale 30 s more, usable on error for 600 s after its ttl (the defaults).
    CACHE_POLICIES: JSON.stringify({ inventory: { ttl: 10, swr: 30, staleIfError: 600 } }),
  });
  const cache = createReadThrough({ config, origin, l2: null, clock });
  const pageReads: PageRead[] = [];
  const metrics = createMetrics({ clock });
  const fleet = createFleet(undefined, { isolateId: metrics.isolateId, pageSample: 1, clock });
  const tier: TierServices = {
    config,
    cache,
    purges: createPurgeWatcher({
      log: null,
      l1: cache,
      clock,
      keyPrefix: config.keyPrefix,
      pollMs: config.purgePollMs,
      wideRetentionMs: 3_600_000,
      blindMaxAgeMs: DEFAULTS.softPurgeGraceMs,
      l1MaxBytes: config.l1MaxBytes,
      syncWaitMs: 200,
    }),
    purgeLog: null,
    knownIds: null,
    renderedPages: new LRUCache<string, RenderedPage>({ maxSize: DEFAULTS.renderedPagesMaxBytes, sizeCalculation: (page) => page.body.byteLength + 256 }),
    hotReport: null,
    origin,
    originLimiter: createLimiter({ maxConcurrent: 8, maxQueued: 8, maxWaitMs: 1000, maxHoldMs: 10_000, clock }),
    clock,
    metrics,
    fleet,
    recordPage: recordPages(metrics, fleet),
    pageRead: (read) => void pageReads.push(read),
    overload: createOverload({
      clock,
      maxColdPages: 8,
      coldPageWaitMs: 100,
      coldPageLeaseMs: 10_000,
      backgroundFillMs: 1000,
    }),
  };
  const app = new Hono();
  app.use("/products/*", timing());
  app.get("/products/:id", (c) => productPage(c, tier));
  const background: Promise<unknown>[] = [];
  const executionCtx = {
    waitUntil: (work: Promise<unknown>) => void background.push(work),
    passThroughOnException: () => undefined,
    props: {},
  } as unknown as ExecutionContext;
  const get = async (id = "p-000042") => {
    const response = await app.request(`/products/${id}`, {}, {}, executionCtx);
    await Promise.all(background.splice(0));
    return {
      status: response.status,
      etag: response.headers.get("etag"),
      degraded: response.headers.get("cache-degraded"),
      cacheStatus: response.headers.get("cache-status"),
      body: await response.text(),
    };
  };
  /** Drops one part of one product from L1: the next page fetches it from the origin again. */
  const forget = (resource: string, id = "p-000042") => cache.forget(entryKey(config.keyPrefix, resource as never, id));
  return { clock, origin, tier, get, forget, pageReads };
}

describe("the page's read, told to the slow-page log", () => {
  it("reports each page's id, read time and Cache-Status (what the slow_page line says)", async () => {
    const { get, pageReads } = setup();
    const cold = await get("p-000042");
    const warm = await get("p-000042");
    expect(pageReads.map((read) => read.id)).toEqual(["p-000042", "p-000042"]);
    expect(pageReads.map((read) => read.cacheStatus)).toEqual([cold.cacheStatus, warm.cacheStatus]);
    expect(pageReads[0]!.cacheStatus).toMatch(/pp-origin/);
    expect(pageReads[1]!.cacheStatus).toMatch(/pp-l1; hit/);
    // The fake clock stands still: no time passed.
    expect(pageReads[0]!.ms).toBe(0);
  });
});

describe("the rendered-page cache", () => {
  it("renders a page once for the same parts in the same versions, and serves the same bytes and ETag after", async () => {
    const { get } = setup();
    const first = await get();
    expect(first.status).toBe(200);
    for (let i = 0; i < 5; i++) {
      const again = await get();
      expect(again.body).toBe(first.body);
      expect(again.etag).toBe(first.etag);
    }
    expect(renders).toHaveBeenCalledTimes(1);
  });

  it("parses none of the page's L1 data when it serves the rendered page, and all of it when it renders", async () => {
    const { origin, get, forget } = setup();
    const first = await get();
    const parse = vi.spyOn(JSON, "parse");
    try {
      const again = await get();
      expect(again.body).toBe(first.body);
      expect(again.cacheStatus).toMatch(/^pp-l1; hit/);
      expect(parse).not.toHaveBeenCalled();
      // A new inventory version: the page renders again, from the other parts' L1 copies, parsed now.
      origin.version = 2;
      forget("inventory");
      await get();
      expect(renders).toHaveBeenCalledTimes(2);
      expect(parse.mock.calls.length).toBeGreaterThanOrEqual(PAGE_RESOURCES.length - 1);
    } finally {
      parse.mockRestore();
    }
  });

  it("does not render again when the parts are fetched again in the same versions", async () => {
    const { clock, origin, get, forget } = setup();
    const first = await get();
    clock.advance(1000);
    for (const resource of PAGE_RESOURCES) forget(resource);
    const again = await get();
    expect(origin.calls).toMatchObject({ product: 2, inventory: 2, reviews: 2, recommendations: 2 });
    expect(again.etag).toBe(first.etag);
    expect(renders).toHaveBeenCalledTimes(1);
  });

  it.each(PAGE_RESOURCES)("renders anew when a new version of the %s comes in, and once only", async (resource) => {
    const { origin, get, forget } = setup();
    const first = await get();
    origin.version = 2;
    forget(resource);
    const changed = await get();
    expect(origin.calls[resource]).toBe(2);
    expect(renders).toHaveBeenCalledTimes(2);
    expect(changed.etag).not.toBe(first.etag);
    await get();
    expect(renders).toHaveBeenCalledTimes(2);
  });

  it("renders each product's own page, although their parts are in the same versions", async () => {
    const { get } = setup();
    const one = await get("p-000001");
    const two = await get("p-000002");
    expect(renders).toHaveBeenCalledTimes(2);
    expect(one.body).toContain("Product p-000001");
    expect(two.body).toContain("Product p-000002");
    expect(two.body).not.toContain("Product p-000001");
  });

  it("gives a page whose inventory is only usable on error a page of its own (availability unknown), and the first page back once the inventory answers", async () => {
    const { clock, origin, get } = setup();
    const first = await get();
    expect(first.body).toContain("In stock");
    expect(first.body).not.toContain(AVAILABILITY_UNKNOWN_TEXT);

    // Past the inventory's ttl and grace, within its stale-if-error window; the inventory service fails.
    clock.advance(41_000);
    origin.behaviour.inventory = "fail";
    const degraded = await get();
    expect(degraded.status).toBe(200);
    expect(degraded.degraded).toBe("inventory");
    expect(degraded.body).toContain(AVAILABILITY_UNKNOWN_TEXT);
    expect(degraded.body).not.toContain("In stock");
    expect(degraded.etag).not.toBe(first.etag);
    expect(renders).toHaveBeenCalledTimes(2);
    await get();
    expect(renders).toHaveBeenCalledTimes(2);

    // The inventory answers again, in the version it had: the page it made is served again, not rendered again.
    origin.behaviour.inventory = "ok";
    const recovered = await get();
    expect(recovered.degraded).toBeNull();
    expect(recovered.body).toBe(first.body);
    expect(recovered.etag).toBe(first.etag);
    expect(renders).toHaveBeenCalledTimes(2);
  });
});
