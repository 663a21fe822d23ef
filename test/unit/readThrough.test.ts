// The entry life cycle and in-isolate coalescing of the read-through path
// (docs/architecture.md#entry-life-cycle), with a fake clock and a fake origin.
import { afterEach, describe, expect, it, vi } from "vitest";
import { storedSize } from "../../src/cache/l1";
import { createReadThrough, redisSilence } from "../../src/cache/readThrough";
import { REJECTED_ANSWER_TTL } from "../../src/cache/fill/rejections";
import type { ResourceName } from "../../src/origin/resources";
import { encodeEntry } from "../../src/cache/l2/codec";
import type { FillClaim, FillClaimRequest, FillWrite, L2 } from "../../src/cache/l2/l2";
import { type FakeClock, type FakeOrigin, fakeClock, fakeOrigin, healthyL2Parts, sample, sampleProduct, testConfig } from "../support/fakes";
import { DEFAULTS } from "../../src/config/defaults";
import { createDepartures } from "../../src/overload/departures";
import { createPageAdmission } from "../../src/overload/admission";
import { entryKey } from "../../src/cache/keys";

const PRODUCT: ResourceName[] = ["product"];

/** An L2's reads (which find nothing) and writes (which all land), counted in `calls`. */
function countedReadsAndWrites(calls: { readMany: number; writes: number }) {
  return {
    async readMany(keys: readonly string[]) {
      calls.readMany++;
      return keys.map(() => null);
    },
    async writeFills(writes: readonly FillWrite[]) {
      calls.writes += writes.length;
      return writes.map(() => true);
    },
  };
}

/** A read path over a fake origin; `random` draws its TTL jitter (none by default: deadlines exact). */
function setup(overrides: Record<string, unknown> = {}, random: () => number = () => 0) {
  const clock = fakeClock();
  const origin = fakeOrigin();
  const config = testConfig({
    CACHE_POLICIES: JSON.stringify({ product: { ttl: 60, swr: 30, staleIfError: 600, negativeTtl: 20 } }),
    ...overrides,
  });
  const cache = createReadThrough({ config, origin, l2: null, clock, random });
  const background: Promise<unknown>[] = [];
  const read = (id = "p-1", resources = PRODUCT) => cache.read(id, resources, (work) => void background.push(work));
  const settle = async () => {
    await Promise.all(background.splice(0));
  };
  return { clock, origin, cache, read, settle, config };
}

describe("entry life cycle", () => {
  it("fetches a missing entry once, then serves it fresh from L1", async () => {
    const { origin, read } = setup();
    const first = await read();
    expect(first.data.product).toMatchObject({ outcome: "found", tier: "origin", freshness: "fresh" });
    const second = await read();
    expect(second.data.product).toMatchObject({ tier: "l1", freshness: "fresh" });
    expect(origin.calls.product).toBe(1);
  });

  it("serves stale at once while exactly one background refresh runs", async () => {
    const { clock, origin, read, settle } = setup();
    await read();
    clock.advance(61_000); // past ttl, within swr
    let releaseGate!: () => void;
    origin.gate = new Promise((resolve) => (releaseGate = resolve));
    origin.version = 2;
    const answers = await Promise.all(Array.from({ length: 50 }, () => read()));
    for (const answer of answers) {
      expect(answer.data.product).toMatchObject({ tier: "l1", freshness: "stale" });
      expect(answer.data.product?.entry?.version).toBe(1);
    }
    expect(origin.calls.product).toBe(2); // the first fill and one refresh for 50 stale reads
    releaseGate();
    origin.gate = null;
    await settle();
    const after = await read();
    expect(after.data.product).toMatchObject({ tier: "l1", freshness: "fresh" });
    expect(after.data.product?.entry?.version).toBe(2);
    expect(origin.calls.product).toBe(2);
  });

  it("past the grace window, asks the origin before answering", async () => {
    const { clock, origin, read } = setup();
    await read();
    clock.advance(95_000); // past ttl + swr
    const answer = await read();
    expect(answer.data.product).toMatchObject({ tier: "origin", freshness: "fresh", forward: "stale" });
    expect(origin.calls.product).toBe(2);
  });

  it("serves an entry usable on error when the origin fails, and nothing beyond that window", async () => {
    const { clock, origin, read } = setup();
    await read();
    origin.behaviour.product = "fail";
    clock.advance(300_000); // within ttl + staleIfError
    const degraded = await read();
    expect(degraded.data.product).toMatchObject({ outcome: "found", freshness: "stale-if-error", failure: "status" });
    clock.advance(400_000); // past ttl + staleIfError
    const gone = await read();
    expect(gone.data.product).toMatchObject({ outcome: "failed", failure: "status" });
  });

  it("never caches a failure: the next read asks again", async () => {
    const { origin, read } = setup();
    origin.behaviour.product = "fail";
    expect((await read()).data.product?.outcome).toBe("failed");
    origin.behaviour.product = "ok";
    expect((await read()).data.product?.outcome).toBe("found");
    expect(origin.calls.product).toBe(2);
  });

  it("remembers an absent product for negativeTtl: one origin fetch per window", async () => {
    const { clock, origin, read } = setup();
    origin.behaviour.product = "absent";
    for (let i = 0; i < 1000; i++) expect((await read("p-missing")).data.product?.outcome).toBe("absent");
    expect(origin.calls.product).toBe(1);
    clock.advance(21_000);
    await read("p-missing");
    expect(origin.calls.product).toBe(2);
  });

  it("shares one origin fetch among concurrent misses of a key", async () => {
    const { origin, read } = setup();
    const answers = await Promise.all(Array.from({ length: 100 }, () => read("p-9", ["product", "inventory"])));
    expect(origin.calls).toMatchObject({ product: 1, inventory: 1 });
    expect(answers.filter((a) => a.data.product?.collapsed)).toHaveLength(99);
  });

  it("spreads expiry with jitter, which only shortens a TTL: deadlines within its last tenth, not all equal", async () => {
    const { clock, read } = setup({}, Math.random);
    const ttls = new Set<number>();
    for (let i = 0; i < 200; i++) {
      const answer = await read(`p-${i}`);
      const ttl = answer.data.product!.entry!.freshUntil - clock.now();
      expect(ttl).toBeGreaterThanOrEqual(54_000);
      expect(ttl).toBeLessThanOrEqual(60_000);
      ttls.add(ttl);
    }
    expect(ttls.size).toBeGreaterThan(100);
  });
});

// An origin answer about one id that the tier cannot use (a 400 or 422, a
// body that breaks the contract): not a failure of the service, and not to be
// asked again on every request.
describe("answers about one id that the tier cannot use", () => {
  const REJECTED_TTL_MS = REJECTED_ANSWER_TTL * 1000;

  it("with nothing cached, is 'no data' for a short while: one origin call, then L1, then asked again", async () => {
    const { clock, origin, read } = setup();
    origin.behaviour.product = "reject";
    const first = await read("P-JUNK");
    expect(first.data.product).toMatchObject({ outcome: "absent", tier: "origin", failure: "rejected" });
    expect(first.data.product!.entry!.freshUntil - clock.now()).toBe(REJECTED_TTL_MS);
    for (let i = 0; i < 100; i++) expect((await read("P-JUNK")).data.product).toMatchObject({ outcome: "absent", tier: "l1" });
    expect(origin.calls.product).toBe(1);
    clock.advance(REJECTED_TTL_MS);
    origin.behaviour.product = "ok";
    expect((await read("P-JUNK")).data.product).toMatchObject({ outcome: "found", tier: "origin" });
    expect(origin.calls.product).toBe(2);
  });

  it("with a copy at hand, keeps serving the copy, and asks the origin once per window, not per request", async () => {
    const { clock, origin, read, settle } = setup();
    await read();
    origin.behaviour.product = "reject";
    clock.advance(61_000); // stale: served while a refresh runs
    for (let i = 0; i < 20; i++) {
      expect((await read()).data.product).toMatchObject({ outcome: "found", freshness: "stale", tier: "l1" });
      await settle();
    }
    expect(origin.calls.product).toBe(2); // the first fill, and one refresh for 20 stale reads
    clock.advance(35_000); // past swr: only usable on error; the copy is never replaced by "no data"
    for (let i = 0; i < 20; i++) {
      expect((await read()).data.product).toMatchObject({ outcome: "found", freshness: "stale-if-error", failure: "rejected" });
    }
    expect(origin.calls.product).toBe(3);
    clock.advance(REJECTED_TTL_MS);
    origin.behaviour.product = "ok";
    expect((await read()).data.product).toMatchObject({ outcome: "found", freshness: "fresh", tier: "origin" });
    expect(origin.calls.product).toBe(4);
  });

  it("is forgotten when the id is purged", async () => {
    const { origin, cache, read, config } = setup();
    origin.behaviour.product = "reject";
    await read("p-fixed");
    origin.behaviour.product = "ok";
    cache.forget(entryKey(config.keyPrefix, "product", "p-fixed"));
    expect((await read("p-fixed")).data.product).toMatchObject({ outcome: "found", tier: "origin" });
    expect(origin.calls.product).toBe(2);
  });
});

describe("the other resources wait for the product", () => {
  const ALL: ResourceName[] = ["product", "inventory", "reviews", "recommendations"];

  it("an id with no product costs one origin fetch: the others are never asked", async () => {
    const { clock, origin, read } = setup();
    origin.behaviour.product = "absent";
    const first = await read("p-missing", ALL);
    expect(first.data.product?.outcome).toBe("absent");
    expect(Object.keys(first.data)).toEqual(["product"]);
    // Known absent from L1 later on, past the others' own negative ttls too: still nothing else asked.
    clock.advance(15_000);
    expect(Object.keys((await read("p-missing", ALL)).data)).toEqual(["product"]);
    expect(origin.calls).toEqual({ product: 1, inventory: 0, reviews: 0, recommendations: 0, listing: 0 });
  });

  it("nor when the product failed with nothing usable, or was rejected", async () => {
    const { origin, read } = setup();
    origin.behaviour.product = "fail";
    expect(Object.keys((await read("p-1", ALL)).data)).toEqual(["product"]);
    origin.behaviour.product = "reject";
    expect(Object.keys((await read("p-2", ALL)).data)).toEqual(["product"]);
    expect(origin.calls).toEqual({ product: 2, inventory: 0, reviews: 0, recommendations: 0, listing: 0 });
  });

  it("a product that exists: the others are filled after it, each once, however many readers", async () => {
    const { origin, read } = setup();
    const answers = await Promise.all(Array.from({ length: 50 }, () => read("p-3", ALL)));
    for (const answer of answers) for (const resource of ALL) expect(answer.data[resource]?.outcome).toBe("found");
    expect(origin.calls).toEqual({ product: 1, inventory: 1, reviews: 1, recommendations: 1, listing: 0 });
  });

  it("unless the known-ids filter lists the product: then every part is asked at once, one origin round trip", async () => {
    const { origin, cache } = setup();
    let open!: () => void;
    origin.gate = new Promise<void>((resolve) => (open = resolve));
    const page = cache.read("p-4", ALL, () => {}, { listed: true });
    await vi.waitFor(() => expect(origin.calls).toEqual({ product: 1, inventory: 1, reviews: 1, recommendations: 1, listing: 0 }));
    open();
    const { data } = await page;
    for (const resource of ALL) expect(data[resource]?.outcome).toBe("found");
    // A listed id that names no product (a false positive of the filter): four fetches, each answer kept as absent.
    origin.gate = null;
    origin.behaviour.product = "absent";
    const missing = await cache.read("p-5", ALL, () => {}, { listed: true });
    expect(missing.data.product?.outcome).toBe("absent");
    expect(origin.calls).toEqual({ product: 2, inventory: 2, reviews: 2, recommendations: 2, listing: 0 });
  });
});

describe("L1 byte bound", () => {
  it("never holds more than its configured bytes, with 200,000 distinct ids requested (over fifty times what fits)", async () => {
    const { cache, read, config } = setup({ L1_MAX_BYTES: String(1024 * 1024) });
    let peak = 0;
    for (let i = 0; i < 200_000; i++) {
      await read(`p-${i}`);
      if (i % 1000 === 0) {
        peak = Math.max(peak, cache.l1.cache.calculatedSize);
        // Let vitest's own messages through: a loop of microtasks alone starves them on a loaded machine.
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
    peak = Math.max(peak, cache.l1.cache.calculatedSize);
    expect(peak).toBeLessThanOrEqual(config.l1MaxBytes);
    // The bound is used, not dodged by holding nothing: and it was filled over fifty times.
    expect(cache.l1.cache.calculatedSize).toBeGreaterThan(config.l1MaxBytes * 0.9);
    expect(cache.l1.cache.size * 50).toBeLessThan(200_000);
  }, 120_000);

  it("counts the entries its byte bound pushed out, and not those overwritten or expired", async () => {
    const { cache, read, clock, origin } = setup({ L1_MAX_BYTES: String(1024 * 1024) });
    for (let i = 0; i < 20_000; i++) await read(`p-${i}`);
    const full = cache.l1.stats();
    // Each product fetched was kept once: what is not held any more was pushed out.
    expect(full.evictions).toBeGreaterThan(0);
    expect(full.evictions + full.entries).toBe(origin.calls.product);
    // Past every entry's error window (60 + 600 s), a read replaces an expired entry: no eviction.
    clock.advance(661_000);
    await read("p-19999");
    expect(cache.l1.stats().evictions).toBe(full.evictions);
  }, 60_000);
});

describe("what L1 holds", () => {
  it("keeps data as JSON text: one byte a character for Latin-1 text, two otherwise; every read gets its own copy", async () => {
    expect(storedSize("x".repeat(1000))).toBe(storedSize("") + 1000);
    expect(storedSize("Müller & Söhne".padEnd(1000, "x"))).toBe(storedSize("") + 1000);
    expect(storedSize("日本語".padEnd(1000, "x"))).toBe(storedSize("") + 2000);

    const { cache, read } = setup();
    const first = await read("p-7");
    const key = entryKey(DEFAULTS.keyPrefix, "product", "p-7");
    expect(typeof cache.l1.cache.peek(key)?.json).toBe("string");
    expect(cache.l1.cache.peek(key)?.tags).toEqual((first.data.product!.data as { tags: string[] }).tags);
    const a = await read("p-7");
    const b = await read("p-7");
    expect(a.data.product?.tier).toBe("l1");
    expect(a.data.product?.data).toEqual(first.data.product?.data);
    // A request that changes what it was given changes nothing for the next one.
    (a.data.product!.data as { title: string }).title = "changed by one request";
    expect(b.data.product?.data).toEqual(first.data.product?.data);
    expect((await read("p-7")).data.product?.data).toEqual(first.data.product?.data);
  });
});

describe("hot products (refresh-ahead)", () => {
  it("a product asked for once a second is never served stale and never waits for the origin", async () => {
    const { clock, origin, read, settle } = setup({ CACHE_POLICIES: JSON.stringify({ product: { ttl: 60, swr: 30 } }) });
    await read();
    const answers: string[] = [];
    for (let second = 1; second <= 600; second++) {
      clock.advance(1000);
      const answer = await read();
      answers.push(`${answer.data.product!.tier}/${answer.data.product!.freshness}`);
      await settle();
    }
    expect(answers.filter((answer) => answer !== "l1/fresh")).toEqual([]);
    // Refreshed once per ttl or so (ahead of expiry), not once per request.
    expect(origin.calls.product).toBeGreaterThanOrEqual(10);
    expect(origin.calls.product).toBeLessThanOrEqual(15);
  });

  it("isolates refresh a hot product ahead at different points of its last stretch, not all at once", async () => {
    // Two isolates holding copies with the same deadlines (one L2 write):
    // each uses its own part of the refresh-ahead share, drawn once.
    const isolate = (draw: number) => {
      const clock = fakeClock();
      const origin = fakeOrigin();
      const config = testConfig({ CACHE_POLICIES: JSON.stringify({ product: { ttl: 60, swr: 30 } }) });
      const cache = createReadThrough({ config, origin, l2: null, clock, random: () => draw });
      const read = () => cache.read("p-1", PRODUCT, () => {});
      return { clock, origin, read };
    };
    const early = isolate(0.999); // refreshes when ~25% of the ttl is left (hot)
    const late = isolate(0); // when 12.5% is left
    for (const { read } of [early, late]) {
      for (let i = 0; i < 150; i++) await read(); // hot: over 60 a minute
    }
    for (const { clock } of [early, late]) clock.advance(60_000 - 10_000); // 10 s of 60 left
    await early.read();
    await late.read();
    expect(early.origin.calls.product).toBe(2); // refreshed ahead
    expect(late.origin.calls.product).toBe(1); // not yet
    late.clock.advance(3_000); // 7 s left
    await late.read();
    expect(late.origin.calls.product).toBe(2);
  });

  it("a product asked for rarely follows the normal life cycle (served stale after ttl)", async () => {
    const { clock, origin, read } = setup({ CACHE_POLICIES: JSON.stringify({ product: { ttl: 60, swr: 600 } }) });
    await read();
    clock.advance(59_000);
    expect((await read()).data.product?.freshness).toBe("fresh");
    expect(origin.calls.product).toBe(1); // cold: no refresh ahead of expiry
    clock.advance(2_000);
    expect((await read()).data.product?.freshness).toBe("stale");
  });
});

// The Workers rules (docs/architecture.md#sharing-work-across-requests-in-one-isolate): a fill whose
// request was cancelled may never settle. Such a fill is one whose origin
// call never returns here.
describe("fills whose request vanished", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("a reader after the fill's bound starts a fill of its own instead of waiting on the dead one", async () => {
    const { clock, origin, cache, read } = setup();
    origin.gate = new Promise(() => undefined); // the owner's origin call never comes back
    void read();
    await Promise.resolve();
    expect(cache.fillStats().inFlight).toBe(1);
    origin.gate = null;
    clock.advance(60_000); // far past the fill's bound
    const answer = await read();
    expect(answer.data.product).toMatchObject({ outcome: "found", tier: "origin" });
    expect(origin.calls.product).toBe(2);
    expect(cache.fillStats().inFlight).toBe(0);
  });

  it("readers that joined a fill whose owner vanished take it over at its bound, on timers of their own", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const { clock, origin, cache, read } = setup();
    origin.gate = new Promise(() => undefined);
    void read(); // the owner
    await Promise.resolve();
    origin.gate = null;
    const joined = Promise.all(Array.from({ length: 5 }, () => read()));
    await Promise.resolve();
    expect(origin.calls.product).toBe(1);
    clock.advance(10_000);
    await vi.advanceTimersByTimeAsync(10_000);
    const answers = await joined;
    for (const answer of answers) expect(answer.data.product).toMatchObject({ outcome: "found" });
    // One takeover fill for the five of them, not five.
    expect(origin.calls.product).toBe(2);
    expect(cache.fillStats().takenOver).toBeGreaterThanOrEqual(1);
  });
});

describe("a copy in L1 past its grace (kept only for the origin's failures)", () => {
  /** An L2 that holds nothing and grants every lock, unless `claimAnswer` says otherwise; counts its calls. */
  function countingL2(claimAnswer: () => FillClaim = () => ({ kind: "won" })) {
    const calls = { readMany: 0, claims: [] as string[], writes: 0 };
    const l2 = {
      ...healthyL2Parts,
      ...countedReadsAndWrites(calls),
      async claimFills(claims: readonly FillClaimRequest[]) {
        calls.claims.push(...claims.map(({ key }) => key));
        return claims.map(() => claimAnswer());
      },
      shardOf: () => "l2",
    } as unknown as L2;
    return { l2, calls };
  }

  function setupWithL2(l2: L2) {
    const clock = fakeClock();
    const origin = fakeOrigin();
    const config = testConfig({ CACHE_POLICIES: JSON.stringify({ product: { ttl: 60, swr: 30, staleIfError: 600, negativeTtl: 20 } }) });
    const cache = createReadThrough({ config, origin, l2, clock, random: () => 0 });
    const background: Promise<unknown>[] = [];
    const read = () => cache.read("p-1", PRODUCT, (work) => void background.push(work));
    const settle = async () => {
      while (background.length > 0) await Promise.all(background.splice(0));
    };
    return { clock, origin, read, settle };
  }

  it("goes to its fill without reading L2 first: the claim is the page's only call before the origin", async () => {
    const { l2, calls } = countingL2();
    const { clock, origin, read, settle } = setupWithL2(l2);
    expect((await read()).data.product).toMatchObject({ tier: "origin" });
    await settle();
    expect(calls).toEqual({ readMany: 1, claims: ["pp:v1:p:p-1"], writes: 1 });

    clock.advance(100_000); // past ttl + swr (90 s), within stale-if-error
    expect((await read()).data.product).toMatchObject({ tier: "origin", freshness: "fresh", forward: "stale" });
    await settle();
    expect(calls).toEqual({ readMany: 1, claims: ["pp:v1:p:p-1", "pp:v1:p:p-1"], writes: 2 });
    expect(origin.calls.product).toBe(2);
  });

  /** An isolate that filled p-1 once; its copy now past its grace, and another isolate's fresh one in L2, which claims find. */
  async function withAnotherIsolatesCopy() {
    let another: FillClaim = { kind: "won" };
    const { l2, calls } = countingL2(() => another);
    const setup = setupWithL2(l2);
    await setup.read();
    await setup.settle();
    setup.clock.advance(100_000);
    const now = setup.clock.now();
    const copy = {
      data: sampleProduct("p-1", 2),
      version: 2,
      fetchedAt: now - 1000,
      freshUntil: now + 59_000,
      staleUntil: now + 89_000,
      errorUntil: now + 599_000,
    };
    another = { kind: "copy", value: encodeEntry(copy, 1024)! };
    return { ...setup, calls };
  }

  it("takes the copy another isolate made fresh since from its claim, with no lock and no origin fetch", async () => {
    const { origin, read, settle, calls } = await withAnotherIsolatesCopy();
    // An L2 hit, as an MGET's would be (Cache-Status "pp-l2; hit"): nothing was forwarded, nothing waited for.
    const answer = (await read()).data.product;
    expect(answer).toMatchObject({ tier: "l2", freshness: "fresh", collapsed: false, entry: { version: 2 } });
    expect(answer?.forward).toBeUndefined();
    await settle();
    expect(calls.readMany).toBe(1);
    expect(calls.writes).toBe(1);
    expect(origin.calls.product).toBe(1);
  });

  it("says of a page that joined a fill whose claim took L2's copy that its answer came from L2, collapsed: not from the origin, which nobody asked", async () => {
    const { origin, read } = await withAnotherIsolatesCopy();
    const [first, second] = await Promise.all([read(), read()]);
    expect(first.data.product).toMatchObject({ tier: "l2", freshness: "fresh", collapsed: false, entry: { version: 2 } });
    expect(second.data.product).toMatchObject({ tier: "l2", freshness: "fresh", collapsed: true, entry: { version: 2 } });
    expect(origin.calls.product).toBe(1);
  });
});

describe("a cold page whose product the known-ids filter lists, every lock held by another isolate", () => {
  it("waits for the winner with one L2 read a round for its four parts, not four: a slow winner cannot spend the request's subrequest budget", async () => {
    const ALL: ResourceName[] = ["product", "inventory", "reviews", "recommendations"];
    const polls: number[] = [];
    let winnerWroteAt = Number.POSITIVE_INFINITY;
    const clock = fakeClock();
    const l2 = {
      ...healthyL2Parts,
      async readMany(keys: readonly string[]) {
        // The waits' polls: [key, lock] pairs (a listed page reads nothing before its claims).
        polls.push(keys.length / 2);
        const written = clock.now() >= winnerWroteAt;
        return keys.map((key, i) => {
          if (i % 2 === 1) return written ? null : "winner";
          if (!written) return null;
          const resource = ALL.find((r) => key === entryKey(DEFAULTS.keyPrefix, r, "p-7"))!;
          const now = clock.now();
          return encodeEntry(
            { data: sample(resource, "p-7", 1), version: 1, fetchedAt: now, freshUntil: now + 60_000, staleUntil: now + 90_000, errorUntil: now + 600_000 },
            1024,
          )!;
        });
      },
      claimFills: async (claims: readonly FillClaimRequest[]) => claims.map((): FillClaim => ({ kind: "lost" })),
      writeFills: async (writes: readonly FillWrite[]) => writes.map(() => true),
      shardOf: () => "l2",
    } as unknown as L2;
    const origin = fakeOrigin();
    // The waits' pauses move the fake clock and take no real time; the winner writes 2 s in.
    const sleep = async (ms: number) => clock.advance(ms);
    winnerWroteAt = clock.now() + 2000;
    const cache = createReadThrough({ config: testConfig(), origin, l2, clock, sleep });
    const { data } = await cache.read("p-7", ALL, () => {}, { listed: true });
    for (const resource of ALL) expect(data[resource]).toMatchObject({ outcome: "found", tier: "l2", collapsed: true });
    expect(origin.calls).toMatchObject({ product: 0, inventory: 0, reviews: 0, recommendations: 0 });
    // About 23 rounds of polling over the 2 s (10, 20, 40, 80 ms, then every L2 budget, 100 ms), each one read for the four.
    expect(polls.length).toBeGreaterThan(10);
    expect(polls.length).toBeLessThan(30);
    expect(new Set(polls)).toEqual(new Set([4]));
  });
});

describe("a page whose product the known-ids filter lists, cold in this isolate", () => {
  const ALL: ResourceName[] = ["product", "inventory", "reviews", "recommendations"];

  /** An L2 holding every part of every product within its stale window, whose claims answer as the script does; counts its calls. */
  function staleL2(clock: ReturnType<typeof fakeClock>) {
    const calls = { readMany: 0, claims: [] as { resource: ResourceName; staleBeyond?: number }[], writes: 0 };
    const fetchedAt = clock.now() - 15_000;
    const copy = (resource: ResourceName, id: string) =>
      encodeEntry(
        {
          data: sample(resource, id, 1),
          version: 1,
          fetchedAt,
          freshUntil: fetchedAt + 10_000,
          staleUntil: fetchedAt + 40_000,
          errorUntil: fetchedAt + 610_000,
        },
        1024,
      )!;
    const l2 = {
      ...healthyL2Parts,
      ...countedReadsAndWrites(calls),
      async claimFills(claims: readonly FillClaimRequest[]) {
        return claims.map(({ key, claim }): FillClaim => {
          const id = key.split(":").at(-1)!;
          const resource = ALL.find((r) => key === entryKey(DEFAULTS.keyPrefix, r, id))!;
          calls.claims.push({ resource, staleBeyond: claim.staleBeyond });
          // Within its stale window past staleBeyond: the copy; otherwise (a refresh) the lock, with the copy to fall back on.
          return claim.staleBeyond !== undefined && fetchedAt + 40_000 > claim.staleBeyond
            ? { kind: "copy", value: copy(resource, id) }
            : { kind: "won", stale: copy(resource, id) };
        });
      },
      shardOf: () => "l2",
    } as unknown as L2;
    return { l2, calls };
  }

  it("reads nothing before its claims: they return L2's stale copies, served at once, each refreshed once in the background", async () => {
    const clock = fakeClock();
    const { l2, calls } = staleL2(clock);
    const origin = fakeOrigin();
    const cache = createReadThrough({ config: testConfig(), origin, l2, clock });
    const background: Promise<unknown>[] = [];
    const { data } = await cache.read("p-8", ALL, (work) => void background.push(work), { listed: true });
    for (const resource of ALL) expect(data[resource]).toMatchObject({ outcome: "found", tier: "l2", freshness: "stale", entry: { version: 1 } });
    // The visitor waited for one claim call of four, and for no origin fetch (the refreshes' claims come after it).
    expect(calls.readMany).toBe(0);
    expect(
      calls.claims
        .slice(0, 4)
        .map(({ resource }) => resource)
        .sort(),
    ).toEqual([...ALL].sort());
    expect(calls.claims.slice(0, 4).every(({ staleBeyond }) => staleBeyond === clock.now())).toBe(true);
    expect(origin.calls).toMatchObject({ product: 0, inventory: 0, reviews: 0, recommendations: 0 });

    while (background.length > 0) await Promise.all(background.splice(0));
    // The refreshes claim without staleBeyond (they want a fresh copy or the lock), fetch once each, and write.
    expect(calls.claims.slice(4).map(({ staleBeyond }) => staleBeyond)).toEqual([undefined, undefined, undefined, undefined]);
    expect(origin.calls).toMatchObject({ product: 1, inventory: 1, reviews: 1, recommendations: 1 });
    expect(calls.writes).toBe(4);
    const after = await cache.read("p-8", ALL, () => {}, { listed: true });
    for (const resource of ALL) expect(after.data[resource]).toMatchObject({ tier: "l1", freshness: "fresh" });
  });

  it("starts no more refreshes than the origin has room for: the rest would win their locks only to be shed", async () => {
    const clock = fakeClock();
    const { l2, calls } = staleL2(clock);
    const origin = fakeOrigin();
    origin.refreshRoom = () => 2;
    const cache = createReadThrough({ config: testConfig(), origin, l2, clock });
    const background: Promise<unknown>[] = [];
    await cache.read("p-8", ALL, (work) => void background.push(work), { listed: true });
    while (background.length > 0) await Promise.all(background.splice(0));
    // Four stale parts served, four refreshes asked for in one send: two started (their claims, their fetches), two left for a later request.
    expect(calls.claims.slice(4)).toHaveLength(2);
    expect(Object.values(origin.calls).reduce((a, b) => a + b, 0)).toBe(2);
    expect(calls.writes).toBe(2);
  });

  it("counts the refreshes still claiming or fetching against the room: the room is the origin's, not each page's", async () => {
    const clock = fakeClock();
    const { l2, calls } = staleL2(clock);
    const origin = fakeOrigin();
    origin.refreshRoom = () => 6; // the limiter's answer while no refresh has taken a slot yet
    let open!: () => void;
    origin.gate = new Promise<void>((resolve) => (open = resolve));
    const cache = createReadThrough({ config: testConfig(), origin, l2, clock });
    const background: Promise<unknown>[] = [];
    const refreshClaims = () => calls.claims.filter(({ staleBeyond }) => staleBeyond === undefined).length;
    await cache.read("p-8", ALL, (work) => void background.push(work), { listed: true });
    // Refreshes' claims wait for a claim call to carry them, at most the outbox's hold.
    const held = { timeout: DEFAULTS.backgroundCallMs + 1000 };
    await vi.waitFor(() => expect(refreshClaims()).toBe(4), held);
    // Another product's four stale parts, while the first four refreshes still run: room for two more, not six.
    await cache.read("p-9", ALL, (work) => void background.push(work), { listed: true });
    await vi.waitFor(() => expect(refreshClaims()).toBe(6), held);
    await new Promise((resolve) => setTimeout(resolve, 50)); // and no more come
    expect(refreshClaims()).toBe(6);
    open();
    while (background.length > 0) await Promise.all(background.splice(0));
    expect(Object.values(origin.calls).reduce((a, b) => a + b, 0)).toBe(6);
  });

  it("without the filter's word, reads L2 first, as before (an unknown id may name no product: its locks are not taken)", async () => {
    const clock = fakeClock();
    const { l2, calls } = staleL2(clock);
    const cache = createReadThrough({ config: testConfig(), origin: fakeOrigin(), l2, clock, sleep: async (ms) => clock.advance(ms) });
    await cache.read("p-8", ALL, () => {});
    expect(calls.readMany).toBe(1);
  });

  it("with L2_READ_REPLICAS on, reads L2 first all the same: a replica nearby answers the read, the claims go to the primary", async () => {
    const clock = fakeClock();
    const { l2, calls } = staleL2(clock);
    const cache = createReadThrough({ config: testConfig({ L2_READ_REPLICAS: "on" }), origin: fakeOrigin(), l2, clock });
    const { data } = await cache.read("p-8", ALL, () => {}, { listed: true });
    expect(calls.readMany).toBe(1);
    // This fake's reads miss: the page's claims follow the MGET, and hand back the stale copies (then come the refreshes').
    expect(calls.claims.filter(({ staleBeyond }) => staleBeyond !== undefined)).toHaveLength(4);
    for (const resource of ALL) expect(data[resource]).toMatchObject({ tier: "l2", freshness: "stale" });
  });
});

/** L2's value for `p-1`'s product (version 4), fetched at `now`: fresh for a minute. */
function productInL2(now: number): string {
  return encodeEntry(
    { data: sampleProduct("p-1", 4), version: 4, fetchedAt: now, freshUntil: now + 60_000, staleUntil: now + 90_000, errorUntil: now + 600_000 },
    1024,
  )!;
}

describe("a double fault: the origin fails for a page that did not hear from L2", () => {
  /** An L2 that holds `p-1`'s product, and whose breaker is `state`: reads are skipped (undefined) while it is open, unless forced. */
  function l2Holding(state: "open" | "closed", silent = false) {
    const clock = fakeClock();
    const now = clock.now();
    const value = productInL2(now);
    const reads = { plain: 0, forced: 0 };
    const l2 = {
      ...healthyL2Parts,
      accepts: () => state === "closed",
      answered: () => 1,
      breaker: { state: () => state },
      async readMany(keys: readonly string[], options?: { force?: boolean }) {
        if (options?.force) reads.forced++;
        else reads.plain++;
        if ((state === "open" || silent) && !options?.force) return keys.map(() => undefined);
        return keys.map((key) => (key === entryKey(DEFAULTS.keyPrefix, "product", "p-1") && (options?.force || state === "closed") ? value : null));
      },
      claimFills: async (claims: readonly FillClaimRequest[]) => claims.map((): FillClaim | undefined => undefined),
      writeFills: async (writes: readonly FillWrite[]) => writes.map(() => undefined),
      shardOf: () => "l2",
    } as unknown as L2;
    return { clock, l2, reads };
  }

  /** `id`'s page read through that L2 while the product service fails. */
  async function readWithOriginFailing({ clock, l2 }: ReturnType<typeof l2Holding>, id: string) {
    const origin = fakeOrigin();
    origin.behaviour.product = "fail";
    const cache = createReadThrough({ config: testConfig({ KNOWN_IDS: "off" }), origin, l2, clock });
    return (await cache.read(id, PRODUCT, () => undefined)).data;
  }

  it("with its breaker open, L2 is read once, as the last resort before a 503, and its copy served", async () => {
    const held = l2Holding("open");
    const data = await readWithOriginFailing(held, "p-1");
    expect(data.product).toMatchObject({ outcome: "found", tier: "l2" });
    expect(data.product?.entry?.version).toBe(4);
    expect(held.reads.forced).toBe(1);
  });

  it("with its breaker closed again but the page's read unanswered (Redis just back), L2 is read once as the last resort too", async () => {
    const held = l2Holding("closed", true);
    const data = await readWithOriginFailing(held, "p-1");
    expect(data.product).toMatchObject({ outcome: "found", tier: "l2" });
    expect(held.reads.forced).toBe(1);
  });

  it("when L2 answered the page's own read (it held nothing then), no second read: the origin's failure stands", async () => {
    const held = l2Holding("closed");
    const data = await readWithOriginFailing(held, "p-2");
    const { reads } = held;
    expect(data.product).toMatchObject({ outcome: "failed", failure: "status" });
    expect(reads.plain).toBeGreaterThanOrEqual(1);
    expect(reads.forced).toBe(0);
  });
});

describe("Redis's silence (what ends a lock claim's or a poll's wait at once)", () => {
  /** An L2 that has answered `answered` calls so far. */
  const answering = (answered: number) => ({ answered: () => answered });

  it("is an unanswered call from an isolate on time to a Redis that answered it before, and nothing since", () => {
    expect(redisSilence(answering(7), () => false)("k", 7)).toBe(true);
  });

  it("is not a fresh isolate's first calls: Redis never answered it, so nothing says it stopped (a slow first connection)", () => {
    expect(redisSilence(answering(0), () => false)("k", 0)).toBe(false);
  });

  it("is not a call that Redis outlasted while answering others meanwhile: its pace, not its silence", () => {
    expect(redisSilence(answering(9), () => false)("k", 7)).toBe(false);
  });

  it("is not a reply this isolate may have read late, nor anything without L2", () => {
    expect(redisSilence(answering(7), () => true)("k", 7)).toBe(false);
    expect(redisSilence(null, () => false)("k", 7)).toBe(false);
  });
});

describe("tag purges judge L2's copies of a product this isolate has never seen", () => {
  const ALL: ResourceName[] = ["product", "inventory", "reviews", "recommendations"];

  it.each([
    ["read from L2 first (not listed by the known-ids filter)", false],
    ["claimed straight away (listed), the claims returning the copies", true],
  ])("a part fetched before a purge of the product's tag is not served from L2, whichever part comes first: %s", async (_, listed) => {
    const clock = fakeClock();
    const fetchedAt = clock.now() - 1_000;
    const copy = (resource: ResourceName, id: string) =>
      encodeEntry(
        {
          data: sample(resource, id, 1),
          version: 1,
          fetchedAt,
          freshUntil: fetchedAt + 60_000,
          staleUntil: fetchedAt + 90_000,
          errorUntil: fetchedAt + 600_000,
        },
        1024,
      )!;
    const l2 = {
      ...healthyL2Parts,
      async readMany(keys: readonly string[]) {
        return keys.map((key) => {
          const id = key.split(":").at(-1)!;
          return copy(ALL.find((r) => key === entryKey(DEFAULTS.keyPrefix, r, id))!, id);
        });
      },
      async writeFills(writes: readonly FillWrite[]) {
        return writes.map(() => true);
      },
      async claimFills(claims: readonly FillClaimRequest[]) {
        // A claim that finds a fresh copy returns it (the script's answer) unless the purge's notBefore rules it out.
        return claims.map(({ key, claim }): FillClaim => {
          const id = key.split(":").at(-1)!;
          const resource = ALL.find((r) => key === entryKey(DEFAULTS.keyPrefix, r, id))!;
          return fetchedAt >= claim.notBefore ? { kind: "copy", value: copy(resource, id) } : { kind: "won" };
        });
      },
      shardOf: () => "l2",
    } as unknown as L2;
    // The product's tag ("brand:acme", sampleProduct) was purged (hard) after the copies were fetched.
    const purges = {
      judge: (entry: { fetchedAt: number }, _id: string, _resource: ResourceName, tags: readonly string[]) =>
        tags.includes("brand:acme") && entry.fetchedAt < clock.now() - 500 ? ("gone" as const) : ("ok" as const),
      purgedAt: (_id: string, _resource: ResourceName, tags: readonly string[]) =>
        tags.includes("brand:acme") ? { hard: clock.now() - 500, any: clock.now() - 500 } : { hard: 0, any: 0 },
      stamp: () => null,
      vouches: () => true,
    };
    const origin = fakeOrigin();
    const cache = createReadThrough({ config: testConfig(), origin, l2, clock, purges });
    const background: Promise<unknown>[] = [];
    // Inventory asked for before the product.
    const page = await cache.read("p-1", ["inventory", "product", "reviews"], (work) => void background.push(work), { listed });
    while (background.length > 0) await Promise.all(background.splice(0));
    for (const resource of ["product", "inventory", "reviews"] as const) expect(page.data[resource]).toMatchObject({ tier: "origin" });
  });
});

/** The read path without L2, its pages' new work going through `admission` (a fake the test writes), as the tier's overload parts pass it. */
function readThroughAdmitting(clock: FakeClock, origin: FakeOrigin, admission: Parameters<typeof createPageAdmission>[0]["admission"], l2: L2 | null = null) {
  const departures = createDepartures({ clock, room: (background) => background < 4, backgroundFillMs: 1000 });
  return createReadThrough({
    config: testConfig(),
    origin,
    l2,
    clock,
    overload: { pages: createPageAdmission({ admission, clock, turnLeaseMs: 10_000, places: 64 }), departures, lag: { lagMs: () => 0 } },
  });
}

describe("pages that waited for their turn", () => {
  it("a page refused for busyness with a core part it has no copy of reads L2 once first, the last resort before a 503: another isolate's copy is served; a client's excess (a 429) reads nothing", async () => {
    const clock = fakeClock();
    const origin = fakeOrigin();
    const now = clock.now();
    const held = productInL2(now);
    const reads: string[][] = [];
    const l2 = {
      ...healthyL2Parts,
      async readMany(keys: readonly string[]) {
        reads.push([...keys]);
        return keys.map((key) => (key === entryKey(DEFAULTS.keyPrefix, "product", "p-1") ? held : null));
      },
      shardOf: () => "l2",
    } as unknown as L2;
    let why: "busy" | "over share" = "busy";
    const admission = {
      async admit<T>(): Promise<T | "busy" | "over share"> {
        return why;
      },
      noteShed: () => undefined,
    };
    const cache = readThroughAdmitting(clock, origin, admission, l2);
    // Listed: its own read would have been its claims, inside admission; shed, it reads L2 with an MGET all the same.
    const page = await cache.read("p-1", PRODUCT, () => {}, { listed: true });
    expect(page.data.product).toMatchObject({ outcome: "found", tier: "l2", freshness: "fresh" });
    expect(reads).toEqual([[entryKey(DEFAULTS.keyPrefix, "product", "p-1")]]);
    why = "over share";
    const excess = await cache.read("p-2", PRODUCT, () => {}, { listed: true });
    expect(excess).toMatchObject({ overShare: true, data: { product: { outcome: "failed", failure: "overloaded" } } });
    expect(reads).toHaveLength(1);
    expect(origin.calls.product).toBe(0);
  });

  it("while one page of a cold product waits for its turn, the others for it do not queue: they go on and join one fill, and the waiting page, shed at the end of its wait, is served what they filled", async () => {
    const clock = fakeClock();
    const origin = fakeOrigin();
    let asked = 0;
    const admission = {
      async admit<T>(): Promise<T | "busy"> {
        asked++;
        // No turn comes within this page's wait: shed.
        await new Promise((resolve) => setTimeout(resolve, 30));
        return "busy";
      },
      noteShed: () => undefined,
    };
    const cache = readThroughAdmitting(clock, origin, admission);
    const pages = await Promise.all(Array.from({ length: 10 }, () => cache.read("p-1", PRODUCT, () => {})));
    expect(asked).toBe(1);
    expect(origin.calls.product).toBe(1);
    expect(pages.map((page) => page.data.product?.outcome)).toEqual(Array(10).fill("found"));
    expect(pages[0]!.data.product?.tier).toBe("l1");
  });

  it("a page with a copy it would show of every part it lacks is not made to wait; stock kept only for failures is no such copy; a page with a copy of every core part it lacks is sheddable", async () => {
    const clock = fakeClock();
    const origin = fakeOrigin();
    const turns: { wait: boolean; sheddable?: boolean }[] = [];
    const admission = {
      async admit<T>(work: () => Promise<T>, { wait, sheddable }: { wait: boolean; sheddable?: boolean }) {
        turns.push({ wait, sheddable });
        return work();
      },
      noteShed: () => undefined,
    };
    const cache = readThroughAdmitting(clock, origin, admission);
    await cache.read("p-1", ["product", "inventory", "reviews"], () => {});
    // Nothing to show: shed, it would be a 503, so it goes before the pages that would not.
    expect(turns).toEqual([{ wait: true, sheddable: false }]);
    // 50 s on, the stock is past its grace (10 s fresh, 30 s stale): kept only for failures, and a page would not show it.
    // Shed, the page would still be a page ("availability unknown").
    clock.advance(50_000);
    await cache.read("p-1", ["product", "inventory"], () => {});
    // Over an hour on, the product and its reviews are past their grace too: copies a page shows.
    clock.advance(4_300_000);
    await cache.read("p-1", ["product", "reviews"], () => {});
    // A page lacking only a part that is not core (no copy of the reviews) is sheddable too: shed, the section gets its default.
    cache.forget(entryKey(DEFAULTS.keyPrefix, "reviews", "p-1"));
    await cache.read("p-1", ["product", "reviews"], () => {});
    expect(turns).toEqual([
      { wait: true, sheddable: false },
      { wait: true, sheddable: true },
      { wait: false, sheddable: true },
      { wait: true, sheddable: true },
    ]);
  });

  it("look at L1 again when let in: a page whose product was filled while it waited costs no fetch", async () => {
    const clock = fakeClock();
    const origin = fakeOrigin();
    // The first page waits for its turn; a second page for the product goes on meanwhile (it does not queue behind the first) and fills it.
    let asked = 0;
    const admission = {
      async admit<T>(work: () => Promise<T>) {
        asked++;
        await new Promise((resolve) => setTimeout(resolve, 20));
        return work();
      },
      noteShed: () => undefined,
    };
    const cache = readThroughAdmitting(clock, origin, admission);
    const pages = await Promise.all([cache.read("p-1", PRODUCT, () => {}), cache.read("p-1", PRODUCT, () => {})]);
    expect(asked).toBe(1);
    expect(origin.calls.product).toBe(1);
    expect(pages.map((page) => page.data.product?.tier)).toEqual(["l1", "origin"]);
  });
});
