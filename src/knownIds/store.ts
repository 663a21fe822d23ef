// The known-ids filter as one isolate sees it: a copy of the filter in memory, loaded lazily and kept in step with Redis off the critical
// path. It fails open (docs/architecture.md, "The known-ids filter"): every doubt resolves to "might exist", never to a false 404.
import type { Clock } from "../shared/clock";
import type { L2 } from "../cache/l2/l2";
import { createAdds } from "./adds";
import { bloomShape, byteLengthFor } from "./bloom";
import { createFilterCopy, type KnownIdLookup } from "./copy";
import type { FilterShelf } from "./locationShelf";
import { KNOWN_IDS_DEFAULTS, KNOWN_IDS_LIMITS } from "./limits";
import { knownIdsKeys } from "./keys";
import { parseMeta } from "./meta";
import { rebuildFilter, type ListIds, type RebuildProgress, type RebuildResult } from "./rebuild";
import { readMeta } from "./redisFilter";
import type { Background } from "../shared/subrequests";

export interface KnownIdsOptions {
  l2: L2;
  /** The tier's key prefix (`pp:v1`). */
  keyPrefix: string;
  clock: Clock;
  /** Ids the filter holds beyond the catalog it is built from (see KNOWN_IDS_DEFAULTS). */
  room?: number;
  fpRate?: number;
  refreshMs?: number;
  /**
   * After Redis did not answer, the next check comes this soon rather than `refreshMs` later: the cool-down of `l2`'s
   * breaker, when it lets a probe through (sooner, the check would meet the open breaker and fail without asking Redis).
   */
  retryMs: number;
  /** The location tier's copy of the filter, which new isolates load from instead of Redis (null or absent: none). */
  shelf?: FilterShelf | null;
  /** Structured log events (state changes only); console.warn as JSON by default. */
  log?: (event: Record<string, unknown>) => void;
}

export type KnownIds = ReturnType<typeof createKnownIds>;
export type KnownIdsStatus = ReturnType<KnownIds["status"]>;

export function createKnownIds(options: KnownIdsOptions) {
  const { l2, clock } = options;
  const room = options.room ?? KNOWN_IDS_DEFAULTS.room;
  const fpRate = options.fpRate ?? KNOWN_IDS_DEFAULTS.fpRate;
  const refreshMs = options.refreshMs ?? KNOWN_IDS_DEFAULTS.refreshMs;
  const log = options.log ?? ((event) => console.warn(JSON.stringify(event)));
  const bytes = byteLengthFor(bloomShape(room, fpRate).m);
  if (bytes > KNOWN_IDS_LIMITS.maxBytes)
    throw new RangeError(`known-ids room ${room} at fpRate ${fpRate} takes ${bytes} bytes, over ${KNOWN_IDS_LIMITS.maxBytes}`);
  if (!(refreshMs > 0)) throw new RangeError("known-ids refreshMs must be positive");
  const keys = knownIdsKeys(options.keyPrefix);
  const shelf = options.shelf ?? null;
  const copy = createFilterCopy({ l2, keys, maxAgeMs: KNOWN_IDS_DEFAULTS.maxAgeMs, log, shelf });
  const adds = createAdds({ l2, keys, log, acceptHere: copy.addLocally });
  let rebuilding: Promise<RebuildResult> | null = null;
  /**
   * The check under way, as a lease: it runs under its request's `waitUntil`, which the runtime cuts off
   * 30 s after the response; a check whose request vanished is replaced after that (src/shared/leases.ts).
   */
  let checking: { work: Promise<void>; until: number } | null = null;
  const checkUnderWay = (now: number) => checking !== null && checking.until > now;
  let nextCheckAt = 0;
  let lastCheckAt: number | null = null;

  /** Redis did not answer: fail open, and look again after `retryMs`. */
  function unavailable(): void {
    copy.unavailable();
    nextCheckAt = Math.min(nextCheckAt, clock.now() + options.retryMs);
  }

  async function check(): Promise<void> {
    lastCheckAt = clock.now();
    const raw = await readMeta(l2, keys);
    if (raw === undefined) return unavailable();
    if (raw === null) return copy.unusable("missing");
    const meta = parseMeta(raw);
    if (!meta) return copy.unusable("damaged", "meta unreadable");
    await adds.retryPending(raw);
    if (!(await copy.follow(meta))) unavailable();
  }

  function startCheck(now: number): Promise<void> {
    nextCheckAt = now + refreshMs;
    const run = check()
      .catch((error: unknown) => {
        // run() never throws, so this is a bug: fail open and say so.
        log({ event: "known_ids_error", message: String(error) });
        unavailable();
      })
      .finally(() => {
        if (checking?.work === run) checking = null;
      });
    checking = { work: run, until: now + KNOWN_IDS_LIMITS.checkLeaseMs };
    return run;
  }

  return {
    /**
     * "absent" only when the id is certainly not a product (see KnownIdLookup). Never waits: the first call, and one call per
     * `refreshMs`, hand a refresh to `background` (ctx.waitUntil); the answer is the one at hand ("unknown" while loading: fail open).
     */
    lookup(id: string, background: Background): KnownIdLookup {
      const now = clock.now();
      if (!checkUnderWay(now) && now >= nextCheckAt) background(startCheck(now));
      return copy.lookup(id, now);
    },

    /**
     * Records new product ids (at most 1000, valid ids only). This isolate accepts them at once; the result says whether
     * every isolate will: true when Redis recorded them (or there is no filter, which accepts everything); false when
     * Redis was unavailable (retried at later checks; the caller should answer 503 so that the notifier retries too).
     */
    add: adds.add,

    /**
     * Whether Redis holds no filter to serve (never built, expired, damaged, or lost with Redis's
     * data) and no build was announced within `buildUnderWayMs`. False when Redis does not answer.
     */
    async needsBuilding(): Promise<boolean> {
      const raw = await readMeta(l2, keys);
      if (raw === undefined) return false;
      const meta = raw === null ? null : parseMeta(raw);
      if (meta?.current && !meta.damaged) return false;
      const started = meta?.next?.startedAt;
      return started === undefined || clock.now() - started >= KNOWN_IDS_LIMITS.buildUnderWayMs;
    },

    /** Builds a new version from the listing and switches to it. Throws KnownIdsRebuildError. */
    rebuild(listIds: ListIds, onProgress?: (progress: RebuildProgress) => void): Promise<RebuildResult> {
      // One build per isolate at a time: a second caller shares the first's result.
      rebuilding ??= (async () => {
        try {
          const built = await rebuildFilter({ l2, keys, clock, room, fpRate }, listIds, onProgress);
          copy.install(built.bloom, built.filter);
          nextCheckAt = clock.now() + refreshMs;
          return built.result;
        } finally {
          rebuilding = null;
        }
      })();
      return rebuilding;
    },

    status() {
      const now = clock.now();
      const filter = copy.current()?.filter ?? null;
      return {
        state: copy.state(now, checkUnderWay(now)),
        /** Whether `lookup` can answer "absent" (or "listed") right now. */
        serving: copy.serving(now),
        version: filter?.version ?? null,
        count: filter?.count ?? null,
        ageMs: filter ? now - filter.builtAt : null,
        /** Adds to this version applied here. */
        changedAt: copy.current()?.synced ?? null,
        /** Times this isolate loaded the filter's segments (its first load, version switches, falling behind the add log), from Redis or the location tier. */
        loads: copy.loads(),
        /** The location tier's copy: loads taken from it, looks in vain, copies refused, puts. Null without one. */
        location: shelf ? { ...shelf.stats } : null,
        lastCheckAt,
        /** Ids whose add could not be recorded in Redis yet (retried at each check). */
        pendingAdds: adds.pending(),
      };
    },
  };
}
