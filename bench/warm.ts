// Filling L2 before a steady-state scenario: the entries the tier itself
// would write after fetching each product from the demo origin, written
// straight into redis-server.
//
// Why not through the worker, or with the repo's warming code (warmProducts
// + createTier, as `npm run warm` does)? Both go through HTTP: one product
// costs 4 origin requests and about 9 gateway round trips (MGET, a lock claim
// and a guarded write per resource), and the servers process (origin +
// gateway, one Node thread) answers about 2,000 requests a second on the
// benchmark's 2-core machine: some 150 products a second, so minutes for the
// catalog, and the L2 budget (75 ms) overruns under that load, which opens
// the breaker and drops the writes. Here each entry is what the tier's fill
// would store (deadlines from src/cache/entry.ts, the format of
// src/cache/codec.ts checked with its decodeEntry, keys from
// src/cache/keys.ts, shards from src/cache/ring.ts), made from the catalog's
// own functions (what the demo origin answers), and written with pipelined
// SETs: the catalog in tens of seconds on a busy 2-core machine.
import { gzipSync } from "node:zlib";
import { Redis } from "ioredis";
import { CatalogStore } from "../dev/origin/catalog";
import { decodeEntry } from "../src/cache/codec";
import { deadlinesFor } from "../src/cache/entry";
import { entryKey } from "../src/cache/keys";
import { longestLifeMs } from "../src/cache/l2Entries";
import { createRing } from "../src/cache/ring";
import type { Config } from "../src/config";
import { validateResource } from "../src/origin/validate";
import type { ResourceName } from "../src/origin/resources";

export interface WarmL2Options {
  /** The worker's parsed configuration: policies, TTL jitter, key prefix, compression threshold, shards. */
  config: Config;
  /** redis-server port of each of config.l2's shards, in the same order. */
  redisPorts: number[];
  ids: readonly string[];
  /** Resources written, in passes, one after the other (the last pass is the youngest). */
  passes: ReadonlyArray<readonly ResourceName[]>;
  catalogSize: number;
  /** The demo origin's URL (image URLs in the data point at it). */
  originUrl: string;
  signal?: AbortSignal;
}

export interface WarmL2Result {
  products: number;
  entries: number;
  /** Bytes of values written. */
  bytes: number;
  seconds: number;
  /** How the data was checked against the origin client's validation (see `needsValidation`). */
  validation: "sample matched: written as generated" | "sample differed: every value validated";
}

/** Products per batch: one pipeline per shard each. */
const BATCH = 1000;

/**
 * Writes `ids`' entries for each pass's resources, as the tier would store
 * them right after fetching them now: found ⇒ fresh for ttl (± jitter),
 * then stale, then usable on error; absent (the origin's 404, e.g. reviews
 * of every fifth product) ⇒ a negative entry.
 */
export async function warmL2(options: WarmL2Options): Promise<WarmL2Result> {
  const started = performance.now();
  const { config } = options;
  const shards = config.l2?.shards ?? [];
  if (shards.length === 0 || shards.length !== options.redisPorts.length) throw new Error("warmL2: one redis port per configured L2 shard");
  const ring = createRing(shards);
  const store = new CatalogStore(options.catalogSize, options.originUrl);
  const validateAll = needsValidation(store, options.ids);
  const links = options.redisPorts.map((port) => new Redis({ port, host: "127.0.0.1", maxRetriesPerRequest: 1 }));
  for (const link of links) link.on("error", () => undefined);
  let entries = 0;
  let bytes = 0;
  /** One key of each encoding written, for checkEntries. */
  const samples = new Map<string, { key: string; shard: number; id: string; resource: ResourceName }>();
  try {
    for (const resources of options.passes) {
      let writing: Promise<unknown> = Promise.resolve();
      for (let first = 0; first < options.ids.length; first += BATCH) {
        if (options.signal?.aborted) throw new Error("aborted");
        const now = Date.now();
        const batch = options.ids.slice(first, first + BATCH).flatMap((id) =>
          resources.map((resource) => {
            const raw = dataOf(store, resource, id);
            const data = validateAll && raw !== null ? validateResource(resource, id, JSON.parse(JSON.stringify(raw))) : raw;
            const { value, errorUntil } = encodedEntry(config, resource, data, now);
            // As the tier's fill writes it: the key lives until the entry is no longer usable even on error.
            return { id, resource, key: entryKey(config.keyPrefix, resource, id), value, ttlMs: errorUntil - now, shard: ring.ownerOf(id) };
          }),
        );
        // One pipeline per shard; the previous batch's replies arrive while this one is built.
        await writing;
        const pipelines = links.map((link) => link.pipeline());
        const spent = Date.now() - now;
        for (const item of batch) {
          pipelines[item.shard]!.set(item.key, item.value, "PX", Math.max(1, Math.round(item.ttlMs - spent)));
          entries++;
          bytes += item.value.length;
          const encoding = item.value.split("|")[4]!;
          if (!samples.has(encoding)) samples.set(encoding, item);
        }
        writing = Promise.all(pipelines.map((pipeline) => pipeline.exec()));
      }
      await writing;
    }
    for (const sample of samples.values()) await checkEntry(links[sample.shard]!, config, sample);
  } finally {
    for (const link of links) link.disconnect();
  }
  return {
    products: options.ids.length,
    entries,
    bytes,
    seconds: Math.round((performance.now() - started) / 100) / 10,
    validation: validateAll ? "sample differed: every value validated" : "sample matched: written as generated",
  };
}

function dataOf(store: CatalogStore, resource: ResourceName, id: string): unknown {
  switch (resource) {
    case "product":
      return store.product(id);
    case "inventory":
      return store.inventory(id);
    case "reviews":
      return store.reviews(id);
    case "recommendations":
      return store.recommendations(id);
  }
}

/**
 * The origin client validates what it fetches (src/origin/validate.ts); the
 * catalog's data is already in the contract's shape, so validating 100,000
 * products would only cost time. A sample says whether that still holds: if
 * the validated form of any sampled value differs, every value is validated.
 */
function needsValidation(store: CatalogStore, ids: readonly string[]): boolean {
  const resources: ResourceName[] = ["product", "inventory", "reviews", "recommendations"];
  for (const id of ids.slice(0, 50)) {
    for (const resource of resources) {
      const raw = dataOf(store, resource, id);
      if (raw === null) continue;
      const checked = validateResource(resource, id, JSON.parse(JSON.stringify(raw)));
      if (JSON.stringify(checked) !== JSON.stringify(raw)) return true;
    }
  }
  return false;
}

/**
 * The entry the tier's fill would make of `data` fetched `now`
 * (src/cache/entry.ts deadlines, jittered), in codec.ts's format:
 * `<version>|<fetchedAt>|<freshUntil>|<staleUntil>|j|<json>` or, above the
 * compression threshold, `…|z|<base64 gzip of the json>`. Built here rather
 * than with codec.ts's encodeEntry, which when this was written serialised
 * twice and gzipped through CompressionStream (about half a millisecond a
 * value in Node: a minute for the catalog); checkEntry decodes samples with the tier's own decodeEntry,
 * so a change of format stops the run instead of measuring misses.
 */
function encodedEntry(config: Config, resource: ResourceName, data: unknown, now: number): { value: string; errorUntil: number } {
  const found = data !== null;
  const deadlines = deadlinesFor(found, config.policies[resource], now, config.ttlJitter);
  const version = found ? (data as { version: number }).version : 0;
  // JSON.stringify({d: data, e: errorUntil}), spelled out.
  const json = `{"d":${JSON.stringify(data)},"e":${deadlines.errorUntil}}`;
  const head = `${version}|${deadlines.fetchedAt}|${deadlines.freshUntil}|${deadlines.staleUntil}|`;
  const value = json.length <= config.compressAboveBytes ? `${head}j|${json}` : `${head}z|${gzipSync(json).toString("base64")}`;
  return { value, errorUntil: deadlines.errorUntil };
}

/** Decodes a written value with the tier's own decodeEntry: a format the worker cannot read would otherwise pass for L2 misses. */
async function checkEntry(link: Redis, config: Config, sample: { key: string; resource: ResourceName; id: string }): Promise<void> {
  const value = await link.get(sample.key);
  const expected = { resource: sample.resource, id: sample.id, now: Date.now(), maxLifeMs: longestLifeMs(config.policies[sample.resource], config.ttlJitter) };
  const decoded = value === null ? { invalid: "missing" } : decodeEntry(value, expected);
  if (!("entry" in decoded)) {
    throw new Error(`warmL2: ${sample.key} does not decode with src/cache/codec.ts (${decoded.invalid}): the benchmark's writer (bench/warm.ts) is out of date`);
  }
}
