// A bulk re-price (hundreds of purges of 1,000 ids each) must not blind the
// isolates that read the purge log: one sync reads a bounded amount (an
// isolate further behind starts over from L2, where id purges are already
// applied), sync reads never open the page path's L2 breaker, and the next
// purge still reaches every isolate within the documented bound.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { productId } from "../../dev/origin/catalog";
import { health, page } from "../support/faults";
import { PURGE_TOKEN, startStack, type Stack } from "../support/stack";
import { logFaults, startWorker, type WorkerInstance } from "../support/worker";

let stack: Stack;
let recorder: WorkerInstance;
let reader: WorkerInstance;

beforeAll(async () => {
  stack = await startStack();
  recorder = await startWorker(stack.bindings);
  // The page path's real budget for L2 calls (the shared test stack gives 1 s for load tolerance).
  reader = await startWorker({ ...stack.bindings, L2_TIMEOUT_MS: "100" });
});

afterAll(async () => {
  expect(logFaults(recorder, reader)).toEqual([]);
  await Promise.all([recorder?.close(), reader?.close()]);
  await stack?.close();
});

function purge(body: unknown) {
  return recorder.fetch("/__purge", {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${PURGE_TOKEN}` },
    body: JSON.stringify(body),
  });
}

async function priceOn(isolate: WorkerInstance, id: string): Promise<string | undefined> {
  const html = (await page(isolate, `/products/${id}`)).html;
  const jsonLd = /<script type="application\/ld\+json">([\s\S]*?)<\/script>/.exec(html)?.[1];
  return jsonLd ? (JSON.parse(jsonLd) as { offers?: { price?: string } }).offers?.price : undefined;
}

const BULK_PURGES = 200;
const IDS_PER_PURGE = 1000;

describe("a bulk re-price", () => {
  it(`(${BULK_PURGES} purges of ${IDS_PER_PURGE} ids) leaves readers synced, their L2 breaker closed, and the next purge within the bound`, async () => {
    const id = "p-000600";
    const before = await priceOn(reader, id);
    expect(before).toBeDefined();

    for (let n = 0; n < BULK_PURGES; n++) {
      const ids = Array.from({ length: IDS_PER_PURGE }, (_, i) => productId(10_000 + ((n * IDS_PER_PURGE + i) % 90_000)));
      const response = await purge({ ids, resources: ["product"] });
      expect(response.status).toBe(202);
    }

    // The reader's next pages: answered without waiting on a failing sync.
    for (let i = 0; i < 5; i++) {
      const p = await page(reader, `/products/${id}`);
      expect(p.status).toBe(200);
      expect(p.ms).toBeLessThan(1000);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const status = (await (await reader.fetch("/__status.json", { headers: { authorization: `Bearer ${PURGE_TOKEN}` } })).json()) as {
      purges: { blind: boolean; seq: number };
    };
    expect(status.purges.blind).toBe(false);
    expect(status.purges.seq).toBeGreaterThanOrEqual(BULK_PURGES);
    expect((await health(reader)).l2).toBe("closed");

    // A price change and its purge still reach the reader within the bound.
    const cents = 424_242;
    await stack.admin(`/__admin/products/${id}`, { body: { price: cents } });
    expect((await purge({ ids: [id] })).status).toBe(202);
    const acknowledgedAt = Date.now();
    let seenAfter = Infinity;
    while (Date.now() - acknowledgedAt < 5000) {
      if ((await priceOn(reader, id)) === "4242.42") {
        seenAfter = Date.now() - acknowledgedAt;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(seenAfter).toBeLessThanOrEqual(1000 + 400);
  });
});
