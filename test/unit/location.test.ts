// The location tier in the read path (src/cache/location/location.ts, pageSteps.ts
// readFromLocation): L1, then the data center's cache, then L2 and the
// origin; every copy judged against this isolate's purge knowledge, and
// served only when this isolate can vouch for its stamp. A fake clock, a fake
// origin, and a Map standing for the Cache API.
import { describe, expect, it } from "vitest";
import type { Entry } from "../../src/cache/entry";
import { createLocationCache, locationUrl, type LocationStore } from "../../src/cache/location/location";
import type { PurgeStamp } from "../../src/cache/location/purgeStamp";
import { createReadThrough } from "../../src/cache/readThrough";
import { PAGE_RESOURCES, type ResourceName } from "../../src/origin/resources";
import { fakeClock, fakeOrigin, fakeStore, testConfig } from "../support/fakes";

const PRODUCT: ResourceName[] = ["product"];
const STAMP: PurgeStamp = { era: "1", seq: 10 };

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
function isolate(store: LocationStore, purges = knowledge(), clock = fakeClock(), config = testConfig()) {
  const origin = fakeOrigin();
  const location = createLocationCache({ config, clock, open: async () => store });
  const cache = createReadThrough({ config, origin, l2: null, location, clock, purges });
  const background: Promise<unknown>[] = [];
  /** `listed`: the known-ids filter lists the product, so that a cold page's parts are filled at once (else the product first). */
  const read = (id = "p-1", resources = PRODUCT, listed?: boolean) => cache.read(id, resources, (work) => void background.push(work), { listed });
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
    expect([...stored.keys()]).toEqual([locationUrl(testConfig(), "product", "p-1")]);
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

  it("keeps a page's parts in one copy: one put for a cold page, one lookup for a page that lacks them all", async () => {
    const { store, stored, calls } = fakeStore();
    const first = isolate(store);
    await first.read("p-1", PAGE_RESOURCES, true);
    await first.settle();
    expect([...stored.keys()]).toEqual([locationUrl(testConfig(), "product", "p-1")]);
    expect(calls.put).toBe(1);

    const second = isolate(store);
    const { data } = await second.read("p-1", PAGE_RESOURCES);
    for (const resource of PAGE_RESOURCES) expect(data[resource], resource).toMatchObject({ tier: "location", freshness: "fresh", outcome: "found" });
    expect(calls.match).toBe(2);
    expect(second.location.stats).toMatchObject({ lookups: 4, hits: 4 });
    for (const resource of PAGE_RESOURCES) expect(second.origin.calls[resource], resource).toBe(0);
  });

  it("takes a stale part another isolate has refreshed since from the location copy, not from a refresh of its own", async () => {
    const { store, calls } = fakeStore();
    const clock = fakeClock();
    const first = isolate(store, knowledge(), clock);
    const second = isolate(store, knowledge(), clock);
    await first.read("p-1", PAGE_RESOURCES, true);
    await first.settle();
    expect((await second.read("p-1", PAGE_RESOURCES)).data.inventory).toMatchObject({ tier: "location", freshness: "fresh" });
    await second.settle();
    clock.advance(15_000); // stock stale in both isolates
    expect((await first.read("p-1", PAGE_RESOURCES)).data.inventory).toMatchObject({ tier: "l1", freshness: "stale" });
    await first.settle();
    expect(first.origin.calls.inventory).toBe(2); // the copy there was as old as its own: refreshed from the origin, and put
    const matches = calls.match;
    expect((await second.read("p-1", PAGE_RESOURCES)).data.inventory).toMatchObject({ tier: "l1", freshness: "stale" });
    await second.settle();
    expect(calls.match).toBe(matches + 1);
    expect(second.origin.calls.inventory).toBe(0);
    // Kept in L1: the next view is fresh, from L1.
    expect((await second.read("p-1", PAGE_RESOURCES)).data.inventory).toMatchObject({ tier: "l1", freshness: "fresh" });
    expect(second.origin.calls.inventory).toBe(0);
  });

  it("puts the copy again when a part is refreshed, with the page's other parts from L1", async () => {
    const { store, stored } = fakeStore();
    const clock = fakeClock();
    const first = isolate(store, knowledge(), clock);
    await first.read("p-1", PAGE_RESOURCES, true);
    await first.settle();
    expect(first.location.stats.puts).toBe(1);
    const copy = () => stored.get(locationUrl(testConfig(), "product", "p-1"))!;
    const framing = () => new Map(copy().headers).get("pp-parts");
    const before = copy().body;
    // Stock is fresh for 10 s, the other parts for minutes: only stock is refreshed.
    clock.advance(15_000);
    expect((await first.read("p-1", PAGE_RESOURCES)).data.inventory).toMatchObject({ tier: "l1", freshness: "stale" });
    await first.settle();
    expect(first.origin.calls.inventory).toBe(2);
    expect(first.origin.calls.product).toBe(1);
    expect(first.location.stats.puts).toBe(2);
    expect(
      framing()
        ?.split(",")
        .map((part) => part[0]),
    ).toEqual(["p", "i", "r", "c"]);
    expect(copy().body).not.toBe(before);

    // Another isolate gets the refreshed stock from the location, fresh.
    const second = isolate(store, knowledge(), clock);
    expect((await second.read("p-1", PAGE_RESOURCES)).data.inventory).toMatchObject({ tier: "location", freshness: "fresh" });
  });

  it("keeps each part as JSON text, however large, and re-encodes the parts it did not refresh from L1 as they were", async () => {
    const { store, stored } = fakeStore();
    const clock = fakeClock();
    // Every part above the threshold at which L2 gzips its values.
    const config = { ...testConfig(), compressAboveBytes: 16 };
    const { read, settle, location } = isolate(store, knowledge(), clock, config);
    const parts = () => {
      const copy = stored.get(locationUrl(config, "product", "p-1"))!;
      let at = 0;
      return new Map(
        new Map(copy.headers)
          .get("pp-parts")!
          .split(",")
          .map((field) => {
            const length = Number(field.slice(2));
            const value = copy.body.slice(at, (at += length));
            return [field[0]!, value] as const;
          }),
      );
    };
    await read("p-1", PAGE_RESOURCES, true);
    await settle();
    const first = parts();
    expect(first.size).toBe(4);
    expect([...first.values()].every((value) => /^\d+\|\d+\|\d+\|\d+\|j\|/.test(value))).toBe(true);
    // Stock is refreshed (fresh 10 s); the copy is put again, the other parts as the first put wrote them.
    clock.advance(15_000);
    await read("p-1", PAGE_RESOURCES);
    await settle();
    expect(location.stats.puts).toBe(2);
    const second = parts();
    expect(second.get("i")).not.toBe(first.get("i"));
    for (const code of ["p", "r", "c"]) expect(second.get(code)).toBe(first.get(code));
  });

  it("reads values it cannot trust as misses: not an entry, an entry of another id, a stamp that is not one, framing that does not add up, a body too large", async () => {
    const url = locationUrl(testConfig(), "product", "p-1");
    const { store, stored } = fakeStore();
    const first = isolate(store);
    await first.read("p-2");
    await first.settle();
    const otherId = stored.get(locationUrl(testConfig(), "product", "p-2"))!;
    const withHeader = (name: string, value: string) => otherId.headers.map(([key, old]): [string, string] => [key, key === name ? value : old]);
    const length = otherId.body.length;
    const hostile = [
      { body: "not an entry", headers: withHeader("pp-parts", "p=12") },
      { body: otherId.body, headers: otherId.headers },
      { body: otherId.body.replace('"p-2"', '"p-1"'), headers: withHeader("pp-purge-stamp", "1|x") },
      { body: otherId.body, headers: withHeader("pp-parts", `p=${length - 1}`) },
      { body: `${otherId.body}x`, headers: withHeader("pp-parts", `p=${length},i=1`) },
      { body: otherId.body.repeat(2), headers: withHeader("pp-parts", `p=${length},p=${length}`) },
      { body: otherId.body, headers: withHeader("pp-parts", `p=${length}; i=0`) },
      { body: "x".repeat(4 * 3 * 768 * 1024 + 1), headers: withHeader("pp-parts", `p=${4 * 3 * 768 * 1024 + 1}`) },
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
    for (let i = 0; i < 40; i++) location.put(`p-${i}`, [{ resource: "product", entry }], STAMP, () => undefined);
    expect(location.stats.putsDropped).toBe(8);
    // Past their deadline, the places come back.
    clock.advance(1001);
    location.put("p-99", [{ resource: "product", entry }], STAMP, () => undefined);
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
