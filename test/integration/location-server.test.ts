// The benchmarks' data-center cache (dev/harness/locationServer.ts) as the
// Workers runtime sees it: two workerd processes whose Cache API calls go to
// it share a location as they do through one Miniflare folder
// (location.test.ts), so that the benchmarks' figures of the tier hold for
// the tests' setup too. Its HTTP answers alone: test/unit/location-server.test.ts.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useLocationServer } from "../../dev/harness/bundle";
import { startLocationServer, type LocationServer } from "../../dev/harness/locationServer";
import { startStack, type Stack } from "../support/stack";
import { logFaults, startWorker, type WorkerInstance } from "../support/worker";
import { COLD_PAGE_PUTS, locationStats, pageParts } from "../support/location";

const PARTS = ["product", "inventory", "reviews", "recommendations"];

let stack: Stack;
let location: LocationServer;
const started: WorkerInstance[] = [];

beforeAll(async () => {
  stack = await startStack({ latencyMs: 5, jitterMs: 0 });
  location = await startLocationServer({ maxBytes: 64 * 1024 * 1024 });
  useLocationServer(location.address);
});

afterAll(async () => {
  useLocationServer(undefined);
  await Promise.all(started.map((worker) => worker.close()));
  await location?.close();
  await stack?.close();
  expect(logFaults(...started)).toEqual([]);
});

async function isolate(): Promise<WorkerInstance> {
  const worker = await startWorker({ ...stack.bindings, KNOWN_IDS: "off" });
  started.push(worker);
  return worker;
}

describe("the benchmarks' location server", () => {
  it("holds what one isolate put, for another isolate to read", async () => {
    const [first, second] = [await isolate(), await isolate()];
    const cold = await pageParts(first, "p-000202");
    expect(cold.product).toMatch(/^pp-origin/);
    for (let i = 0; i < 100 && (await locationStats(first)).puts < COLD_PAGE_PUTS; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    // One copy holds the page's parts.
    expect(location.stats()).toMatchObject({ puts: COLD_PAGE_PUTS, refused: 0, entries: 1 });
    const shared = await pageParts(second, "p-000202");
    for (const part of PARTS) expect(shared[part], JSON.stringify(shared)).toMatch(/^pp-location; hit/);
    expect(location.stats().hits).toBe(1);
  });
});
