// The page's own address comes from configuration (PUBLIC_URL), never from
// the request: a Host or X-Forwarded-* header set by a client must not reach
// the canonical, OpenGraph or JSON-LD URL of a page sent `public, s-maxage`
// (the classic cache-poisoning hole, docs/architecture.md#known-pitfalls), and a worker deployed
// without PUBLIC_URL says so instead of falling back to the Host header.
// Real HTTP to workerd, where the request's URL is built from its Host.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { httpGet as get, startHttpWorker } from "../support/clients";
import { selfUrls } from "../support/faults";
import { PUBLIC_URL, startStack, type Stack } from "../support/stack";
import { logFaults, type WorkerInstance } from "../support/worker";

const HOSTILE_HEADERS = {
  host: "evil.example",
  "x-forwarded-host": "evil.example",
  "x-forwarded-proto": "http",
  "x-forwarded-port": "8443",
  forwarded: "host=evil.example;proto=http",
};

let stack: Stack;

beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.close();
});

describe("a page's own URL with PUBLIC_URL set", () => {
  let worker: WorkerInstance;

  beforeAll(async () => {
    worker = await startHttpWorker(stack.bindings);
  });
  afterAll(async () => {
    await worker?.close();
    expect(logFaults(worker)).toEqual([]);
  });

  it("is PUBLIC_URL in canonical, og:url and JSON-LD whatever Host and X-Forwarded-* say, and the page is the same", async () => {
    const id = "p-000101";
    const expected = `${PUBLIC_URL}/products/${id}`;

    const plain = await get(worker.url!, `/products/${id}`);
    const hostile = await get(worker.url!, `/products/${id}`, HOSTILE_HEADERS);
    for (const answer of [plain, hostile]) {
      expect(answer.status).toBe(200);
      expect(answer.headers["cache-control"]).toMatch(/^public, /);
      expect(selfUrls(answer.body)).toEqual({ canonical: expected, ogUrl: expected, jsonLd: expected, jsonLdOffer: expected });
    }
    expect(hostile.body).not.toContain("evil.example");
    // Not a variant of its own: the same bytes and validator as anyone else's page.
    expect(hostile.body).toBe(plain.body);
    expect(hostile.headers.etag).toBe(plain.headers.etag);
    expect(hostile.headers["cache-status"]).toMatch(/pp-l1; hit/);
  });

  it("does not follow Host on the Workers runtime's own dispatch either", async () => {
    const response = await worker.fetch("/products/p-000102", { headers: HOSTILE_HEADERS });
    expect(response.status).toBe(200);
    const html = await response.text();
    expect(selfUrls(html).canonical).toBe(`${PUBLIC_URL}/products/p-000102`);
    expect(html).not.toContain("evil.example");
  });
});

describe("a worker deployed without PUBLIC_URL", () => {
  let worker: WorkerInstance;

  beforeAll(async () => {
    worker = await startHttpWorker({ ...stack.bindings, PUBLIC_URL: undefined });
  });
  afterAll(async () => {
    await worker?.close();
  });

  it("answers the configuration error naming PUBLIC_URL on every route, reads nothing, and logs it once", async () => {
    await stack.admin("/__admin/counters/reset", { method: "POST" });
    for (const path of ["/products/p-000103", "/", "/__status.json"]) {
      const answer = await get(worker.url!, path, HOSTILE_HEADERS);
      expect(answer.status, path).toBe(500);
      expect(answer.body).toContain("Configuration error: PUBLIC_URL is not set");
      expect(answer.body).not.toContain("evil.example");
      expect(answer.body).not.toMatch(/at .*\.js|Error:/);
    }
    const health = await get(worker.url!, "/healthz");
    // In the same words as the pages'.
    expect(JSON.parse(health.body)).toMatchObject({ ok: false, error: expect.stringMatching(/^Configuration error: PUBLIC_URL is not set/) });
    expect((await stack.counters()).total).toBe(0);

    await new Promise((resolve) => setTimeout(resolve, 100));
    const configErrors = worker.logs.filter((line) => line.includes('"event":"config_error"'));
    expect(configErrors).toHaveLength(1);
    expect(configErrors[0]).toContain('"setting":"PUBLIC_URL"');
    expect(logFaults(worker)).toEqual([]);
  });
});
