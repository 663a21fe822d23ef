// The operators' status page (GET /__status, /__status.json) end to end: the
// bundled worker in the Workers runtime, a real redis-server behind the
// Upstash REST gateway, the demo origin. Counts after known page views, the
// HTML (inline SVG chart, no script), the purge token, the breaker state
// after Redis dies, and a screenshot in Chromium for a person to look at.
import { existsSync, mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { StatusModel } from "../../src/observability/statusModel";
import { clearFaults, completeProducts, injectFault, page, waitFor } from "../support/faults";
import { startHttpWorker } from "../support/clients";
import { PURGE_TOKEN, startStack, type Stack } from "../support/stack";
import { startWorker, type WorkerInstance } from "../support/worker";

const AUTH = { authorization: `Bearer ${PURGE_TOKEN}` };
const CHROMIUM = "/usr/bin/chromium";
const SCREENSHOT = resolve("test/artifacts/status.png");

async function status(worker: WorkerInstance): Promise<StatusModel> {
  const response = await worker.fetch("/__status.json", { headers: AUTH });
  expect(response.status).toBe(200);
  expect(response.headers.get("cache-control")).toBe("no-store");
  return (await response.json()) as StatusModel;
}

describe("status page", () => {
  let stack: Stack;
  let worker: WorkerInstance;

  beforeAll(async () => {
    stack = await startStack();
    worker = await startHttpWorker({ ...stack.bindings });
  });
  afterAll(async () => {
    await worker?.close();
    await stack?.close();
  });

  it("counts the page views it served: 1 origin fetch, then L1", async () => {
    const [id] = completeProducts(6000, 1);
    const before = await status(worker);
    expect(before.last5m.pages).toBe(0);
    expect(before.l2.shards).toEqual([{ name: "l2", state: "closed", since: null }]);

    const views = 6;
    for (let i = 0; i < views; i++) expect((await page(worker, `/products/${id}`)).status).toBe(200);

    const after = await status(worker);
    expect(after.last5m.pages).toBe(views);
    expect(after.last5m.outcomes.ok).toBe(views);
    for (const resource of ["product", "inventory", "reviews", "recommendations"] as const) {
      expect(after.last5m.resources[resource], resource).toMatchObject({ answers: views, origin: 1, l1: views - 1, l2: 0, failed: 0 });
      expect(after.last5m.origin[resource]).toMatchObject({ fetches: 1, errors: 0 });
    }
    expect(after.last5m.total.hitRatio).toBeCloseTo((views - 1) / views);
    expect(after.last15m.pages).toBe(views);
    expect(after.perMinute.at(-1)!.pages).toBe(views);
    expect(after.hotProducts[0]).toEqual({ id, count: views, error: 0 });
    // Gauges: L1 holds the page's four entries; the purge watcher has synced.
    expect(after.l1.entries).toBeGreaterThanOrEqual(4);
    expect(after.l1.bytes).toBeGreaterThan(0);
    expect(after.l1.bytes).toBeLessThanOrEqual(after.l1.maxBytes);
    expect(after.purges.syncAgeMs).not.toBeNull();
    expect(after.config.policies.product.ttl).toBe(300);
    // The configuration it runs with, every setting but the tokens.
    expect(after.config).toMatchObject({
      caching: true,
      locationCache: true,
      l2: true,
      l2Shards: [{ name: "l2", url: stack.bindings.UPSTASH_REDIS_REST_URL }],
    });
    const text = JSON.stringify(after);
    for (const secret of [PURGE_TOKEN, stack.bindings.UPSTASH_REDIS_REST_TOKEN]) expect(text).not.toContain(secret);
  });

  it("counts 404s, defaulted sections and origin errors", async () => {
    const [id] = completeProducts(6100, 1);
    const before = await status(worker);
    expect((await page(worker, "/products/p-999999")).status).toBe(404);
    await injectFault(stack, { service: "reviews", down: "500" });
    try {
      const p = await page(worker, `/products/${id}`);
      expect(p.status).toBe(200);
      expect(p.degraded).toContain("reviews");
    } finally {
      await clearFaults(stack);
    }
    const after = await status(worker);
    expect(after.last5m.outcomes.absent - before.last5m.outcomes.absent).toBe(1);
    expect(after.last5m.degradedPages - before.last5m.degradedPages).toBe(1);
    expect(after.last5m.resources.reviews.defaulted - before.last5m.resources.reviews.defaulted).toBe(1);
    expect(after.last5m.resources.reviews.failed - before.last5m.resources.reviews.failed).toBe(1);
    expect(after.last5m.origin.reviews.errors - before.last5m.origin.reviews.errors).toBeGreaterThanOrEqual(1);
  });

  it("answers HTML with an inline SVG chart, no script, never stored", async () => {
    const response = await worker.fetch("/__status", { headers: AUTH });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/html");
    expect(response.headers.get("cache-control")).toBe("no-store");
    // Its own policy, not the product pages': images are its inline SVG and data: only, never the web's.
    expect(response.headers.get("content-security-policy")).toContain("default-src 'none'");
    expect(response.headers.get("content-security-policy")).toContain("img-src data:;");
    expect(response.headers.get("content-security-policy")).not.toContain("https:");
    expect(response.headers.get("x-content-type-options")).toBe("nosniff");
    const html = await response.text();
    expect(html).toContain("<svg");
    expect(html).toMatch(/<path d="M[\d.]+ [\d.]+/);
    expect(html).not.toMatch(/<script/i);
    expect(html).not.toMatch(/<link[^>]+stylesheet/i);
    expect(html).toContain("Hot products");
    expect(html).toMatch(/<span class="pill ok">closed<\/span>/);
  });

  it("wants the purge token: 401 with a Bearer challenge and a readable reason without it or with a wrong one", async () => {
    for (const path of ["/__status", "/__status.json"]) {
      const none = await worker.fetch(path);
      expect(none.status).toBe(401);
      expect(none.headers.get("cache-control")).toBe("no-store");
      // RFC 9110: a 401 carries a challenge; the body says what is wrong and what to send.
      expect(none.headers.get("www-authenticate")).toBe('Bearer realm="edge-product-pages admin"');
      expect(await none.json()).toEqual({ error: "unauthorized", message: "send Authorization: Bearer <PURGE_TOKEN>" });
      const wrong = await worker.fetch(path, { headers: { authorization: "Bearer not-the-token" } });
      expect(wrong.status).toBe(401);
      expect(wrong.headers.get("www-authenticate")).toBe('Bearer realm="edge-product-pages admin", error="invalid_token"');
      expect(wrong.headers.get("cache-control")).toBe("no-store");
      expect(((await wrong.json()) as { message: string }).message).toMatch(/^invalid token: send Authorization: Bearer <PURGE_TOKEN>/);
      const malformed = await worker.fetch(path, { headers: { authorization: "Basic eDp5" } });
      expect(malformed.status).toBe(400);
      expect(malformed.headers.get("www-authenticate")).toBe('Bearer realm="edge-product-pages admin", error="invalid_request"');
      expect(((await malformed.json()) as { error: string }).error).toBe("bad_request");
    }
  });

  it("looks right in Chromium (screenshot in test/artifacts/status.png)", async (context) => {
    if (!existsSync(CHROMIUM)) return context.skip();
    // Some traffic of every kind, so that the page has something to show.
    const ids = completeProducts(6200, 8);
    for (let round = 0; round < 5; round++) {
      await Promise.all(ids.slice(0, 8 - round).map((id) => page(worker, `/products/${id}`)));
    }
    await page(worker, "/products/p-999998");

    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--headless", "--no-sandbox", "--disable-gpu"], headless: true });
    try {
      const browserContext = await browser.newContext({ viewport: { width: 1280, height: 900 }, extraHTTPHeaders: AUTH, deviceScaleFactor: 1 });
      const tab = await browserContext.newPage();
      const problems: string[] = [];
      tab.on("console", (message) => message.type() === "error" && problems.push(message.text()));
      tab.on("pageerror", (error) => problems.push(error.message));
      tab.on("requestfailed", (request) => problems.push(`request failed: ${request.url()}`));
      const response = await tab.goto(`${worker.url}/__status`, { waitUntil: "load" });
      expect(response?.status()).toBe(200);
      const layout = (await tab.evaluate(`({
        overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
        h1: [...document.querySelectorAll("h1")].map((h) => h.textContent),
        svgWidth: document.querySelector(".chart svg").getBoundingClientRect().width,
        scripts: document.scripts.length,
      })`)) as { overflow: number; h1: string[]; svgWidth: number; scripts: number };
      expect(problems).toEqual([]);
      expect(layout.overflow).toBeLessThanOrEqual(0);
      expect(layout.h1).toEqual(["Status of this isolate"]);
      expect(layout.svgWidth).toBeGreaterThan(400);
      expect(layout.scripts).toBe(0);
      mkdirSync(dirname(SCREENSHOT), { recursive: true });
      await tab.screenshot({ path: SCREENSHOT, fullPage: true });
    } finally {
      await browser.close();
    }
  });
});

describe("status page without a purge token", () => {
  let stack: Stack;
  let worker: WorkerInstance;
  beforeAll(async () => {
    stack = await startStack();
    worker = await startWorker({ ...stack.bindings, PURGE_TOKEN: undefined });
  });
  afterAll(async () => {
    await worker?.close();
    await stack?.close();
  });

  it("does not exist: 404 for everyone", async () => {
    for (const path of ["/__status", "/__status.json"]) {
      expect((await worker.fetch(path)).status).toBe(404);
      expect((await worker.fetch(path, { headers: AUTH })).status).toBe(404);
    }
  });
});

describe("status page when Redis dies", () => {
  let stack: Stack;
  let worker: WorkerInstance;
  beforeAll(async () => {
    stack = await startStack();
    worker = await startWorker({ ...stack.bindings, L2_TIMEOUT_MS: "300" });
  });
  afterAll(async () => {
    await worker?.close();
    await stack?.close();
  });

  it("shows the L2 breaker open", async () => {
    const ids = completeProducts(6300, 6);
    expect((await page(worker, `/products/${ids[0]}`)).status).toBe(200);
    expect((await status(worker)).l2.shards[0]!.state).toBe("closed");

    await stack.redis.kill();
    // Cold pages make L2 calls; failed calls open the breaker (5 in a row).
    let next = 1;
    await waitFor(
      "the L2 breaker to open",
      async () => {
        if (next < ids.length) expect((await page(worker, `/products/${ids[next++]}`)).status).toBe(200);
        return (await status(worker)).l2.shards[0]!.state === "open";
      },
      15_000,
    );

    const model = await status(worker);
    expect(model.l2.shards[0]).toMatchObject({ name: "l2", state: "open" });
    expect(model.l2.shards[0]!.since).not.toBeNull();
    expect(model.l2.stats!.failures).toBeGreaterThanOrEqual(5);
    expect(model.breakerChanges).toContainEqual(expect.objectContaining({ name: "l2:l2", state: "open" }));
    const html = await (await worker.fetch("/__status", { headers: AUTH })).text();
    expect(html).toMatch(/<td>l2<\/td><td><span class="pill bad">open<\/span>/);
  });
});
