// A purge's bound through Redis faults (docs/architecture.md#invalidation):
// the shop's backend retries its purge through a Redis fault until the 202;
// counted from that 202, every isolate shows the new price within
// PURGE_POLL_MS plus one L2 round trip, whatever it went through before (its
// reads of the log unanswered, its L2 breaker open), and a hard-purged copy is
// never its fallback when the origin then fails. Two isolates sharing a
// location cache, the known-ids filter built, visitors asking all along.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { OriginAdmin } from "../../dev/harness/originAdmin";
import { productId } from "../../dev/origin/catalog";
import { DEFAULTS } from "../../src/config/defaults";
import { page } from "../support/faults";
import { buildFilter, waitUntilReady } from "../support/knownIds";
import { PURGE_TOKEN, startStack, type Stack } from "../support/stack";
import { logFaults, startWorker, type WorkerInstance } from "../support/worker";

const L2_TIMEOUT_MS = 100;
/** The bound a 202 promises (README, "Purges"), and room for a loaded test machine to read its replies. */
const BOUND_MS = DEFAULTS.purgePollMs + 2 * L2_TIMEOUT_MS + 500;

let stack: Stack;
let admin: OriginAdmin;
const isolates: WorkerInstance[] = [];

beforeAll(async () => {
  stack = await startStack();
  admin = new OriginAdmin(stack.origin.url);
  await buildFilter(stack);
  const locationCache = mkdtempSync(join(tmpdir(), "purge-faults-"));
  for (let i = 0; i < 2; i++)
    isolates.push(await startWorker({ ...stack.bindings, L2_TIMEOUT_MS: String(L2_TIMEOUT_MS), LOCATION_CACHE: "on" }, { cachePersist: locationCache }));
  for (const isolate of isolates) await waitUntilReady(isolate);
});

afterEach(async () => {
  stack.redis.resume();
  await admin.clearFaults();
});

afterAll(async () => {
  expect(logFaults(...isolates)).toEqual([]);
  await Promise.all(isolates.map((isolate) => isolate.close()));
  await stack?.close();
});

/** The offer price in the page's JSON-LD (undefined: no page). */
function priceOf(html: string): string | undefined {
  const jsonLd = /<script type="application\/ld\+json">([\s\S]*?)<\/script>/.exec(html)?.[1];
  return jsonLd ? (JSON.parse(jsonLd) as { offers?: { price?: string } }).offers?.price : undefined;
}

/** The shop's backend: POST /__purge to the isolates in turn, every 500 ms, until one answers 202; when it did (performance.now()). */
async function purgeUntilAccepted(id: string): Promise<number> {
  for (let attempt = 0; attempt < 40; attempt++) {
    const response = await isolates[attempt % isolates.length]!.fetch("/__purge", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${PURGE_TOKEN}` },
      body: JSON.stringify({ ids: [id] }),
    });
    if (response.status === 202) return performance.now();
    expect(response.status).toBe(503);
    await sleep(500);
  }
  throw new Error("the purge was never accepted");
}

/**
 * Visitors on both isolates all along (the product under test, warm pages
 * and cold ones), each 200 of `id` kept with its price and when it was sent.
 */
function visitors(id: string, warm: readonly string[]) {
  const seen: { isolate: number; sent: number; status: number; price: string | undefined; cacheStatus: string }[] = [];
  let stopped = false;
  const loops = isolates.flatMap((isolate, n) =>
    [0, 1, 2, 3].map(async (k) => {
      for (let j = k; !stopped; j++) {
        const asked = j % 3 === 0 ? id : j % 3 === 1 ? warm[j % warm.length]! : productId(1000 + ((j * 7919 + k * 104_729) % 4000));
        const sent = performance.now();
        const answer = await page(isolate, `/products/${asked}`);
        if (asked === id) seen.push({ isolate: n, sent, status: answer.status, price: priceOf(answer.html), cacheStatus: answer.cacheStatus });
        await sleep(2);
      }
    }),
  );
  return {
    seen,
    async stop() {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

async function warmUp(ids: readonly string[]): Promise<string> {
  for (const isolate of isolates) for (const id of ids) expect((await page(isolate, `/products/${id}`)).status).toBe(200);
  return priceOf((await page(isolates[0]!, `/products/${ids[0]}`)).html)!;
}

describe("a purge retried through a Redis fault", () => {
  it("reaches every isolate within the bound of its 202 when Redis comes back from a pause", async () => {
    const warm = Array.from({ length: 20 }, (_, i) => productId(300 + i));
    const id = warm[0]!;
    const oldPrice = await warmUp(warm);
    const load = visitors(id, warm);
    await sleep(1000);
    stack.redis.pause();
    await admin.changePrice(id, 77_701, { notify: false });
    const resumed = sleep(3000).then(() => stack.redis.resume());
    const ackAt = await purgeUntilAccepted(id);
    await resumed;
    await sleep(BOUND_MS + 1500);
    await load.stop();

    const after = load.seen.filter((s) => s.sent > ackAt + BOUND_MS && s.status === 200);
    for (const n of [0, 1]) expect(after.filter((s) => s.isolate === n).length, `isolate ${n} answered`).toBeGreaterThan(5);
    expect(after.filter((s) => s.price !== "777.01").map((s) => `#${s.isolate} +${Math.round(s.sent - ackAt)} ms ${s.price} ${s.cacheStatus}`)).toEqual([]);
    expect(oldPrice).not.toBe("777.01");
  }, 60_000);

  it("after Redis paused and the product service failing, serves no isolate's hard-purged copy, neither fresh nor as a fallback", async () => {
    const warm = Array.from({ length: 20 }, (_, i) => productId(400 + i));
    const id = warm[0]!;
    await warmUp(warm);
    const load = visitors(id, warm);
    await sleep(1000);
    stack.redis.pause();
    await admin.changePrice(id, 77_702, { notify: false });
    // The double fault: Redis paused, and a second later the product service failing; both undone together.
    const failing = sleep(1000).then(() => admin.setFaults({ service: "product", errorRate: 1 }));
    const resumed = sleep(3000).then(() => stack.redis.resume());
    const ackAt = await purgeUntilAccepted(id);
    await resumed;
    await failing;
    // Still failing past the bound: what an isolate then serves of the product is either the new price or nothing (503).
    await sleep(BOUND_MS + 1500);
    await admin.clearFaults();
    await sleep(500);
    await load.stop();

    const after = load.seen.filter((s) => s.sent > ackAt + BOUND_MS);
    for (const n of [0, 1]) expect(after.filter((s) => s.isolate === n).length, `isolate ${n} answered`).toBeGreaterThan(5);
    const old = after.filter((s) => s.status === 200 && s.price !== "777.02");
    expect(old.map((s) => `#${s.isolate} +${Math.round(s.sent - ackAt)} ms ${s.price} ${s.cacheStatus}`)).toEqual([]);
  }, 60_000);
});
