// The origin client (src/origin/client.ts): one GET per resource, bounded by
// its service's timeout, one retry (connection errors, time-outs noticed late), answers checked
// against the contract, a breaker per service and the isolate's fetch limiter.
// Most cases use an injected `fetch`; a few run against the real demo origin
// over HTTP, where faults are injected through its admin API.
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { createBreaker, type Breaker } from "../../src/shared/breaker";
import { createOriginClient, type OriginClient, type OriginClientOptions } from "../../src/origin/client";
import { isAnswerAboutId, OriginError, type OriginFailure } from "../../src/origin/failure";
import { createLimiter } from "../../src/shared/limiter";
import { RESOURCE_NAMES, type ResourceName } from "../../src/origin/resources";
import { startDemoOrigin, type DemoOrigin } from "../../dev/origin";
import { productFor } from "../../dev/origin/catalog";
import { fakeClock, sampleProduct } from "../support/fakes";
import { freePort } from "../../dev/harness/ports";

const BASE = "http://origin.test";

/** Every service gets `timeoutMs` unless overridden. */
function policies(timeoutMs: number, overrides: Partial<Record<ResourceName, number>> = {}): OriginClientOptions["policies"] {
  const policy = (resource: ResourceName) => ({ originTimeoutMs: overrides[resource] ?? timeoutMs });
  return Object.fromEntries(RESOURCE_NAMES.map((resource) => [resource, policy(resource)])) as OriginClientOptions["policies"];
}

/** A fetch that records its calls and answers with `respond`. */
function recordingFetch(respond: (url: string, init: RequestInit | undefined, call: number) => Promise<Response> | Response) {
  const calls: string[] = [];
  const fetchFn = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = String(input);
    calls.push(url);
    return respond(url, init, calls.length);
  }) as typeof fetch;
  return { fetch: fetchFn, calls };
}

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });

/** Never answers; rejects as a real fetch does when its signal aborts. */
function hang(init: RequestInit | undefined): Promise<Response> {
  return new Promise((_resolve, reject) => {
    const signal = init?.signal;
    if (!signal) return; // would hang forever: the client must always pass a signal
    if (signal.aborted) return reject(signal.reason);
    signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}

/** What the failure was, or "no failure". */
async function failureOf(promise: Promise<unknown>): Promise<OriginFailure | "no failure" | "other error"> {
  try {
    await promise;
    return "no failure";
  } catch (error) {
    return error instanceof OriginError ? error.failure : "other error";
  }
}

async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await work();
  return { value, ms: performance.now() - started };
}

function client(options: Partial<OriginClientOptions> & Pick<OriginClientOptions, "fetch">): OriginClient {
  return createOriginClient({ baseUrl: BASE, policies: policies(1000), ...options });
}

describe("origin client: answers", () => {
  it("validates a 200 into the contract's shape, dropping unknown fields", async () => {
    const product = { ...sampleProduct("p-000001"), internalCost: 12, supplier: { name: "x" } };
    const inventory = { id: "p-000001", available: 3, status: "low_stock", version: 2, updatedAt: "2026-11-20T10:00:00Z", warehouse: "B7" };
    const origin = recordingFetch((url) => json(url.includes("/inventory/") ? inventory : product));
    const c = client({ fetch: origin.fetch });

    const answer = await c.fetchResource("product", "p-000001");
    if (!answer.found) throw new Error("expected the product to be found");
    const data = answer.data;
    expect(data).toEqual(sampleProduct("p-000001"));
    expect(data).not.toHaveProperty("internalCost");
    expect(data).not.toHaveProperty("supplier");

    const stock = await c.fetchResource("inventory", "p-000001");
    expect(stock).toEqual({ found: true, data: { id: "p-000001", available: 3, status: "low_stock", version: 2, updatedAt: "2026-11-20T10:00:00Z" } });
    expect(origin.calls).toEqual([`${BASE}/products/p-000001`, `${BASE}/inventory/p-000001`]);
  });

  it("asks each service at its contract path", async () => {
    const origin = recordingFetch(() => new Response(null, { status: 404 }));
    const c = client({ fetch: origin.fetch });
    for (const resource of ["product", "inventory", "reviews", "recommendations"] as const) await c.fetchResource(resource, "p-000042");
    expect(origin.calls).toEqual([
      `${BASE}/products/p-000042`,
      `${BASE}/inventory/p-000042`,
      `${BASE}/reviews/p-000042/summary`,
      `${BASE}/recommendations/p-000042`,
    ]);
  });

  it("turns a 404 into {found: false}, not an error", async () => {
    const origin = recordingFetch(() => json({ error: "not_found" }, 404));
    await expect(client({ fetch: origin.fetch }).fetchResource("product", "p-999999")).resolves.toEqual({ found: false });
    expect(origin.calls).toHaveLength(1);
  });

  it.each([500, 502, 503, 429])("fails an HTTP %i with 'status' (the service is failing), without retrying", async (status) => {
    const origin = recordingFetch(() => json({ error: "x" }, status));
    expect(await failureOf(client({ fetch: origin.fetch }).fetchResource("product", "p-000001"))).toBe("status");
    expect(origin.calls).toHaveLength(1);
  });

  it.each([400, 422, 403, 410, 301])("fails an HTTP %i with 'rejected' (an answer about this id), without retrying", async (status) => {
    const origin = recordingFetch(() => json({ error: "x" }, status));
    const answer = client({ fetch: origin.fetch }).fetchResource("product", "p-000001");
    expect(await failureOf(answer)).toBe("rejected");
    expect(await answer.catch((error: unknown) => isAnswerAboutId(error))).toBe(true);
    expect(origin.calls).toHaveLength(1);
  });

  it.each([
    ["a body that is not JSON", () => new Response("<html>oops</html>", { status: 200 })],
    ["a body of the wrong shape", () => json({ id: "p-000001", title: 42 })],
    ["a product without its price", () => json({ ...sampleProduct("p-000001"), price: undefined })],
    ["another product's data (id mismatch)", () => json(sampleProduct("p-000002"))],
    ["an empty body", () => new Response("", { status: 200 })],
    ["JSON null", () => json(null)],
  ])("fails %s with 'invalid'", async (_name, respond) => {
    const origin = recordingFetch(respond);
    expect(await failureOf(client({ fetch: origin.fetch }).fetchResource("product", "p-000001"))).toBe("invalid");
    expect(origin.calls).toHaveLength(1);
  });

  it("fails a body over the size cap with 'invalid', whether its length is announced or not, and stops reading it", async () => {
    const valid = JSON.stringify({ ...sampleProduct("p-000001"), description: "x".repeat(2000) });
    const announced = recordingFetch(() => new Response(valid, { status: 200, headers: { "content-length": String(valid.length) } }));
    expect(await failureOf(client({ fetch: announced.fetch, maxBodyBytes: 1000 }).fetchResource("product", "p-000001"))).toBe("invalid");

    // A length announced under the cap that the body exceeds (a response made in code: off the network, the runtime reads no further than it).
    const understated = recordingFetch(() => new Response(valid, { status: 200, headers: { "content-length": "900" } }));
    expect(await failureOf(client({ fetch: understated.fetch, maxBodyBytes: 1000 }).fetchResource("product", "p-000001"))).toBe("invalid");

    // A stream that never ends: only the cap stops the read.
    let pulled = 0;
    const endless = recordingFetch(
      () =>
        new Response(
          new ReadableStream<Uint8Array>({
            pull(controller) {
              pulled++;
              controller.enqueue(new TextEncoder().encode(" ".repeat(256)));
            },
          }),
          { status: 200 },
        ),
    );
    expect(await failureOf(client({ fetch: endless.fetch, maxBodyBytes: 1000 }).fetchResource("product", "p-000001"))).toBe("invalid");
    expect(pulled).toBeLessThan(10);

    // The same body under the cap is read and validated.
    const under = recordingFetch(() => new Response(valid, { status: 200 }));
    await expect(client({ fetch: under.fetch, maxBodyBytes: 4000 }).fetchResource("product", "p-000001")).resolves.toMatchObject({ found: true });
  });
});

describe("origin client: time and connections", () => {
  it("fails a hanging service with 'timeout' within the service's timeout", async () => {
    const origin = recordingFetch((_url, init) => hang(init));
    const c = client({ fetch: origin.fetch, policies: policies(1000, { reviews: 150 }) });
    const { value: failure, ms } = await timed(() => failureOf(c.fetchResource("reviews", "p-000001")));
    expect(failure).toBe("timeout");
    expect(ms).toBeGreaterThanOrEqual(140);
    expect(ms).toBeLessThan(150 + 500);
    // A timeout is not retried: the budget is spent.
    expect(origin.calls).toHaveLength(1);
  });

  it("tries once more, with a fresh budget, a time-out this isolate noticed late (its own delay, not the service's)", async () => {
    // The first call hangs, and when its signal aborts the isolate is busy
    // (a synchronous stall), so the time-out is noticed well past its budget.
    const origin = recordingFetch((_url, init, call) => {
      if (call > 1) return json(sampleProduct("p-000001"));
      return new Promise((_resolve, reject) => {
        const signal = init!.signal!;
        signal.addEventListener(
          "abort",
          () => {
            const until = Date.now() + 300;
            while (Date.now() < until); // the isolate is busy rendering other pages
            reject(signal.reason);
          },
          { once: true },
        );
      });
    });
    const c = client({ fetch: origin.fetch, policies: policies(150) });
    await expect(c.fetchResource("product", "p-000001")).resolves.toMatchObject({ found: true });
    expect(origin.calls).toHaveLength(2);
  });

  it("fails a body that stops arriving with 'timeout', not 'invalid'", async () => {
    const origin = recordingFetch((_url, init) => {
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode('{"id":"p-000001",'));
          init?.signal?.addEventListener("abort", () => controller.error(init.signal!.reason), { once: true });
        },
      });
      return new Response(body, { status: 200 });
    });
    const c = client({ fetch: origin.fetch, policies: policies(150) });
    const { value, ms } = await timed(() => failureOf(c.fetchResource("product", "p-000001")));
    expect(value).toBe("timeout");
    expect(ms).toBeLessThan(150 + 500);
  });

  it("retries a refused connection once, then fails with 'unreachable'", async () => {
    const origin = recordingFetch(() => Promise.reject(new TypeError("fetch failed", { cause: new Error("connect ECONNREFUSED") })));
    const { value, ms } = await timed(() => failureOf(client({ fetch: origin.fetch }).fetchResource("product", "p-000001")));
    expect(value).toBe("unreachable");
    expect(origin.calls).toHaveLength(2);
    // One short jittered pause between the attempts, nothing like a timeout.
    expect(ms).toBeLessThan(500);
  });

  it("a retry that succeeds answers normally", async () => {
    const origin = recordingFetch((_url, _init, call) => (call === 1 ? Promise.reject(new TypeError("fetch failed")) : json(sampleProduct("p-000001"))));
    const answer = await client({ fetch: origin.fetch }).fetchResource("product", "p-000001");
    expect(answer.found).toBe(true);
    expect(origin.calls).toHaveLength(2);
  });

  it("does not retry when the timeout leaves no room for it", async () => {
    const origin = recordingFetch(() => Promise.reject(new TypeError("fetch failed")));
    const c = client({ fetch: origin.fetch, policies: policies(15) });
    expect(await failureOf(c.fetchResource("product", "p-000001"))).toBe("unreachable");
    // The retry pause (20 to 60 ms) would overrun a 15 ms budget.
    expect(origin.calls).toHaveLength(1);
  });
});

describe("origin client: per-service breaker", () => {
  const THRESHOLD = 3;
  const COOL_DOWN_MS = 2000;

  function withBreakers(fetchFn: typeof fetch, extra: Partial<OriginClientOptions> = {}) {
    const clock = fakeClock();
    const breakers = new Map<ResourceName, Breaker>();
    const c = client({
      fetch: fetchFn,
      breakerFor: (service) => {
        const breaker = createBreaker({ failureThreshold: THRESHOLD, coolDownMs: COOL_DOWN_MS, clock });
        breakers.set(service, breaker);
        return breaker;
      },
      ...extra,
    });
    return { c, clock, breakers };
  }

  it("opens after repeated failures: 'circuit-open' without calling fetch, then recovers after the cool-down", async () => {
    let healthy = false;
    const origin = recordingFetch(() => (healthy ? json(sampleProduct("p-000001")) : json({ error: "x" }, 500)));
    const { c, clock, breakers } = withBreakers(origin.fetch);

    for (let i = 0; i < THRESHOLD; i++) expect(await failureOf(c.fetchResource("product", "p-000001"))).toBe("status");
    expect(origin.calls).toHaveLength(THRESHOLD);
    expect(breakers.get("product")!.state()).toBe("open");

    for (let i = 0; i < 10; i++) expect(await failureOf(c.fetchResource("product", "p-000001"))).toBe("circuit-open");
    expect(origin.calls).toHaveLength(THRESHOLD);

    clock.advance(COOL_DOWN_MS - 1);
    expect(await failureOf(c.fetchResource("product", "p-000001"))).toBe("circuit-open");
    expect(origin.calls).toHaveLength(THRESHOLD);

    healthy = true;
    clock.advance(1);
    // One probe goes through, succeeds, and closes the breaker.
    expect(await failureOf(c.fetchResource("product", "p-000001"))).toBe("no failure");
    expect(origin.calls).toHaveLength(THRESHOLD + 1);
    expect(breakers.get("product")!.state()).toBe("closed");
    expect(await failureOf(c.fetchResource("product", "p-000001"))).toBe("no failure");
    expect(origin.calls).toHaveLength(THRESHOLD + 2);
  });

  it("a failed probe opens the breaker again for another cool-down", async () => {
    const origin = recordingFetch(() => json({ error: "x" }, 503));
    const { c, clock } = withBreakers(origin.fetch);
    for (let i = 0; i < THRESHOLD; i++) await failureOf(c.fetchResource("inventory", "p-000001"));
    clock.advance(COOL_DOWN_MS);
    expect(await failureOf(c.fetchResource("inventory", "p-000001"))).toBe("status"); // the probe
    expect(origin.calls).toHaveLength(THRESHOLD + 1);
    expect(await failureOf(c.fetchResource("inventory", "p-000001"))).toBe("circuit-open");
    clock.advance(COOL_DOWN_MS - 1);
    expect(await failureOf(c.fetchResource("inventory", "p-000001"))).toBe("circuit-open");
    expect(origin.calls).toHaveLength(THRESHOLD + 1);
  });

  it("counts timeouts, refused connections and 5xx as failures", async () => {
    let mode: "hang" | "refuse" | "500" = "hang";
    const origin = recordingFetch((_url, init) =>
      mode === "hang" ? hang(init) : mode === "refuse" ? Promise.reject(new TypeError("fetch failed")) : json({ error: "x" }, 500),
    );
    const { c, breakers } = withBreakers(origin.fetch, { policies: policies(50) });
    expect(await failureOf(c.fetchResource("reviews", "p-000001"))).toBe("timeout");
    mode = "refuse";
    expect(await failureOf(c.fetchResource("reviews", "p-000001"))).toBe("unreachable");
    mode = "500";
    expect(await failureOf(c.fetchResource("reviews", "p-000001"))).toBe("status");
    expect(breakers.get("reviews")!.state()).toBe("open");
  });

  it("counts a refused connection against the service even when a busy isolate wakes for its retry past the deadline", async () => {
    // The retry waits 20 ms (the shortest); the isolate is busy for 80 ms meanwhile, past the call's 50 ms.
    const random = vi.spyOn(Math, "random").mockReturnValue(0);
    try {
      const origin = recordingFetch(() => {
        setTimeout(() => {
          const until = Date.now() + 80;
          while (Date.now() < until);
        }, 1);
        return Promise.reject(new TypeError("fetch failed"));
      });
      const { c, breakers } = withBreakers(origin.fetch, { policies: policies(50) });
      for (let i = 0; i < THRESHOLD; i++) expect(await failureOf(c.fetchResource("reviews", "p-000001"))).toBe("unreachable");
      expect(breakers.get("reviews")!.state()).toBe("open");
    } finally {
      random.mockRestore();
    }
  });

  it("a call cut short because nobody waits any more is 'abandoned', and never counted against the service", async () => {
    const origin = recordingFetch((_url, init) => hang(init));
    const { c, breakers } = withBreakers(origin.fetch, { policies: policies(5_000) });
    for (let i = 0; i < THRESHOLD * 3; i++) {
      const stop = new AbortController();
      const call = failureOf(c.fetchResource("product", `p-00000${i}`, "visitor", stop.signal));
      stop.abort();
      expect(await call).toBe("abandoned");
    }
    expect(origin.calls).toHaveLength(THRESHOLD * 3); // one attempt each: no retry of a call nobody wants
    expect(breakers.get("product")!.state()).toBe("closed");
  });

  it("never opens on answers about one id (400, 422, a body that breaks the contract, another id's data), however many", async () => {
    // What anonymous visitors can cause by asking for junk ids, or for `P-1` at an origin that answers with `p-1`.
    const answers = [
      () => json({ error: "bad_request" }, 400),
      () => json({ error: "invalid_id" }, 422),
      () => json({ nope: true }),
      () => new Response("<html>oops</html>", { status: 200 }),
      () => json(sampleProduct("p-000002")),
    ];
    let failing = false;
    const origin = recordingFetch((_url, _init, call) => (failing ? json({ error: "x" }, 503) : answers[call % answers.length]!()));
    const { c, breakers } = withBreakers(origin.fetch);
    for (let i = 0; i < THRESHOLD * 10; i++) expect(["rejected", "invalid"]).toContain(await failureOf(c.fetchResource("product", "p-000001")));
    expect(breakers.get("product")!.state()).toBe("closed");
    expect(origin.calls).toHaveLength(THRESHOLD * 10);
    // They are answers, like 404s: a service that then fails still opens its breaker, on the usual rate.
    failing = true;
    for (let i = 0; i < THRESHOLD * 4 && breakers.get("product")!.state() === "closed"; i++) await failureOf(c.fetchResource("product", "p-000001"));
    expect(breakers.get("product")!.state()).toBe("open");
  });

  it("keeps one breaker per service: a failing service does not stop the others", async () => {
    const origin = recordingFetch((url) => (url.includes("/reviews/") ? json({ error: "x" }, 500) : json({ id: "p-000001", items: [], version: 1 })));
    const { c, breakers } = withBreakers(origin.fetch);
    for (let i = 0; i < THRESHOLD; i++) await failureOf(c.fetchResource("reviews", "p-000001"));
    expect(breakers.get("reviews")!.state()).toBe("open");
    expect(await failureOf(c.fetchResource("recommendations", "p-000001"))).toBe("no failure");
    expect(breakers.get("recommendations")!.state()).toBe("closed");
    expect(origin.calls.filter((url) => url.includes("/recommendations/"))).toHaveLength(1);
  });

  it("404s and successes keep the breaker closed", async () => {
    const origin = recordingFetch((_url, _init, call) => (call % 3 !== 0 ? json({ error: "not_found" }, 404) : json({ error: "x" }, 500)));
    const { c, breakers } = withBreakers(origin.fetch);
    // 404, 404, failure, ...: a third of the calls fail, never half of them.
    for (let i = 0; i < 10; i++) await failureOf(c.fetchResource("product", "p-000001"));
    expect(breakers.get("product")!.state()).toBe("closed");
    expect(origin.calls).toHaveLength(10);
  });
});

describe("origin client: limiter", () => {
  it("a full limiter answers 'overloaded' at once, without fetching, and the breaker does not count it", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const origin = recordingFetch(async () => {
      await gate;
      return json(sampleProduct("p-000001"));
    });
    const clock = fakeClock();
    const breakers = new Map<ResourceName, Breaker>();
    const c = createOriginClient({
      baseUrl: BASE,
      policies: policies(5000),
      fetch: origin.fetch,
      limiter: createLimiter({ maxConcurrent: 1, maxQueued: 0, maxWaitMs: 1000, maxHoldMs: 10_000 }),
      // A breaker that opens on the first failure: any counted overload would open it.
      breakerFor: (service) => {
        const breaker = createBreaker({ failureThreshold: 1, coolDownMs: 60_000, clock });
        breakers.set(service, breaker);
        return breaker;
      },
    });
    const first = c.fetchResource("product", "p-000001");
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(origin.calls).toHaveLength(1);

    const { value, ms } = await timed(() => failureOf(c.fetchResource("product", "p-000001")));
    expect(value).toBe("overloaded");
    expect(ms).toBeLessThan(100);
    expect(origin.calls).toHaveLength(1);
    expect(breakers.get("product")!.state()).toBe("closed");

    release();
    expect((await first).found).toBe(true);
    // The breaker never saw a failure: the next call goes through.
    expect(await failureOf(c.fetchResource("product", "p-000001"))).toBe("no failure");
    expect(origin.calls).toHaveLength(2);
  });

  it("a caller that waited too long for a slot is 'overloaded' too, and the breaker stays closed", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const origin = recordingFetch(async () => {
      await gate;
      return json(sampleProduct("p-000001"));
    });
    const clock = fakeClock();
    let breaker: Breaker | undefined;
    const c = createOriginClient({
      baseUrl: BASE,
      policies: policies(5000),
      fetch: origin.fetch,
      limiter: createLimiter({ maxConcurrent: 1, maxQueued: 1, maxWaitMs: 50, maxHoldMs: 10_000 }),
      breakerFor: () => (breaker = createBreaker({ failureThreshold: 1, coolDownMs: 60_000, clock })),
    });
    const first = c.fetchResource("product", "p-000001");
    const { value, ms } = await timed(() => failureOf(c.fetchResource("product", "p-000001")));
    expect(value).toBe("overloaded");
    expect(ms).toBeGreaterThanOrEqual(45);
    expect(ms).toBeLessThan(50 + 500);
    expect(breaker!.state()).toBe("closed");
    release();
    await first;
  });

  it("a time-out that the wait for a slot made short is the isolate's: the breaker does not count it", async () => {
    // A slow service (250 ms, well within its 400 ms timeout) behind one
    // slot: the second caller queues for 250 ms, has 150 ms left, and times
    // out. The service answered every call it got in time.
    const TIMEOUT_MS = 400;
    const origin = recordingFetch((url, init) =>
      Promise.race([hang(init), new Promise<Response>((resolve) => setTimeout(() => resolve(json(sampleProduct(url.slice(url.lastIndexOf("/") + 1)))), 250))]),
    );
    let breaker: Breaker | undefined;
    const c = createOriginClient({
      baseUrl: BASE,
      policies: policies(TIMEOUT_MS),
      fetch: origin.fetch,
      limiter: createLimiter({ maxConcurrent: 1, maxQueued: 10, maxWaitMs: 5000, maxHoldMs: 10_000 }),
      breakerFor: () => (breaker = createBreaker({ failureThreshold: 1, coolDownMs: 60_000, clock: fakeClock() })),
    });
    const first = failureOf(c.fetchResource("product", "p-000001"));
    const second = failureOf(c.fetchResource("product", "p-000002"));
    expect(await first).toBe("no failure");
    expect(await second).toBe("timeout");
    expect(breaker!.state()).toBe("closed");
    // The same time-out with the whole budget is the service's: it counts.
    const slow = createOriginClient({
      baseUrl: BASE,
      policies: policies(100),
      fetch: origin.fetch,
      limiter: createLimiter({ maxConcurrent: 1, maxQueued: 10, maxWaitMs: 5000, maxHoldMs: 10_000 }),
      breakerFor: () => (breaker = createBreaker({ failureThreshold: 1, coolDownMs: 60_000, clock: fakeClock() })),
    });
    expect(await failureOf(slow.fetchResource("product", "p-000003"))).toBe("timeout");
    expect(breaker!.state()).toBe("open");
  });

  it("the service timeout bounds the whole call, the wait for a slot included", async () => {
    // defaults.ts: "a slow service costs a visitor at most this"; fill.ts: "the
    // fill as a whole stays within the service's origin timeout". A caller
    // that queued behind a hanging fetch must not then get a full timeout of its own.
    const TIMEOUT_MS = 400;
    const origin = recordingFetch((_url, init) => hang(init));
    const c = createOriginClient({
      baseUrl: BASE,
      policies: policies(TIMEOUT_MS),
      fetch: origin.fetch,
      limiter: createLimiter({ maxConcurrent: 1, maxQueued: 10, maxWaitMs: 5000, maxHoldMs: 10_000 }),
    });
    const first = failureOf(c.fetchResource("product", "p-000001"));
    const { value, ms } = await timed(() => failureOf(c.fetchResource("product", "p-000002")));
    expect(await first).toBe("timeout");
    expect(["timeout", "overloaded"]).toContain(value);
    expect(ms).toBeLessThan(TIMEOUT_MS + 250);
  });

  it("an open breaker answers inside its slot and gives the slot back at once", async () => {
    const origin = recordingFetch(() => json({ error: "x" }, 500));
    const limiter = createLimiter({ maxConcurrent: 1, maxQueued: 0, maxWaitMs: 1000, maxHoldMs: 10_000 });
    const c = createOriginClient({
      baseUrl: BASE,
      policies: policies(1000),
      fetch: origin.fetch,
      limiter,
      breakerFor: () => createBreaker({ failureThreshold: 1, coolDownMs: 60_000, clock: fakeClock() }),
    });
    expect(await failureOf(c.fetchResource("product", "p-000001"))).toBe("status");
    for (let i = 0; i < 5; i++) {
      expect(await failureOf(c.fetchResource("product", "p-000001"))).toBe("circuit-open");
      expect(limiter.inFlight).toBe(0);
    }
    expect(origin.calls).toHaveLength(1);
  });
});

describe("origin client against the demo origin over HTTP", () => {
  let origin: DemoOrigin;

  const admin = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(origin.url + path, { method, ...(body !== undefined && { body: JSON.stringify(body) }) });
    return (await response.json()) as any;
  };
  const counted = async (key: string): Promise<number> => (await admin("GET", "/__admin/counters")).ids[key] ?? 0;

  beforeAll(async () => {
    origin = await startDemoOrigin({ latencyMs: 0, jitterMs: 0, catalogSize: 1000 });
  });
  afterAll(() => origin?.close());
  beforeEach(async () => {
    await admin("DELETE", "/__admin/faults");
    await admin("POST", "/__admin/counters/reset");
  });

  const real = (timeoutMs = 1000) => createOriginClient({ baseUrl: origin.url, policies: policies(timeoutMs) });

  it("reads a catalog product into the contract's shape", async () => {
    const answer = await real().fetchResource("product", "p-000007");
    expect(answer).toEqual({ found: true, data: expect.objectContaining({ id: "p-000007", title: productFor(7, origin.url).title }) });
  });

  it("reads an unknown id as {found: false}", async () => {
    await expect(real().fetchResource("inventory", "p-999999")).resolves.toEqual({ found: false });
  });

  it("fails a service answering 500 with 'status', one request", async () => {
    await admin("PUT", "/__admin/faults", { service: "reviews", down: "500" });
    expect(await failureOf(real().fetchResource("reviews", "p-000001"))).toBe("status");
    expect(await counted("reviews:p-000001")).toBe(1);
  });

  it("fails a hanging service with 'timeout' within its timeout", async () => {
    await admin("PUT", "/__admin/faults", { service: "product", down: "hang" });
    const { value, ms } = await timed(() => failureOf(real(300).fetchResource("product", "p-000001")));
    expect(value).toBe("timeout");
    expect(ms).toBeGreaterThanOrEqual(280);
    expect(ms).toBeLessThan(300 + 700);
    expect(await counted("product:p-000001")).toBe(1);
  });

  it("fails a service that drops connections with 'unreachable' after exactly one retry", async () => {
    await admin("PUT", "/__admin/faults", { service: "inventory", down: "refuse" });
    const { value, ms } = await timed(() => failureOf(real().fetchResource("inventory", "p-000001")));
    expect(value).toBe("unreachable");
    expect(await counted("inventory:p-000001")).toBe(2);
    expect(ms).toBeLessThan(1000);
  });

  it("fails a port where nothing listens with 'unreachable', quickly", async () => {
    const port = await freePort();
    const c = createOriginClient({ baseUrl: `http://127.0.0.1:${port}`, policies: policies(1000) });
    const { value, ms } = await timed(() => failureOf(c.fetchResource("product", "p-000001")));
    expect(value).toBe("unreachable");
    expect(ms).toBeLessThan(1000);
  });
});
