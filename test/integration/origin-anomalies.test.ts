// Origin answers that are about one id, not about the service: a 400 or 422
// for a junk id, or the data of another id from an origin that canonicalises
// case. Anonymous visitors can cause as many of them as they like, so they
// must never open the service's breaker (which would turn every uncached
// page of the isolate into a 503): each is remembered for its id for a short
// while, and its visitor gets the 404 page. Only timeouts, refused
// connections and 5xx open it. And an id with no product costs one origin
// fetch, not one per resource of the page.
//
// The known-ids filter is off here: it stops junk ids before the origin when
// it is loaded, and these are the requests that reach the origin when it is
// not (failing open, still loading, or off).
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { DEFAULTS } from "../../src/config/defaults";
import type { StatusModel } from "../../src/observability/statusModel";
import { tierStatus, type TierStatus } from "../support/clients";
import { member } from "../../dev/harness/cacheStatus";
import { clearFaults, completeProducts, injectFault, page, resetCounters, type Page } from "../support/faults";
import { startStack, type Stack } from "../support/stack";
import { logFaults, startWorker, type WorkerInstance } from "../support/worker";

type Status = TierStatus & Pick<StatusModel, "originBreakers" | "breakerTransitions">;

const JUNK_REQUESTS = 20;

let stack: Stack;

beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.close();
});
beforeEach(async () => {
  await clearFaults(stack);
  await resetCounters(stack);
});

/** A worker of its own (its own isolate, so its own breakers), for one block. */
function freshWorker(): () => WorkerInstance {
  let worker: WorkerInstance;
  beforeAll(async () => {
    worker = await startWorker({ ...stack.bindings, KNOWN_IDS: "off" });
  });
  afterAll(async () => {
    await worker?.close();
    expect(logFaults(worker)).toEqual([]);
  });
  return () => worker;
}

function expectNotFoundPage(p: Page): void {
  expect(p.status).toBe(404);
  expect(p.html).toContain("We could not find that product.");
  expect(p.html).not.toMatch(/OriginError|at .*\.js/);
}

/** Origin requests per service since the last reset. */
async function fetchesPerService(): Promise<Record<string, number>> {
  return (await stack.counters()).services;
}

async function productBreaker(worker: WorkerInstance): Promise<{ state: string; transitions: number }> {
  const status = (await tierStatus(worker)) as Status;
  return { state: status.originBreakers.product.state, transitions: status.breakerTransitions["origin:product"] ?? 0 };
}

describe("junk ids answered 400 or 422 by the origin", () => {
  const worker = freshWorker();

  it(`${JUNK_REQUESTS} of them leave the breaker closed: a valid cold product still answers 200`, async () => {
    const junk = Array.from({ length: JUNK_REQUESTS }, (_, i) => `junk-${i}`);
    const pages: Page[] = [];
    await injectFault(stack, { service: "product", unknownIdStatus: 422 });
    for (const id of junk.slice(0, JUNK_REQUESTS / 2)) pages.push(await page(worker(), `/products/${id}`));
    await injectFault(stack, { service: "product", unknownIdStatus: 400 });
    for (const id of junk.slice(JUNK_REQUESTS / 2)) pages.push(await page(worker(), `/products/${id}`));
    await clearFaults(stack);

    const [cold] = completeProducts(7100, 1);
    const coldPage = await page(worker(), `/products/${cold}`);
    expect(coldPage.status).toBe(200);
    expect(coldPage.html).toContain("In stock");
    expect(await productBreaker(worker())).toEqual({ state: "closed", transitions: 0 });

    for (const p of pages) {
      expectNotFoundPage(p);
      expect(member(p.cacheStatus, "product")).toMatch(/^pp-origin; fwd=uri-miss; fwd-status=502; ttl=\d+; detail="product rejected"$/);
    }
    // One product fetch each, and nothing else: there is no product to show the rest on.
    expect(await fetchesPerService()).toMatchObject({ product: JUNK_REQUESTS + 1, inventory: 1, reviews: 1, recommendations: 1 });

    // Remembered for their ids: asked again, they cost nothing.
    for (const id of junk) {
      const p = await page(worker(), `/products/${id}`);
      expectNotFoundPage(p);
      expect(member(p.cacheStatus, "product")).toMatch(/^pp-l1; hit; ttl=\d+; detail="product absent"$/);
    }
    expect((await fetchesPerService()).product).toBe(JUNK_REQUESTS + 1);
  });
});

describe("an origin that canonicalises case (P-000123 answered as p-000123)", () => {
  const worker = freshWorker();

  it(`${JUNK_REQUESTS} of them give the 404 page and leave the breaker closed`, async () => {
    await injectFault(stack, { service: "product", canonicalIds: true });
    const upper = completeProducts(7200, JUNK_REQUESTS).map((id) => id.toUpperCase());
    const pages: Page[] = [];
    for (const id of upper) pages.push(await page(worker(), `/products/${id}`));

    const [cold] = completeProducts(7300, 1);
    expect((await page(worker(), `/products/${cold}`)).status).toBe(200);
    expect(await productBreaker(worker())).toEqual({ state: "closed", transitions: 0 });
    for (const p of pages) {
      expectNotFoundPage(p);
      expect(member(p.cacheStatus, "product")).toContain('detail="product rejected"');
    }
    expect(await fetchesPerService()).toMatchObject({ product: JUNK_REQUESTS + 1, inventory: 1, reviews: 1, recommendations: 1 });
  });
});

describe("an origin answering 5xx", () => {
  const worker = freshWorker();

  it("still opens the breaker, as before", async () => {
    await injectFault(stack, { service: "product", down: "500" });
    for (const id of completeProducts(7400, DEFAULTS.breakerFailures)) {
      expect((await page(worker(), `/products/${id}`)).status).toBe(503);
    }
    expect(await productBreaker(worker())).toEqual({ state: "open", transitions: 1 });
    // Nothing of the page but the product was asked for while it failed.
    expect(await fetchesPerService()).toMatchObject({ product: DEFAULTS.breakerFailures, inventory: 0, reviews: 0, recommendations: 0 });
  });
});

describe("a product that does not exist", () => {
  const worker = freshWorker();

  it("costs one origin fetch, not four", async () => {
    const id = "p-999990";
    expectNotFoundPage(await page(worker(), `/products/${id}`));
    expectNotFoundPage(await page(worker(), `/products/${id}`));
    const counters = await stack.counters();
    expect(counters.total).toBe(1);
    expect(counters.ids).toEqual({ [`product:${id}`]: 1 });
  });
});
