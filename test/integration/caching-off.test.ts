// CACHING=off (src/cache/bypass.ts): the same worker with no cache at all,
// the baseline bench:peers sets the tier against. In the Workers runtime,
// against the demo origin and a real Redis that it must leave alone.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { member } from "../../dev/harness/cacheStatus";
import { PAGE_RESOURCES } from "../../src/origin/resources";
import { originFetches, resetCounters } from "../support/faults";
import { directRedis } from "../support/l2Values";
import { startStack, type Stack } from "../support/stack";
import { logFaults, startWorker, type WorkerInstance } from "../support/worker";

let stack: Stack;
let worker: WorkerInstance;
let direct: ReturnType<typeof directRedis>;

beforeAll(async () => {
  stack = await startStack({ latencyMs: 5, jitterMs: 0 });
  worker = await startWorker({ ...stack.bindings, CACHING: "off", KNOWN_IDS: "off" });
  direct = directRedis(stack);
});

afterAll(async () => {
  direct?.disconnect();
  await worker?.close();
  await stack?.close();
  expect(logFaults(worker)).toEqual([]);
});

describe("CACHING=off", () => {
  it("asks the origin for every part of every page, says so in Cache-Status, and keeps nothing, in Redis or elsewhere", async () => {
    await resetCounters(stack);
    await direct.config("RESETSTAT");
    const views = [await worker.fetch("/products/p-000005"), await worker.fetch("/products/p-000005")];
    for (const view of views) {
      expect(view.status).toBe(200);
      const cacheStatus = view.headers.get("cache-status") ?? "";
      // The origin's own status: 200, or 404 for a part it has none of (this product has no reviews).
      for (const resource of PAGE_RESOURCES) {
        const status = member(cacheStatus, resource).includes(" absent") ? 404 : 200;
        expect(member(cacheStatus, resource)).toMatch(new RegExp(`^pp-origin; fwd=bypass; fwd-status=${status}; ttl=\\d+`));
      }
      expect(member(cacheStatus, "product")).not.toContain("absent");
      // Nothing is stored: no `stored` member parameter.
      expect(cacheStatus).not.toMatch(/stored/);
    }
    for (const resource of PAGE_RESOURCES) expect(await originFetches(stack, resource, "p-000005")).toBe(2);
    expect(await direct.keys("*p-000005*")).toEqual([]);
    expect(await direct.info("commandstats")).not.toMatch(/cmdstat_(mget|eval|evalsha|evalsha_ro)/);
  });

  it("answers a product the origin does not have with the 404 page, and asks again the next time", async () => {
    await resetCounters(stack);
    for (let i = 0; i < 2; i++) expect((await worker.fetch("/products/p-999999")).status).toBe(404);
    expect(await originFetches(stack, "product", "p-999999")).toBe(2);
  });
});
