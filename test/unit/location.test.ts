// The location tier in the read path (src/cache/location/location.ts, pageSteps.ts
// readFromLocation): L1, then the data center's cache, then L2 and the
// origin; every copy judged against this isolate's purge knowledge, and
// served only when this isolate can vouch for its stamp. A fake clock, a fake
// origin, and a Map standing for the Cache API.
import { describe, expect, it } from "vitest";
import type { Entry } from "../../src/cache/entry";
import { entryKey } from "../../src/cache/keys";
import { createLocationCache, locationUrl, type LocationStore } from "../../src/cache/location/location";
import type { PurgeStamp } from "../../src/cache/location/purgeStamp";
import { createReadThrough } from "../../src/cache/readThrough";
import type { ResourceName } from "../../src/origin/resources";
import { fakeClock, fakeOrigin, testConfig } from "../support/fakes";

const PRODUCT: ResourceName[] = ["product"];
const STAMP: PurgeStamp = { era: "1", seq: 10 };

/** A data center's cache: what was put, by URL, answered as the Cache API does (a new Response each time). */
function fakeStore() {
  const stored = new Map<string, { body: string; headers: [string, string][] }>();
  const store: LocationStore = {
    async match(request) {
      const found = stored.get(String(request));
      return found && new Response(found.body, { headers: found.headers });
    },
    async put(request, response) {
      stored.set(String(request), { body: await response.text(), headers: [...response.headers] });
    },
  };
  return { store, stored };
}

/** What the isolate knows of purges: a verdict per fetch time, and the stamps it vouches for. */
function knowledge(overrides: { judge?: (entry: Entry) => "ok" | "stale" | "gone"; vouchesFrom?: number } = {}) {
  return {
    judge: (entry: Entry) => overrides.judge?.(entry) ?? "ok",
    purgedAt: () => ({ hard: 0, any: 0 }),
    stamp: () => STAMP,
    vouches: (stamp: PurgeStamp) => stamp.era === STAMP.era && stamp.seq >= (overrides.vouchesFrom ?? 0),
  };
}

/** One isolate: its own L1, the shared `store`, and the purge knowledge given. */
function isolate(store: LocationStore, purges = knowledge(), clock = fakeClock()) {
  const origin = fakeOrigin();
  const config = testConfig();
  const location = createLocationCache({ config, clock, open: async () => store });
  const cache = createReadThrough({ config, origin, l2: null, location, clock, purges });
  const background: Promise<unknown>[] = [];
  const read = (id = "p-1", resources = PRODUCT) => cache.read(id, resources, (work) => void background.push(work));
  const settle = async () => {
    while (background.length > 0) await Promise.all(background.splice(0));
  };
  return { origin, cache, read, settle, location, clock };
}

describe("the location tier in the read path", () => {
  it("puts what the origin gave, and serves it to another isolate without the origin", async () => {
    const { store, stored } = fakeStore();
    const first = isolate(store);
    expect((await first.read()).data.product).toMatchObject({ tier: "origin" });
    await first.settle();
    expect([...stored.keys()]).toEqual([locationUrl(testConfig().publicUrl, entryKey("pp:v1", "product", "p-1"))]);
    expect(first.location.stats).toMatchObject({ puts: 1, putsDropped: 0 });

    const second = isolate(store);
    const { data, timings } = await second.read();
    expect(data.product).toMatchObject({ tier: "location", freshness: "fresh", outcome: "found" });
    expect(timings.location).toBeDefined();
    expect(second.origin.calls.product).toBe(0);
    // Kept in L1: the next view does not look again.
    expect((await second.read()).data.product).toMatchObject({ tier: "l1" });
    expect(second.location.stats).toMatchObject({ lookups: 1, hits: 1 });
  });

  it("does not serve a copy stamped before what this isolate can vouch for", async () => {
    const { store } = fakeStore();
    const first = isolate(store);
    await first.read();
    await first.settle();
    const second = isolate(store, knowledge({ vouchesFrom: STAMP.seq + 1 }));
    expect((await second.read()).data.product).toMatchObject({ tier: "origin" });
    expect(second.origin.calls.product).toBe(1);
    expect(second.location.stats).toMatchObject({ unvouched: 1, hits: 0 });
  });

  it("does not serve a copy a known purge made gone, and serves a soft-purged one stale while one refresh runs", async () => {
    const { store } = fakeStore();
    const first = isolate(store);
    await first.read();
    await first.settle();

    const gone = isolate(store, knowledge({ judge: () => "gone" }));
    expect((await gone.read()).data.product).toMatchObject({ tier: "origin" });
    expect(gone.location.stats).toMatchObject({ purged: 1 });

    const soft = isolate(store, knowledge({ judge: (entry) => (entry.fetchedAt < Date.UTC(2027, 0, 1) ? "stale" : "ok") }));
    expect((await soft.read()).data.product).toMatchObject({ tier: "location", freshness: "stale" });
    await soft.settle();
    expect(soft.origin.calls.product).toBe(1);
  });

  it("reads values it cannot trust as misses: not an entry, an entry of another id, a stamp that is not one, a body too large", async () => {
    const url = locationUrl(testConfig().publicUrl, entryKey("pp:v1", "product", "p-1"));
    const { store, stored } = fakeStore();
    const first = isolate(store);
    await first.read("p-2");
    await first.settle();
    const otherId = stored.get(locationUrl(testConfig().publicUrl, entryKey("pp:v1", "product", "p-2")))!;
    const hostile = [
      { body: "not an entry", headers: otherId.headers },
      { body: otherId.body, headers: otherId.headers },
      { body: otherId.body.replace('"p-2"', '"p-1"'), headers: [["pp-purge-stamp", "1|x"]] as [string, string][] },
      { body: "x".repeat(3 * 768 * 1024 + 1), headers: otherId.headers },
    ];
    for (const [index, value] of hostile.entries()) {
      stored.set(url, value);
      const reader = isolate(store);
      const { data } = await reader.read();
      expect(data.product, `value ${index}`).toMatchObject({ tier: "origin", outcome: "found" });
      // Turned down as invalid, or (the large body) given up on past the lookup's budget: a miss either way.
      expect(reader.location.stats.invalid + reader.location.stats.errors, `value ${index}`).toBe(1);
      await reader.settle();
    }
  });

  it("drops puts past its bound of puts in flight, and counts them", async () => {
    const clock = fakeClock();
    const hanging: LocationStore = { match: async () => undefined, put: () => new Promise(() => undefined) };
    const location = createLocationCache({ config: testConfig(), clock, open: async () => hanging });
    const entry: Entry = {
      data: null,
      version: 0,
      fetchedAt: clock.now(),
      freshUntil: clock.now() + 1000,
      staleUntil: clock.now() + 1000,
      errorUntil: clock.now() + 60_000,
    };
    for (let i = 0; i < 40; i++) location.put(entryKey("pp:v1", "product", `p-${i}`), entry, STAMP, () => undefined);
    expect(location.stats.putsDropped).toBe(8);
    // Past their deadline, the places come back.
    clock.advance(1001);
    location.put(entryKey("pp:v1", "product", "p-99"), entry, STAMP, () => undefined);
    expect(location.stats.putsDropped).toBe(8);
  });
});

describe("a burst for one cold product while the location answers slowly", () => {
  it("fills it once: the requests whose lookup came back after the fill had ended find it in L1", async () => {
    const { store } = fakeStore();
    // Every lookup is sent before any copy is there (a miss); the first answers at once, the others once
    // the first request's fill has long ended.
    let lookups = 0;
    const slowStore: LocationStore = {
      async match(request) {
        const answer = store.match(request);
        if (lookups++ > 0) await new Promise((resolve) => setTimeout(resolve, 20));
        return answer;
      },
      put: (request, response) => store.put(request, response),
    };
    const { origin, read, settle } = isolate(slowStore);
    const pages = await Promise.all(Array.from({ length: 10 }, () => read()));
    await settle();
    expect(lookups).toBe(10);
    expect(origin.calls.product).toBe(1);
    expect(pages.map((page) => page.data.product?.tier).sort()).toEqual(["l1", "l1", "l1", "l1", "l1", "l1", "l1", "l1", "l1", "origin"]);
  });
});
