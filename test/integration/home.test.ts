// GET / goes through the same read path as product pages: the listing is
// cached, fetched once however many visitors ask, served stale while the
// listing service is slow or failing, and a cold failure is the documented
// 503 page; the titles cost a bounded number of subrequests.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { DEFAULTS } from "../../src/config/defaults";
import { pageRetryAfterSeconds } from "../../src/http/errorPage";
import { LISTING_ID } from "../../src/origin/resources";
import { clearFaults, injectFault } from "../support/faults";
import { PURGE_TOKEN, startStack, type Stack } from "../support/stack";
import { tierStatus } from "../support/clients";
import { logFaults, startWorker, type WorkerInstance } from "../support/worker";

let stack: Stack;
const workers: WorkerInstance[] = [];

/** A new isolate; `shortListing`: its listing is fresh for 1 s (then stale for 600 s), to see it expire. */
async function isolate(shortListing = false): Promise<WorkerInstance> {
  const policies = shortListing ? { CACHE_POLICIES: JSON.stringify({ listing: { ttl: 1 } }) } : {};
  const worker = await startWorker({ ...stack.bindings, ...policies });
  workers.push(worker);
  return worker;
}

const home = (worker: WorkerInstance) =>
  worker.fetch("/").then(async (response) => ({ status: response.status, html: await response.text(), retryAfter: response.headers.get("retry-after") }));
/** A hard purge of the listing, in L2 and (within the propagation bound) every isolate's L1. */
async function purgeListing(worker: WorkerInstance): Promise<void> {
  const response = await worker.fetch("/__purge", {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${PURGE_TOKEN}` },
    body: JSON.stringify({ ids: [LISTING_ID], resources: ["listing"] }),
  });
  expect(response.status).toBe(202);
}
const listingCalls = async () => (await stack.counters()).services.listing ?? 0;

beforeAll(async () => {
  stack = await startStack();
});

afterEach(async () => {
  await clearFaults(stack);
});

afterAll(async () => {
  expect(logFaults(...workers)).toEqual([]);
  await Promise.all(workers.map((worker) => worker.close()));
  await stack?.close();
});

describe("the home page", () => {
  it("answers the documented 503 page, not a 500, when the listing service is down and nothing is cached", async () => {
    const worker = await isolate();
    await injectFault(stack, { service: "listing", down: "500" });
    const answer = await home(worker);
    expect(answer.status).toBe(503);
    expect(answer.retryAfter).toBe(String(pageRetryAfterSeconds(DEFAULTS)));
    expect(answer.html).toContain("The product list is not available right now.");
  });

  it("fetches the listing once for 40 concurrent visitors of a slow listing service", async () => {
    const worker = await isolate();
    await injectFault(stack, { service: "listing", latencyMs: 300 });
    await stack.admin("/__admin/counters/reset", { method: "POST" });
    const answers = await Promise.all(Array.from({ length: 40 }, () => home(worker)));
    expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 200));
    expect(await listingCalls()).toBe(1);
    expect(answers[0]!.html).toContain('href="/products/p-000001"');
  });

  it("keeps serving the last list while the listing service fails, without asking it for every visitor", async () => {
    const worker = await isolate(true);
    // Fetched by this isolate, under its 1 s freshness: not another isolate's copy from L2.
    await purgeListing(worker);
    expect((await home(worker)).status).toBe(200);
    await injectFault(stack, { service: "listing", down: "500" });
    await new Promise((resolve) => setTimeout(resolve, 1300)); // past the listing's freshness
    await stack.admin("/__admin/counters/reset", { method: "POST" });
    const answers = await Promise.all(Array.from({ length: 20 }, () => home(worker)));
    for (const answer of answers) {
      expect(answer.status).toBe(200);
      expect(answer.html).toContain('href="/products/p-000001"');
    }
    // One refresh (and its one retry of a failed connection at most), not one per visitor.
    expect(await listingCalls()).toBeLessThanOrEqual(2);
  });

  it("costs at most a few product fetches per view, and shows more titles on later views", async () => {
    const worker = await isolate();
    await stack.admin("/__admin/counters/reset", { method: "POST" });
    const first = await home(worker);
    expect(first.status).toBe(200);
    const productFetches = (await stack.counters()).services.product ?? 0;
    expect(productFetches).toBeGreaterThan(0);
    expect(productFetches).toBeLessThanOrEqual(4);
    const titled = (html: string) => [...html.matchAll(/href="\/products\/([^"]+)">([^<]+)</g)].filter(([, id, title]) => id !== title).length;
    const second = await home(worker);
    expect(titled(second.html)).toBeGreaterThan(titled(first.html));
  });

  it("is shared through L2, and a purge of the listing reaches an isolate that serves only /", async () => {
    const [first, second] = [await isolate(), await isolate()];
    await purgeListing(first); // what earlier tests left in L2
    await stack.admin("/__admin/counters/reset", { method: "POST" });
    expect((await home(first)).status).toBe(200);
    expect((await home(second)).status).toBe(200);
    // The second isolate took the first one's listing from L2.
    expect(await listingCalls()).toBe(1);

    await purgeListing(first);
    await new Promise((resolve) => setTimeout(resolve, DEFAULTS.purgePollMs + 200)); // the propagation bound
    expect((await home(second)).status).toBe(200);
    // Gone from its L1 and from L2: fetched again, by an isolate that never served a product page.
    expect(await listingCalls()).toBe(2);
  });
  it("answers as a product page does: Cache-Status for its list, Server-Timing, an ETag (304 on a match), and each view counted", async () => {
    await purgeListing(await isolate());
    const worker = await isolate();
    const first = await worker.fetch("/");
    expect(first.status).toBe(200);
    expect(first.headers.get("cache-status")).toMatch(/^pp-(origin|l2); .*detail="listing"$/);
    expect(first.headers.get("server-timing")).toMatch(/(origin|l2);dur=[\d.]+.*total;dur=/);
    let [body, etag] = [await first.text(), first.headers.get("etag")];
    // Each view fills a few more titles: the page (and its ETag) changes until every title is known.
    let views = 1;
    for (let same = false; !same && views < 30; views++) {
      const next = await worker.fetch("/");
      expect(next.headers.get("cache-status")).toMatch(/^pp-l1; hit; ttl=\d+; detail="listing"$/);
      const html = await next.text();
      same = html === body && next.headers.get("etag") === etag;
      [body, etag] = [html, next.headers.get("etag")];
    }
    expect(etag).toBeTruthy();
    const notModified = await worker.fetch("/", { headers: { "if-none-match": etag! } });
    views++;
    expect(notModified.status).toBe(304);
    expect(notModified.headers.get("cache-status")).toMatch(/detail="listing"/);
    const status = (await tierStatus(worker)) as unknown as { last5m: { pages: number; outcomes: { ok: number } }; hotProducts: { id: string }[] };
    expect(status.last5m.pages).toBe(views);
    expect(status.last5m.outcomes.ok).toBe(views);
    // "home" is the list's id, not a product: never among the hot products to warm.
    expect(status.hotProducts.map((product) => product.id)).not.toContain(LISTING_ID);
  });
});
