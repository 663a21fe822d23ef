// The status page's counters (src/observability/): 1-minute buckets over the
// last 15 minutes on the tier's clock, the ratios computed from them, the
// space-saving top-K of hot products, the rate-limited log, breaker change
// notices, the origin client's onFetch, and the page rendered from it all.
import { afterEach, describe, expect, it, vi } from "vitest";
import { createBreaker, type BreakerState } from "../../src/shared/breaker";
import { parseConfig } from "../../src/config";
import { createOriginClient } from "../../src/origin/client";
import type { OriginFailure } from "../../src/origin/failure";
import { type PageResource, RESOURCE_NAMES, type ResourceName } from "../../src/origin/resources";
import { buildChart } from "../../src/render/chart";
import { createRateLimitedLog, logEvent } from "../../src/shared/log";
import { BUCKET_MS, createMetrics, HOT_COUNTERS, HOT_PRODUCTS, MAX_BUCKETS, type PageRecord } from "../../src/observability/metrics";
import { buildStatus, type StatusSources } from "../../src/observability/statusModel";
import { createTopK } from "../../src/observability/topK";
import { watchOrigin } from "../../src/observability/wiring";
import { createLimiter } from "../../src/shared/limiter";
import { renderStatusPage } from "../../src/render";
import { eachPageResource, fakeClock, sampleProduct } from "../support/fakes";

/** Every service with a 500 ms origin timeout. */
const TIMEOUTS_500_MS = Object.fromEntries(RESOURCE_NAMES.map((name) => [name, { originTimeoutMs: 500 }])) as Record<ResourceName, { originTimeoutMs: number }>;
import { shuffledIndexes, ZipfSampler } from "../../dev/harness/random";

const MINUTE = BUCKET_MS;
type Served = NonNullable<PageRecord["served"]>[number];

type ServedBy = "l1" | "l2" | "origin" | "failed";

/** A page whose resources were served as given (`l1`, `l2`, `origin`, or `failed`). */
function pageOf(id: string, tiers: Record<PageResource, ServedBy>, extra: Partial<Record<ResourceName, Partial<Served>>> = {}): PageRecord {
  const served = (Object.keys(tiers) as PageResource[]).map((resource): Served => {
    const tier = tiers[resource];
    return tier === "failed"
      ? { resource, outcome: "failed", collapsed: false, ...extra[resource] }
      : { resource, outcome: "found", tier, freshness: "fresh", collapsed: false, ...extra[resource] };
  });
  return { id, outcome: "ok", served };
}

const ALL_L1 = eachPageResource<ServedBy>("l1");
const ALL_ORIGIN = eachPageResource<ServedBy>("origin");

describe("metrics buckets", () => {
  it("rolls over to a new bucket at each minute boundary of the tier's clock", () => {
    const clock = fakeClock(Date.UTC(2026, 10, 22, 12, 0, 30));
    const metrics = createMetrics({ clock });
    metrics.recordPage(pageOf("p-1", ALL_ORIGIN));
    metrics.recordPage(pageOf("p-1", ALL_L1));
    clock.advance(29_999); // 12:00:59.999: same minute
    metrics.recordPage(pageOf("p-1", ALL_L1));
    expect(metrics.buckets()).toHaveLength(1);
    expect(metrics.buckets()[0]!.start).toBe(Date.UTC(2026, 10, 22, 12, 0, 0));

    clock.advance(1); // 12:01:00.000: a new minute
    metrics.recordPage(pageOf("p-2", ALL_ORIGIN));
    expect(metrics.buckets()).toHaveLength(2);
    expect(metrics.buckets()[1]!.start).toBe(Date.UTC(2026, 10, 22, 12, 1, 0));

    // The current minute alone, then the last 5 minutes.
    expect(metrics.window(1).pages).toBe(1);
    expect(metrics.window(1).resources.product.origin).toBe(1);
    const five = metrics.window(5);
    expect(five.pages).toBe(4);
    expect(five.resources.product).toMatchObject({ l1: 2, origin: 2, l2: 0, failed: 0 });

    // Four minutes later the first minute has left the 5-minute window, but not the 15-minute one.
    clock.advance(4 * MINUTE);
    expect(metrics.window(5).pages).toBe(1);
    expect(metrics.window(15).pages).toBe(4);
  });

  it("keeps at most 15 buckets, whatever the time the isolate lives", () => {
    const clock = fakeClock();
    const metrics = createMetrics({ clock });
    for (let minute = 0; minute < 120; minute++) {
      for (let i = 0; i < 3; i++) metrics.recordPage(pageOf(`p-${i}`, ALL_L1));
      metrics.recordOriginFetch("product", "found");
      expect(metrics.buckets().length).toBeLessThanOrEqual(MAX_BUCKETS);
      clock.advance(MINUTE);
    }
    clock.advance(-MINUTE); // back into the last minute recorded
    expect(metrics.buckets()).toHaveLength(MAX_BUCKETS);
    expect(metrics.window(15).pages).toBe(45);
    expect(metrics.window(15).origin.product.fetches).toBe(15);
    // Asking for more than 15 minutes gives 15.
    expect(metrics.window(60).minutes).toBe(15);
    expect(metrics.window(60).pages).toBe(45);
  });

  it("drops buckets older than 15 minutes after a quiet spell, and shows quiet minutes as zeros", () => {
    const clock = fakeClock(Date.UTC(2026, 10, 22, 12, 0, 0));
    const metrics = createMetrics({ clock });
    metrics.recordPage(pageOf("p-1", ALL_ORIGIN));
    clock.advance(10 * MINUTE);
    metrics.recordPage(pageOf("p-1", ALL_L1));
    clock.advance(10 * MINUTE);
    metrics.recordPage(pageOf("p-1", ALL_L1));
    // 12:00 is 20 minutes old: gone; 12:10 and 12:20 remain.
    expect(metrics.buckets().map((b) => b.start)).toEqual([Date.UTC(2026, 10, 22, 12, 10), Date.UTC(2026, 10, 22, 12, 20)]);

    const points = metrics.perMinute();
    expect(points).toHaveLength(MAX_BUCKETS);
    expect(points[MAX_BUCKETS - 1]!.start).toBe(Date.UTC(2026, 10, 22, 12, 20));
    expect(points[0]!.start).toBe(Date.UTC(2026, 10, 22, 12, 6));
    expect(points.filter((p) => p.pages > 0).map((p) => p.start)).toEqual([Date.UTC(2026, 10, 22, 12, 10), Date.UTC(2026, 10, 22, 12, 20)]);
    expect(points.filter((p) => p.pages === 0).every((p) => p.hitRatio === null && p.originFetches === 0)).toBe(true);
  });

  it("computes hit ratios per tier and per resource", () => {
    const metrics = createMetrics({ clock: fakeClock() });
    // product: l1, l1, l2, origin → hit 3/4, L1 2/4, L2 1/2 of L1's misses, origin 1/4.
    metrics.recordPage(pageOf("p-1", { ...ALL_L1, recommendations: "failed" }));
    metrics.recordPage(pageOf("p-1", { ...ALL_L1, inventory: "l2", recommendations: "failed" }));
    metrics.recordPage(pageOf("p-2", { ...ALL_L1, product: "l2", inventory: "origin", reviews: "origin" }, { inventory: { collapsed: true } }));
    metrics.recordPage(pageOf("p-3", { ...ALL_L1, product: "origin" }, { inventory: { freshness: "stale" }, reviews: { freshness: "stale-if-error" } }));
    const w = metrics.window(5);
    expect(w.resources.product).toMatchObject({ answers: 4, l1: 2, l2: 1, origin: 1, hitRatio: 0.75, l1Ratio: 0.5, l2Ratio: 0.5, originRatio: 0.25 });
    expect(w.resources.inventory).toMatchObject({ answers: 4, l1: 2, l2: 1, origin: 1, stale: 1, collapsed: 1 });
    expect(w.resources.reviews).toMatchObject({ staleIfError: 1, hitRatio: 0.75 });
    // Failed answers are misses: recommendations 2 of 4 answered from L1, none from L2.
    expect(w.resources.recommendations).toMatchObject({ answers: 4, failed: 2, hitRatio: 0.5, l1Ratio: 0.5, l2Ratio: 0 });
    // All resources together: 16 answers, 9 from L1, 2 from L2, 3 from the origin, 2 failed.
    expect(w.total).toMatchObject({ answers: 16, l1: 9, l2: 2, origin: 3, failed: 2 });
    expect(w.total.hitRatio).toBeCloseTo(11 / 16);
    expect(w.total.l2Ratio).toBeCloseTo(2 / 7);
    // No answers: no ratio, rather than 0 % or NaN.
    expect(createMetrics({ clock: fakeClock() }).window(5).total.hitRatio).toBeNull();
  });

  it("counts page outcomes, defaulted sections, origin fetches, errors and shed calls", () => {
    const metrics = createMetrics({ clock: fakeClock() });
    metrics.recordPage({ id: "p-9", outcome: "filtered" });
    metrics.recordPage({ ...pageOf("p-8", ALL_ORIGIN), outcome: "absent" });
    metrics.recordPage({ ...pageOf("p-7", { ...ALL_L1, product: "failed", inventory: "failed" }), outcome: "unavailable" });
    metrics.recordPage({
      ...pageOf("p-6", { ...ALL_L1, reviews: "failed", recommendations: "failed" }),
      defaulted: ["reviews", "recommendations"],
    });
    const outcomes: ("found" | "absent" | OriginFailure)[] = ["found", "found", "absent", "timeout", "status", "circuit-open", "overloaded"];
    for (const outcome of outcomes) metrics.recordOriginFetch("reviews", outcome);

    const w = metrics.window(15);
    expect(w.pages).toBe(4);
    expect(w.outcomes).toEqual({ ok: 1, absent: 1, filtered: 1, unavailable: 1 });
    expect(w.degradedPages).toBe(1);
    expect(w.resources.reviews.defaulted).toBe(1);
    expect(w.resources.recommendations.defaulted).toBe(1);
    expect(w.resources.product.failed).toBe(1);
    expect(w.origin.reviews).toEqual({ fetches: 5, errors: 2, shed: 2, errorRatio: 0.4 });
    expect(w.originTotal.fetches).toBe(5);
    // Only pages of products that exist (or may: a 503) are hot.
    expect(
      metrics.hot
        .top()
        .map((item) => item.key)
        .sort(),
    ).toEqual(["p-6", "p-7"]);
  });
});

// ------------------------------------------------------------------ top-K

/** `length` draws from a Zipf distribution over `items` keys with exponent `s`, seeded (dev/harness/random.ts); ranks shuffled onto ids so that the hot keys are not simply the first ones. */
function zipfStream(items: number, s: number, length: number, seed: number): string[] {
  const sampler = new ZipfSampler({ n: items, s, seed });
  const ids = shuffledIndexes(items, seed);
  return Array.from({ length }, () => `p-${String(ids[sampler.next() - 1]! - 1).padStart(6, "0")}`);
}

describe("top-K (space-saving)", () => {
  it("finds the true top 5, in order, of Zipf streams of page views (exponent 1, 10,000 products)", () => {
    for (const seed of [1, 2, 3]) {
      const stream = zipfStream(10_000, 1.0, 50_000, seed);
      const truth = new Map<string, number>();
      const metrics = createMetrics({ clock: fakeClock() });
      for (const id of stream) {
        truth.set(id, (truth.get(id) ?? 0) + 1);
        metrics.recordPage(pageOf(id, ALL_L1));
      }
      const trueTop5 = [...truth]
        .sort((a, b) => b[1] - a[1])
        .slice(0, 5)
        .map(([id]) => id);
      expect(
        metrics.hot.top(5).map((item) => item.key),
        `seed ${seed}`,
      ).toEqual(trueTop5);

      const hot = metrics.hot;
      expect(hot.total).toBe(stream.length);
      expect(hot.size).toBe(HOT_COUNTERS);
      expect(hot.top(HOT_PRODUCTS)).toHaveLength(HOT_PRODUCTS);
      for (const item of hot.top()) {
        const real = truth.get(item.key)!;
        expect(item.count).toBeGreaterThanOrEqual(real);
        expect(item.count - item.error).toBeLessThanOrEqual(real);
        expect(item.error).toBeLessThanOrEqual(stream.length / HOT_COUNTERS);
      }
    }
  });

  it("finds the top 5 of a steeper stream with only 20 counters", () => {
    const stream = zipfStream(10_000, 1.3, 50_000, 7);
    const truth = new Map<string, number>();
    const topK = createTopK<string>(20);
    for (const id of stream) {
      truth.set(id, (truth.get(id) ?? 0) + 1);
      topK.offer(id);
    }
    const trueTop5 = [...truth]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 5)
      .map(([id]) => id);
    expect(topK.top(5).map((item) => item.key)).toEqual(trueTop5);
    expect(topK.size).toBe(20);
  });

  it("counts exactly while there are no more keys than counters", () => {
    const topK = createTopK<string>(3);
    for (const key of ["a", "b", "a", "c", "a", "b"]) topK.offer(key);
    expect(topK.top()).toEqual([
      { key: "a", count: 3, error: 0 },
      { key: "b", count: 2, error: 0 },
      { key: "c", count: 1, error: 0 },
    ]);
    expect(topK.top(1)).toHaveLength(1);
    // A newcomer takes over the smallest counter and carries its count as possible error.
    topK.offer("d");
    expect(topK.top().find((item) => item.key === "d")).toEqual({ key: "d", count: 2, error: 1 });
    expect(topK.size).toBe(3);
  });

  it("keeps space-saving's guarantees when many counters share the minimum and grow between takeovers", () => {
    // Three heavy keys among a uniform tail of 500: most counters sit at the minimum, and some of those grow before they are taken over.
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const stream = Array.from({ length: 20_000 }, () => (random() < 0.3 ? `hot-${Math.floor(random() * 3)}` : `k-${Math.floor(random() * 500)}`));
    const capacity = 20;
    const topK = createTopK<string>(capacity);
    const truth = new Map<string, number>();
    for (const key of stream) {
      truth.set(key, (truth.get(key) ?? 0) + 1);
      topK.offer(key);
    }
    const bound = stream.length / capacity;
    for (const item of topK.top()) {
      const count = truth.get(item.key) ?? 0;
      expect(item.count).toBeGreaterThanOrEqual(count);
      expect(item.count - item.error).toBeLessThanOrEqual(count);
      expect(item.error).toBeLessThanOrEqual(bound);
    }
    const counted = new Set(topK.top().map((item) => item.key));
    for (const [key, count] of truth) if (count > bound) expect(counted.has(key)).toBe(true);
    expect(
      topK
        .top(3)
        .map((item) => item.key)
        .sort(),
    ).toEqual(["hot-0", "hot-1", "hot-2"]);
    expect(topK.total).toBe(stream.length);
  });

  it("keeps memory bounded by its capacity on a stream of distinct keys", () => {
    const topK = createTopK<number>(20);
    for (let i = 0; i < 100_000; i++) topK.offer(i);
    expect(topK.size).toBe(20);
    expect(() => createTopK(0)).toThrow(RangeError);
  });
});

// ------------------------------------------------------------------ logs, breakers, origin client

describe("structured logs", () => {
  afterEach(() => vi.restoreAllMocks());

  it("writes one JSON line per event, errors to console.error", () => {
    const info = vi.spyOn(console, "log").mockImplementation(() => {});
    const error = vi.spyOn(console, "error").mockImplementation(() => {});
    logEvent("purge_recorded", { seq: 7, ids: 2 });
    logEvent("config_error", { setting: "ORIGIN_URL" }, "error");
    const line = JSON.parse(info.mock.calls[0]![0] as string);
    expect(line).toMatchObject({ event: "purge_recorded", seq: 7, ids: 2 });
    expect(new Date(line.ts).toISOString()).toBe(line.ts);
    expect(JSON.parse(error.mock.calls[0]![0] as string)).toMatchObject({ event: "config_error", setting: "ORIGIN_URL" });
  });

  it("rate-limits per key to one line per interval, and says how many it held back", () => {
    const clock = fakeClock();
    const lines: Record<string, unknown>[] = [];
    const log = createRateLimitedLog({ intervalMs: 10_000, clock, log: (event, fields) => lines.push({ event, ...fields }) });
    for (let i = 0; i < 50; i++) log("reviews", "origin_failure", { service: "reviews" });
    log("inventory", "origin_failure", { service: "inventory" });
    expect(lines).toEqual([
      { event: "origin_failure", service: "reviews", suppressed: 0 },
      { event: "origin_failure", service: "inventory", suppressed: 0 },
    ]);
    clock.advance(9_999);
    log("reviews", "origin_failure", { service: "reviews" });
    expect(lines).toHaveLength(2);
    clock.advance(1);
    log("reviews", "origin_failure", { service: "reviews" });
    expect(lines[2]).toEqual({ event: "origin_failure", service: "reviews", suppressed: 50 });
  });
});

describe("breaker onChange", () => {
  it("is told of every change of state, and of nothing else", () => {
    const clock = fakeClock();
    const changes: [BreakerState, BreakerState][] = [];
    const breaker = createBreaker({ failureThreshold: 2, coolDownMs: 1000, clock, onChange: (from, to) => changes.push([from, to]) });
    breaker.success();
    breaker.failure();
    expect(changes).toEqual([]);
    breaker.failure();
    expect(breaker.allow()).toBe(false);
    clock.advance(1000);
    expect(breaker.allow()).toBe(true);
    breaker.failure();
    clock.advance(1000);
    breaker.allow();
    breaker.success();
    breaker.success();
    expect(changes).toEqual([
      ["closed", "open"],
      ["open", "half-open"],
      ["half-open", "open"],
      ["open", "half-open"],
      ["half-open", "closed"],
    ]);
  });
});

describe("origin client onFetch", () => {
  it("reports each call's outcome once: found, absent, or the failure", async () => {
    const outcomes: string[] = [];
    const answers: Record<string, () => Response> = {
      "p-1": () => new Response(JSON.stringify(sampleProduct("p-1")), { status: 200 }),
      "p-2": () => new Response("", { status: 404 }),
      "p-3": () => new Response("oops", { status: 500 }),
    };
    const client = createOriginClient({
      baseUrl: "http://origin.test",
      policies: TIMEOUTS_500_MS,
      fetch: (async (input: RequestInfo | URL) => answers[String(input).split("/").pop()!]!()) as typeof fetch,
      onFetch: (service, outcome) => outcomes.push(`${service}:${outcome}`),
    });
    await client.fetchResource("product", "p-1");
    await client.fetchResource("product", "p-2");
    await expect(client.fetchResource("product", "p-3")).rejects.toThrow();
    expect(outcomes).toEqual(["product:found", "product:absent", "product:status"]);
  });

  it("counts a background refresh that gave way to visitors without logging it as an origin failure; a visitor turned away is logged", async () => {
    const lines: string[] = [];
    const error = vi.spyOn(console, "error").mockImplementation((line: string) => void lines.push(line));
    try {
      const clock = fakeClock();
      const metrics = createMetrics({ clock });
      const limiter = createLimiter({ maxConcurrent: 1, maxQueued: 0, maxWaitMs: 0, maxHoldMs: 10_000 });
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const client = createOriginClient({
        baseUrl: "http://origin.test",
        policies: TIMEOUTS_500_MS,
        limiter,
        fetch: (async () => (await held, new Response(JSON.stringify(sampleProduct("p-1")), { status: 200 }))) as typeof fetch,
        onFetch: watchOrigin(metrics, clock),
      });
      const visitor = client.fetchResource("product", "p-1");
      await expect(client.fetchResource("inventory", "p-1", "refresh")).rejects.toThrow(/kept for visitors/);
      expect(lines.filter((line) => line.includes("origin_failure"))).toEqual([]);
      await expect(client.fetchResource("reviews", "p-1")).rejects.toThrow(/overloaded/);
      expect(lines.filter((line) => line.includes("origin_failure")).map((line) => JSON.parse(line).service)).toEqual(["reviews"]);
      const bucket = metrics.buckets().at(-1)!;
      expect([bucket.origin.inventory.shed, bucket.origin.reviews.shed]).toEqual([1, 1]);
      release();
      await visitor;
    } finally {
      error.mockRestore();
    }
  });
});

// ------------------------------------------------------------------ the page

function sources(overrides: Partial<StatusSources> = {}): StatusSources {
  const clock = fakeClock();
  const metrics = createMetrics({ clock });
  const config = parseConfig({ ORIGIN_URL: "http://origin.test", PUBLIC_URL: "https://shop.example", PURGE_TOKEN: "t" });
  return {
    now: clock.now(),
    metrics,
    config,
    l2: {
      shards: [
        { name: "eu", state: "closed" },
        { name: "us", state: "open" },
      ],
      stats: { skipped: 3, failures: 5, droppedWrites: 1, isolateErrors: 0, replayedWrites: 0, countedTimeouts: 0, countedErrors: 0, outagesDismissed: 0 },
      invalidValues: { rejected: 2, deleted: 1 },
    },
    l1: { bytes: 12 * 1024 * 1024, entries: 3456, evictions: 789 },
    location: { lookups: 200, hits: 150, invalid: 1, purged: 4, unvouched: 6, errors: 0, puts: 90, putsFailed: 0, putsDropped: 2 },
    purges: { seq: 42, lastSyncAt: clock.now() - 400, blind: false, widePurges: 1, logReads: 30, sharedReadsTaken: 12 },
    originSlots: { inUse: 7, queued: 2, reclaimed: 1 },
    fills: {
      inFlight: 5,
      takenOver: 0,
      outbox: { queued: 1, claimCalls: 70, claims: 120, joined: 45, lapsed: 0, carried: 12, writeCalls: 90, expired: 2 },
    },
    overload: {
      admission: {
        lagMs: 12,
        congested: true,
        limit: 4,
        coldPages: 3,
        coldPagesQueued: 5,
        pushedOut: 6,
        admitted: 900,
        lastChance: 0,
        clients: 3,
        shed: { busy: 42, overShare: 3 },
        shedServedStale: 30,
        shedRefused: 12,
      },
      departures: { pagesLeft: 75, fillsStopped: 60, fillsFinished: 9, fillsDropped: 4, backgroundFills: 1 },
      hold: { holdMs: 38, departedShare: 0.9, held: 500, leftWhileHeld: 470, maxHoldMs: 100 },
    },
    knownIds: {
      state: "ready",
      serving: true,
      version: "v7",
      count: 10_000,
      ageMs: 3_600_000,
      changedAt: null,
      lastCheckAt: clock.now(),
      pendingAdds: 0,
      loads: 1,
      location: { hits: 1, misses: 0, refused: 0, puts: 0, putsFailed: 0 },
    },
    ...overrides,
  };
}

describe("status page", () => {
  it("renders every section, the chart as inline SVG, and no script", () => {
    const s = sources();
    const clock = fakeClock();
    const metrics = createMetrics({ clock });
    for (let minute = 0; minute < 15; minute++) {
      metrics.recordPage(pageOf("p-000001", minute % 3 ? ALL_L1 : ALL_ORIGIN));
      for (let i = 0; i < minute; i++) metrics.recordOriginFetch("product", i % 4 ? "found" : "timeout");
      clock.advance(MINUTE);
    }
    metrics.noteBreaker("l2:us", "open");
    const model = buildStatus({ ...s, now: clock.now(), metrics });
    const html = renderStatusPage(model);
    expect(html).toContain("<svg");
    expect(html).toMatch(/<path d="M[\d.]+ [\d.]+ L/);
    expect(html).not.toMatch(/<script/i);
    expect(html).toContain('href="/products/p-000001"');
    expect(html).toContain("12.0 MiB of 32.0 MiB");
    // The location tier: whether it answers, its hit ratio and its purge rejections.
    expect(html).toMatch(/<span class="pill ok">yes<\/span>/);
    expect(html).toMatch(/75(\.0)?%/);
    expect(html).toMatch(/4 <small>\(purged since fetched\)<\/small>, 6/);
    expect(html).toMatch(/<td>us<\/td><td><span class="pill bad">open<\/span>/);
    expect(html).toContain("v7");
    expect(html).toContain("42");
    // The outbox: its claims' calls, and its writes, carried or alone; what waits, and what was dropped.
    expect(html).toContain("120 claims in 70 calls; 45 went in another request&#39;s call");
    expect(html).toContain("12 went with a lock claim, 90 calls of writes alone; 1 waiting, 2 dropped late");
    expect(html).toMatch(/<dt>invalid values<\/dt><dd>2 <small>\(not valid entries: read as misses; 1 deleted\)/);
    // The shedding: what was shed and why, and the work of visitors who left.
    expect(html).toContain(
      "45 (42 answered 503, with no turn within their wait or no room to wait; 3 answered 429, their client holding more than its share; 6 of all these gave their place in the full queue to a client holding fewer): 30 served from a copy, 12 with a part missing (503 or a default)",
    );
    // The lateness against CoDel's target and interval (overload/limit.ts), and the limit it sets.
    expect(html).toMatch(/<span class="pill bad">12 ms \(more than 5 ms for 100 ms: congested\)<\/span>/);
    expect(html).toContain("3 in progress, 4 at most now (of 256); 5 waiting for their turn");
    expect(html).toContain("75 pages not rendered; 60 fills stopped before a claim, poll or fetch");
    expect(html).toContain("38 ms now (90.0% of recent cold pages left before their answer; at most 100 ms); 500 pages held, 470 of them left during the hold");
    expect(html).toContain("9 written, 4 dropped past the limit; 1 now");
    // The JSON twin carries the same numbers.
    expect(model.last15m.pages).toBe(14); // the current minute is empty; the first one has left the window
    expect(model.l2.shards.find((shard) => shard.name === "us")?.since).toBe(clock.now());
    expect(model.l2.invalidValues).toEqual({ rejected: 2, deleted: 1 });
    expect(JSON.parse(JSON.stringify(model))).toEqual(model);
  });

  it("escapes what it prints, and renders with no L2, no filter and no traffic", () => {
    const s = sources({ l2: null, knownIds: null, purges: { seq: 0, lastSyncAt: -Infinity, blind: false, widePurges: 0, logReads: 0, sharedReadsTaken: 0 } });
    const model = buildStatus({
      ...s,
      l2: {
        shards: [{ name: '<img src=x onerror="alert(1)">', state: "half-open" }],
        stats: { skipped: 0, failures: 0, droppedWrites: 0, isolateErrors: 0, replayedWrites: 0, countedTimeouts: 0, countedErrors: 0, outagesDismissed: 0 },
        invalidValues: { rejected: 0, deleted: 0 },
      },
    });
    const html = renderStatusPage(model);
    expect(html).not.toContain("<img src=x");
    expect(html).toContain("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;");
    const quiet = buildStatus(s);
    expect(quiet.purges.syncAgeMs).toBeNull();
    expect(renderStatusPage(quiet)).toContain("No product pages served yet");
  });

  it("breaks the hit-ratio line over minutes without answers", () => {
    const points = Array.from({ length: 15 }, (_, i) => ({
      start: i * MINUTE,
      pages: 1,
      answers: i === 7 ? 0 : 4,
      hitRatio: i === 7 ? null : 0.5,
      originFetches: i,
      originErrors: 0,
    }));
    const chart = buildChart(points);
    expect(chart.ratioPath.match(/M/g)).toHaveLength(2);
    expect(chart.ratioDots).toHaveLength(14);
    expect(chart.bars).toHaveLength(15);
    expect(chart.maxFetches).toBe(20);
    // Bars stay inside the plot.
    for (const bar of chart.bars) expect(bar.y + bar.height).toBeCloseTo(chart.plot.bottom, 0);
  });
});
