// The demo origin over real HTTP: the contract's shapes, the catalog's rules,
// the admin endpoints (counters, faults, changes and the purge calls they make).
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { Inventory, Product, Recommendations, ReviewsSummary } from "../../src/origin/types";
import { isValidProductId } from "../../src/origin/types";
import {
  HOSTILE_DESCRIPTION_MARKUP,
  HOSTILE_TITLE_MARKUP,
  indexOf,
  inventoryFor,
  productFor,
  productId,
  recommendationsFor,
  reviewsFor,
} from "../../dev/origin/catalog";
import { startDemoOrigin, type DemoOrigin } from "../../dev/origin/index";
import { eachResource } from "../support/fakes";

const CATALOG_SIZE = 2500;

let origin: DemoOrigin;

beforeAll(async () => {
  origin = await startDemoOrigin({ catalogSize: CATALOG_SIZE, latencyMs: 0, jitterMs: 0 });
});
afterAll(() => origin.close());
beforeEach(() => call("POST", "/__admin/reset"));

async function call(method: string, path: string, body?: unknown, base = origin.url) {
  const response = await fetch(base + path, {
    method,
    ...(body !== undefined && { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text ? (JSON.parse(text) as any) : null };
}

const get = (path: string) => call("GET", path);

/** `call` against another origin than the shared one. */
const callOn = (base: string) => (method: string, path: string, body?: unknown) => call(method, path, body, base);

// ---------------------------------------------------------------- contract shapes

function expectMoney(value: unknown) {
  expect(value).toEqual({ amount: expect.any(Number), currency: "USD" });
  expect(Number.isInteger((value as { amount: number }).amount)).toBe(true);
}

function expectRfc3339(value: unknown) {
  expect(value).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);
  expect(Number.isNaN(Date.parse(value as string))).toBe(false);
}

function expectProduct(p: Product, id: string) {
  expect(p.id).toBe(id);
  for (const key of ["title", "description", "brand"] as const) expect(typeof p[key]).toBe("string");
  expect(p.title.length).toBeGreaterThan(0);
  expect(p.category.length).toBeGreaterThanOrEqual(2);
  expect(p.category.length).toBeLessThanOrEqual(3);
  expectMoney(p.price);
  if (p.compareAtPrice !== undefined) {
    expectMoney(p.compareAtPrice);
    expect(p.compareAtPrice.amount).toBeGreaterThan(p.price.amount);
  }
  expect(p.images.length).toBeGreaterThanOrEqual(1);
  expect(p.images.length).toBeLessThanOrEqual(4);
  for (const image of p.images) {
    expect(image.url.startsWith(`${origin.url}/images/${id}/`)).toBe(true);
    expect(typeof image.alt).toBe("string");
  }
  for (const value of Object.values(p.attributes)) expect(typeof value).toBe("string");
  expect(p.tags).toEqual(expect.arrayContaining([expect.stringMatching(/^brand:/), expect.stringMatching(/^cat:/)]));
  expect(p.version).toBe(1);
  expectRfc3339(p.updatedAt);
}

function expectInventory(inv: Inventory, id: string) {
  expect(inv.id).toBe(id);
  expect(Number.isInteger(inv.available)).toBe(true);
  expect(inv.available).toBeGreaterThanOrEqual(0);
  expect(inv.available).toBeLessThanOrEqual(50);
  const status = inv.available === 0 ? "out_of_stock" : inv.available < 5 ? "low_stock" : "in_stock";
  expect(inv.status).toBe(status);
  expect(inv.version).toBe(1);
  expectRfc3339(inv.updatedAt);
}

function expectReviews(r: ReviewsSummary, id: string) {
  expect(r.id).toBe(id);
  expect(r.rating).toBeGreaterThanOrEqual(1);
  expect(r.rating).toBeLessThanOrEqual(5);
  expect(Number.isInteger(r.count)).toBe(true);
  expect(r.top.length).toBeGreaterThanOrEqual(1);
  expect(r.top.length).toBeLessThanOrEqual(Math.min(3, r.count));
  for (const review of r.top) {
    expect(review).toEqual({
      author: expect.any(String),
      rating: expect.any(Number),
      title: expect.any(String),
      body: expect.any(String),
    });
  }
  expect(r.version).toBe(1);
}

function expectRecommendations(r: Recommendations, id: string) {
  expect(r.id).toBe(id);
  expect(r.items.length).toBeGreaterThanOrEqual(1);
  expect(r.items.length).toBeLessThanOrEqual(8);
  expect(new Set(r.items.map((item) => item.id)).size).toBe(r.items.length);
  for (const item of r.items) {
    expect(item.id).not.toBe(id);
    expect(indexOf(item.id, CATALOG_SIZE)).not.toBeNull();
    expect(typeof item.title).toBe("string");
    expectMoney(item.price);
    expect(item.image).toBe(`${origin.url}/images/${item.id}/1.svg`);
  }
  expect(r.version).toBe(1);
}

describe("settings", () => {
  it("names a bad setting as the operator sets it, with the value given", async () => {
    await expect(startDemoOrigin({ catalogSize: 0 })).rejects.toThrow(/^CATALOG_SIZE \(--catalog-size\) must be a whole number from 1 to [\d]+, got 0$/);
    await expect(startDemoOrigin({ latencyMs: -5 })).rejects.toThrow(/^ORIGIN_LATENCY_MS \(--latency\) must be from 0 to \d+ ms, got -5$/);
    await expect(startDemoOrigin({ jitterMs: Number.NaN })).rejects.toThrow(/^ORIGIN_JITTER_MS \(--jitter\) must be/);
  });
});

describe("catalog ids", () => {
  it("spells ids p- and six digits, and parses only that spelling within the catalog", () => {
    expect(productId(1)).toBe("p-000001");
    expect(productId(1_000_000)).toBe("p-1000000");
    expect(indexOf("p-000001")).toBe(1);
    expect(indexOf("p-1000000")).toBe(1_000_000);
    for (const bad of ["p-1", "p-0000001", "p-000000", "p-1000001", "x-000001", "p-00000a", ""]) {
      expect(indexOf(bad)).toBeNull();
    }
    expect(indexOf("p-002501", CATALOG_SIZE)).toBeNull();
    expect(indexOf("p-002500", CATALOG_SIZE)).toBe(2500);
  });
});

describe("services", () => {
  it("serves the same JSON for the same id, computed from the index", async () => {
    const first = await get("/products/p-000041");
    const second = await get("/products/p-000041");
    expect(first.status).toBe(200);
    expect(first.headers.get("content-type")).toBe("application/json");
    expect(second.body).toEqual(first.body);
    expect(first.body).toEqual(productFor(41, origin.url));
    expect((await get("/inventory/p-000041")).body).toEqual(inventoryFor(41));
    expect((await get("/reviews/p-000041/summary")).body).toEqual(reviewsFor(41));
    expect((await get("/recommendations/p-000041")).body).toEqual(recommendationsFor(41, CATALOG_SIZE, origin.url));
  });

  it("answers every service in the contract's shapes", async () => {
    for (let index = 1; index <= 40; index++) {
      const id = productId(index);
      const [product, inventory, reviews, recommendations] = await Promise.all([
        get(`/products/${id}`),
        get(`/inventory/${id}`),
        get(`/reviews/${id}/summary`),
        get(`/recommendations/${id}`),
      ]);
      expect(product.status).toBe(200);
      expectProduct(product.body, id);
      expect(inventory.status).toBe(200);
      expectInventory(inventory.body, id);
      if (index % 5 === 0) expect(reviews).toMatchObject({ status: 404, body: { error: "not_found" } });
      else expectReviews(reviews.body, id);
      if (index % 7 === 0) expect(recommendations).toMatchObject({ status: 404, body: { error: "not_found" } });
      else expectRecommendations(recommendations.body, id);
    }
  });

  it("varies the data: some products on sale, some out of stock", () => {
    const products = Array.from({ length: 500 }, (_, i) => productFor(i + 1, origin.url));
    const onSale = products.filter((p) => p.compareAtPrice).length;
    expect(onSale).toBeGreaterThan(150);
    expect(onSale).toBeLessThan(350);
    expect(new Set(products.map((p) => p.brand)).size).toBeGreaterThan(5);
    const statuses = new Set(Array.from({ length: 500 }, (_, i) => inventoryFor(i + 1).status));
    expect(statuses).toEqual(new Set(["in_stock", "low_stock", "out_of_stock"]));
  });

  it("answers 404 not_found for unknown, out-of-range and malformed ids", async () => {
    const paths = [
      "/products/p-002501",
      "/products/p-1",
      "/products/bad%20id",
      "/products/%3Cscript%3E",
      "/products/",
      "/inventory/p-999999",
      "/reviews/p-000005/summary",
      "/reviews/nope/summary",
      "/recommendations/p-000007",
      `/recommendations/${"a".repeat(50)}`,
      "/nowhere",
    ];
    for (const path of paths) {
      const response = await get(path);
      expect(response.status, path).toBe(404);
      expect(response.body).toEqual({ error: "not_found" });
      expect(response.headers.get("content-type")).toBe("application/json");
    }
  });

  it("puts hostile and non-ASCII text where pages must escape it", async () => {
    const hostile = (await get("/products/p-000003")).body as Product;
    expect(hostile.title).toContain(HOSTILE_TITLE_MARKUP);
    expect(hostile.title).toMatch(/".*&/);
    const description = (await get("/products/p-000007")).body as Product;
    expect(description.description).toContain(HOSTILE_DESCRIPTION_MARKUP);
    expect(description.description).toContain("日本語");
    expect(description.description).toMatch(/é.*ü/);
    const authors = Array.from({ length: 200 }, (_, i) => reviewsFor(i + 1)?.top ?? []).flat();
    expect(authors.some((review) => review.author.includes("<b>"))).toBe(true);
    expect(authors.some((review) => /[^\x00-\x7f]/.test(review.author))).toBe(true);
  });

  it("serves the image placeholders that product images point at", async () => {
    const response = await fetch(`${origin.url}/images/p-000001/1.svg`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("image/svg+xml");
    expect(response.headers.get("cache-control")).toBe("public, max-age=86400");
    expect(await response.text()).toContain("p-000001");
    expect((await fetch(`${origin.url}/images/p-000001/x.svg`)).status).toBe(404);
  });
});

describe("listing", () => {
  it("pages through exactly the catalog's ids, without duplicates", async () => {
    const ids: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query: string = cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`;
      const page = await get(`/products?limit=1000${query}`);
      expect(page.status).toBe(200);
      ids.push(...page.body.ids);
      cursor = page.body.next;
      pages++;
    } while (cursor !== null);
    expect(pages).toBe(3);
    expect(ids.length).toBe(CATALOG_SIZE);
    expect(new Set(ids).size).toBe(CATALOG_SIZE);
    expect(ids).toEqual(Array.from({ length: CATALOG_SIZE }, (_, i) => productId(i + 1)));
  });

  it("defaults to 100 ids and rejects bad limits and cursors with 400", async () => {
    const first = await get("/products");
    expect(first.body.ids).toHaveLength(100);
    expect(typeof first.body.next).toBe("string");
    for (const query of ["limit=0", "limit=1001", "limit=abc", "limit=-5", "limit=1.5", "cursor=garbage"]) {
      const response = await get(`/products?${query}`);
      expect(response.status, query).toBe(400);
      expect(response.body.error).toBe("bad_request");
    }
  });
});

describe("counters", () => {
  it("counts every request each service received, 404s included, and resets", async () => {
    await get("/products/p-000001");
    await get("/products/p-000001");
    await get("/products/p-009999");
    await get("/inventory/p-000001");
    await get("/reviews/p-000005/summary");
    await get("/recommendations/p-000002");
    await get("/products?limit=10");
    await get("/products/bad%20id");

    const counters = (await get("/__admin/counters")).body;
    expect(counters.total).toBe(8);
    expect(counters.services).toEqual({ ...eachResource(0), product: 4, inventory: 1, reviews: 1, recommendations: 1, listing: 1 });
    expect(counters.ids).toEqual({
      "product:p-000001": 2,
      "product:p-009999": 1,
      "inventory:p-000001": 1,
      "reviews:p-000005": 1,
      "recommendations:p-000002": 1,
    });

    expect((await call("POST", "/__admin/counters/reset")).status).toBe(200);
    expect((await get("/__admin/counters")).body).toEqual({
      total: 0,
      services: eachResource(0),
      ids: {},
    });
  });
});

describe("faults", () => {
  afterEach(() => call("DELETE", "/__admin/faults"));

  it("answers 500 when a service is down, and only that service", async () => {
    await call("PUT", "/__admin/faults", { service: "product", down: "500" });
    expect((await get("/products/p-000001")).status).toBe(500);
    expect((await get("/inventory/p-000001")).status).toBe(200);
    expect((await get("/__admin/faults")).body.product).toEqual({ latencyMs: 0, errorRate: 0, down: "500", unknownIdStatus: 404, canonicalIds: false });
    // Failures are counted too, and per product as failed: a herd's bound is on answered fetches.
    const counters = (await get("/__admin/counters")).body;
    expect(counters.services.product).toBe(1);
    expect([counters.ids["product:p-000001"], counters.ids["product:p-000001:failed"], counters.ids["inventory:p-000001:failed"]]).toEqual([1, 1, undefined]);
  });

  it("fails the given fraction of requests with errorRate", async () => {
    await call("PUT", "/__admin/faults", { service: "inventory", errorRate: 1 });
    const response = await get("/inventory/p-000001");
    expect(response.status).toBe(500);
    expect(response.body).toEqual({ error: "injected_failure" });
    await call("PUT", "/__admin/faults", { service: "inventory", errorRate: 0 });
    expect((await get("/inventory/p-000001")).status).toBe(200);
  });

  it("destroys the connection with refuse", async () => {
    await call("PUT", "/__admin/faults", { service: "reviews", down: "refuse" });
    await expect(fetch(`${origin.url}/reviews/p-000001/summary`)).rejects.toThrow();
    expect((await get("/products/p-000001")).status).toBe(200);
  });

  it("adds fault latency on top of the base latency", async () => {
    await call("PUT", "/__admin/faults", { service: "recommendations", latencyMs: 200 });
    const started = performance.now();
    expect((await get("/recommendations/p-000001")).status).toBe(200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
  });

  it("hangs until the client gives up, and answers once the fault is cleared", async () => {
    await call("PUT", "/__admin/faults", { service: "all", down: "hang" });
    const timedOut = fetch(`${origin.url}/products/p-000001`, { signal: AbortSignal.timeout(300) });
    await expect(timedOut).rejects.toMatchObject({ name: "TimeoutError" });

    // Admin endpoints are never slowed by faults.
    expect((await get("/__admin/faults")).body.listing.down).toBe("hang");
    const waiting = get("/inventory/p-000001");
    await new Promise((resolve) => setTimeout(resolve, 100));
    await call("DELETE", "/__admin/faults");
    expect((await waiting).status).toBe(200);
  });

  it("answers ids it has nothing for with unknownIdStatus instead of 404, and known ids as before", async () => {
    await call("PUT", "/__admin/faults", { service: "product", unknownIdStatus: 422 });
    expect(await get("/products/junk-1")).toMatchObject({ status: 422, body: { error: "invalid_id" } });
    expect((await get("/products/p-000001")).status).toBe(200);
    // Only the service named: the others still say 404.
    expect((await get("/inventory/junk-1")).status).toBe(404);
  });

  it("with canonicalIds, answers an id in another case with the catalog's spelling", async () => {
    await call("PUT", "/__admin/faults", { service: "product", canonicalIds: true });
    const answer = await get("/products/P-000001");
    expect(answer.status).toBe(200);
    expect(answer.body.id).toBe("p-000001");
    await call("DELETE", "/__admin/faults");
    expect((await get("/products/P-000001")).status).toBe(404);
  });

  it("rejects bad fault settings with 400", async () => {
    const bad = [
      { service: "nope" },
      { service: "product", down: "sometimes" },
      { service: "product", errorRate: 2 },
      { service: "product", unknownIdStatus: 500 },
      { service: "product", unknownIdStatus: 200 },
      { service: "product", canonicalIds: "yes" },
      "[]",
    ];
    for (const body of bad) expect((await call("PUT", "/__admin/faults", body)).status).toBe(400);
  });

  it("changes the base latency", async () => {
    const answer = await call("POST", "/__admin/latency", { latencyMs: 150, jitterMs: 0 });
    expect(answer.body).toEqual({ latencyMs: 150, jitterMs: 0 });
    try {
      const started = performance.now();
      await get("/products/p-000001");
      expect(performance.now() - started).toBeGreaterThanOrEqual(140);
    } finally {
      await call("POST", "/__admin/latency", { latencyMs: 0, jitterMs: 0 });
    }
  });
});

/** A stand-in for the tier's purge endpoint: records requests, answers the given statuses in turn. */
async function startRecorder(statuses: number[] = []) {
  const requests: { method: string; url: string; authorization: string | undefined; body: unknown }[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      requests.push({
        method: req.method ?? "",
        url: req.url ?? "",
        authorization: req.headers.authorization,
        body: JSON.parse(Buffer.concat(chunks).toString("utf8")),
      });
      const status = statuses.shift() ?? 200;
      // As the tier's endpoints do when Redis could not record: retry, in a second.
      res.writeHead(status, { "content-type": "application/json", ...(status === 503 ? { "retry-after": "1" } : {}) });
      res.end('{"ok":true}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return { url, requests, close };
}

describe("changes", () => {
  it("bumps the version on a price change and calls the purge endpoint with the token", async () => {
    const recorder = await startRecorder();
    const shop = await startDemoOrigin({
      catalogSize: 100,
      latencyMs: 0,
      jitterMs: 0,
      purgeUrl: `${recorder.url}/__purge`,
      purgeToken: "s3cret",
    });
    const shopCall = callOn(shop.url);
    try {
      const before = (await shopCall("GET", "/products/p-000010")).body as Product;
      const changed = await shopCall("POST", "/__admin/products/p-000010", { price: 1234 });
      expect(changed.status).toBe(200);
      const price = { amount: 1234, currency: "USD" };
      expect(changed.body.product).toMatchObject({ id: "p-000010", price, version: 2 });
      expect(changed.body.product.updatedAt).not.toBe(before.updatedAt);
      expect(changed.body.inventory.version).toBe(1);
      expect(changed.body.purge).toEqual({ status: 200 });
      expect(recorder.requests).toEqual([{ method: "POST", url: "/__purge", authorization: "Bearer s3cret", body: { ids: ["p-000010"] } }]);
      const after = (await shopCall("GET", "/products/p-000010")).body as Product;
      expect(after).toEqual({ ...before, price, version: 2, updatedAt: after.updatedAt });

      const restocked = await shopCall("POST", "/__admin/products/p-000010", { available: 0, title: "Renamed" });
      expect(restocked.body.inventory).toMatchObject({ available: 0, status: "out_of_stock", version: 2 });
      expect(restocked.body.product).toMatchObject({ title: "Renamed", version: 3 });
      expect(recorder.requests).toHaveLength(2);
    } finally {
      await shop.close();
      await recorder.close();
    }
  });

  it("retries a failing purge endpoint and reports what came of it", async () => {
    const recorder = await startRecorder([503, 503]);
    const shop = await startDemoOrigin({ catalogSize: 100, latencyMs: 0, purgeUrl: recorder.url, purgeToken: "t" });
    try {
      const changed = await callOn(shop.url)("POST", "/__admin/products/p-000001", { price: 100 });
      expect(changed.body.purge).toEqual({ status: 200 });
      expect(recorder.requests).toHaveLength(3);
    } finally {
      await shop.close();
    }
    // Failing for longer than the quick retries (Redis down at the tier): the call says so, and the notifier goes on
    // in the background at the pace the tier's Retry-After asks, until the tier takes it.
    const outage = await startRecorder([503, 503, 503, 503, 503]);
    const during = await startDemoOrigin({ catalogSize: 100, latencyMs: 0, purgeUrl: outage.url, purgeToken: "t" });
    try {
      const changed = await callOn(during.url)("POST", "/__admin/products/p-000002", { price: 200 });
      expect(changed.body.purge).toEqual({ status: 503, error: "HTTP 503", retrying: true });
      expect(outage.requests).toHaveLength(4);
      const deadline = Date.now() + 5_000;
      while (outage.requests.length < 6 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(outage.requests.map((request) => request.body)).toEqual(Array.from({ length: 6 }, () => ({ ids: ["p-000002"] })));
      // Taken (the 6th answered 200): no more attempts.
      await new Promise((resolve) => setTimeout(resolve, 1_200));
      expect(outage.requests).toHaveLength(6);
    } finally {
      await during.close();
      await outage.close();
    }
    // Nobody listening any more: every attempt fails.
    const orphan = await startDemoOrigin({ catalogSize: 100, latencyMs: 0, purgeUrl: recorder.url });
    await recorder.close();
    try {
      const changed = await callOn(orphan.url)("POST", "/__admin/products/p-000001", { price: 100 });
      expect(changed.status).toBe(200);
      expect(changed.body.purge).toMatchObject({ status: null, error: expect.any(String) });
    } finally {
      await orphan.close();
    }
  });

  it("creates products, lists them after the catalog and tells the tier", async () => {
    const recorder = await startRecorder();
    const shop = await startDemoOrigin({
      catalogSize: 3,
      latencyMs: 0,
      purgeUrl: `${recorder.url}/__purge`,
      knownIdsUrl: `${recorder.url}/__known-ids`,
      purgeToken: "tok",
    });
    const shopCall = callOn(shop.url);
    try {
      const title = "Fresh <b>thing</b>";
      const created = await shopCall("POST", "/__admin/products", { id: "new-1", title, price: 999 });
      expect(created.status).toBe(201);
      expect(created.body.knownIds).toEqual({ status: 200 });
      expect(recorder.requests.map((r) => [r.url, r.authorization, r.body])).toEqual([
        ["/__known-ids", "Bearer tok", { ids: ["new-1"] }],
        ["/__purge", "Bearer tok", { ids: ["new-1"] }],
      ]);
      const product = await shopCall("GET", "/products/new-1");
      expect(product.body).toMatchObject({ id: "new-1", title, price: { amount: 999 }, version: 1 });
      expect((await shopCall("GET", "/inventory/new-1")).body.available).toBeGreaterThan(0);
      expect((await shopCall("GET", "/reviews/new-1/summary")).status).toBe(404);
      const first = await shopCall("GET", "/products?limit=2");
      expect(first.body.ids).toEqual(["p-000001", "p-000002"]);
      const rest = await shopCall("GET", `/products?limit=2&cursor=${first.body.next}`);
      expect(rest.body).toEqual({ ids: ["p-000003", "new-1"], next: null });

      expect((await shopCall("POST", "/__admin/products", { id: "new-1", title: "Again", price: 1 })).status).toBe(409);
      expect((await shopCall("POST", "/__admin/products", { id: "bad id", title: "x", price: 1 })).status).toBe(400);

      await shopCall("POST", "/__admin/reset");
      expect((await shopCall("GET", "/products/new-1")).status).toBe(404);
    } finally {
      await shop.close();
      await recorder.close();
    }
  });

  it("rejects bad admin input without falling over", async () => {
    expect((await call("POST", "/__admin/products/p-000001", "{not json")).status).toBe(400);
    expect((await call("POST", "/__admin/products/p-000001", {})).status).toBe(400);
    expect((await call("POST", "/__admin/products/p-000001", { price: -1 })).status).toBe(400);
    expect((await call("POST", "/__admin/products/p-000001", { price: 1.5 })).status).toBe(400);
    expect((await call("POST", "/__admin/products/p-000001", { title: "" })).status).toBe(400);
    expect((await call("POST", "/__admin/products/p-999999", { price: 1 })).status).toBe(404);
    expect((await call("POST", "/__admin/products/p-000001", { title: "x".repeat(70 * 1024) })).status).toBe(413);
    expect((await call("GET", "/__admin/nothing")).status).toBe(404);
    expect((await call("POST", "/products/p-000001")).status).toBe(405);
    expect((await get("/products/p-000001")).status).toBe(200);
  });

  it("says what was wrong in an {error, message} body", async () => {
    expect(await call("POST", "/__admin/products/p-000001", { price: "12" })).toMatchObject({
      status: 400,
      body: { error: "bad_request", message: expect.stringMatching(/^price: /) },
    });
    expect((await call("POST", "/__admin/latency", "[]")).body).toEqual({ error: "bad_request", message: "body must be a JSON object" });
    expect((await get("/products?limit=5&limit=6")).body).toMatchObject({ error: "bad_request", message: expect.stringMatching(/^limit: /) });
    // Without a content-length the cap holds as the body streams in.
    const chunks = [new TextEncoder().encode(`{"title":"${"x".repeat(70 * 1024)}"}`)];
    const streamed = await fetch(`${origin.url}/__admin/products/p-000001`, {
      method: "POST",
      body: new ReadableStream({ pull: (controller) => (chunks.length ? controller.enqueue(chunks.shift()) : controller.close()) }),
      duplex: "half",
    } as RequestInit);
    expect(streamed.status).toBe(413);
    expect(await streamed.json()).toMatchObject({ error: "payload_too_large" });
  });
});

describe("lifecycle", () => {
  it("starts a catalog of a million products at once", async () => {
    const started = performance.now();
    const big = await startDemoOrigin({ catalogSize: 1_000_000, latencyMs: 0 });
    try {
      expect(performance.now() - started).toBeLessThan(500);
      const last = await callOn(big.url)("GET", "/products/p-1000000");
      expect(last.status).toBe(200);
      expect(last.body.id).toBe("p-1000000");
      expect(isValidProductId(last.body.id)).toBe(true);
      expect((await callOn(big.url)("GET", "/products/p-1000001")).status).toBe(404);
    } finally {
      await big.close();
    }
  });

  it("closes keep-alive sockets and hanging requests", async () => {
    const shop = await startDemoOrigin({ catalogSize: 10, latencyMs: 0 });
    const shopCall = callOn(shop.url);
    await shopCall("GET", "/products/p-000001"); // leaves a keep-alive socket
    await shopCall("PUT", "/__admin/faults", { service: "product", down: "hang" });
    const hanging = fetch(`${shop.url}/products/p-000001`);
    hanging.catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const started = performance.now();
    await shop.close();
    expect(performance.now() - started).toBeLessThan(1000);
    await expect(hanging).rejects.toThrow();
  });

  it("refuses bad options", async () => {
    await expect(startDemoOrigin({ catalogSize: 0 })).rejects.toThrow(RangeError);
    await expect(startDemoOrigin({ catalogSize: 1_000_001 })).rejects.toThrow(RangeError);
  });
});
