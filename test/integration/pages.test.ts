// The tier end to end: the bundled worker in the Workers runtime (miniflare),
// a real redis-server behind the Upstash REST gateway, and the demo origin.
import { parseList } from "structured-headers";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startStack, type Stack } from "../support/stack";
import { startWorker, type WorkerInstance } from "../support/worker";
import { escapeHtml, health } from "../support/faults";

let stack: Stack;
let worker: WorkerInstance;

beforeAll(async () => {
  stack = await startStack();
  worker = await startWorker(stack.bindings);
});

afterAll(async () => {
  await worker?.close();
  await stack?.close();
});

beforeEach(async () => {
  await stack.admin("/__admin/counters/reset", { method: "POST" });
});

describe("product pages", () => {
  it("renders a complete product page from the origin's data", async () => {
    const product = (await (await fetch(`${stack.origin.url}/products/p-000001`)).json()) as { title: string; images: { url: string }[] };
    const response = await worker.fetch("/products/p-000001");
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/html");
    // Its main image, preloaded: Cloudflare sends a 103 Early Hints from this header before the page.
    expect(response.headers.get("link")).toBe(`<${product.images[0]!.url}>; rel=preload; as=image`);
    const html = await response.text();
    expect(html).toContain("<h1");
    expect(html).toContain("application/ld+json");
    // The title is there, HTML-escaped as the template engine does it.
    expect(html).toContain(escapeHtml(product.title));
  });

  it("shows a hostile title as text, never as markup", async () => {
    const response = await worker.fetch("/products/p-000003");
    expect(response.status).toBe(200);
    const html = await response.text();
    expect(html).not.toContain("<script>alert(1)</script>");
    expect(html).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
  });

  it("answers an unknown product with the 404 page, and remembers that it is absent", async () => {
    const first = await worker.fetch("/products/p-999999");
    expect(first.status).toBe(404);
    expect(await first.text()).toContain("<h1>Product not found</h1>");
    // Cache-Status gives the origin's own status for what it said (RFC 9211 fwd-status).
    expect(first.headers.get("cache-status")).toMatch(/^pp-origin; fwd=uri-miss; fwd-status=404; stored; ttl=\d+; detail="product absent"/);
    const second = await worker.fetch("/products/p-999999");
    expect(second.status).toBe(404);
    const counters = await stack.counters();
    expect(counters.ids["product:p-999999"]).toBe(1);
  });

  it.each([
    ["bad characters", "/products/p%3Cscript%3E"],
    ["too long", `/products/${"a".repeat(41)}`],
    ["leading dash", "/products/-p1"],
    ["encoded path trick", "/products/..%2F..%2Fetc%2Fpasswd"],
    ["NUL byte", "/products/p-1%00"],
    ["space", "/products/p%201"],
    ["unicode look-alike", "/products/p%E2%80%90000001"],
  ])("rejects a malformed id (%s) without touching Redis or the origin", async (_name, path) => {
    const response = await worker.fetch(path);
    expect([400, 404]).toContain(response.status);
    const body = await response.text();
    expect(body).toContain("<html");
    expect(body).not.toMatch(/Error:|at .*\(.*\.js/);
    expect((await stack.counters()).total).toBe(0);
  });

  it("serves the second request for a product from L1: no origin fetch, no L2 read", async () => {
    const first = await worker.fetch("/products/p-000010");
    const firstHtml = await first.text();
    const before = await stack.counters();
    const second = await worker.fetch("/products/p-000010");
    expect(second.status).toBe(200);
    expect(second.headers.get("content-type")).toBe("text/html; charset=UTF-8");
    // The rendered page is kept as bytes and given to every answer whole, concurrent ones included.
    const again = await Promise.all(Array.from({ length: 5 }, () => worker.fetch("/products/p-000010").then((res) => res.text())));
    expect([await second.text(), ...again]).toEqual(Array(6).fill(firstHtml));
    expect(second.headers.get("cache-status")).toMatch(/pp-l1; hit; ttl=\d+; detail="product"/);
    expect(second.headers.get("cache-status")).not.toMatch(/pp-l2|pp-origin/);
    expect((await stack.counters()).total).toBe(before.total);
  });

  it("serves a second runtime instance from L2, without an origin fetch", async () => {
    const first = await worker.fetch("/products/p-000020");
    expect(first.headers.get("cache-status")).toMatch(/pp-origin; fwd=uri-miss; fwd-status=200; stored/);
    // A valid RFC 8941 list, one member per resource, as a structured-field parser reads it.
    expect(parseList(first.headers.get("cache-status")!).map(([, params]) => String(params.get("detail")).split(" ")[0])).toEqual([
      "product",
      "inventory",
      "reviews",
      "recommendations",
    ]);
    expect((await stack.counters()).ids["product:p-000020"]).toBe(1);
    // The first instance writes L2 in the background after answering.
    await waitFor(async () => (await stack.counters()).total > 0);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const other = await startWorker(stack.bindings);
    try {
      const response = await other.fetch("/products/p-000020");
      expect(response.status).toBe(200);
      expect(response.headers.get("cache-status")).toMatch(/pp-l2; hit; ttl=\d+; detail="product"/);
      expect((await stack.counters()).ids["product:p-000020"]).toBe(1);
    } finally {
      await other.close();
    }
  });

  it("answers If-None-Match with 304 and keeps the cache headers", async () => {
    const first = await worker.fetch("/products/p-000030");
    const etag = first.headers.get("etag");
    // Weak: the same page goes out gzipped or not, and a strong validator would name one of the two.
    expect(etag).toMatch(/^W\/"[0-9a-f]{16}"$/);
    const second = await worker.fetch("/products/p-000030", { headers: { "if-none-match": etag! } });
    expect(second.status).toBe(304);
    expect(second.headers.get("etag")).toBe(etag);
    expect(second.headers.get("cache-status")).toContain("pp-l1");
    // A client that kept the tag without its W/ (If-None-Match compares weakly), among others.
    const bare = await worker.fetch("/products/p-000030", { headers: { "if-none-match": `"0000000000000000", ${etag!.slice(2)}` } });
    expect(bare.status).toBe(304);
    expect((await worker.fetch("/products/p-000030", { headers: { "if-none-match": 'W/"0000000000000000"' } })).status).toBe(200);
  });

  it("gives every answer the pages' security headers: a page, its 304, a bad id, an unknown address, the home page, an endpoint refusing", async () => {
    const page = await worker.fetch("/products/p-000031");
    const notModified = await worker.fetch("/products/p-000031", { headers: { "if-none-match": page.headers.get("etag")! } });
    const others = await Promise.all(["/products/not-an-id!", "/no/such/page", "/"].map((path) => worker.fetch(path)));
    const refused = await worker.fetch("/__purge", { method: "POST", body: "{}" });
    expect([page, notModified, ...others].map((answer) => answer.status)).toEqual([200, 304, 400, 404, 200]);
    // The runtime compresses the HTML for clients that accept it: a cache downstream keeps the encodings apart.
    for (const answer of [page, notModified, ...others]) expect(answer.headers.get("vary")).toBe("Accept-Encoding");
    // An address that is no product's is not called a missing product.
    expect(await others[1]!.clone().text()).toContain("<h1>Page not found</h1>");
    expect(refused.status).toBeGreaterThanOrEqual(400);
    for (const answer of [page, notModified, ...others, refused]) {
      expect(answer.headers.get("content-security-policy")).toBe(
        "default-src 'none'; img-src https: http: data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
      );
      expect(answer.headers.get("x-content-type-options")).toBe("nosniff");
      expect(answer.headers.get("referrer-policy")).toBe("no-referrer");
      expect(answer.headers.get("strict-transport-security")).toMatch(/^max-age=\d+/);
    }
  });

  it("says what happened: Server-Timing and Cache-Control", async () => {
    const response = await worker.fetch("/products/p-000040");
    // Only what the Workers clock can measure: the steps that wait on I/O, and the total.
    const timing = response.headers.get("server-timing") ?? "";
    expect(timing).toMatch(/\borigin;dur=\d/);
    expect(timing).toMatch(/\btotal;dur=\d/);
    expect(timing).not.toMatch(/\b(l1|render);/);
    const cached = (await worker.fetch("/products/p-000040")).headers.get("server-timing") ?? "";
    expect(cached).not.toMatch(/\b(l1|l2|origin|render);/);
    expect(response.headers.get("cache-control")).toMatch(/^public, max-age=\d+, s-maxage=\d+, stale-while-revalidate=\d+$/);
  });

  it("serves the same cache entries whatever the query string", async () => {
    await worker.fetch("/products/p-000050");
    const before = (await stack.counters()).total;
    const response = await worker.fetch("/products/p-000050?utm_source=x&__proto__=1");
    expect(response.status).toBe(200);
    expect((await stack.counters()).total).toBe(before);
  });

  it("lists products on the home page and answers /healthz", async () => {
    const home = await worker.fetch("/");
    expect(home.status).toBe(200);
    const html = await home.text();
    expect(html).toContain('href="/products/p-000001"');
    const second = (await (await fetch(`${stack.origin.url}/products/p-000002`)).json()) as { title: string };
    expect(html).toContain(escapeHtml(second.title));
    // Public health says it is up, nothing of what is behind it; L2's state is on the authenticated status.
    expect(await (await worker.fetch("/healthz")).json()).toEqual({ ok: true });
    expect((await health(worker)).l2).toBe("closed");
  });
});

describe("configuration", () => {
  it("names a missing setting in one clear message", async () => {
    const bad = await startWorker({ UPSTASH_REDIS_REST_URL: stack.gateway.url });
    try {
      const response = await bad.fetch("/products/p-000001");
      expect(response.status).toBe(500);
      const text = await response.text();
      expect(text).toContain("ORIGIN_URL");
      expect(text).not.toMatch(/at .*\.js/);
    } finally {
      await bad.close();
    }
  });

  it("names a malformed setting", async () => {
    const bad = await startWorker({ ...stack.bindings, L2_TIMEOUT_MS: "fast" });
    try {
      const text = await (await bad.fetch("/")).text();
      expect(text).toContain("L2_TIMEOUT_MS must be a number");
    } finally {
      await bad.close();
    }
  });

  it("runs without Redis on L1 and the origin", async () => {
    const noL2 = await startWorker({ ORIGIN_URL: stack.origin.url, PUBLIC_URL: stack.bindings.PUBLIC_URL });
    try {
      const response = await noL2.fetch("/products/p-000060");
      expect(response.status).toBe(200);
      expect(await (await noL2.fetch("/healthz")).json()).toEqual({ ok: true });
    } finally {
      await noL2.close();
    }
  });
});

async function waitFor(condition: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
