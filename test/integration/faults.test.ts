// What visitors get, and what the origin sees, when Redis or the origin fails
// (docs/architecture.md#when-redis-fails and #when-the-origin-fails). Real
// processes: redis-server killed or frozen, the gateway closed, the demo
// origin slowed, failing or gone; the bundled worker in the Workers runtime.
//
// Time bounds are generous for a loaded 2-core machine, but each one is far
// below what the fault would cost without the protection under test.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startDemoOrigin } from "../../dev/origin";
import { DEFAULTS, DEFAULT_POLICIES } from "../../src/config/defaults";
import { entryKey } from "../../src/cache/keys";
import {
  clearFaults,
  completeProducts,
  gatewayCommand,
  health,
  injectFault,
  originFetches,
  page,
  resetCounters,
  serverTiming,
  sleep,
  waitFor,
  type Page,
} from "../support/faults";
import { member } from "../../dev/harness/cacheStatus";
import { tierStatus } from "../support/clients";
import { PURGE_TOKEN, startStack, type Stack } from "../support/stack";
import { logFaults, startedWorkers, startWorker, type WorkerInstance } from "../support/worker";

/** Product and inventory fresh for 1 s, then only usable on error for a minute: expiry within a test. */
const SHORT_CORE_POLICIES = JSON.stringify({
  product: { ttl: 1, swr: 0, staleIfError: 60 },
  inventory: { ttl: 1, swr: 0, staleIfError: 60 },
});
/** Just past the 1 s ttl of SHORT_CORE_POLICIES. */
const PAST_SHORT_TTL_MS = 1300;

const PRODUCT_TIMEOUT_MS = DEFAULT_POLICIES.product.originTimeoutMs; // 1500
/** Slack for a loaded machine on top of a time budget: far below the cost of the fault itself. */
const MARGIN_MS = 1500;

const isServerError = (p: Page) => p.status >= 500;

// Whatever fails around it, the worker itself never fails: no exception
// reaches the app's error handler, and no request touches another's I/O
// (docs/architecture.md#sharing-work-across-requests-in-one-isolate). Runs after every block below
// has closed its workers, so their logs are complete.
afterAll(() => {
  expect(logFaults(...startedWorkers())).toEqual([]);
});

function expect503Page(p: Page): void {
  expect(p.status).toBe(503);
  expect(p.headers.get("retry-after")).toMatch(/^\d+$/);
  expect(p.headers.get("cache-control")).toBe("no-store");
  expect(p.html).toContain("temporarily unavailable");
  expect(p.html).not.toMatch(/OriginError|at .*\.js/);
}

// ------------------------------------------------------------------ Redis

/** The shared specification of an L2 outage that refuses at once (killed Redis, closed gateway). */
function describeRefusingL2Outage(name: string, breakL2: (stack: Stack) => Promise<void>) {
  describe(name, () => {
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

    it("serves pages in L1 from L1, others from the origin once per key, and never errors", async () => {
      const [warmA, warmB, coldA, coldB, burst, ...more] = completeProducts(100, 9);
      for (const id of [warmA!, warmB!]) expect((await page(worker, `/products/${id}`)).status).toBe(200);
      expect((await health(worker)).l2).toBe("closed");

      await breakL2(stack);
      await resetCounters(stack);
      const pages: Page[] = [];

      // In L1: served from L1, nothing asked of anybody.
      for (const id of [warmA!, warmB!]) {
        const p = await page(worker, `/products/${id}`);
        pages.push(p);
        expect(p.status).toBe(200);
        for (const resource of ["product", "inventory", "reviews", "recommendations"]) {
          expect(member(p.cacheStatus, resource)).toMatch(/^pp-l1; hit;/);
        }
        expect(p.degraded).toEqual([]);
      }
      expect((await stack.counters()).total).toBe(0);

      // Not in L1: a complete page from the origin.
      for (const id of [coldA!, coldB!]) {
        const p = await page(worker, `/products/${id}`);
        pages.push(p);
        expect(p.status).toBe(200);
        expect(member(p.cacheStatus, "product")).toMatch(/^pp-origin; fwd=uri-miss; fwd-status=200/);
        expect(p.degraded).toEqual([]);
        expect(p.html).toContain("In stock");
      }
      // Failed L2 calls open the isolate's breaker within a few cold pages (a refused call is no reason to stop claiming locks, so each page adds its failures).
      for (const id of more) {
        if ((await health(worker)).l2 === "open") break;
        const p = await page(worker, `/products/${id}`);
        pages.push(p);
        expect(p.status).toBe(200);
      }
      expect((await health(worker)).l2).toBe("open");

      // With the breaker open: a burst for a cold product, and repeats of the ones just filled.
      const burstPages = await Promise.all([
        ...Array.from({ length: 30 }, () => page(worker, `/products/${burst}`)),
        ...Array.from({ length: 10 }, (_, i) => page(worker, `/products/${i % 2 ? coldA : coldB}`)),
      ]);
      pages.push(...burstPages);
      expect(burstPages.map((p) => p.status)).toEqual(Array(40).fill(200));

      expect(pages.filter(isServerError)).toEqual([]);
      // No stampede: one fetch per resource and key in this isolate, however many visitors.
      for (const id of [coldA!, coldB!, burst!]) {
        for (const resource of ["product", "inventory", "reviews", "recommendations"]) {
          expect(await originFetches(stack, resource, id), `${resource}:${id}`).toBe(1);
        }
      }
      for (const id of [warmA!, warmB!]) expect(await originFetches(stack, "product", id)).toBe(0);
      expect((await health(worker)).l2).toBe("open");
    });
  });
}

describe("when Redis fails", () => {
  describeRefusingL2Outage("redis-server killed (SIGKILL)", (stack) => stack.redis.kill());

  describeRefusingL2Outage("the Upstash gateway down (connection refused)", (stack) => stack.gateway.close());

  describe("redis-server frozen (SIGSTOP): calls hang instead of failing", () => {
    const L2_BUDGET_MS = 100;
    let stack: Stack;
    let worker: WorkerInstance;

    beforeAll(async () => {
      stack = await startStack();
      worker = await startWorker({ ...stack.bindings, L2_TIMEOUT_MS: String(L2_BUDGET_MS) });
    });
    afterAll(async () => {
      await worker?.close();
      await stack?.close();
    });

    it("costs a visitor at most about the L2 budget, then nothing once the breaker is open", async () => {
      const ids = completeProducts(200, 12);
      // Warm the isolate's connections to the gateway and the origin.
      expect((await page(worker, "/products/p-000199")).status).toBe(200);
      stack.redis.pause();
      const frozenAt = Date.now();
      try {
        const pages: Page[] = [];
        let openedAfter: number | null = null;
        let openedAtMs = Infinity;
        for (const id of ids) {
          pages.push(await page(worker, `/products/${id}`));
          if (openedAfter === null && (await health(worker)).l2 === "open") {
            openedAfter = pages.length;
            openedAtMs = Date.now() - frozenAt;
          }
        }

        expect(pages.map((p) => p.status)).toEqual(Array(ids.length).fill(200));
        for (const p of pages) {
          expect(p.degraded).toEqual([]);
          // A hung Redis would cost the gateway's 5 s command timeout, or forever.
          // A cold page pays its L2 read's budget (100 ms) and the origin
          // (~5 ms), and the purge sync's read when one is due: Redis's
          // silence to an isolate that reads replies on time is taken for what
          // it is, so no lock is claimed and no winner waited for (it was
          // 2.3 s at the p99). Bounds for a loaded machine.
          expect(p.ms).toBeLessThan(600);
        }
        console.log(`Redis frozen: cold pages ${pages.map((p) => Math.round(p.ms)).join(", ")} ms`);
        // The first page waited for its L2 read until the budget ran out...
        const firstL2 = serverTiming(pages[0]!.headers, "l2")!;
        expect(firstL2).toBeGreaterThanOrEqual(L2_BUDGET_MS * 0.9);
        expect(firstL2).toBeLessThan(1000);
        // ...and the breaker opened once the time-outs had lasted its 500 ms
        // span (calls that time out together may be this isolate's stall)
        // and Redis failed the probe they asked for (500 ms) ...
        expect(openedAfter, "the L2 breaker never opened").not.toBeNull();
        expect(openedAtMs).toBeLessThan(2500);
        expect(openedAfter!).toBeLessThan(ids.length);
        // ... so that later pages do not wait for L2 at all.
        for (const p of pages.slice(openedAfter!)) expect(serverTiming(p.headers, "l2")!).toBeLessThan(L2_BUDGET_MS / 2);
      } finally {
        stack.redis.resume();
      }
    });
  });

  describe("recovery", () => {
    let stack: Stack;
    const workers: WorkerInstance[] = [];

    beforeAll(async () => {
      stack = await startStack();
    });
    afterAll(async () => {
      await Promise.all(workers.map((worker) => worker.close()));
      await stack?.close();
    });

    it("the L2 breaker closes by itself once Redis is back, and pages are written to L2 again", async () => {
      const bindings = { ...stack.bindings, L2_TIMEOUT_MS: "300" };
      const worker = await startWorker(bindings);
      workers.push(worker);
      const [afterOutage, ...duringOutage] = completeProducts(400, 4);

      await stack.redis.kill();
      // A cold page makes three calls on the visitor's path (its read, two
      // claim calls) and a write after the answer: the breaker opens within
      // a page or two of failures.
      for (const id of duringOutage) {
        expect((await page(worker, `/products/${id}`)).status).toBe(200);
        if ((await health(worker)).l2 === "open") break;
      }
      const openedBy = Date.now(); // the breaker opened during those requests, at the latest now
      expect((await health(worker)).l2).toBe("open");

      // A fresh, empty Redis on the same port; the gateway reconnects by itself.
      await stack.redis.restart();
      await waitFor("the gateway to reach the new redis", async () => (await gatewayCommand(stack, ["PING"])) === "PONG");
      const backAt = Date.now();
      // Before the cool-down is over, the next page's skipped L2 call sends a recovery probe, off its path.
      expect(backAt - openedBy).toBeLessThan(DEFAULTS.breakerCoolDownMs);
      const probed = await page(worker, `/products/${afterOutage}`);
      expect(probed.status).toBe(200);
      await waitFor("the breaker closed by the recovery probe", async () => (await health(worker)).l2 === "closed", 1000);
      expect(Date.now() - backAt).toBeLessThan(DEFAULTS.breakerCoolDownMs);

      // The page's entries were written to L2 (in the background, after the answer).
      const key = entryKey(DEFAULTS.keyPrefix, "product", afterOutage!);
      await waitFor(`${key} in L2`, async () => (await gatewayCommand(stack, ["EXISTS", key])) === 1, 3000);
      // The outage's first page, fetched while L2 was down, was kept in the backlog and written too.
      const outageKey = entryKey(DEFAULTS.keyPrefix, "product", duringOutage[0]!);
      await waitFor(`${outageKey} in L2`, async () => (await gatewayCommand(stack, ["EXISTS", outageKey])) === 1, 3000);

      // Another isolate, with an empty L1, is served from L2.
      const other = await startWorker(bindings);
      workers.push(other);
      await resetCounters(stack);
      const fromL2 = await page(other, `/products/${afterOutage}`);
      expect(fromL2.status).toBe(200);
      expect(member(fromL2.cacheStatus, "product")).toMatch(/^pp-l2; hit;/);
      expect(await originFetches(stack, "product", afterOutage!)).toBe(0);
    });
  });

  describe("a double fault: Redis hangs, comes back, then the origin goes down", () => {
    let stack: Stack;
    const workers: WorkerInstance[] = [];
    const bindings = () => ({ ...stack.bindings, L2_TIMEOUT_MS: "100" });

    beforeAll(async () => {
      stack = await startStack();
    });
    afterEach(async () => {
      stack.redis.resume();
      await clearFaults(stack);
    });
    afterAll(async () => {
      await Promise.all(workers.map((worker) => worker.close()));
      await stack?.close();
    });

    async function isolate(): Promise<WorkerInstance> {
      const worker = await startWorker(bindings());
      workers.push(worker);
      expect((await page(worker, "/products/p-000999")).status).toBe(200); // connections warm
      return worker;
    }

    /** Freezes Redis until the isolate's L2 breaker opens (pages of `ids` meanwhile), then thaws it; when it opened. */
    async function openL2Breaker(worker: WorkerInstance, ids: string[]): Promise<number> {
      stack.redis.pause();
      try {
        for (const id of ids) {
          await page(worker, `/products/${id}`);
          if ((await health(worker)).l2 === "open") return Date.now();
        }
        throw new Error("the L2 breaker never opened");
      } finally {
        stack.redis.resume();
      }
    }

    it("Redis back: what an isolate fetches at once reaches L2 within a second, and another isolate serves all of it with the origin down", async () => {
      const a = await isolate();
      await openL2Breaker(a, completeProducts(1500, 40));
      // Redis answers again, a's breaker is still open: right away, 20 products viewed on a.
      const filled = completeProducts(700, 20);
      const backAt = Date.now();
      for (const id of filled) expect((await page(a, `/products/${id}`)).status).toBe(200);
      const keys = filled.map((id) => entryKey(DEFAULTS.keyPrefix, "product", id));
      // The first page's skipped call sent a recovery probe; its answer closed the breaker; what was
      // kept meanwhile went out with the next pages, the rest with their fills.
      await waitFor("every page in L2", async () => (await gatewayCommand(stack, ["EXISTS", ...keys])) === keys.length, 3000);
      expect(Date.now() - backAt).toBeLessThan(DEFAULTS.breakerCoolDownMs);
      expect((await health(a)).l2).toBe("closed");

      // The origin goes down at once: another isolate serves every one of them from L2.
      await injectFault(stack, { service: "all", down: "refuse" });
      const b = await startWorker(bindings());
      workers.push(b);
      const pages = await Promise.all(filled.map((id) => page(b, `/products/${id}`)));
      expect(pages.map((p) => p.status)).toEqual(filled.map(() => 200));
    });

    it("Redis loses its data (a purge log reset under the isolate), then the origin goes down: the pages the isolate had, stale-if-error, not 503s", async () => {
      // L1 alone: with the location tier on, its copies of these pages would answer first (cache/location/).
      const a = await startWorker({ ...bindings(), LOCATION_CACHE: "off" });
      workers.push(a);
      const viewed = completeProducts(2600, 10);
      for (const id of viewed) expect((await page(a, `/products/${id}`)).status).toBe(200);
      // A purge starts the log's era; the isolate reads it (its knowledge renewed within PURGE_POLL_MS).
      const purged = await a.fetch("/__purge", {
        method: "POST",
        headers: { authorization: `Bearer ${PURGE_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ ids: ["p-009999"] }),
      });
      expect(purged.status).toBe(202);
      await sleep(DEFAULTS.purgePollMs + 100);
      expect((await page(a, `/products/${viewed[0]}`)).status).toBe(200);

      // Redis restarted empty: the next sync finds another era, and the isolate cannot tell which of its copies a lost purge made gone.
      const purgesRead = async () => ((await tierStatus(a)) as unknown as { purges: { seq: number } }).purges.seq;
      const readBefore = await purgesRead();
      expect(readBefore).toBeGreaterThan(0);
      expect(await gatewayCommand(stack, ["FLUSHALL"])).toBe("OK");
      // Until the isolate has read the log Redis lost (its position back to the start): a page of another
      // product is what starts its sync, once its knowledge is a poll old.
      const [other] = completeProducts(2700, 1);
      await waitFor(
        "the isolate to read the emptied log",
        async () => (await page(a, `/products/${other}`)).status === 200 && (await purgesRead()) < readBefore,
        10_000,
      );
      await injectFault(stack, { service: "all", down: "refuse" });
      const pages = await Promise.all(viewed.map((id) => page(a, `/products/${id}`)));
      expect(pages.map((p) => p.status)).toEqual(viewed.map(() => 200));
      // Not served as they were: each asked the origin first, and is marked as a copy kept for errors.
      for (const p of pages) expect(member(p.cacheStatus, "product")).toMatch(/^pp-l1; fwd=stale; fwd-status=50\d; .*detail="product stale-if-error"$/);
    });

    it("an isolate that skipped L2 while Redis hung tries it once before a 503 when the origin fails too", async () => {
      const [stored] = completeProducts(800, 1);
      const a = await isolate();
      expect((await page(a, `/products/${stored}`)).status).toBe(200);
      const key = entryKey(DEFAULTS.keyPrefix, "product", stored!);
      await waitFor(`${key} in L2`, async () => (await gatewayCommand(stack, ["EXISTS", key])) === 1, 3000);

      const b = await isolate();
      await openL2Breaker(b, completeProducts(2000, 40));
      await injectFault(stack, { service: "all", down: "refuse" });
      // b has never seen the product, the origin refuses: whether b's breaker is still open (its
      // L2 calls skipped) or already closed by a recovery probe, L2 is the last resort
      // (the open-breaker path alone: test/unit/readThrough.test.ts, "a double fault").
      const p = await page(b, `/products/${stored}`);
      expect(p.status).toBe(200);
      expect(member(p.cacheStatus, "product")).toMatch(/^pp-l2;/);
    });
  });
});

// ------------------------------------------------------------------ origin

describe("when the origin fails", () => {
  let stack: Stack;
  let worker: WorkerInstance;

  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(async () => {
    await stack?.close();
  });

  /** Each block gets its own isolate: origin breakers and L1 must not carry over. */
  function freshWorker() {
    beforeAll(async () => {
      worker = await startWorker({ ...stack.bindings, CACHE_POLICIES: SHORT_CORE_POLICIES });
    });
    afterAll(async () => {
      await worker?.close();
    });
  }

  beforeEach(async () => {
    await clearFaults(stack);
    await resetCounters(stack);
  });
  afterEach(async () => {
    await clearFaults(stack);
  });

  describe("one service slow (2 s)", () => {
    freshWorker();

    it("uncached product: a 503 with Retry-After within the product timeout", async () => {
      const [id] = completeProducts(500, 1);
      await injectFault(stack, { service: "product", latencyMs: 2000 });
      const p = await page(worker, `/products/${id}`);
      expect503Page(p);
      expect(member(p.cacheStatus, "product")).toMatch(/fwd=uri-miss; fwd-status=504; detail="product failed"/);
      expect(p.ms).toBeLessThan(PRODUCT_TIMEOUT_MS + MARGIN_MS);
      expect(await originFetches(stack, "product", id!)).toBe(1);
      // No known-ids filter lists it here: the product goes first, and without it nothing else is asked (the README's fault table).
      for (const service of ["inventory", "reviews", "recommendations"]) expect(await originFetches(stack, service, id!), service).toBe(0);
    });

    it("product cached but past its ttl: 200 stale-if-error, within the product timeout", async () => {
      const [id] = completeProducts(510, 1);
      expect((await page(worker, `/products/${id}`)).status).toBe(200);
      await sleep(PAST_SHORT_TTL_MS);
      await injectFault(stack, { service: "product", latencyMs: 2000 });

      const p = await page(worker, `/products/${id}`);
      expect(p.status).toBe(200);
      expect(member(p.cacheStatus, "product")).toMatch(/^pp-l1; fwd=stale; fwd-status=504; ttl=(0|-\d+); detail="product stale-if-error"/);
      expect(p.headers.get("cache-control")).toBe("no-cache");
      // Not waiting for the slow answer: at most the product's timeout.
      expect(p.ms).toBeLessThan(PRODUCT_TIMEOUT_MS + MARGIN_MS);
    });

    it("reviews slow: the page is streamed without them, and closes with their default at the reviews timeout", async () => {
      const [id] = completeProducts(520, 1);
      await injectFault(stack, { service: "reviews", latencyMs: DEFAULT_POLICIES.reviews.originTimeoutMs + 500 });
      const p = await page(worker, `/products/${id}`);
      expect(p.status).toBe(200);
      // The headers went before the reviews' end: named as streamed, not as degraded (test/integration/streaming.test.ts).
      expect(member(p.cacheStatus, "reviews")).toBe('pp-origin; fwd=uri-miss; detail="reviews streamed"');
      expect(p.degraded).toEqual([]);
      expect(p.headers.get("cache-control")).toBe("no-cache");
      expect(p.html).toContain("Reviews are unavailable right now");
      expect(p.html.endsWith("</html>")).toBe(true);
      expect(p.ms).toBeLessThan(DEFAULT_POLICIES.reviews.originTimeoutMs + MARGIN_MS);
    });
  });

  // Whether a page can exist without a resource is the `core` flag of its
  // policy (src/origin/resources.ts): a shop that would rather show the page
  // than a 503 sets inventory's to false.
  describe("inventory configured as optional (core: false), its service stopped", () => {
    beforeAll(async () => {
      worker = await startWorker({
        ...stack.bindings,
        CACHE_POLICIES: JSON.stringify({ inventory: { core: false } }),
      });
    });
    afterAll(async () => {
      await worker?.close();
    });

    it("nothing cached: 200 with 'Availability unknown', marked degraded, where a core inventory gives a 503", async () => {
      const [id] = completeProducts(650, 1);
      await injectFault(stack, { service: "inventory", down: "refuse" });
      const p = await page(worker, `/products/${id}`);
      expect(p.status).toBe(200);
      expect(p.html).toContain("Availability unknown");
      expect(p.html).not.toContain("In stock");
      expect(p.html).not.toContain("schema.org/InStock");
      expect(p.degraded).toEqual(["inventory"]);
      expect(p.headers.get("cache-control")).toBe("no-cache");
      expect(member(p.cacheStatus, "inventory")).toMatch(/detail="inventory failed"/);
      // The rest of the page is whole.
      expect(p.html).toContain("You may also like");
    });
  });

  describe("one service answering 500", () => {
    freshWorker();

    it("reviews: page 200 with the reviews default, marked degraded and not cacheable", async () => {
      const [id] = completeProducts(600, 1);
      await injectFault(stack, { service: "reviews", down: "500" });
      const p = await page(worker, `/products/${id}`);
      expect(p.status).toBe(200);
      expect(p.html).toContain("Reviews are unavailable right now");
      expect(p.degraded).toEqual(["reviews"]);
      expect(p.headers.get("cache-control")).toBe("no-cache");
      expect(member(p.cacheStatus, "reviews")).toMatch(/fwd-status=502; detail="reviews failed"/);
      // The rest of the page is whole.
      expect(p.html).toContain("In stock");
      expect(p.html).toContain("You may also like");
    });

    it("recommendations: page 200 without recommendations, marked degraded", async () => {
      const [id] = completeProducts(610, 1);
      await injectFault(stack, { service: "recommendations", down: "500" });
      const p = await page(worker, `/products/${id}`);
      expect(p.status).toBe(200);
      expect(p.html).not.toContain("You may also like");
      expect(p.degraded).toEqual(["recommendations"]);
      expect(p.headers.get("cache-control")).toBe("no-cache");
      expect(member(p.cacheStatus, "recommendations")).toMatch(/detail="recommendations failed"/);
      expect(p.html).not.toContain("Reviews are unavailable");
    });

    it("inventory with nothing cached: 503", async () => {
      const [id] = completeProducts(620, 1);
      await injectFault(stack, { service: "inventory", down: "500" });
      const p = await page(worker, `/products/${id}`);
      expect503Page(p);
      expect(member(p.cacheStatus, "inventory")).toMatch(/detail="inventory failed"/);
    });

    it("inventory cached but past its ttl and swr: 200 with 'Availability unknown', never 'In stock'", async () => {
      const [id] = completeProducts(630, 1);
      const before = await page(worker, `/products/${id}`);
      expect(before.html).toContain("In stock");
      await sleep(PAST_SHORT_TTL_MS);
      await injectFault(stack, { service: "inventory", down: "500" });

      const p = await page(worker, `/products/${id}`);
      expect(p.status).toBe(200);
      expect(p.html).toContain("Availability unknown");
      expect(p.html).not.toContain("In stock");
      expect(p.html).not.toContain("schema.org/InStock");
      expect(p.degraded).toContain("inventory");
      expect(member(p.cacheStatus, "inventory")).toMatch(/detail="inventory stale-if-error"/);
      expect(p.headers.get("cache-control")).toBe("no-cache");
    });

    it("product: 503 when uncached, 200 stale-if-error when cached", async () => {
      const [uncached, cached] = completeProducts(640, 2);
      expect((await page(worker, `/products/${cached}`)).status).toBe(200);
      await sleep(PAST_SHORT_TTL_MS);
      await injectFault(stack, { service: "product", down: "500" });

      const missing = await page(worker, `/products/${uncached}`);
      expect503Page(missing);
      expect(member(missing.cacheStatus, "product")).toMatch(/fwd-status=502; detail="product failed"/);

      const stale = await page(worker, `/products/${cached}`);
      expect(stale.status).toBe(200);
      expect(member(stale.cacheStatus, "product")).toMatch(/detail="product stale-if-error"/);
      expect(stale.headers.get("cache-control")).toBe("no-cache");
    });
  });

  describe("every service refusing connections", () => {
    freshWorker();

    it("viewed products render stale, others get the 503 page at once, and nothing of it is cached", async () => {
      const [viewed, unseen] = completeProducts(700, 2);
      expect((await page(worker, `/products/${viewed}`)).status).toBe(200);
      await sleep(PAST_SHORT_TTL_MS);
      await injectFault(stack, { service: "all", down: "refuse" });

      const stale = await page(worker, `/products/${viewed}`);
      expect(stale.status).toBe(200);
      expect(member(stale.cacheStatus, "product")).toMatch(/fwd-status=502; ttl=(0|-\d+); detail="product stale-if-error"/);
      expect(stale.html).toContain("Availability unknown");
      expect(stale.degraded).toContain("inventory");
      expect(stale.headers.get("cache-control")).toBe("no-cache");
      expect(stale.ms).toBeLessThan(PRODUCT_TIMEOUT_MS);

      const failed = await page(worker, `/products/${unseen}`);
      expect503Page(failed);
      // Refused connections fail fast: no waiting for a timeout.
      expect(failed.ms).toBeLessThan(PRODUCT_TIMEOUT_MS);
      // One try and one retry, no more.
      expect(await originFetches(stack, "product", unseen!)).toBeLessThanOrEqual(2);

      // The origin is back: the very next requests render fresh pages.
      await clearFaults(stack);
      const recovered = await page(worker, `/products/${unseen}`);
      expect(recovered.status).toBe(200);
      expect(member(recovered.cacheStatus, "product")).toMatch(/^pp-origin; fwd=uri-miss; fwd-status=200/);
      expect(recovered.degraded).toEqual([]);
      const refreshed = await page(worker, `/products/${viewed}`);
      expect(refreshed.status).toBe(200);
      expect(refreshed.cacheStatus).not.toContain("stale-if-error");
      expect(refreshed.html).toContain("In stock");
    });
  });

  describe("a per-service origin breaker", () => {
    freshWorker();

    it("after repeated product failures the origin is left alone for the cool-down, visitors answered at once", async () => {
      const FAILURES = DEFAULTS.breakerFailures;
      const ids = completeProducts(800, FAILURES + 12);
      const stale = ids.pop()!;
      expect((await page(worker, `/products/${stale}`)).status).toBe(200);
      await sleep(PAST_SHORT_TTL_MS);
      await injectFault(stack, { service: "product", down: "500" });
      await resetCounters(stack);

      for (const id of ids.splice(0, FAILURES)) expect503Page(await page(worker, `/products/${id}`));
      const openedBy = Date.now();
      expect((await stack.counters()).services.product).toBe(FAILURES);

      // Well within the cool-down: no product request reaches the origin.
      const during: Page[] = [];
      while (Date.now() - openedBy < DEFAULTS.breakerCoolDownMs * 0.6 && ids.length > 1) {
        during.push(await page(worker, `/products/${ids.shift()}`));
        during.push(await page(worker, `/products/${stale}`));
      }
      expect(during.length).toBeGreaterThanOrEqual(4);
      for (const p of during) {
        expect(p.ms).toBeLessThan(1000);
        if (p.status === 200) {
          expect(member(p.cacheStatus, "product")).toMatch(/fwd-status=503; ttl=(0|-\d+); detail="product stale-if-error"/);
        } else {
          expect503Page(p);
          expect(member(p.cacheStatus, "product")).toMatch(/fwd-status=503; detail="product failed"/);
        }
      }
      expect(during.filter((p) => p.status === 200).length).toBe(during.length / 2);
      expect((await stack.counters()).services.product).toBe(FAILURES);

      // After the cool-down one probe goes through; the service is back, so the breaker closes.
      await clearFaults(stack);
      await sleep(Math.max(0, openedBy + DEFAULTS.breakerCoolDownMs + 300 - Date.now()));
      const probe = await page(worker, `/products/${ids.shift()}`);
      expect(probe.status).toBe(200);
      expect((await stack.counters()).services.product).toBe(FAILURES + 1);
      expect((await page(worker, `/products/${stale}`)).cacheStatus).not.toContain("stale-if-error");
    });
  });
});

describe("when the whole origin is gone (process stopped)", () => {
  let stack: Stack;
  let worker: WorkerInstance;
  let revived: { close(): Promise<void> } | undefined;

  beforeAll(async () => {
    stack = await startStack();
    worker = await startWorker({ ...stack.bindings, CACHE_POLICIES: SHORT_CORE_POLICIES });
  });
  afterAll(async () => {
    await worker?.close();
    await revived?.close();
    await stack?.close();
  });

  it("viewed products render stale, others get the 503 page at once; a revived origin serves fresh pages", async () => {
    const [viewed, unseen] = completeProducts(750, 2);
    expect((await page(worker, `/products/${viewed}`)).status).toBe(200);
    await sleep(PAST_SHORT_TTL_MS);
    await stack.origin.close();

    const stale = await page(worker, `/products/${viewed}`);
    expect(stale.status).toBe(200);
    expect(member(stale.cacheStatus, "product")).toMatch(/fwd-status=502; ttl=(0|-\d+); detail="product stale-if-error"/);
    expect(stale.html).toContain("Availability unknown");
    expect(stale.ms).toBeLessThan(PRODUCT_TIMEOUT_MS);

    const failed = await page(worker, `/products/${unseen}`);
    expect503Page(failed);
    expect(failed.ms).toBeLessThan(PRODUCT_TIMEOUT_MS);

    // The origin comes back on the same address.
    revived = await startDemoOrigin({ port: stack.origin.port, latencyMs: 5, jitterMs: 2 });
    const recovered = await page(worker, `/products/${unseen}`);
    expect(recovered.status).toBe(200);
    expect(member(recovered.cacheStatus, "product")).toMatch(/^pp-origin; fwd=uri-miss; fwd-status=200/);
    const refreshed = await page(worker, `/products/${viewed}`);
    expect(refreshed.status).toBe(200);
    expect(refreshed.cacheStatus).not.toContain("stale-if-error");
  });
});
