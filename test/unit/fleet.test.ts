// The fleet's data points (src/observability/fleet.ts): their columns, the
// sampling of plain pages and its weight, and that a write never costs the page.
import { describe, expect, it } from "vitest";
import { createFleet, type FleetDataset, type FleetPage } from "../../src/observability/fleet";
import { BLOB, DOUBLE, resourceBlob } from "../../src/observability/fleetPoints";
import { fakeClock } from "../support/fakes";

function recording(): FleetDataset & { points: AnalyticsEngineDataPoint[] } {
  const points: AnalyticsEngineDataPoint[] = [];
  return { points, writeDataPoint: (point) => void points.push(point!) };
}

const fromL1 = (resource: "product" | "inventory") => ({
  resource,
  tier: "l1" as const,
  freshness: "fresh" as const,
  outcome: "found" as const,
  collapsed: false,
});
const plain: FleetPage = { route: "/products/:id", id: "p-000001", outcome: "ok", status: 200, ms: 3, served: [fromL1("product"), fromL1("inventory")] };
const none = () => undefined;

describe("the fleet's data points", () => {
  it("write a page's outcome, status and the tier of each resource in their columns, and the isolate and its colo", () => {
    const dataset = recording();
    const fleet = createFleet(dataset, { isolateId: "iso1", pageSample: 1, clock: fakeClock() });
    fleet.page(
      {
        ...plain,
        outcome: "unavailable",
        status: 503,
        shed: true,
        served: [fromL1("product"), { resource: "inventory", outcome: "failed", collapsed: true }],
        defaulted: ["reviews"],
      },
      "FRA",
      none,
    );
    const [point] = dataset.points;
    expect(point!.indexes).toEqual(["page"]);
    const blobs = point!.blobs!;
    expect([blobs[BLOB.isolate - 1], blobs[BLOB.colo - 1], blobs[BLOB.what - 1], blobs[BLOB.outcome - 1], blobs[BLOB.detail - 1]]).toEqual([
      "iso1",
      "FRA",
      "/products/:id",
      "unavailable",
      "p-000001",
    ]);
    expect(blobs[resourceBlob("product") - 1]).toBe("l1");
    expect(blobs[resourceBlob("inventory") - 1]).toBe("failed");
    // A resource the page did not read: no value, which Analytics Engine stores as "".
    expect(blobs[resourceBlob("reviews") - 1] ?? "").toBe("");
    const doubles = point!.doubles!;
    const at = (position: number) => doubles[position - 1] ?? 0;
    expect([
      at(DOUBLE.weight),
      at(DOUBLE.status),
      at(DOUBLE.ms),
      at(DOUBLE.l1),
      at(DOUBLE.failed),
      at(DOUBLE.collapsed),
      at(DOUBLE.defaulted),
      at(DOUBLE.shed),
    ]).toEqual([1, 503, 3, 1, 1, 1, 1, 1]);
    // Later points of the isolate name the colo its pages came from.
    fleet.breaker("origin:reviews", "closed", "open");
    expect(dataset.points[1]!.blobs!.slice(0, 5)).toEqual(["iso1", "FRA", "origin:reviews", "open", "closed"]);
  });

  it("writes one plain page in pageSample, weighted pageSample; every other page with weight 1", () => {
    const dataset = recording();
    let draw = 0;
    // Draws 0.05, 0.15, … 0.95: one in ten falls under 1/10.
    const fleet = createFleet(dataset, { isolateId: "iso1", pageSample: 10, clock: fakeClock(), random: () => ((draw++ % 10) + 0.5) / 10 });
    for (let i = 0; i < 100; i++) fleet.page(plain, undefined, none);
    expect(dataset.points).toHaveLength(10);
    expect(dataset.points.every((point) => point.doubles![DOUBLE.weight - 1] === 10)).toBe(true);
    const stale = { ...plain, served: [{ ...fromL1("product"), freshness: "stale" as const }] };
    const fromL2 = { ...plain, served: [{ ...fromL1("product"), tier: "l2" as const }] };
    for (const page of [stale, fromL2, { ...plain, outcome: "absent" as const, status: 404 }, { ...plain, defaulted: ["reviews"] }])
      fleet.page(page, undefined, none);
    expect(dataset.points.slice(10).map((point) => point.doubles![DOUBLE.weight - 1])).toEqual([1, 1, 1, 1]);
    expect(dataset.points[10]!.blobs![BLOB.colo - 1]).toBe("local");
  });

  it("never fails the page: a write the platform refuses is dropped; without a binding nothing is written", () => {
    const refusing: FleetDataset = {
      writeDataPoint: () => {
        throw new TypeError("too many blobs");
      },
    };
    expect(() => createFleet(refusing, { isolateId: "i", pageSample: 1, clock: fakeClock() }).page(plain, undefined, none)).not.toThrow();
    expect(() => createFleet(undefined, { isolateId: "i", pageSample: 1, clock: fakeClock() }).origin("product", "timeout")).not.toThrow();
  });

  it("takes the local recorder's delivery only where a request can keep it alive", () => {
    const kept: Promise<unknown>[] = [];
    let offered = 0;
    const delivery = Promise.resolve();
    const dataset: FleetDataset = {
      writeDataPoint: () => ({
        deliver: () => {
          offered++;
          return delivery;
        },
      }),
    };
    const fleet = createFleet(dataset, { isolateId: "i", pageSample: 1, clock: fakeClock() });
    fleet.origin("product", "found");
    expect(offered).toBe(0);
    fleet.page(plain, undefined, (work) => void kept.push(work));
    expect(kept).toEqual([delivery]);
  });
});

describe("the fleet's purge-reach points", () => {
  it("write one point per purge of a small sync, and for a sync of hundreds at most 32, weighted to count every purge", () => {
    const dataset = recording();
    const fleet = createFleet(dataset, { isolateId: "iso1", pageSample: 1, clock: fakeClock() });
    fleet.purgesReached(
      [
        { mode: "hard", ms: 120 },
        { mode: "soft", ms: 80 },
      ],
      none,
    );
    expect(dataset.points.map((p) => [p.blobs![BLOB.what - 1], p.doubles![DOUBLE.weight - 1], p.doubles![DOUBLE.ms - 1]])).toEqual([
      ["hard", 1, 120],
      ["soft", 1, 80],
    ]);

    dataset.points.length = 0;
    // A bulk re-price caught up in one sync: 600 hard purges reaching 0-599 ms after their recording.
    fleet.purgesReached(
      Array.from({ length: 600 }, (_, i) => ({ mode: "hard" as const, ms: 599 - i })),
      none,
    );
    expect(dataset.points.length).toBeLessThanOrEqual(32);
    const weights = dataset.points.map((p) => p.doubles![DOUBLE.weight - 1]!);
    expect(weights.reduce((a, b) => a + b, 0)).toBeCloseTo(600);
    // Quantiles of the reaches: the points' median is the reaches' median, give or take one point's share.
    const ms = dataset.points.map((p) => p.doubles![DOUBLE.ms - 1]!).sort((a, b) => a - b);
    expect(Math.abs(ms[ms.length / 2]! - 300)).toBeLessThanOrEqual(600 / ms.length);
  });
});
