// The status of one isolate, as data: the counters of the last 5 and 15 minutes, one point per minute, hot products, and
// the gauges read at the time of asking (breakers, L2 stats, L1 size, purge watcher, known-ids filter, configuration).
// GET /__status.json answers exactly this; GET /__status renders it (see ../render/statusView.ts and templates/status.tsx).
import type { BreakerState } from "../shared/breaker";
import type { L2Stats } from "../cache/l2/l2";
import type { L2ValueStats } from "../cache/l2/l2Entries";
import type { LocationStats } from "../cache/location/location";
import type { FillStats } from "../cache/readThrough";
import type { Config } from "../config";
import type { KnownIdsStatus } from "../knownIds";
import type { Overload } from "../overload";
import { INTERVAL_MS, TARGET_MS } from "../overload/limit";
import type { PurgeWatcherStatus } from "../invalidation/watcher";
import { RESOURCE_NAMES, type ResourceName } from "../origin/resources";
import { HOT_PRODUCTS, MAX_BUCKETS, type Metrics } from "./metrics";

/** Everything the status is made from, read from the tier at the time of asking. */
export interface StatusSources {
  now: number;
  metrics: Metrics;
  config: Config;
  /** Null when no L2 is configured; each shard with its breaker's state. `invalidValues`: values read that were not valid entries. */
  l2: { shards: readonly { name: string; state: BreakerState }[]; stats: L2Stats; invalidValues: L2ValueStats } | null;
  /** `evictions`: entries the byte bound pushed out since the isolate started. */
  l1: { bytes: number; entries: number; evictions: number };
  /** What the location tier did since the isolate started; null when it is off (or the runtime has no Cache API). */
  location: LocationStats | null;
  purges: PurgeWatcherStatus;
  /** The isolate's origin fetch slots (leases): held now, callers queued, and slots taken back from vanished holders. */
  originSlots: { inUse: number; queued: number; reclaimed: number };
  /** Fills in flight in this isolate, fills taken over from a request that vanished, and the outbox's claims and writes (cache/l2/outbox.ts). */
  fills: FillStats;
  /** Admission of new work and what became of work whose visitors left (overload/). */
  overload: ReturnType<Overload["stats"]>;
  /** The known-ids filter's status (null: off). */
  knownIds: KnownIdsStatus | null;
}

export type StatusModel = ReturnType<typeof buildStatus>;

export function buildStatus(sources: StatusSources) {
  const { now, metrics, config } = sources;
  // Every setting as it is but the tokens; L2's shards without theirs (a shard's name and URL are no secret).
  const { purgeToken, l2: l2Config, ...settings } = config;
  const notes = new Map(metrics.breakers().map((note) => [note.name, note]));
  const lastSyncAt = Number.isFinite(sources.purges.lastSyncAt) ? sources.purges.lastSyncAt : null;
  const shards = sources.l2?.shards ?? [];
  const shardStates = new Set(shards.map((shard) => shard.state));
  return {
    generatedAt: new Date(now).toISOString(),
    isolate: { id: metrics.isolateId, startedAt: new Date(metrics.startedAt).toISOString(), uptimeMs: now - metrics.startedAt },
    last5m: metrics.window(5),
    last15m: metrics.window(MAX_BUCKETS),
    /** MAX_BUCKETS points, oldest first; the last one is the current (partial) minute. */
    perMinute: metrics.perMinute(),
    hotProducts: metrics.hot.top(HOT_PRODUCTS).map(({ key, count, error }) => ({ id: key, count, error })),
    hotTracking: { capacity: metrics.hot.capacity, offered: metrics.hot.total },
    /**
     * `state`: one word for L2 as a whole: "off" without L2, its breaker's state when all shards agree, "partial" when they do not.
     * A shard's `since`: when its breaker entered its state (null: closed since the isolate started).
     */
    l2: {
      configured: sources.l2 !== null,
      state: shards.length === 0 ? "off" : shardStates.size === 1 ? shards[0]!.state : "partial",
      shards: shards.map(({ name, state }) => ({ name, state, since: notes.get(`l2:${name}`)?.since ?? null })),
      stats: sources.l2 ? { ...sources.l2.stats } : null,
      invalidValues: sources.l2 ? { ...sources.l2.invalidValues } : null,
    },
    /** Per origin service: the state of its breaker ("closed" until it first changed). */
    originBreakers: Object.fromEntries(
      RESOURCE_NAMES.map((service) => {
        const note = notes.get(`origin:${service}`);
        return [service, { state: note?.state ?? "closed", since: note?.since ?? null }];
      }),
    ) as Record<ResourceName, { state: BreakerState; since: number | null }>,
    /** Every breaker that changed state in this isolate, by name (l2:<shard>, origin:<service>, known-ids:<shard>). */
    breakerChanges: [...notes.values()],
    /** State changes per breaker since the isolate started. */
    breakerTransitions: Object.fromEntries([...notes.values()].map((note) => [note.name, note.changes])),
    originSlots: { ...sources.originSlots },
    fills: { ...sources.fills },
    overload: {
      ...sources.overload,
      coldPagesMax: config.coldPagesMax,
      targetMs: TARGET_MS,
      intervalMs: INTERVAL_MS,
    },
    l1: {
      bytes: sources.l1.bytes,
      maxBytes: config.l1MaxBytes,
      entries: sources.l1.entries,
      evictions: sources.l1.evictions,
      usedRatio: config.l1MaxBytes > 0 ? sources.l1.bytes / config.l1MaxBytes : 0,
    },
    /** `hitRatio`: copies served of parts looked up (null before any lookup); `stats` null when off. */
    location: {
      enabled: sources.location !== null,
      hitRatio: sources.location && sources.location.lookups > 0 ? sources.location.hits / sources.location.lookups : null,
      stats: sources.location ? { ...sources.location } : null,
    },
    /** The purge watcher's status, with its last sync as a date and an age. */
    purges: {
      enabled: config.l2 !== null,
      ...sources.purges,
      lastSyncAt: lastSyncAt === null ? null : new Date(lastSyncAt).toISOString(),
      syncAgeMs: lastSyncAt === null ? null : Math.max(0, now - lastSyncAt),
    },
    knownIds: sources.knownIds ? { enabled: true as const, ...sources.knownIds } : { enabled: false as const },
    config: {
      ...settings,
      l2: l2Config !== null,
      l2Shards: l2Config?.shards.map(({ name, url, weight }) => ({ name, url, weight })) ?? [],
      purgeEndpoint: purgeToken !== null,
    },
  };
}
