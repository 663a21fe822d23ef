// The per-isolate state of the tier: configuration, L1, the L2 client with its breaker, the origin client. Built once per isolate on the
// first request (Workers hand bindings to `fetch`, not to module scope) and kept for the isolate's life, which is what makes L1 an L1.
import { createBreaker, type Breaker, type BreakerOptions } from "./shared/breaker";
import { ISOLATE_STALL_MS, leaseFor } from "./shared/leases";
import { systemClock, type Clock } from "./shared/clock";
import { TTL_JITTER } from "./cache/entry";
import { createL2, type L2 } from "./cache/l2/l2";
import type { CallTiming } from "./cache/l2/l2Guard";
import { createRing } from "./cache/l2/ring";
import { createShardedL2 } from "./cache/l2/shardedL2";
import { createReadThrough, type ReadThrough } from "./cache/readThrough";
import { createLocationCache, LOCATION_CACHE_NAME } from "./cache/location/location";
import { fillBoundMs } from "./cache/fill/fill";
import { RESOURCE_NAMES } from "./origin/resources";
import { createOverload, type Overload } from "./overload";
import { bypassingCaches } from "./cache/bypass";
import { ConfigError, parseConfig, type Config, type Env, type L2Endpoint } from "./config";
import { DEFAULTS } from "./config/defaults";
import { createOriginClient, type OriginClient } from "./origin/client";
import { createLimiter, type Limiter } from "./shared/limiter";
import { createPurgeLog, type PurgeLog } from "./invalidation/log";
import { createFilterShelf, createKnownIds, type KnownIds } from "./knownIds";
import { createHotReport, type HotReport } from "./warming/hotReport";
import { LRUCache } from "lru-cache";
import { createPurgeWatcher, knowledgeOf, type PurgeWatcher } from "./invalidation/watcher";
import { createLogShelf } from "./invalidation/sharedReads";
import { logEvent } from "./shared/log";
import { createFleet, type Fleet, type FleetDataset } from "./observability/fleet";
import { createMetrics, type Metrics } from "./observability/metrics";
import { recordPages, watchBreaker, watchOrigin, watchSlowPages, type PageRead, type RecordPage } from "./observability/wiring";

/**
 * A product page as rendered once: its HTML as UTF-8 bytes, and its validator. Bytes, not the
 * string: each answer would otherwise encode the string again, and a string with one character
 * beyond Latin-1 (a ★, a —) takes two bytes a character in V8 where UTF-8 takes about one.
 */
export interface RenderedPage {
  body: Uint8Array<ArrayBuffer>;
  etag: string;
  /** Its `Link` header (http/headers.ts, preloadLink), if it has an image. */
  link?: string;
}

/**
 * What one isolate serves with: its configuration, caches, origin client, purge watcher, metrics
 * and overload parts, built once (createTier) and kept for the isolate's life. (Not a `Tier` of
 * cache/served.ts: that is where a copy came from, "l1" | "location" | "l2" | "origin".)
 */
export interface TierServices {
  config: Config;
  cache: ReadThrough;
  purges: PurgeWatcher;
  /** The purge log in Redis; null without L2 (purges cannot be recorded then). */
  purgeLog: PurgeLog | null;
  /** The known-ids filter; null without L2 or when disabled. */
  knownIds: KnownIds | null;
  /** Pages rendered in this isolate, by URL and the versions they were made from (bounded in bytes). */
  renderedPages: LRUCache<string, RenderedPage>;
  /** This isolate's share of the fleet's hot products, reported to L2 for warming; null without L2. */
  hotReport: HotReport | null;
  origin: OriginClient;
  /** The isolate's cap on origin fetches in flight (leases, see shared/limiter.ts). */
  originLimiter: Limiter;
  clock: Clock;
  /** What this isolate has been doing, for the status page (observability/metrics.ts). */
  metrics: Metrics;
  /** What the fleet is told of this isolate's pages and events (observability/fleet.ts). */
  fleet: Fleet;
  /** Counts a page view, for the status page and the fleet. */
  recordPage: RecordPage;
  /** Told of every product page's read; logs the slow ones (observability/wiring.ts). */
  pageRead: (read: PageRead) => void;
  /** How late the isolate runs, which pages may start new work, and what became of work nobody waited for. */
  overload: Overload;
}

const tiers = new WeakMap<object, TierServices | ConfigError>();

export function createTier(config: Config, clock: Clock = systemClock, fleetDataset?: FleetDataset): TierServices {
  const metrics = createMetrics({ clock });
  const fleet = createFleet(fleetDataset, { isolateId: metrics.isolateId, pageSample: config.fleetPageSample, clock });
  const longestCallMs = Math.max(...RESOURCE_NAMES.map((resource) => config.policies[resource].originTimeoutMs));
  const originLimiter = createLimiter({
    maxConcurrent: config.originMaxConcurrent,
    // One waiter per slot: each holder gives its slot back within its own timeout, so every waiter can
    // get one within its deadline; a longer queue would hold callers for slots they cannot get in time.
    maxQueued: config.originMaxConcurrent,
    // A caller waits for a slot within its own call's deadline (origin/client.ts passes what is left of
    // the service's timeout): no wait is longer than the longest of those.
    maxWaitMs: longestCallMs,
    // A slot is held through its call's timeout and the isolate's longest stall (origin/client.ts asks for no more).
    maxHoldMs: leaseFor(longestCallMs),
    clock,
  });
  const origin = createOriginClient({
    baseUrl: config.originUrl,
    policies: config.policies,
    limiter: originLimiter,
    breakerFor: (service) => tierBreaker(`origin:${service}`, clock, metrics, fleet),
    onFetch: watchOrigin(metrics, clock, fleet),
    // Each service's replies are one more measure of how late the isolate runs: a delay every service shows is the isolate's.
    onReply: (service, ms) => overload.lag.observeReply(ms, `origin:${service}`),
  });
  const overload = createOverload({
    clock,
    maxColdPages: config.coldPagesMax,
    coldPageWaitMs: config.coldPageWaitMs,
    // A page's read fills its subject, then the other parts: two fills at most, one after the other.
    coldPageLeaseMs: 2 * Math.max(...RESOURCE_NAMES.map((resource) => fillBoundMs(config, resource))),
    // A finished fill's write waits for a claim call to carry it (a write's budget at most: cache/l2/outbox.ts), then has its budget.
    backgroundFillMs: 2 * DEFAULTS.backgroundCallMs,
  });
  // CACHING=off: no cache at all, Redis's included (cache/bypass.ts).
  const l2 = config.l2 && config.caching ? createTierL2(config.l2.shards, config.l2TimeoutMs, clock, overload.lag, metrics, fleet) : null;
  const wideRetentionMs = longestEntryLifeMs(config);
  const purgeLog = l2 ? createPurgeLog({ l2, keyPrefix: config.keyPrefix, wideRetentionMs, clock }) : null;
  // The watcher judges what the cache serves, and the cache's L1 is what the watcher purges.
  let purges: PurgeWatcher | undefined;
  const readThrough = createReadThrough({
    config,
    origin,
    l2,
    location: withLocation(config, (open) => createLocationCache({ config, clock, open })),
    clock,
    purges: knowledgeOf(() => purges!),
    overload,
  });
  const cache = config.caching ? readThrough : bypassingCaches(readThrough, { config, origin, clock });
  purges = createPurgeWatcher({
    log: purgeLog,
    l1: readThrough,
    clock,
    keyPrefix: config.keyPrefix,
    pollMs: config.purgePollMs,
    wideRetentionMs,
    // Blind, a purge the isolate may have missed acts at worst as a soft one: a copy fetched before it is fresh no longer than its grace.
    blindMaxAgeMs: DEFAULTS.softPurgeGraceMs,
    l1MaxBytes: config.l1MaxBytes,
    syncWaitMs: config.l2TimeoutMs * 2,
    // With the location tier on, the data center's isolates share their reads of the log.
    shared: withLocation(config, (open) => createLogShelf({ publicUrl: config.publicUrl, keyPrefix: config.keyPrefix, open })),
    reached: (reaches, background) => fleet.purgesReached(reaches, background),
  });
  return {
    config,
    origin,
    originLimiter,
    clock,
    cache,
    purges,
    purgeLog,
    knownIds: createKnownIdsFor(config, clock, metrics, fleet),
    metrics,
    fleet,
    recordPage: recordPages(metrics, fleet),
    overload,
    pageRead: watchSlowPages(longestCallMs, clock),
    hotReport: l2 ? createHotReport({ l2, keyPrefix: config.keyPrefix, clock }) : null,
    renderedPages: new LRUCache<string, RenderedPage>({
      maxSize: DEFAULTS.renderedPagesMaxBytes,
      sizeCalculation: (page) => page.body.byteLength + 256,
    }),
  };
}

/**
 * What `make` builds on the location tier, when it is on and the runtime has the Cache API (not in Node's unit tests); null
 * otherwise. The named cache is opened by each request that uses it: the promise of one request is not awaited by another.
 */
function withLocation<T>(config: Config, make: (open: () => Promise<Cache>) => T): T | null {
  if (!config.locationCache || typeof caches === "undefined") return null;
  return make(() => caches.open(LOCATION_CACHE_NAME));
}

/**
 * A breaker of the tier (L2's, the known-ids filter's, each origin service's): one set of numbers (config/defaults.ts), and
 * time-outs must span the isolate's longest stall, so that calls a stall made late together are not taken for a failing store.
 */
function tierBreaker(name: string, clock: Clock, metrics?: Metrics, fleet?: Fleet, extra: Partial<BreakerOptions> = {}): Breaker {
  return createBreaker({
    failureThreshold: DEFAULTS.breakerFailures,
    coolDownMs: DEFAULTS.breakerCoolDownMs,
    minFailureSpanMs: ISOLATE_STALL_MS,
    clock,
    onChange: watchBreaker(name, metrics, fleet),
    ...extra,
  });
}

/** One L2 client and breaker per shard; several shards go on a consistent-hash ring. */
function createTierL2(shards: readonly L2Endpoint[], timeoutMs: number, clock: Clock, timing?: CallTiming, metrics?: Metrics, fleet?: Fleet): L2 {
  // The probe that confirms an outage is read on time by a stalled isolate (shared/leases.ts): no failure of Redis's then.
  const probeTimeoutMs = Math.max(timeoutMs, ISOLATE_STALL_MS);
  const clients = shards.map((shard) =>
    createL2({
      name: shard.name,
      url: shard.url,
      token: shard.token,
      timeoutMs,
      writeTimeoutMs: DEFAULTS.backgroundCallMs,
      claimTimeoutMs: Math.max(timeoutMs, DEFAULTS.l2ClaimTimeoutMs),
      probeTimeoutMs,
      timing,
      breaker: tierBreaker(`l2:${shard.name}`, clock, metrics, fleet, {
        confirmTimeouts: true,
        // While it is open, a PING whose answer closes it at once (writes and the backlog flow again then, not at the
        // cool-down's end): one out at a time, the next once the last one's budget is over.
        recoveryProbeEveryMs: probeTimeoutMs,
      }),
    }),
  );
  return clients.length === 1 ? clients[0]! : createShardedL2(clients, createRing(shards));
}

/**
 * The filter has an L2 client and breaker of its own: loading its segments takes longer than
 * the page path's budget, and a slow load must not open the breaker that pages depend on.
 */
function createKnownIdsFor(config: Config, clock: Clock, metrics?: Metrics, fleet?: Fleet): KnownIds | null {
  if (!config.l2 || !config.knownIds) return null;
  const home = config.l2.shards[0]!;
  const breaker = tierBreaker(`known-ids:${home.name}`, clock, metrics, fleet);
  const l2 = createL2({ name: home.name, url: home.url, token: home.token, timeoutMs: DEFAULTS.backgroundCallMs, breaker });
  // With the location tier on, new isolates take the filter's segments from this data center's copy.
  const shelf = withLocation(config, (open) =>
    createFilterShelf({ publicUrl: config.publicUrl, keyPrefix: config.keyPrefix, open, callMs: DEFAULTS.backgroundCallMs }),
  );
  return createKnownIds({
    l2,
    keyPrefix: config.keyPrefix,
    clock,
    retryMs: DEFAULTS.breakerCoolDownMs,
    shelf,
    ...config.knownIds,
    log: ({ event, ...fields }) => logEvent(String(event), fields, fields.state === "ok" ? "info" : "warn"),
  });
}

/** The longest any entry can live (its ttl, as earlier releases' jitter lengthened it, then stale-if-error): how long a tag purge must be remembered. */
function longestEntryLifeMs(config: Config): number {
  return Math.max(...Object.values(config.policies).map((p) => (p.ttl * (1 + TTL_JITTER) + Math.max(p.swr, p.staleIfError)) * 1000));
}

/** The isolate's tier for these bindings, or the configuration error that prevents it (reported once, not per request). */
export function tierFor(env: Env): TierServices | ConfigError {
  let tier = tiers.get(env);
  if (!tier) {
    try {
      tier = createTier(parseConfig(env), systemClock, env.FLEET);
      if (!tier.config.l2) logEvent("l2_off", { message: "UPSTASH_REDIS_REST_URL is not set: serving from L1 and the origin only" }, "warn");
    } catch (error) {
      // What parseConfig let through and a component refused when built (a client that checks its own
      // settings): still the configuration's fault, named on every route rather than a 500 page.
      tier = error instanceof ConfigError ? error : new ConfigError("configuration", `was refused while starting the tier: ${String(error)}`);
      logEvent("config_error", { setting: tier.setting, message: tier.message }, "error");
    }
    tiers.set(env, tier);
  }
  return tier;
}
