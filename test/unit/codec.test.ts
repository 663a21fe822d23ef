// Values read from L2 are untrusted (issue 12, item 2): the codec turns a
// value into an entry only when its size, header, compression and data all
// check out against what its key promises, and the read path (l2Entries)
// treats anything else as a miss, counts it and deletes it from L2 unless a
// good value replaced it meanwhile.
import { gzipSync } from "node:zlib";
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, type Gateway } from "../../dev/gateway";
import { createBreaker } from "../../src/shared/breaker";
import { systemClock } from "../../src/shared/clock";
import { decodeEntry, encodeEntry, type EntryExpectation } from "../../src/cache/l2/codec";
import { dataJson, type Entry } from "../../src/cache/entry";
import { createL1 } from "../../src/cache/l1";
import { entryKey } from "../../src/cache/keys";
import { createL2 } from "../../src/cache/l2/l2";
import { createL2Entries, longestLifeMs } from "../../src/cache/l2/l2Entries";
import { parseConfig } from "../../src/config";
import { DEFAULTS, DEFAULT_POLICIES } from "../../src/config/defaults";
import { LISTING_ID, type ResourceName } from "../../src/origin/resources";
import type { Product } from "../../src/origin/types";
import { validateResource } from "../../src/origin/validate";
import { bytesToBase64 } from "../../src/shared/base64";
import { sampleProduct } from "../support/fakes";
import { startRedis, type RedisServer } from "../../dev/harness/redis";

const NOW = Date.UTC(2026, 10, 22, 12);
const ID = "p-000123";

function expecting<R extends ResourceName>(resource: R, id = ID, now = NOW): EntryExpectation<R> {
  return { resource, id, now, maxLifeMs: longestLifeMs(DEFAULT_POLICIES[resource]) };
}

/** A product entry as a fill makes it `agoMs` before NOW: fresh 300 s, stale 1 h more, usable on error for a day. */
function productEntry(product: Product = sampleProduct(ID, 17), agoMs = 1000): Entry<Product> {
  const fetchedAt = NOW - agoMs;
  const freshUntil = fetchedAt + 300_000;
  return { data: product, version: product.version, fetchedAt, freshUntil, staleUntil: freshUntil + 3_600_000, errorUntil: freshUntil + 86_400_000 };
}

function encoded(entry: Entry, compressAboveBytes: number = DEFAULTS.compressAboveBytes): string {
  const value = encodeEntry(entry, compressAboveBytes);
  if (value === undefined) throw new Error("not storable");
  return value;
}

/** The reason a value is not an entry, or "valid". */
/** The value a fill of `id` (version 1) writes now, by the real clock: fresh for a second. */
function justFilled(id: string): string {
  const now = Date.now();
  return encoded({ ...productEntry(sampleProduct(id, 1), 0), fetchedAt: now, freshUntil: now + 1000, staleUntil: now + 2000, errorUntil: now + 3000 });
}

function verdict(value: string, expected: EntryExpectation<ResourceName> = expecting("product")): string {
  const decoded = decodeEntry(value, expected);
  return "entry" in decoded ? "valid" : decoded.invalid;
}

/** `<version>|<fetchedAt>|<freshUntil>|<staleUntil>|j|{"d":…,"e":…}` with the numbers of a good product entry unless given. */
function handMade(
  fields: { version?: number | string; fetchedAt?: number | string; freshUntil?: number | string; staleUntil?: number | string; d?: unknown; e?: unknown } = {},
): string {
  const good = productEntry();
  const { version = good.version, fetchedAt = good.fetchedAt, freshUntil = good.freshUntil, staleUntil = good.staleUntil } = fields;
  const payload = JSON.stringify({ d: "d" in fields ? fields.d : good.data, e: "e" in fields ? fields.e : good.errorUntil });
  return `${version}|${fetchedAt}|${freshUntil}|${staleUntil}|j|${payload}`;
}

/** What the previous release wrote above the compression threshold: gzip through CompressionStream, as base64. */
async function gzipAsBefore(json: string): Promise<string> {
  const stream = new Blob([new TextEncoder().encode(json)]).stream().pipeThrough(new CompressionStream("gzip"));
  return bytesToBase64(new Uint8Array(await new Response(stream).arrayBuffer()));
}

describe("codec: values that are entries", () => {
  it("round-trips small entries as JSON and large ones compressed, with their size", () => {
    const small = productEntry();
    const smallValue = encoded(small);
    expect(smallValue).toMatch(/^17\|\d+\|\d+\|\d+\|j\|/);
    const decodedSmall = decodeEntry(smallValue, expecting("product"));
    expect(decodedSmall).toMatchObject({
      entry: {
        data: small.data,
        version: 17,
        fetchedAt: small.fetchedAt,
        freshUntil: small.freshUntil,
        staleUntil: small.staleUntil,
        errorUntil: small.errorUntil,
      },
    });

    const large = productEntry({ ...sampleProduct(ID, 18), description: 'Lorem ipsum — 日本語 <b>"x"</b> '.repeat(500) });
    const largeValue = encoded(large);
    expect(largeValue).toMatch(/^18\|\d+\|\d+\|\d+\|z\|/);
    expect(largeValue.length).toBeLessThan(JSON.stringify(large.data).length / 4);
    const decodedLarge = decodeEntry(largeValue, expecting("product"));
    if (!("entry" in decodedLarge)) throw new Error(decodedLarge.invalid);
    expect(decodedLarge.entry.data).toEqual(large.data);
  });

  it("encodes an entry read from L1 from the JSON text L1 keeps, to the same value as the entry it kept", () => {
    const l1 = createL1({ maxBytes: 1024 * 1024, clock: { now: () => NOW } });
    for (const entry of [productEntry(), productEntry({ ...sampleProduct(ID, 18), description: 'Lorem ipsum — 日本語 <b>"x"</b> '.repeat(500) })]) {
      l1.keep("key", entry);
      const fromL1 = l1.entry("key")!;
      // It carries the text L1 keeps, and that text is what gets written out.
      expect(dataJson(fromL1)).toBe(JSON.stringify(entry.data));
      expect(encoded(fromL1)).toBe(encoded(entry));
      expect(encoded(fromL1, Number.POSITIVE_INFINITY)).toBe(encoded(entry, Number.POSITIVE_INFINITY));
    }
  });

  it("reads the values the previous release wrote, JSON and gzip alike, and fills in what older data lacks", async () => {
    const product = sampleProduct(ID, 17);
    const json = JSON.stringify({ d: product, e: NOW + 86_700_000 });
    const head = `17|${NOW - 1000}|${NOW + 299_000}|${NOW + 3_899_000}|`;
    expect(verdict(`${head}j|${json}`)).toBe("valid");
    expect(verdict(`${head}z|${await gzipAsBefore(json)}`)).toBe("valid");
    // Data from before `images`, `attributes` and `tags` were in the contract: given their defaults, never undefined.
    const { images: _images, attributes: _attributes, tags: _tags, ...older } = product;
    const decoded = decodeEntry(`${head}j|${JSON.stringify({ d: { ...older, compareAtPrice: null }, e: NOW + 86_700_000 })}`, expecting("product"));
    expect(decoded).toMatchObject({ entry: { data: { images: [], attributes: {}, tags: [] } } });
    expect("entry" in decoded && "compareAtPrice" in decoded.entry.data!).toBe(false);
  });

  it("reads back the home page's listing as it stores it, which is not the shape the origin sends", () => {
    // What a fill stores: the origin's page of ids ({ids, next}) as validateResource makes it ({id, ids, version}).
    const listing = validateResource("listing", LISTING_ID, { ids: ["p-000001", "p-000002"], next: "cursor-2" });
    expect(listing).toEqual({ id: LISTING_ID, ids: ["p-000001", "p-000002"], version: 1 });
    const fetchedAt = NOW - 1000;
    const freshUntil = fetchedAt + 60_000;
    const entry: Entry = { data: listing, version: 1, fetchedAt, freshUntil, staleUntil: freshUntil + 600_000, errorUntil: freshUntil + 86_400_000 };
    expect(decodeEntry(encoded(entry), expecting("listing", LISTING_ID))).toMatchObject({ entry: { data: listing, version: 1 } });
    // Stored under another id or version, or with ids that are not ids: not ours.
    const handMadeListing = (d: unknown) => `1|${fetchedAt}|${freshUntil}|${freshUntil + 600_000}|j|${JSON.stringify({ d, e: freshUntil + 86_400_000 })}`;
    expect(verdict(handMadeListing({ ...listing, id: "p-000001" }), expecting("listing", LISTING_ID))).toBe("schema");
    expect(verdict(handMadeListing({ ...listing, version: 2 }), expecting("listing", LISTING_ID))).toBe("schema");
    expect(verdict(handMadeListing({ ...listing, ids: ["../etc/passwd"] }), expecting("listing", LISTING_ID))).toBe("schema");
  });

  it("takes a negative entry (null, version 0) and soft-purged deadlines", () => {
    const freshUntil = NOW + 60_000;
    expect(verdict(`0|${NOW}|${freshUntil}|${freshUntil}|j|{"d":null,"e":${freshUntil}}`)).toBe("valid");
    // A soft purge brings freshUntil forward to its time, and may push staleUntil past errorUntil (log.ts, PURGE_KEYS).
    const fetchedAt = NOW - 1000;
    expect(verdict(`0|${fetchedAt}|${NOW}|${NOW + 60_000}|j|{"d":null,"e":${fetchedAt + 60_000}}`)).toBe("valid");
    const good = productEntry();
    expect(verdict(handMade({ freshUntil: NOW, staleUntil: good.staleUntil }))).toBe("valid");
  });

  it("has room for the largest answer the contract allows (attributes aside), every character escaped", () => {
    const escaped = (n: number) => "\u0001".repeat(n); // JSON writes each as \u0001: six characters
    const largest: Product = {
      ...sampleProduct(ID, 3),
      title: escaped(500),
      description: escaped(20_000),
      brand: escaped(200),
      category: Array.from({ length: 10 }, () => escaped(200)),
      images: Array.from({ length: 20 }, () => ({ url: escaped(2000), alt: escaped(500) })),
      tags: Array.from({ length: 50 }, () => escaped(100)),
    };
    const entry = productEntry(largest);
    expect(JSON.stringify(entry.data).length).toBeGreaterThan(450_000);
    expect(verdict(encoded(entry))).toBe("valid");
  });
});

describe("codec: values that are not entries", () => {
  it("refuses a malformed header", () => {
    for (const value of ["", "hello", "1|2|3|4|x|{}", "1|2|3|j|{}", "-1|2|3|4|j|{}", "1.5|2|3|4|j|{}", " 1|2|3|4|j|{}", "1|2|3|4|j"]) {
      expect(verdict(value), value).toBe("header");
    }
    // Numbers past 2^53 that Lua and JavaScript would read differently (or round): not ours.
    expect(verdict(handMade({ version: "9007199254740993" }))).toBe("header");
    expect(verdict(handMade({ version: "12345678901234567890" }))).toBe("header");
  });

  it("refuses deadlines out of order, beyond today's policy, or fetched in the future", () => {
    const good = productEntry();
    expect(verdict(handMade({ freshUntil: good.staleUntil + 1 }))).toBe("deadlines");
    expect(verdict(handMade({ fetchedAt: good.freshUntil + 1 }))).toBe("deadlines");
    expect(verdict(handMade({ e: good.freshUntil - 1 }))).toBe("deadlines");
    expect(verdict(handMade({ e: 1e300 }))).toBe("deadlines");
    // Fresh for a year: written under another policy, or not by a fill; it would be sent downstream as s-maxage.
    const year = 365 * 86_400_000;
    expect(verdict(handMade({ freshUntil: good.fetchedAt + year, staleUntil: good.fetchedAt + year, e: good.fetchedAt + year }))).toBe("deadlines");
    // "Fetched" an hour from now: it would be fresh, and escape purges, until then.
    const later = NOW + 3_600_000;
    expect(verdict(handMade({ fetchedAt: later, freshUntil: later + 1000, staleUntil: later + 2000, e: later + 3000 }))).toBe("deadlines");
    // A little clock skew between isolates is fine.
    const skewed = NOW + 5000;
    expect(verdict(handMade({ fetchedAt: skewed, freshUntil: skewed + 1000, staleUntil: skewed + 2000, e: skewed + 3000 }))).toBe("valid");
  });

  it("refuses a payload that is not {d, e}", () => {
    const head = handMade().slice(0, handMade().indexOf("j|") + 2);
    for (const payload of ["{not json", "[]", "null", '"x"', '{"d":null}', '{"e":1}', '{"d":null,"e":"1"}']) {
      expect(verdict(head + payload), payload).toBe("payload");
    }
  });

  it("refuses data that breaks the contract, belongs to another id or resource, or carries another version", () => {
    const product = sampleProduct(ID, 17);
    expect(verdict(handMade({ d: { ...product, title: 42 } }))).toBe("schema");
    expect(verdict(handMade({ d: { ...product, price: { amount: "12.99", currency: "USD" } } }))).toBe("schema");
    // An amount past 2^53 is not exact in JSON's numbers: no price to show.
    expect(verdict(handMade({ d: { ...product, price: { amount: 1e20, currency: "USD" } } }))).toBe("schema");
    expect(verdict(handMade({ d: { ...product, images: undefined, title: undefined } }))).toBe("schema");
    expect(verdict(handMade({ d: "<html>" }))).toBe("schema");
    expect(verdict(handMade({ d: product }), expecting("product", "p-000999"))).toBe("schema");
    const short = { fetchedAt: NOW, freshUntil: NOW + 1000, staleUntil: NOW + 2000, e: NOW + 3000 };
    expect(verdict(handMade({ ...short, d: product }), expecting("inventory"))).toBe("schema");
    expect(verdict(handMade({ version: 18, d: product }))).toBe("version");
    expect(verdict(handMade({ version: 5, d: null }))).toBe("version");
  });

  it("refuses an oversized value before looking at it", () => {
    const huge = handMade() + " ".repeat(DEFAULTS.l2ValueMaxChars);
    // "too-long", not "payload" or "schema": the length is judged first (how fast that is, bench/ measures).
    expect(verdict(huge)).toBe("too-long");
  });

  it("stops inflating a gzip bomb at the cap", () => {
    const head = handMade().slice(0, handMade().indexOf("j|"));
    // 200 MB of zeros: about 200 KB of gzip, 270 KB of base64, well under the stored-value cap.
    const bomb = `${head}z|${gzipSync(new Uint8Array(200 * 1024 * 1024)).toString("base64")}`;
    expect(bomb.length).toBeLessThan(DEFAULTS.l2ValueMaxChars);
    const before = process.memoryUsage();
    expect(verdict(bomb)).toBe("too-large");
    const after = process.memoryUsage();
    // Inflated in full, the bomb would hold 200 MB of bytes (and as much again as text).
    expect(after.arrayBuffers - before.arrayBuffers).toBeLessThan(32 * 1024 * 1024);
    expect(after.rss - before.rss).toBeLessThan(64 * 1024 * 1024);
  });

  it("refuses gzip that is cut short, not gzip at all, or not UTF-8 inside", () => {
    const head = handMade().slice(0, handMade().indexOf("j|"));
    const whole = gzipSync(JSON.stringify({ d: sampleProduct(ID, 17), e: productEntry().errorUntil }));
    expect(verdict(`${head}z|${whole.toString("base64")}`)).toBe("valid");
    expect(verdict(`${head}z|${whole.subarray(0, whole.length - 12).toString("base64")}`)).toBe("gzip");
    expect(verdict(`${head}z|${whole.subarray(0, 40).toString("base64")}`)).toBe("gzip");
    expect(verdict(`${head}z|!!!`)).toBe("gzip");
    expect(verdict(`${head}z|${Buffer.from("plain text").toString("base64")}`)).toBe("gzip");
    expect(verdict(`${head}z|${gzipSync(Buffer.from([0x7b, 0xff, 0xfe, 0x7d])).toString("base64")}`)).toBe("payload");
  });
});

describe("codec: what is not written", () => {
  it("does not store what it would refuse to read back: JSON over the cap, versions past 2^53", () => {
    const tooLarge = productEntry({
      ...sampleProduct(ID, 3),
      attributes: Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`a${i}`, "\u0001".repeat(100)])),
    });
    expect(encodeEntry(tooLarge, DEFAULTS.compressAboveBytes)).toBeUndefined();
    const product = { ...sampleProduct(ID), version: 1e21 };
    expect(encodeEntry({ ...productEntry(), data: product, version: product.version }, DEFAULTS.compressAboveBytes)).toBeUndefined();
  });
});

// ------------------------------------------------------------------ the read path's handling, against a real Redis

describe("L2 entries: invalid values are misses, counted, logged and deleted while still bad", () => {
  const TOKEN = "codec-test-token";
  let redisServer: RedisServer;
  let gateway: Gateway;
  let redis: Redis;

  beforeAll(async () => {
    redisServer = await startRedis();
    gateway = await startGateway({ redisPort: redisServer.port, token: TOKEN, log: () => {} });
    redis = new Redis({ url: gateway.url, token: TOKEN, automaticDeserialization: false, enableTelemetry: false });
  });
  afterAll(async () => {
    await gateway?.close();
    await redisServer?.stop();
  });

  function setup() {
    const config = parseConfig({ ORIGIN_URL: "http://origin.test", PUBLIC_URL: "https://shop.test" });
    const l2 = createL2({
      url: gateway.url,
      token: TOKEN,
      timeoutMs: 1000,
      breaker: createBreaker({ failureThreshold: 3, coolDownMs: 60_000, clock: systemClock }),
    });
    const logged: { key: string; event: string; fields: Record<string, unknown> | undefined }[] = [];
    const entries = createL2Entries({ config, l2, clock: systemClock, log: (key, event, fields) => void logged.push({ key, event, fields }) });
    const background: Promise<unknown>[] = [];
    const read = (key: string, value: string, id: string) => entries.read(key, value, "product", id, (work) => void background.push(work));
    const settle = () => Promise.all(background.splice(0));
    return { entries, logged, read, settle };
  }

  it("deletes a bad value, and keeps a good one that replaced it meanwhile", async () => {
    const { entries, logged, read, settle } = setup();
    const badKey = entryKey("pp:v1", "product", "bad-1");
    const bad = `99|${Date.now()}|${Date.now() + 1000}|${Date.now() + 2000}|j|{"d":{"id":"bad-1","title":42},"e":${Date.now() + 3000}}`;
    await redis.set(badKey, bad, { px: 60_000 });
    expect(read(badKey, bad, "bad-1")).toBeUndefined();
    await settle();
    expect(await redis.get(badKey)).toBeNull();
    expect(entries.stats).toEqual({ rejected: 1, deleted: 1 });
    expect(logged).toEqual([{ key: "schema", event: "l2_invalid_value", fields: { key: badKey, resource: "product", reason: "schema", chars: bad.length } }]);

    // A fill wrote a good value after the bad one was read: it stays.
    const raceKey = entryKey("pp:v1", "product", "bad-2");
    const good = justFilled("bad-2");
    await redis.set(raceKey, good, { px: 60_000 });
    expect(read(raceKey, "garbage", "bad-2")).toBeUndefined();
    await settle();
    expect(await redis.get(raceKey)).toBe(good);
    expect(entries.stats).toEqual({ rejected: 2, deleted: 1 });
    expect(read(raceKey, good, "bad-2")).toMatchObject({ version: 1, data: { id: "bad-2" } });
  });

  it("identifies a long bad value by its first characters: deleted while it is there, kept once replaced", async () => {
    const { entries, read, settle } = setup();
    const key = entryKey("pp:v1", "product", "huge-1");
    const huge = "x".repeat(DEFAULTS.l2ValueMaxChars + 1);
    await redis.set(key, huge, { px: 60_000 });
    expect(read(key, huge, "huge-1")).toBeUndefined();
    await settle();
    expect(await redis.get(key)).toBeNull();
    // Replaced by a fill's value meanwhile: kept.
    const good = justFilled("huge-1");
    await redis.set(key, good, { px: 60_000 });
    expect(read(key, huge, "huge-1")).toBeUndefined();
    await settle();
    expect(await redis.get(key)).toBe(good);
    expect(entries.stats).toEqual({ rejected: 2, deleted: 1 });
  });
});
