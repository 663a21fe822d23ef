// The cron dispatch (src/scheduled.ts, runScheduled): which job runs
// for which cron expression of wrangler.toml, and that an expression it does
// not know runs nothing. A tier of fakes that records what is asked of it;
// warming's pauses run on vitest's fake timers.
import { readFileSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { parseConfig } from "../../src/config";
import { PAGE_RESOURCES } from "../../src/origin/resources";
import type { TierServices } from "../../src/tier";
import { hotKey } from "../../src/warming/hotReport";
import { productsPerWarmRun, REBUILD_CRON, runScheduled, WARM_CRON } from "../../src/scheduled";
import { fakeOrigin } from "../support/fakes";

const HOT = ["p-000003", "p-000001", "p-000002"];

function fakeTier(options: { knownIds?: boolean; l2?: boolean; rebuild?: () => Promise<unknown>; filterMissing?: boolean } = {}) {
  const config = parseConfig({ ORIGIN_URL: "http://origin.test", PUBLIC_URL: "https://shop.example" });
  const origin = fakeOrigin();
  const listed: (string | null)[] = [];
  origin.listProductIds = async (cursor) => (listed.push(cursor), { ids: [], next: null });
  const rebuilds: unknown[] = [];
  const zranges: unknown[][] = [];
  const reads: { id: string; resources: readonly string[] }[] = [];
  const l2 = {
    // hottestIds: one ZRANGE of the hot list.
    run: async (command: (redis: unknown) => Promise<unknown>) => command({ zrange: async (...args: unknown[]) => (zranges.push(args), HOT) }),
  };
  const tier = {
    config,
    origin,
    knownIds:
      options.knownIds === false
        ? null
        : {
            needsBuilding: async () => options.filterMissing ?? false,
            rebuild: (listing: unknown) => {
              rebuilds.push(listing);
              return options.rebuild ? options.rebuild() : Promise.resolve({ count: 0 });
            },
          },
    cache: {
      l2: options.l2 === false ? null : l2,
      read: async (id: string, resources: readonly string[]) => {
        reads.push({ id, resources });
        return { data: { product: { outcome: "found" } }, timings: { l1: 0, l2: 0, origin: 0 } };
      },
    },
  } as unknown as TierServices;
  return { tier, config, rebuilds, listed, zranges, reads };
}

/** That the cron rebuilt the filter once, from the origin's listing, for `reason`, and warmed nothing. */
async function expectRebuiltOnly({ rebuilds, listed, zranges, reads }: ReturnType<typeof fakeTier>, reason: "daily" | "missing"): Promise<void> {
  expect(rebuilds).toHaveLength(1);
  // The listing it rebuilds from is the origin's.
  await (rebuilds[0] as (cursor: string | null) => Promise<unknown>)(null);
  expect(listed).toEqual([null]);
  expect(zranges).toEqual([]);
  expect(reads).toEqual([]);
  expect(events()).toEqual(["known_ids_rebuilt"]);
  expect(JSON.parse(logs[0]!)).toMatchObject({ reason });
}

/** Runs the cron to its end, moving vitest's fake timers along (warming paces its starts with setTimeout). */
async function run(cron: string, tier: TierServices): Promise<void> {
  const done = runScheduled(cron, tier, () => undefined);
  await vi.runAllTimersAsync();
  await done;
}

let logs: string[];

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
  logs = [];
  const capture = (line: string) => void logs.push(line);
  vi.spyOn(console, "log").mockImplementation(capture);
  vi.spyOn(console, "warn").mockImplementation(capture);
  vi.spyOn(console, "error").mockImplementation(capture);
});

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const events = () => logs.map((line) => (JSON.parse(line) as { event: string }).event);

describe("the cron dispatch", () => {
  it("schedules in wrangler.toml exactly the crons it knows", () => {
    const toml = readFileSync("wrangler.toml", "utf8");
    const crons = /^crons\s*=\s*(\[.*\])\s*$/m.exec(toml)?.[1];
    expect(crons).toBeDefined();
    expect((JSON.parse(crons!) as string[]).sort()).toEqual([REBUILD_CRON, WARM_CRON].sort());
  });

  it("rebuilds the known-ids filter from the origin's listing on the daily cron, and warms nothing", async () => {
    const fake = fakeTier();
    await run(REBUILD_CRON, fake.tier);
    await expectRebuiltOnly(fake, "daily");
  });

  it("on the daily cron, does nothing when the known-ids filter is off", async () => {
    const { tier, zranges, reads } = fakeTier({ knownIds: false });
    await run(REBUILD_CRON, tier);
    expect(zranges).toEqual([]);
    expect(reads).toEqual([]);
    expect(logs).toEqual([]);
  });

  it("logs a rebuild that failed as an error, and does not throw", async () => {
    const { tier, rebuilds } = fakeTier({ rebuild: () => Promise.reject(new Error("L2 unavailable (segments)")) });
    await expect(run(REBUILD_CRON, tier)).resolves.toBeUndefined();
    expect(rebuilds).toHaveLength(1);
    expect(events()).toEqual(["known_ids_rebuild_failed"]);
    expect(logs[0]).toContain("L2 unavailable (segments)");
  });

  it("warms the fleet's hottest products on the quarter-hourly cron: the hot list's top that the subrequest budget affords, each through the read path", async () => {
    const { tier, config, rebuilds, zranges, reads } = fakeTier();
    await run(WARM_CRON, tier);
    const top = productsPerWarmRun(config.maxSubrequests);
    expect(top).toBeGreaterThan(0);
    expect(zranges).toEqual([[hotKey(config.keyPrefix), 0, top - 1, { rev: true }]]);
    expect(reads).toEqual(HOT.map((id) => ({ id, resources: PAGE_RESOURCES })));
    expect(rebuilds).toEqual([]);
    expect(events()).toEqual(["warmed"]);
    expect(JSON.parse(logs[0]!)).toMatchObject({ products: 3, warmed: 3, failed: 0 });
  });

  it("on the quarter-hourly cron, builds the known-ids filter instead of warming when Redis holds none (first deploy, or lost with its data)", async () => {
    const fake = fakeTier({ filterMissing: true });
    await run(WARM_CRON, fake.tier);
    await expectRebuiltOnly(fake, "missing");
  });

  it("on the quarter-hourly cron, does nothing without L2", async () => {
    const { tier, rebuilds, reads } = fakeTier({ l2: false });
    await run(WARM_CRON, tier);
    expect(reads).toEqual([]);
    expect(rebuilds).toEqual([]);
    expect(logs).toEqual([]);
  });

  it.each(["0 * * * *", "17 3 * * 1", "*/5 * * * *", ""])("runs nothing for a cron expression it does not know (%j)", async (cron) => {
    const { tier, rebuilds, zranges, reads } = fakeTier();
    await run(cron, tier);
    expect(rebuilds).toEqual([]);
    expect(zranges).toEqual([]);
    expect(reads).toEqual([]);
    expect(logs).toEqual([]);
  });
});
