// The known-ids filter as one isolate sees it: a copy of the filter in
// memory, loaded lazily and kept in step with Redis off the critical path.
//
// It fails open. `mightExist` answers "no" only from a loaded, recent filter
// while Redis answers; when the filter was never built, is damaged, is older
// than `maxAgeMs`, is (re)loading, or Redis is out, every id "might exist"
// and goes on to negative caching. A false "no" would be a 404 for a real
// product, so every doubt resolves to "yes".
//
// Freshness: an id added through this isolate is accepted here at once; other
// isolates accept it after their next check (`refreshMs`), which reads the
// meta and catches up from the version's log of added ids.
import type { Clock } from "../shared/clock";
import type { L2 } from "../cache/l2";
import { isValidProductId } from "../origin/types";
import { Bloom, byteLengthFor, positionsOf, redisBitOf } from "./bloom";
import { KNOWN_IDS_DEFAULTS, KNOWN_IDS_LIMITS } from "./defaults";
import { knownIdsKeys } from "./keys";
import { parseMeta, type FilterMeta, type Meta } from "./meta";
import { loadFilter, readTail } from "./redisFilter";
import { rebuildFilter, type ListIds, type RebuildProgress, type RebuildResult } from "./rebuild";
import { scriptsFor } from "./scripts";

/** How long a check may run before another may start: the runtime ends `waitUntil` work 30 s after the response. */
const CHECK_LEASE_MS = 30_000;

export interface KnownIdsOptions {
  l2: L2;
  /** The tier's key prefix (`pp:v1`). */
  keyPrefix: string;
  clock: Clock;
  capacity?: number;
  fpRate?: number;
  refreshMs?: number;
  maxAgeMs?: number;
  /** Structured log events (state changes only); console.warn as JSON by default. */
  log?: (event: Record<string, unknown>) => void;
}

export type KnownIdsState =
  /** Nothing asked yet. */
  | "cold"
  /** The first load, or a new version, is on its way. */
  | "loading"
  /** Answering from the filter. */
  | "ready"
  /** No filter in Redis (never built, or expired). */
  | "missing"
  /** Built longer ago than maxAgeMs. */
  | "stale"
  /** Redis did not answer the last check, or its breaker is open. */
  | "unavailable"
  /** The meta or a segment is unreadable: a rebuild repairs it. */
  | "damaged";

interface KnownIdsStatus {
  state: KnownIdsState;
  /** Whether `mightExist` can answer "no" right now. */
  serving: boolean;
  version: string | null;
  count: number | null;
  capacity: number | null;
  fpRate: number | null;
  m: number | null;
  k: number | null;
  segments: number | null;
  bytes: number | null;
  builtAt: number | null;
  ageMs: number | null;
  /** Adds to this version applied here. */
  changedAt: number | null;
  /** Times this isolate read the filter's segments (its first load, version switches, falling behind the add log). */
  loads: number;
  lastCheckAt: number | null;
  nextCheckAt: number;
  /** Ids whose add could not be recorded in Redis yet (retried at each check). */
  pendingAdds: number;
  rebuilding: boolean;
}

export interface KnownIds {
  /**
   * false only when the id is certainly not a product. Never waits: the first
   * call, and one call per `refreshMs`, hand a refresh to `background`
   * (ctx.waitUntil); the answer is the one at hand (fail open while loading).
   */
  mightExist(id: string, background: (work: Promise<unknown>) => void): boolean;
  /**
   * Records new product ids (at most 1000, valid ids only). This isolate
   * accepts them at once; the result says whether every isolate will: true
   * when Redis recorded them (or there is no filter, which accepts
   * everything); false when Redis was unavailable (retried at later checks;
   * the caller should answer 503 so that the notifier retries too).
   */
  add(ids: string[]): Promise<boolean>;
  /** Builds a new version from the listing and switches to it. Throws KnownIdsRebuildError. */
  rebuild(listIds: ListIds, onProgress?: (progress: RebuildProgress) => void): Promise<RebuildResult>;
  status(): KnownIdsStatus;
}

type Health = "cold" | "ok" | "missing" | "unavailable" | "damaged";
type AddOutcome = "recorded" | "no-filter" | "damaged" | "unavailable";

interface View {
  bloom: Bloom;
  filter: FilterMeta;
  /** Position in the version's log of added ids up to which this copy is up to date. */
  synced: number;
}

export function createKnownIds(options: KnownIdsOptions): KnownIds {
  const { l2, clock } = options;
  const capacity = options.capacity ?? KNOWN_IDS_DEFAULTS.capacity;
  const fpRate = options.fpRate ?? KNOWN_IDS_DEFAULTS.fpRate;
  const refreshMs = options.refreshMs ?? KNOWN_IDS_DEFAULTS.refreshMs;
  const maxAgeMs = options.maxAgeMs ?? KNOWN_IDS_DEFAULTS.maxAgeMs;
  const log = options.log ?? ((event) => console.warn(JSON.stringify(event)));
  checkSettings(capacity, fpRate, refreshMs, maxAgeMs);
  const keys = knownIdsKeys(options.keyPrefix);

  let view: View | null = null;
  let health: Health = "cold";
  /** A version other than the view's is loading: answers fail open until it is in. */
  let switching = false;
  /**
   * The check under way, as a lease: it runs under its request's `waitUntil`,
   * which the runtime cuts off 30 s after the response; a check whose request
   * vanished is replaced after that (src/shared/leases.ts).
   */
  let checking: { work: Promise<void>; until: number } | null = null;
  const checkUnderWay = (now: number) => checking !== null && checking.until > now;
  let rebuilding: Promise<RebuildResult> | null = null;
  let nextCheckAt = 0;
  let lastCheckAt: number | null = null;
  let loads = 0;
  const pending = new Set<string>();

  function setHealth(next: Health, detail?: string): void {
    if (next !== health) log({ event: "known_ids", state: next, ...(detail ? { detail } : {}) });
    health = next;
  }

  /** Redis did not answer: fail open, and look again soon rather than a whole interval later. */
  function unavailable(): void {
    setHealth("unavailable");
    nextCheckAt = Math.min(nextCheckAt, clock.now() + KNOWN_IDS_LIMITS.retryAfterFailureMs);
  }

  /** Nothing usable in Redis: drop the copy (it could only be wrong) and its memory. */
  function unusable(next: "missing" | "damaged", detail?: string): void {
    view = null;
    setHealth(next, detail);
  }

  function serving(now: number): boolean {
    return (
      health === "ok" &&
      view !== null &&
      !switching &&
      now - view.filter.builtAt <= maxAgeMs &&
      l2.breaker.state() !== "open"
    );
  }

  const readMeta = () => l2.run((redis) => redis.get<string>(keys.meta));

  async function check(): Promise<void> {
    lastCheckAt = clock.now();
    const raw = await readMeta();
    if (raw === undefined) return unavailable();
    if (raw === null) return unusable("missing");
    const meta = parseMeta(raw);
    if (!meta) return unusable("damaged", "meta unreadable");
    if (pending.size > 0) await flushPending(raw);
    if (!meta.current) return unusable(meta.damaged ? "damaged" : "missing", meta.damaged ? "a segment vanished" : undefined);
    if (view && view.filter.version === meta.current.version) return sync(view, meta.current);
    return load(meta.current);
  }

  /**
   * Same version: apply the ids added since, from the log's window of the
   * last `logCap` adds; reload the segments only when this isolate is
   * further behind than that.
   */
  async function sync(current: View, filter: FilterMeta): Promise<void> {
    const missed = filter.changedAt - current.synced;
    if (missed > KNOWN_IDS_LIMITS.logCap) return load(filter);
    if (missed > 0) {
      const tail = await readTail(l2, keys, filter.version, current.synced);
      if (tail === undefined) return unavailable();
      if (tail === "behind") return load(filter);
      if (tail === "replaced") return; // a rebuild switched meanwhile: the next check loads it
      tail.ids.forEach((id) => current.bloom.add(id));
      current.synced = tail.changedAt;
    }
    current.filter = filter;
    setHealth("ok");
  }

  async function load(filter: FilterMeta): Promise<void> {
    switching = view?.filter.version !== filter.version;
    try {
      const loaded = await loadFilter(l2, keys, filter);
      if (loaded.kind === "unavailable") return unavailable();
      if (loaded.kind === "damaged") return unusable("damaged", loaded.reason);
      // A rebuild in this isolate may have installed a newer version meanwhile: keep that one.
      if (view && view.filter.version !== filter.version && view.filter.builtAt > filter.builtAt) return setHealth("ok");
      view = { bloom: loaded.bloom, filter, synced: filter.changedAt };
      loads++;
      setHealth("ok");
    } finally {
      switching = false;
    }
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
    checking = { work: run, until: now + CHECK_LEASE_MS };
    return run;
  }

  /** The arguments of the ADD script for `ids` against `meta`'s current and next versions. */
  function addCall(ids: string[], meta: Meta): { keys: string[]; args: (string | number)[] } {
    const { current, next } = meta;
    const callKeys = [keys.meta, current ? keys.log(current.version) : keys.meta, next ? keys.log(next.version) : keys.meta];
    const pairs: number[] = [];
    if (current) {
      const keyIndex = new Map<number, number>();
      const bits = new Uint32Array(current.k);
      for (const id of ids) {
        for (const bit of positionsOf(id, current, bits)) {
          const { segment, offset } = redisBitOf(bit);
          let index = keyIndex.get(segment);
          if (index === undefined) {
            callKeys.push(keys.segment(current.version, segment));
            keyIndex.set(segment, (index = callKeys.length - 3));
          }
          pairs.push(index, offset);
        }
      }
    }
    const stamp = `${current?.version ?? ""}/${next?.version ?? ""}`;
    return { keys: callKeys, args: [stamp, KNOWN_IDS_LIMITS.keyTtlMs, KNOWN_IDS_LIMITS.logCap, ids.length, ...ids, ...pairs] };
  }

  /** Sets the ids' bits in the current version and logs them for other isolates and a running build. */
  async function record(ids: string[], knownMeta?: string): Promise<AddOutcome> {
    let raw: string | null | undefined = knownMeta ?? (await readMeta());
    // A rebuild switching meanwhile changes the versions under us: recompute, a bounded number of times.
    for (let attempt = 0; attempt < 3; attempt++) {
      if (raw === undefined) return "unavailable";
      if (raw === null) return "no-filter";
      const meta = parseMeta(raw);
      // Readers fail open on an unreadable or damaged meta until a rebuild, which lists these ids.
      if (!meta || meta.damaged) return "damaged";
      if (!meta.current && !meta.next) return "no-filter";
      const call = addCall(ids, meta);
      const reply = await l2.run((redis) => scriptsFor(redis).add(call.keys, call.args), { isWrite: true });
      if (reply === undefined) return "unavailable";
      if (reply[0] === 1) return "recorded";
      if (reply[0] === 2) return "damaged";
      if (reply[0] === 3) return "no-filter";
      raw = typeof reply[1] === "string" ? reply[1] : undefined;
    }
    return "unavailable";
  }

  /** Retries ids whose add could not be recorded, one bounded batch per check. */
  async function flushPending(raw: string): Promise<void> {
    const batch = [...pending].slice(0, KNOWN_IDS_LIMITS.maxIdsPerAdd);
    if ((await record(batch, raw)) === "unavailable") return;
    batch.forEach((id) => pending.delete(id));
  }

  return {
    mightExist(id, background) {
      const now = clock.now();
      if (!checkUnderWay(now) && now >= nextCheckAt) background(startCheck(now));
      return !serving(now) || view!.bloom.has(id);
    },

    async add(ids) {
      const unique = [...new Set(ids)];
      if (unique.length > KNOWN_IDS_LIMITS.maxIdsPerAdd) throw new RangeError(`at most ${KNOWN_IDS_LIMITS.maxIdsPerAdd} ids per add`);
      if (!unique.every(isValidProductId)) throw new RangeError("add() takes valid product ids only");
      if (unique.length === 0) return true;
      // This isolate knows at once, whatever Redis says (extra bits only ever cost false positives).
      if (view) unique.forEach((id) => view!.bloom.add(id));
      const outcome = await record(unique);
      if (outcome !== "unavailable") return true;
      for (const id of unique) if (pending.size < KNOWN_IDS_LIMITS.maxPendingAdds) pending.add(id);
      log({ event: "known_ids_add_unrecorded", ids: unique.length, pending: pending.size });
      return false;
    },

    rebuild(listIds, onProgress) {
      // One build per isolate at a time: a second caller shares the first's result.
      rebuilding ??= (async () => {
        try {
          const built = await rebuildFilter({ l2, keys, clock, capacity, fpRate }, listIds, onProgress);
          // Built here: this isolate serves the new version without reading it back.
          view = { bloom: built.bloom, filter: built.filter, synced: built.filter.changedAt };
          setHealth("ok");
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
      const filter = view?.filter ?? null;
      return {
        state: stateOf(now),
        serving: serving(now),
        version: filter?.version ?? null,
        count: filter?.count ?? null,
        capacity: filter?.capacity ?? null,
        fpRate: filter?.fpRate ?? null,
        m: filter?.m ?? null,
        k: filter?.k ?? null,
        segments: filter?.segmentCount ?? null,
        bytes: filter ? byteLengthFor(filter.m) : null,
        builtAt: filter?.builtAt ?? null,
        ageMs: filter ? now - filter.builtAt : null,
        changedAt: view?.synced ?? null,
        loads,
        lastCheckAt,
        nextCheckAt,
        pendingAdds: pending.size,
        rebuilding: rebuilding !== null,
      };
    },
  };

  function stateOf(now: number): KnownIdsState {
    if (health === "cold") return checkUnderWay(now) ? "loading" : "cold";
    if (health !== "ok") return health;
    if (switching) return "loading";
    if (l2.breaker.state() === "open") return "unavailable";
    if (view && now - view.filter.builtAt > maxAgeMs) return "stale";
    return "ready";
  }
}

function checkSettings(capacity: number, fpRate: number, refreshMs: number, maxAgeMs: number): void {
  const { maxCapacity, minFpRate, maxFpRate } = KNOWN_IDS_LIMITS;
  if (!Number.isInteger(capacity) || capacity < 1 || capacity > maxCapacity) throw new RangeError(`known-ids capacity must be from 1 to ${maxCapacity}`);
  if (!(fpRate >= minFpRate && fpRate <= maxFpRate)) throw new RangeError(`known-ids fpRate must be from ${minFpRate} to ${maxFpRate}`);
  if (!(refreshMs > 0)) throw new RangeError("known-ids refreshMs must be positive");
  if (!(maxAgeMs > 0)) throw new RangeError("known-ids maxAgeMs must be positive");
}
