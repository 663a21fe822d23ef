// Values in Redis are untrusted (issue 12, item 2). Malformed values, data
// that breaks the contract or belongs to another product, deadlines no fill
// could have written, an oversized value and a gzip bomb are written straight
// into the real redis-server under the keys the tier uses, for products no
// isolate holds yet; the bundled worker then serves those pages. Each must
// come from the origin (200, never a 500), the bad value must be gone from
// Redis or replaced by a good one, and the worker must stay healthy, its
// memory included.
import { readdirSync, readFileSync } from "node:fs";
import type { Redis as IORedis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { productFor, indexOf } from "../../dev/origin/catalog";
import { DEFAULT_POLICIES, DEFAULTS } from "../../src/config/defaults";
import { lockKey } from "../../src/cache/keys";
import type { StatusModel } from "../../src/observability/statusModel";
import { PAGE_RESOURCES, type ResourceName } from "../../src/origin/resources";
import { member } from "../../dev/harness/cacheStatus";
import { completeProducts, health, page, waitFor } from "../support/faults";
import {
  directRedis,
  entryHeader as header,
  goneOrGood as goneOrGoodIn,
  gzipBombValue,
  heldEntry,
  HIGH_VERSION,
  HOUR,
  jsonValue,
  l2KeyOf as keyOf,
  oversizedValue,
} from "../support/l2Values";
import { PURGE_TOKEN, startStack, type Stack } from "../support/stack";
import { logFaults, startedWorkers, startWorker, type WorkerInstance } from "../support/worker";

let stack: Stack;
let direct: IORedis;

beforeAll(async () => {
  stack = await startStack();
  direct = directRedis(stack);
});

afterAll(async () => {
  direct?.disconnect();
  await stack?.close();
  // No exception reached the error handler (`unhandled_error`) in any worker of this file.
  expect(logFaults(...startedWorkers())).toEqual([]);
});

/** The demo origin's product, as the contract has it. */
function originProduct(id: string) {
  return productFor(indexOf(id)!, stack.origin.url);
}

const goneOrGood = (resource: ResourceName, id: string) => goneOrGoodIn(direct, resource, id);

async function status(worker: WorkerInstance): Promise<StatusModel> {
  const response = await worker.fetch("/__status.json", { headers: { authorization: `Bearer ${PURGE_TOKEN}` } });
  expect(response.status).toBe(200);
  return (await response.json()) as StatusModel;
}

describe("invalid values in L2", () => {
  let worker: WorkerInstance;

  beforeAll(async () => {
    worker = await startWorker({ ...stack.bindings });
  });
  afterAll(async () => {
    await worker?.close();
  });

  const [garbage, brokenJson, wrongSchema, olderShape, otherProduct, foreverFresh, oversized, badInventory, otherId] = completeProducts(7000, 9);

  /** What each product's key is made to hold, and which resource. */
  const cases: { name: string; id: string; resource: ResourceName; value: () => string }[] = [
    { name: "not an entry at all", id: garbage!, resource: "product", value: () => "<html>oops</html>" },
    { name: "a good header over broken JSON", id: brokenJson!, resource: "product", value: () => `${header()}j|{"d":{"id":` },
    {
      name: "data that breaks the schema",
      id: wrongSchema!,
      resource: "product",
      value: () => jsonValue({ ...originProduct(wrongSchema!), title: 42, version: HIGH_VERSION }),
    },
    {
      // As an older release might have written it: before category and images were there.
      name: "data of an older shape",
      id: olderShape!,
      resource: "product",
      value: () => {
        const { category: _category, images: _images, ...older } = originProduct(olderShape!);
        return jsonValue({ ...older, version: HIGH_VERSION });
      },
    },
    { name: "another product's data", id: otherProduct!, resource: "product", value: () => jsonValue({ ...originProduct(otherId!), version: HIGH_VERSION }) },
    {
      // Valid data, fresh for ten years: it would be served, and sent downstream with s-maxage, for as long.
      name: "deadlines no fill writes",
      id: foreverFresh!,
      resource: "product",
      value: () => {
        const now = Date.now();
        const decade = 10 * 365 * 24 * HOUR;
        return `${HIGH_VERSION}|${now}|${now + decade}|${now + decade}|j|${JSON.stringify({ d: { ...originProduct(foreverFresh!), title: "STALE TITLE", version: HIGH_VERSION }, e: now + decade })}`;
      },
    },
    { name: "a value over the size cap", id: oversized!, resource: "product", value: () => oversizedValue() },
    {
      name: "inventory in a state the contract does not have",
      id: badInventory!,
      resource: "inventory",
      value: () => jsonValue({ id: badInventory!, available: 5, status: "exploded", version: HIGH_VERSION, updatedAt: "2026-11-20T10:00:00Z" }),
    },
  ];

  it.each(cases)("$name: the page comes from the origin, and the bad value leaves Redis", async ({ id, resource, value }) => {
    await direct.set(keyOf(resource, id), value(), "PX", 24 * HOUR);
    const p = await page(worker, `/products/${id}`);
    expect(p.status).toBe(200);
    expect(member(p.cacheStatus, resource)).toMatch(/^pp-origin; fwd=uri-miss; fwd-status=200/);
    expect(p.html).toContain(`"sku":"${id}"`);
    expect(p.html).not.toContain("STALE TITLE");
    expect(Number(/max-age=(\d+)/.exec(p.headers.get("cache-control") ?? "")?.[1])).toBeLessThanOrEqual(DEFAULT_POLICIES.product.ttl);
    if (resource === "inventory") expect(p.html).toContain("In stock");
    await waitFor(`${resource}:${id} deleted or replaced`, () => goneOrGood(resource, id));
    // And the next view is an ordinary L1 hit.
    const again = await page(worker, `/products/${id}`);
    expect(again.status).toBe(200);
    expect(member(again.cacheStatus, resource)).toMatch(/^pp-l1; hit/);
  });

  it("counts them on the status page and logs them", async () => {
    const model = await status(worker);
    expect(model.l2.invalidValues!.rejected).toBeGreaterThanOrEqual(cases.length);
    expect(model.l2.invalidValues!.deleted).toBeGreaterThanOrEqual(1);
    const logged = () => worker.logs.filter((line) => line.includes('"event":"l2_invalid_value"'));
    await waitFor("an l2_invalid_value log line", () => logged().length > 0);
    expect(logged()[0]).toMatch(/"key":"pp:v1:[pi]:p-\d+","resource":"(product|inventory)","reason":"[a-z-]+","chars":\d+/);
  });
});

// ------------------------------------------------------------------ foreign locks

describe("a lock key holding what no fill wrote, for ten minutes", () => {
  let worker: WorkerInstance;

  beforeAll(async () => {
    worker = await startWorker({ ...stack.bindings });
  });
  afterAll(async () => {
    await worker?.close();
  });

  // Another release's lock format, a bad writer, a restored backup: none of it is a fill's lock.
  const values: { name: string; value: () => string }[] = [
    { name: "a plain string", value: () => "held-by-release-41" },
    { name: "a token of another format", value: () => `${Date.now()}:${"f".repeat(32)}` },
    { name: "a token of this format, with a TTL no lock has", value: () => `${Date.now()}.${crypto.randomUUID()}` },
  ];
  const ids = completeProducts(7400, values.length);

  it.each(values.map((v, i) => ({ ...v, id: ids[i]! })))(
    "$name, on every part's lock: the page is a 200 in the origin's time, and the value is replaced",
    async ({ id, value }) => {
      const written = value();
      for (const resource of PAGE_RESOURCES) await direct.set(lockKey(DEFAULTS.keyPrefix, keyOf(resource, id)), written, "PX", 10 * 60_000);
      const p = await page(worker, `/products/${id}`);
      expect(p.status).toBe(200);
      for (const resource of PAGE_RESOURCES) expect(member(p.cacheStatus, resource), resource).toMatch(/^pp-origin; fwd=uri-miss; fwd-status=200/);
      // The origin's time (a few ms here) plus one L2 round trip, with room for a loaded machine: a fill waiting on the
      // foreign value would take DEFAULTS.lockTtlMs (3 s) at least.
      expect(p.ms).toBeLessThan(1500);
      for (const resource of PAGE_RESOURCES) {
        await waitFor(`${resource}:${id} filled`, async () => (await heldEntry(direct, resource, id)) === "filled");
        expect(await direct.get(lockKey(DEFAULTS.keyPrefix, keyOf(resource, id))), resource).not.toBe(written);
      }
    },
  );
});

// ------------------------------------------------------------------ gzip bomb

/** workerd processes this test process started. */
function workerdPids(): Set<number> {
  const pids = new Set<number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const status = readFileSync(`/proc/${entry}/status`, "utf8");
      if (/^Name:\s+workerd/m.test(status) && new RegExp(`^PPid:\\s+${process.pid}$`, "m").test(status)) pids.add(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** The peak resident memory of a process so far, in bytes (Linux: VmHWM). */
function peakMemory(pid: number): number {
  const match = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(match![1]) * 1024;
}

describe.runIf(process.platform === "linux")("a gzip bomb in L2", () => {
  let worker: WorkerInstance;
  let pid: number;

  beforeAll(async () => {
    const before = workerdPids();
    worker = await startWorker({ ...stack.bindings });
    const started = [...workerdPids()].filter((candidate) => !before.has(candidate));
    expect(started).toHaveLength(1);
    pid = started[0]!;
  });
  afterAll(async () => {
    await worker?.close();
  });

  it("is a miss that costs the isolate about the size cap, and the worker stays healthy", async () => {
    const [warmA, warmB, bombed, after] = completeProducts(7200, 4);
    for (const id of [warmA!, warmB!]) expect((await page(worker, `/products/${id}`)).status).toBe(200);
    const baseline = peakMemory(pid);

    // 200 MB of zeros: about 200 KB of gzip, 270 KB of base64, well within the stored-value cap.
    const bomb = gzipBombValue(200 * 1024 * 1024);
    await direct.set(keyOf("product", bombed!), bomb, "PX", 24 * HOUR);
    const p = await page(worker, `/products/${bombed}`);
    expect(p.status).toBe(200);
    expect(member(p.cacheStatus, "product")).toMatch(/^pp-origin; fwd=uri-miss; fwd-status=200/);
    await waitFor("the bomb deleted or replaced", () => goneOrGood("product", bombed!));

    // Inflated in full it would be 200 MB in workerd's buffer, and as much again in the isolate.
    expect(peakMemory(pid) - baseline).toBeLessThan(64 * 1024 * 1024);
    expect(await health(worker)).toMatchObject({ ok: true, l2: "closed" });
    expect((await page(worker, `/products/${after}`)).status).toBe(200);
    expect((await status(worker)).l2.invalidValues).toMatchObject({ rejected: expect.any(Number) });
  });
});
