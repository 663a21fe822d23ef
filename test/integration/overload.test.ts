// An isolate does bounded work (docs/architecture.md#overload): a visitor who
// leaves stops the work of their page, a fill nobody waits for any more
// finishes only in the room its limit has spare, and a page that needs new work
// while the isolate cannot take it on is shed (a copy usable on error, or a
// quick 503 with Retry-After) while pages in L1 are served.
//
// The bundled worker in workerd over real HTTP (visitors leave with a
// connection reset, as in cancellation.test.ts), real Redis behind the
// gateway, the demo origin with a slow product service so that a visitor
// can leave, or a page be in progress, while the product is at the origin.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { member } from "../../dev/harness/cacheStatus";
import { entryKey, lockKey } from "../../src/cache/keys";
import { DEFAULTS } from "../../src/config/defaults";
import { pageRetryAfterSeconds } from "../../src/http/errorPage";
import { ONE_BROWSER } from "../../src/overload/fairShare";
import { INTERVAL_MS } from "../../src/overload/limit";
import type { Env } from "../../src/config";
import { pollUntil, tierStatus, visit } from "../support/clients";
import { clearFaults, completeProducts, gatewayCommand, injectFault, originFetches, page, sleep, type Page } from "../support/faults";
import { freePort } from "../../dev/harness/ports";
import { startStack, type Stack } from "../support/stack";
import { logFaults, startedWorkers, startWorker, type WorkerInstance } from "../support/worker";

/**
 * The product service answers this late (within its time-out: startWith): a visitor
 * can leave, or a page be held, while it is at the origin. The tests check the
 * order of what happens meanwhile, not its time: long enough that the other
 * requests of a test are answered within it on a machine busy with other tests.
 */
const SLOW_PRODUCT_MS = 1200;

let stack: Stack;
let worker: WorkerInstance | undefined;

beforeAll(async () => {
  stack = await startStack({ latencyMs: 10, jitterMs: 2 });
});
afterAll(async () => {
  await stack?.close();
});
afterEach(async () => {
  await clearFaults(stack);
  await worker?.close();
  worker = undefined;
});

/**
 * The worker with `bindings`, its product service's time-out well past
 * SLOW_PRODUCT_MS (a reply read late on a busy machine is not a time-out),
 * unless the test sets the product's policy itself.
 */
async function startWith(bindings: Partial<Env>): Promise<WorkerInstance> {
  const policies = JSON.parse((bindings.CACHE_POLICIES as string | undefined) ?? "{}") as Record<string, object>;
  policies.product ??= { originTimeoutMs: 4 * SLOW_PRODUCT_MS };
  worker = await startWorker({ ...stack.bindings, ...bindings, CACHE_POLICIES: JSON.stringify(policies) }, { port: await freePort() });
  return worker;
}

interface OverloadStatus {
  admission: {
    admitted: number;
    shed: { busy: number; overShare: number };
    shedServedStale: number;
    shedRefused: number;
    coldPages: number;
    coldPagesQueued: number;
    pushedOut: number;
    limit: number;
  };
  departures: { pagesLeft: number; fillsStopped: number; fillsFinished: number; fillsDropped: number };
  hold: { holdMs: number; departedShare: number; held: number; leftWhileHeld: number };
}
const overloadOf = async (target: WorkerInstance) => ((await tierStatus(target)) as unknown as { overload: OverloadStatus }).overload;

const redisHas = async (key: string) => (await gatewayCommand(stack, ["EXISTS", key])) === 1;
const productKey = (id: string) => entryKey(DEFAULTS.keyPrefix, "product", id);

/** Until the origin has been asked for `id`'s product (which it then holds for SLOW_PRODUCT_MS). */
async function productAtOrigin(id: string): Promise<void> {
  await pollUntil(
    `${id}'s product at the origin`,
    () => originFetches(stack, "product", id),
    (n) => n >= 1,
    3000,
  );
}

/**
 * A page for `id`, started and held while its product is at the origin (the
 * isolate's cold page in progress); resolves once it is held, with its answer
 * still to come (wrapped: a returned promise would be awaited with it).
 */
async function heldAtOrigin(target: WorkerInstance, id: string): Promise<{ answer: Promise<Page> }> {
  const answer = page(target, `/products/${id}`);
  await productAtOrigin(id);
  return { answer };
}

/** A visitor asks for `id` and leaves (a reset) once the origin has been asked for its product. */
async function leaveWhileProductAtOrigin(target: WorkerInstance, id: string, stayMs = 20): Promise<void> {
  const leaving = visit(target.url!, `/products/${id}`);
  await productAtOrigin(id);
  await sleep(stayMs);
  leaving.abort();
  expect((await leaving.done).kind).toBe("aborted");
}

describe("visitors who leave", () => {
  it("a page whose visitor left while its product was at the origin fetches nothing more; the product is written for the next visitor", async () => {
    const [id] = completeProducts(7000, 1);
    const target = await startWith({});
    await injectFault(stack, { service: "product", latencyMs: SLOW_PRODUCT_MS });
    await leaveWhileProductAtOrigin(target, id!);

    // The product's fill was past its fetch when its answer came: within the budget, it is written to L2.
    await pollUntil("the product in L2", () => redisHas(productKey(id!)), Boolean, 3000);
    // The page's other parts were never claimed nor fetched: nobody was left to show them to.
    await sleep(300);
    for (const resource of ["inventory", "reviews", "recommendations"]) {
      expect(await originFetches(stack, resource, id!), `${resource} fetched for nobody`).toBe(0);
      expect(await redisHas(lockKey(DEFAULTS.keyPrefix, entryKey(DEFAULTS.keyPrefix, resource as "inventory", id!))), `${resource} lock`).toBe(false);
    }
    const overload = await overloadOf(target);
    expect(overload.departures.pagesLeft).toBe(1);
    expect(overload.departures.fillsFinished).toBe(1);

    // The next visitor gets the product from this isolate's L1, and the rest from the origin.
    await clearFaults(stack);
    const next = await page(target, `/products/${id}`);
    expect(next.status).toBe(200);
    expect(member(next.cacheStatus, "product")).toMatch(/^pp-l1; hit/);
    expect(member(next.cacheStatus, "inventory")).toMatch(/^pp-origin; fwd=uri-miss; fwd-status=200/);
  });

  it("while another visitor's page waits for its turn, a fill nobody waits for is cut short at the origin, and its lock released at once", async () => {
    const [id, next] = completeProducts(7100, 2);
    // One cold page at a time: the leaving visitor's, then the waiting one's.
    const target = await startWith({ COLD_PAGES_MAX: "1", COLD_PAGE_WAIT_MS: "5000" });
    await injectFault(stack, { service: "product", latencyMs: SLOW_PRODUCT_MS });
    const leaving = visit(target.url!, `/products/${id}`);
    await productAtOrigin(id!);
    const waiting = page(target, `/products/${next}`);
    await pollUntil(
      "the second page waiting for its turn",
      () => overloadOf(target),
      (o) => o.admission.coldPagesQueued === 1,
      3000,
    );
    let waited = false;
    void waiting.then(() => (waited = true));
    leaving.abort();
    expect((await leaving.done).kind).toBe("aborted");
    await pollUntil(
      "the fill to be dropped",
      () => overloadOf(target),
      (o) => o.departures.fillsDropped === 1,
      3000,
    );
    // Released (with the isolate's next send of writes), not left to expire
    // (DEFAULTS.lockTtlMs, 3 s), and before the waiting page, which started as
    // the visitor left, got its product from the slow service: another isolate
    // may fill the key now.
    await pollUntil(
      "the lock released",
      () => redisHas(lockKey(DEFAULTS.keyPrefix, productKey(id!))),
      (held) => !held,
      3000,
    );
    expect(waited).toBe(false);
    await sleep(SLOW_PRODUCT_MS);
    expect(await redisHas(productKey(id!))).toBe(false);
    expect((await overloadOf(target)).departures.fillsFinished).toBe(0);

    // The waiting page went first, and was served.
    expect((await waiting).status).toBe(200);
    // Nothing was kept: the next visitor's page fills the product again.
    await clearFaults(stack);
    const again = await page(target, `/products/${id}`);
    expect(again.status).toBe(200);
    expect(member(again.cacheStatus, "product")).toMatch(/^pp-origin; fwd=uri-miss; fwd-status=200/);
    // And the origin's breaker did not count the cut: no failure of the service.
    const status = (await tierStatus(target)) as unknown as { originBreakers: Record<string, { state: string }> };
    expect(status.originBreakers.product!.state).toBe("closed");
  });
});

// The hold's tests use products 5000-6400, apart from the other tests' (7000 and up): this file's origin counts fetches per product.
describe("the hold while visitors leave", () => {
  /** The isolate's first page, which sets the tier up (its reads of Redis), before visitors who leave within ms. */
  async function warmUp(target: WorkerInstance): Promise<void> {
    expect((await page(target, `/products/${completeProducts(6400, 1)[0]}`)).status).toBe(200);
  }

  /** Visitors for `ids` at once, each leaving `afterMs` after it asked. */
  async function leavers(target: WorkerInstance, ids: readonly string[], afterMs: number): Promise<void> {
    await Promise.all(
      ids.map(async (id) => {
        const leaving = visit(target.url!, `/products/${id}`);
        await sleep(afterMs);
        leaving.abort();
        await leaving.done;
      }),
    );
  }

  it("once most cold pages' visitors leave, a cold page starts its work only after a hold: one who leaves sooner costs no claim and no fetch, one who stays is served", async () => {
    const [first, second, third, staying] = [completeProducts(5000, 24), completeProducts(5400, 10), completeProducts(5500, 24), completeProducts(5600, 1)];
    const target = await startWith({});
    await warmUp(target);
    // Nobody is answered before leaving: the product is at the origin longer than anyone stays.
    await injectFault(stack, { service: "product", latencyMs: SLOW_PRODUCT_MS });
    /**
     * Visitors for `ids` who each leave a while after their product is at the origin: cold pages left before
     * their answer, by visitors who stayed longer than the hold's ceiling.
     */
    const holdOn = async (ids: readonly string[]) => {
      await Promise.all(ids.map((id) => leaveWhileProductAtOrigin(target, id, 2 * INTERVAL_MS)));
      return pollUntil(
        "the hold",
        () => overloadOf(target),
        (o) => o.hold.holdMs > 0 && o.hold.departedShare >= 0.5,
        3000,
      );
    };
    const { holdMs } = (await holdOn(first)).hold;
    // The leavers stayed longer than its ceiling: the hold is the ceiling.
    expect(holdMs).toBe(INTERVAL_MS);

    // Visitors who leave well within the hold: their pages never start.
    const admitted = (await overloadOf(target)).admission.admitted;
    await leavers(target, second, 1);
    await sleep(SLOW_PRODUCT_MS);
    expect((await overloadOf(target)).admission.admitted).toBe(admitted);
    for (const id of second) {
      expect(await originFetches(stack, "product", id), `${id} fetched for nobody`).toBe(0);
      expect(await redisHas(lockKey(DEFAULTS.keyPrefix, productKey(id))), `${id} claimed for nobody`).toBe(false);
    }

    // A visitor who stays through the hold gets the page (while visitors still leave: the hold follows the last 2 s).
    const before = (await holdOn(third)).hold.held;
    await clearFaults(stack);
    const stayed = await page(target, `/products/${staying[0]}`);
    expect(stayed.status).toBe(200);
    expect(member(stayed.cacheStatus, "product")).toMatch(/^pp-origin; fwd=uri-miss; fwd-status=200/);
    expect((await overloadOf(target)).hold.held).toBeGreaterThan(before);
  });
});

describe("shedding", () => {
  it("past COLD_PAGES_MAX, and with no time to wait, a cold page is a quick 503 with Retry-After while a page in L1 is served", async () => {
    const [warm, held, shed] = completeProducts(7200, 3);
    const target = await startWith({ COLD_PAGES_MAX: "1", COLD_PAGE_WAIT_MS: "0" });
    expect((await page(target, `/products/${warm}`)).status).toBe(200);
    await injectFault(stack, { service: "product", latencyMs: SLOW_PRODUCT_MS });

    // One cold page in progress: the isolate's whole allowance.
    const holding = (await heldAtOrigin(target, held!)).answer;
    let heldAnswered = false;
    void holding.then(() => (heldAnswered = true));
    const refused = await page(target, `/products/${shed}`);
    // Not queued behind the held page: answered while its product is still at the origin.
    expect(heldAnswered).toBe(false);
    expect(refused.status).toBe(503);
    // The breaker's cool-down and this worker's wait (none) together.
    expect(refused.headers.get("retry-after")).toBe(String(pageRetryAfterSeconds({ coldPageWaitMs: 0 })));
    expect(refused.headers.get("cache-control")).toBe("no-store");
    expect(refused.html).toContain("very busy");
    expect(member(refused.cacheStatus, "product")).toMatch(/fwd-status=503; detail="product failed"/);
    expect(await originFetches(stack, "product", shed!)).toBe(0);
    // A page in L1 needs no new work: always served.
    const cached = await page(target, `/products/${warm}`);
    expect(cached.status).toBe(200);
    expect(member(cached.cacheStatus, "product")).toMatch(/^pp-l1; hit/);

    expect((await holding).status).toBe(200);
    const overload = await overloadOf(target);
    // Shed as "busy": no place within its wait (none), the isolate's, a 503.
    expect(overload.admission.shed.busy).toBe(1);
    expect(overload.admission.shedRefused).toBe(1);
    // Its allowance back, the shed product is served.
    await clearFaults(stack);
    expect((await page(target, `/products/${shed}`)).status).toBe(200);
  });

  it("orders waiting cold pages by client (CF-Connecting-IP): while one floods, another's page goes ahead of the flood's waiting pages", async () => {
    const FLOOD = 30;
    const [warm, visitorId, ...ids] = completeProducts(7700, 2 + FLOOD);
    /** One round of the product service: the flood takes several, one after another, within the pages' wait. */
    const ROUND_MS = 600;
    const target = await startWith({ COLD_PAGES_MAX: "64", COLD_PAGE_WAIT_MS: String(10 * ROUND_MS) });
    const as = (client: string, id: string) => page(target, `/products/${id}`, { "cf-connecting-ip": client });
    expect((await as("198.51.100.9", warm!)).status).toBe(200);
    await injectFault(stack, { service: "product", latencyMs: ROUND_MS });
    const flood = ids.map((id) => as("198.51.100.9", id));
    // Handled here too: should the test fail early, the worker closes under them.
    for (const request of flood) request.catch(() => undefined);
    const { limit } = (await overloadOf(target)).admission;
    await pollUntil(
      "the flood's pages past the limit waiting",
      async () => (await overloadOf(target)).admission.coldPagesQueued,
      (queued) => queued === FLOOD - limit,
      ROUND_MS,
    );
    const visitor = as("2001:db8:0:7::1", visitorId!);
    // Its cached pages are served meanwhile.
    expect((await as("198.51.100.9", warm!)).status).toBe(200);
    // When the visitor's product reaches the origin, some of the flood's pages, queued before it, still wait:
    // it went ahead of them (queued last, it would go last). By order, not by a time bound.
    await pollUntil(
      "the visitor's product at the origin",
      () => originFetches(stack, "product", visitorId!),
      (n) => n >= 1,
      10 * ROUND_MS,
    );
    const floodAtOrigin = (await Promise.all(ids.map((id) => originFetches(stack, "product", id)))).filter((n) => n >= 1).length;
    expect(floodAtOrigin).toBeLessThan(FLOOD);
    expect((await visitor).status).toBe(200);
    const answers = await Promise.all(flood);
    expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 200));
  }, 60_000);

  it("a client holding more than its share of the queue while pages wait: its next cold pages are 429s one interval later, never queued; another client's page is queued and served next", async () => {
    const [warm, held, other, ...ids] = completeProducts(1000, 3 + 160);
    // The page in progress stays at the product service while the flood comes in.
    const heldMs = 4000;
    // Places to wait in for the flood's share and the other client's page.
    const PLACES = 128;
    const target = await startWith({
      COLD_PAGES_MAX: String(PLACES),
      COLD_PAGE_WAIT_MS: "10000",
      CACHE_POLICIES: JSON.stringify({ product: { originTimeoutMs: 6000 } }),
    });
    const as = (client: string, id: string) => page(target, `/products/${id}`, { "cf-connecting-ip": client });
    const flooder = "198.51.100.9";
    expect((await as(flooder, warm!)).status).toBe(200);
    await injectFault(stack, { service: "product", latencyMs: heldMs });
    // Requests off the platform ("unknown": Miniflare gives a request without the header 127.0.0.1) hold the page in progress: two share the places, half each.
    // The isolate's limit (it grew as the first page ended): the held page and the flood's first pages are in progress, the rest wait.
    const { limit } = (await overloadOf(target)).admission;
    const holding = (await heldAtOrigin(target, held!)).answer;
    let heldAnswered = false;
    void holding.then(() => (heldAnswered = true));
    const share = PLACES / 2;
    const answered: Page[] = [];
    const flood = ids.map((id) => as(flooder, id).then((answer) => (answered.push(answer), answer)));
    // Handled here too: should the test fail early, the worker closes under them.
    for (const request of flood) request.catch(() => undefined);
    // Past its share, each page is told at once that it is the client's own excess: a 429 with Retry-After.
    await pollUntil(
      "the flood past its share answered",
      async () => answered.length,
      (n) => n >= ids.length - share,
      heldMs * 0.75,
    );
    expect(answered.map((answer) => [answer.status, answer.headers.get("retry-after")])).toEqual(
      answered.map(() => [429, String(pageRetryAfterSeconds({ coldPageWaitMs: 10_000 }))]),
    );
    expect(answered[0]!.html).toContain("many pages at once");
    // Refused while the page in progress was still at the origin: never queued behind it.
    expect(heldAnswered).toBe(false);
    // Never queued: the flood holds its share (in progress or waiting), and none of the refused pages reached the origin.
    const { admission } = await overloadOf(target);
    expect(admission.coldPagesQueued).toBe(share - (limit - 1));
    expect(admission.shed.overShare).toBe(ids.length - share);
    // Another client's page is queued, and goes with the next round, right after the pages in progress, ahead of
    // most of the flood's waiting pages (queued behind them all, it would wait out rounds of the slow service and be shed).
    const served = await as("2001:db8:0:7::1", other!);
    expect(served.status).toBe(200);
    expect(answered.filter((answer) => answer.status === 200).length).toBeLessThan(share / 2);
    expect((await holding).status).toBe(200);
    // The rest of the flood is answered in its turn once the product service is quick again (served, or shed at its wait's end).
    await clearFaults(stack);
    const statuses = new Set((await Promise.all(flood)).map((answer) => answer.status));
    expect([...statuses].filter((status) => ![200, 429, 503].includes(status))).toEqual([]);
  }, 60_000);

  it("a cold page past COLD_PAGES_MAX waits for its turn (COLD_PAGE_WAIT_MS), off the CPU, and is served", async () => {
    const [held, waiting] = completeProducts(7500, 2);
    const target = await startWith({ COLD_PAGES_MAX: "1", COLD_PAGE_WAIT_MS: "3000" });
    await injectFault(stack, { service: "product", latencyMs: SLOW_PRODUCT_MS });
    const holding = (await heldAtOrigin(target, held!)).answer;
    const second = page(target, `/products/${waiting}`);
    await pollUntil(
      "the second page waiting",
      async () => (await overloadOf(target)).admission.coldPagesQueued,
      (queued) => queued === 1,
      SLOW_PRODUCT_MS,
    );
    // Waiting for its turn: nothing of it has reached the origin.
    expect(await originFetches(stack, "product", waiting!)).toBe(0);
    expect((await holding).status).toBe(200);
    const served = await second;
    expect(served.status).toBe(200);
    expect(member(served.cacheStatus, "product")).toMatch(/^pp-origin; fwd=uri-miss; fwd-status=200/);
    expect((await overloadOf(target)).admission).toMatchObject({ shed: { busy: 0 }, coldPagesQueued: 0 });
  });

  it("an isolate whose pages are all cold but which keeps up (a slow origin) grows its limit as its pages end: many start at once, and all are served", async () => {
    const BATCHES = 4;
    const [first, ...ids] = completeProducts(6500, 1 + BATCHES * 2 * ONE_BROWSER + 4 * ONE_BROWSER);
    const target = await startWith({ COLD_PAGE_WAIT_MS: "5000", CACHE_POLICIES: JSON.stringify({ product: { originTimeoutMs: 5000 } }) });
    expect((await page(target, `/products/${first}`)).status).toBe(200);
    // It starts at one browser's pages; pages that end with half of it in use add one each.
    expect((await overloadOf(target)).admission.limit).toBe(ONE_BROWSER);
    await injectFault(stack, { service: "product", latencyMs: 300 });
    // Batches of cold pages until the limit has grown: one batch does it on an idle machine, but the test files
    // beside this one can keep workerd's replies late enough to read as congestion for a while (then it halves).
    let limit = ONE_BROWSER;
    let used = 0;
    for (let round = 0; round < BATCHES && limit <= ONE_BROWSER; round++) {
      const batch = ids.slice(used, (used += 2 * ONE_BROWSER));
      expect((await Promise.all(batch.map((id) => page(target, `/products/${id}`)))).map((answer) => answer.status)).toEqual(batch.map(() => 200));
      ({ limit } = (await overloadOf(target)).admission);
    }
    expect(limit).toBeGreaterThan(ONE_BROWSER);
    // The product service slower (within its time-out): the limit's worth of pages are at the origin at once.
    await injectFault(stack, { service: "product", latencyMs: 2000 });
    const rest = ids.slice(used, used + limit);
    const answers = rest.map((id) => page(target, `/products/${id}`));
    await pollUntil(
      "the limit's pages at the origin at once",
      async () => (await Promise.all(rest.map((id) => originFetches(stack, "product", id)))).filter((n) => n >= 1).length,
      (atOrigin) => atOrigin === rest.length,
      1800,
    );
    expect((await overloadOf(target)).admission.coldPages).toBe(rest.length);
    expect((await Promise.all(answers)).map((answer) => answer.status)).toEqual(rest.map(() => 200));
  }, 60_000);

  it("a herd for one cold product joins its one fill: not shed, whatever COLD_PAGES_MAX", async () => {
    const [id] = completeProducts(7400, 1);
    const target = await startWith({ COLD_PAGES_MAX: "1", COLD_PAGE_WAIT_MS: "0" });
    await injectFault(stack, { service: "product", latencyMs: SLOW_PRODUCT_MS });
    const first = (await heldAtOrigin(target, id!)).answer;
    const herd = await Promise.all([first, ...Array.from({ length: 20 }, () => page(target, `/products/${id}`))]);
    expect(herd.map((p) => p.status)).toEqual(herd.map(() => 200));
    expect(await originFetches(stack, "product", id!)).toBe(1);
    expect((await overloadOf(target)).admission.shed).toEqual({ busy: 0, overShare: 0 });
  });

  /**
   * One isolate with a single cold-page slot, taken by a page held at the
   * slow product service, and a second product whose `resource` L1 keeps
   * only as a copy usable on error (fresh for 1 s, no stale-while-revalidate,
   * viewed 1.2 s ago): that product's page again, and the held one's answer.
   */
  async function copyOnlyUsableOnError(resource: "reviews" | "inventory", fromIndex: number) {
    const [held, stale] = completeProducts(fromIndex, 2);
    const target = await startWith({
      COLD_PAGES_MAX: "1",
      COLD_PAGE_WAIT_MS: "5000",
      CACHE_POLICIES: JSON.stringify({ [resource]: { ttl: 1, swr: 0, staleIfError: 600 } }),
    });
    expect((await page(target, `/products/${stale}`)).status).toBe(200);
    await sleep(1200);
    await injectFault(stack, { service: "product", latencyMs: SLOW_PRODUCT_MS });
    const holding = (await heldAtOrigin(target, held!)).answer;
    return { target, holding, again: await page(target, `/products/${stale}`) };
  }

  it("a shed page with a copy usable on error is served from it", async () => {
    const { target, holding, again: fromCopy } = await copyOnlyUsableOnError("reviews", 7300);
    expect(fromCopy.status).toBe(200);
    expect(member(fromCopy.cacheStatus, "reviews")).toMatch(/^pp-l1; fwd=stale; fwd-status=503; .*detail="reviews stale-if-error"/);
    // Reviews that old are still shown (origin/resources.ts): nothing is defaulted.
    expect(fromCopy.degraded).toEqual([]);
    expect((await holding).status).toBe(200);
    expect((await overloadOf(target)).admission.shedServedStale).toBe(1);
  });

  it("a page whose only copy is stock kept for failures waits for its turn, and shows fresh stock", async () => {
    // The page would not show that stock ("availability unknown"): it is no copy to show, so the page waits, not shed.
    const { target, holding, again: waited } = await copyOnlyUsableOnError("inventory", 7350);
    expect(waited.status).toBe(200);
    expect(member(waited.cacheStatus, "inventory")).toMatch(/^pp-origin; fwd=stale; fwd-status=200;/);
    expect(waited.degraded).toEqual([]);
    expect((await holding).status).toBe(200);
    expect((await overloadOf(target)).admission).toMatchObject({ shedServedStale: 0, shedRefused: 0 });
  });
});

it("no unhandled_error, and no 'Cannot perform I/O on behalf of a different request', in any worker's log", () => {
  expect(logFaults(...startedWorkers())).toEqual([]);
});
