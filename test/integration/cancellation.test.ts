// Visitors who leave mid-request must cost the isolate nothing it needs to
// serve the next ones (docs/architecture.md#sharing-work-across-requests-in-one-isolate): origin
// slots, places in the queue, in-flight fills and the purge sync are leases
// that come back by their deadline whatever became of their holder, and a
// fill whose owner vanished is completed or taken over for the requests
// waiting on it.
//
// Real clients on real connections to the bundled worker in workerd, real
// Redis behind the gateway, the demo origin's product service answering in
// ~250 ms (the other services in ~20 ms) so that a visitor can leave while
// the page's fills are at the origin. Leaving is a connection reset (see
// support/clients.ts): workerd then cancels the request as the edge does.
//
// Time bounds are generous for a loaded 2-core machine, but each is far
// below "never", which is what a leaked slot or an orphaned fill costs.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { indexOf, productFor } from "../../dev/origin/catalog";
import { DEFAULTS, DEFAULT_POLICIES } from "../../src/config/defaults";
import { fillBoundMs } from "../../src/cache/fill/fill";
import { ISOLATE_STALL_MS } from "../../src/shared/leases";
import { pollUntil, tierStatus, visit, type TierStatus, type Visit, type VisitOutcome } from "../support/clients";
import { member } from "../../dev/harness/cacheStatus";
import { clearFaults, completeProducts, injectFault, originFetches, page, sleep, type Page } from "../support/faults";
import { freePort } from "../../dev/harness/ports";
import { startStack, type Stack } from "../support/stack";
import { logFaults, startedWorkers, startWorker, type WorkerInstance } from "../support/worker";

/** Every origin service answers in about this... */
const BASE_LATENCY_MS = 20;
/** ...and the product service this much later: a page's fills take ~250-300 ms. */
const PRODUCT_EXTRA_MS = 230;
/** The product service slowed further in (c): fills still at the origin ~1 s after their visitors left, within the 1.5 s product timeout. */
const SLOW_PRODUCT_EXTRA_MS = 800;
/** Slack for a loaded machine on top of a deadline of the tier's own. */
const MARGIN_MS = 1500;
/**
 * A slot is waited for and then leased within the fetch's own deadline (the
 * service's timeout) and a stall's grace: by then it is back, whatever
 * became of its holder.
 */
const SLOTS_BACK_MS = DEFAULT_POLICIES.product.originTimeoutMs + ISOLATE_STALL_MS + MARGIN_MS;
/** The longest a product fill may take (readThrough's fill bound: lock claim, wait for another isolate, origin timeout). */
const FILL_BOUND_MS = fillBoundMs({ lockTtlMs: DEFAULTS.lockTtlMs, policies: DEFAULT_POLICIES }, "product");
/** Visitors waiting on a fill whose owner left: an origin round trip or two, well under the fill bound (~7 s). */
const WAITERS_BOUND_MS = 1500;

let stack: Stack;
let worker: WorkerInstance | undefined;

beforeAll(async () => {
  stack = await startStack({ latencyMs: BASE_LATENCY_MS, jitterMs: 5 });
});
afterAll(async () => {
  await stack?.close();
});
beforeEach(async () => {
  // Only the product service is slow: fills stay at the origin long enough
  // to leave during them, while the other services keep the origin queue
  // short, so that no fetch times out and no breaker opens for reasons of
  // its own.
  await injectFault(stack, { service: "product", latencyMs: PRODUCT_EXTRA_MS });
});
afterEach(async () => {
  await clearFaults(stack);
  await worker?.close();
  worker = undefined;
});

/** A new isolate serving real HTTP (each test its own: a leak must not carry over), with its tier built. */
async function freshWorker(warmId: string): Promise<WorkerInstance> {
  // 64 origin slots (the default is 256): the waves below must queue for them.
  worker = await startWorker({ ...stack.bindings, ORIGIN_MAX_CONCURRENT: "64" }, { port: await freePort() });
  expect((await page(worker, `/products/${warmId}`)).status).toBe(200);
  return worker;
}

interface Wave {
  /** Visits reset 1-30 ms after the origin was asked for their product: mid-fill. */
  abortedMidFill: number;
  /** Visits reset without their product reaching the origin in time. */
  abortedOther: number;
  outcomes: VisitOutcome[];
}

/**
 * `perId` visits for each of `ids`, all at once; each visitor leaves 1-30 ms
 * after the origin received its product's request (its fill is then at the
 * origin), or after `maxWaitMs` if that never happens.
 */
async function abandonedWave(target: WorkerInstance, ids: readonly string[], perId: number, maxWaitMs = 3000): Promise<Wave> {
  const byId = new Map<string, Visit[]>(ids.map((id) => [id, []]));
  for (let round = 0; round < perId; round++) {
    for (const id of ids) byId.get(id)!.push(visit(target.url!, `/products/${id}`));
  }
  const midFill = new Set<Visit>();
  const waiting = new Set(ids);
  const deadline = Date.now() + maxWaitMs;
  while (waiting.size > 0 && Date.now() < deadline) {
    const asked = (await stack.counters()).ids;
    for (const id of [...waiting]) {
      if (!asked[`product:${id}`]) continue;
      waiting.delete(id);
      for (const v of byId.get(id)!) {
        setTimeout(
          () => {
            midFill.add(v);
            v.abort();
          },
          1 + Math.random() * 29,
        );
      }
    }
    await sleep(20);
  }
  for (const id of waiting) for (const v of byId.get(id)!) v.abort();
  const visits = [...byId.values()].flat();
  const outcomes = await Promise.all(visits.map((v) => v.done));
  const abortedMidFill = visits.filter((v, i) => midFill.has(v) && outcomes[i]!.kind === "aborted").length;
  const abortedOther = visits.filter((v, i) => !midFill.has(v) && outcomes[i]!.kind === "aborted").length;
  return { abortedMidFill, abortedOther, outcomes };
}

/** What these tests read of the isolate's status: the gauges (null: not reported), and how long ago it synced purges. */
async function gauges(target: WorkerInstance) {
  const status: TierStatus = await tierStatus(target);
  return {
    originSlots: status.originSlots ?? null,
    fills: status.fills ?? null,
    coldPages: status.overload?.admission.coldPages ?? null,
    purgeSyncAgeMs: status.purges.syncAgeMs,
  };
}
type Gauges = Awaited<ReturnType<typeof gauges>>;

const allSlotsBack = (g: Gauges) => g.originSlots?.inUse === 0 && g.originSlots?.queued === 0;
const noFillInFlight = (g: Gauges) => g.fills?.inFlight === 0;

/** A cold product's page from the origin, complete: what an isolate that lost nothing answers. */
function expectFreshFromOrigin(p: Page): void {
  expect(p.status, `status of a cold product (Cache-Status: ${p.cacheStatus})`).toBe(200);
  expect(member(p.cacheStatus, "product")).toMatch(/^pp-origin; fwd=uri-miss; fwd-status=200/);
  expect(p.degraded).toEqual([]);
}

describe("visitors who leave mid-request", () => {
  it("200 requests aborted by their clients mid-fill give back every origin slot", async () => {
    const [warm, ...ids] = completeProducts(3000, 52);
    const cold = ids.pop()!;
    const target = await freshWorker(warm!);

    // 4 visitors for each of 50 cold products (200 origin fetches for 64 slots: some queue), all leaving mid-fill.
    const wave = await abandonedWave(target, ids, 4);
    expect(wave.outcomes.filter((o) => o.kind === "failed")).toEqual([]);
    // Most of them really left while their fill was at the origin (the rest before it got there).
    expect(wave.abortedMidFill).toBeGreaterThanOrEqual(100);

    // Every slot and place in the queue comes back, by its lease's deadline at the latest...
    await pollUntil("every origin slot to come back", () => gauges(target), allSlotsBack, SLOTS_BACK_MS);
    // ... and no fill is left behind.
    await pollUntil("no fill in flight", () => gauges(target), noFillInFlight, FILL_BOUND_MS + MARGIN_MS);
    // The pages whose visitors left are no longer counted in progress by admission: not a page's lease (~7 s) later, at once.
    expect((await gauges(target)).coldPages).toBe(0);

    // The isolate serves uncached pages as before.
    expectFreshFromOrigin(await page(target, `/products/${cold}`));
  });

  it("a fill whose owning request is cancelled is completed or taken over for its waiters", async () => {
    const [warm, ...candidates] = completeProducts(4000, 4);
    // A title without markup, to find it verbatim in the page.
    const id = candidates.find((candidate) => indexOf(candidate)! % 10 !== 3)!;
    const title = productFor(indexOf(id)!, stack.origin.url).title;
    const target = await freshWorker(warm!);

    // A starts the fill; B..E arrive while A's product fetch is at the origin; then A leaves.
    const owner = visit(target.url!, `/products/${id}`);
    await pollUntil(
      "the origin to be asked for the product",
      () => originFetches(stack, "product", id),
      (n) => n >= 1,
      3000,
    );
    const waiters = Array.from({ length: 4 }, () => page(target, `/products/${id}`));
    await sleep(20);
    owner.abort();
    expect((await owner.done).kind).toBe("aborted");

    const pages = await Promise.all(waiters);
    for (const p of pages) {
      expect(p.status, `a waiter's page (Cache-Status: ${p.cacheStatus})`).toBe(200);
      expect(p.html).toContain(title);
      expect(p.degraded).toEqual([]);
      // Not the fill bound, which is what waiting for a fill that never settles costs.
      expect(p.ms).toBeLessThan(WAITERS_BOUND_MS);
    }
    // The owner's fetch, and at most one more by a waiter that took over.
    expect(await originFetches(stack, "product", id)).toBeLessThanOrEqual(2);

    // The fill's result was kept: the next visitor is served from this isolate's L1.
    const later = await page(target, `/products/${id}`);
    expect(later.status).toBe(200);
    expect(member(later.cacheStatus, "product")).toMatch(/^pp-l1; hit;/);
    await pollUntil("no fill in flight", () => gauges(target), noFillInFlight, FILL_BOUND_MS + MARGIN_MS);
  });

  it("visitors leaving while a slow origin holds their fills: slots come back, and once it is healed cold pages are served again", async () => {
    const [warm, ...ids] = completeProducts(5000, 61);
    const colds = ids.splice(50);
    const target = await freshWorker(warm!);
    await injectFault(stack, { service: "product", latencyMs: SLOW_PRODUCT_EXTRA_MS });

    const wave = await abandonedWave(target, ids, 4);
    expect(wave.outcomes.filter((o) => o.kind === "failed")).toEqual([]);
    expect(wave.abortedMidFill).toBeGreaterThanOrEqual(100);
    // The visitors are gone; their product fetches are still at the origin. It recovers.
    await clearFaults(stack);
    const healedAt = Date.now();

    // Within a second or two, cold products are answered from the origin again...
    const first = await pollUntil(
      "a cold product answered 200",
      () => page(target, `/products/${colds[0]}`),
      (p) => p.status === 200,
      SLOTS_BACK_MS,
    );
    expectFreshFromOrigin(first);
    expect(Date.now() - healedAt).toBeLessThan(SLOTS_BACK_MS);
    // ... and once the fetches of the visitors who left have had their time
    // at the slow origin, all of them at once: nothing is held any more.
    await sleep(Math.max(0, healedAt + BASE_LATENCY_MS + SLOW_PRODUCT_EXTRA_MS + 300 - Date.now()));
    const burst = await Promise.all(colds.slice(1).map((id) => page(target, `/products/${id}`)));
    for (const p of burst) expectFreshFromOrigin(p);

    await pollUntil("every origin slot to come back", () => gauges(target), allSlotsBack, SLOTS_BACK_MS);
    await pollUntil("no fill in flight", () => gauges(target), noFillInFlight, FILL_BOUND_MS + MARGIN_MS);
  });

  it("a purge sync whose request was cancelled holds up neither later pages nor later syncs", async () => {
    const [warm, id] = completeProducts(6000, 2);
    const target = await freshWorker(warm!);
    expect((await page(target, `/products/${id}`)).status).toBe(200);
    // Past the poll interval, the next request syncs purges before it is served...
    await sleep(DEFAULTS.purgePollMs + 200);
    // ... and waits on Redis, frozen for the moment, when its visitor leaves.
    stack.redis.pause();
    try {
      const leaving = visit(target.url!, `/products/${id}`);
      await sleep(200);
      leaving.abort();
      expect((await leaving.done).kind).toBe("aborted");
    } finally {
      stack.redis.resume();
    }

    // Within the sync's own deadline (its L2 budget, twice) and some, pages
    // are no longer held up by that sync, and purges are read again.
    const syncWaitMs = 2 * Number(stack.bindings.L2_TIMEOUT_MS);
    const healthy = (v: { status: number; ms: number; purgeSyncAgeMs: number | null }) =>
      v.status === 200 && v.ms < 1000 && v.purgeSyncAgeMs !== null && v.purgeSyncAgeMs < DEFAULTS.purgePollMs + 1000;
    await pollUntil(
      "pages served without waiting on the cancelled sync, and purges synced again",
      async () => {
        const p = await page(target, `/products/${id}`);
        return { status: p.status, ms: Math.round(p.ms), purgeSyncAgeMs: (await gauges(target)).purgeSyncAgeMs };
      },
      healthy,
      syncWaitMs + 2 * MARGIN_MS,
    );
    // And it stays so.
    await sleep(DEFAULTS.purgePollMs + 200);
    const p = await page(target, `/products/${id}`);
    expect(p.ms).toBeLessThan(1000);
    expect((await gauges(target)).purgeSyncAgeMs).toBeLessThan(DEFAULTS.purgePollMs + 1000);
  });

  it("no unhandled_error, and no 'Cannot perform I/O on behalf of a different request', in any worker's log", () => {
    // Every worker of this file is closed by now (afterEach): its log is complete.
    expect(logFaults(...startedWorkers())).toEqual([]);
  });
});
