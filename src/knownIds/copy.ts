// This isolate's copy of the filter, and how far it may be trusted. Only a loaded copy whose health is "ok", not switching
// versions, built within `maxAgeMs`, and with the L2 breaker closed may answer "no": every other state fails open (see store.ts).
import type { L2 } from "../cache/l2/l2";
import type { Bloom } from "./bloom";
import { KNOWN_IDS_LIMITS } from "./limits";
import type { KnownIdsKeys } from "./keys";
import type { FilterMeta, Meta } from "./meta";
import type { FilterShelf } from "./locationShelf";
import { loadFilter, readTail } from "./redisFilter";

/**
 * What the filter says of one id: "absent" (certainly not a product), "listed" (a loaded, recent filter holds it: a product,
 * or one of the filter's false positives, about 1%), "unknown" (the filter cannot answer now: every id might exist).
 */
export type KnownIdLookup = "absent" | "listed" | "unknown";

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

export interface FilterCopyOptions {
  l2: L2;
  keys: KnownIdsKeys;
  maxAgeMs: number;
  log: (event: Record<string, unknown>) => void;
  /** The location tier's copy of the filter (null: off, or no Cache API). */
  shelf: FilterShelf | null;
}

type Health = "cold" | "ok" | "missing" | "unavailable" | "damaged";

interface View {
  bloom: Bloom;
  filter: FilterMeta;
  /** Position in the version's log of added ids up to which this copy is up to date. */
  synced: number;
}

export function createFilterCopy({ l2, keys, maxAgeMs, log, shelf }: FilterCopyOptions) {
  let view: View | null = null;
  let health: Health = "cold";
  /** A version other than the view's is loading: answers fail open until it is in. */
  let switching = false;
  let loads = 0;

  function setHealth(next: Health, detail?: string): void {
    if (next !== health) log({ event: "known_ids", state: next, ...(detail ? { detail } : {}) });
    health = next;
  }

  function unusable(next: "missing" | "damaged", detail?: string): void {
    view = null;
    setHealth(next, detail);
  }

  /** Whether the copy may answer "no": only when "ready" (health "ok" always comes with a view: see take, sync, install). */
  const serving = (now: number): boolean => stateOf(now, false) === "ready";

  /**
   * Same version: apply the ids added since, from the log's window of the last `logCap`
   * adds; reload the segments only when this isolate is further behind than that.
   */
  async function sync(current: View, filter: FilterMeta): Promise<boolean> {
    const caught = await catchUp(current, filter);
    if (caught === "unavailable") return unavailable();
    if (caught === "behind") return load(filter, false);
    if (caught === "replaced") return true;
    current.filter = filter;
    setHealth("ok");
    return true;
  }

  /** Applies to `current` the ids added to `filter`'s version since it was synced ("replaced": a rebuild switched meanwhile, the next check loads it). */
  async function catchUp(current: View, filter: FilterMeta): Promise<"ok" | "behind" | "replaced" | "unavailable"> {
    const missed = filter.changedAt - current.synced;
    if (missed > KNOWN_IDS_LIMITS.logCap) return "behind";
    if (missed <= 0) return "ok";
    const tail = await readTail(l2, keys, filter.version, current.synced);
    if (tail === undefined) return "unavailable";
    if (typeof tail === "string") return tail;
    tail.ids.forEach((id) => current.bloom.add(id));
    current.synced = tail.changedAt;
    return "ok";
  }

  /**
   * Loads `filter`'s version: from the location tier's copy when there is one (then only the adds since
   * come from Redis), else its segments from Redis, then kept in the location tier for the next isolate.
   */
  async function load(filter: FilterMeta, fromShelf = true): Promise<boolean> {
    switching = view?.filter.version !== filter.version;
    try {
      const shelved = fromShelf && shelf ? await shelf.read(filter) : null;
      if (shelved) {
        const candidate: View = { bloom: shelved.bloom, filter, synced: shelved.synced };
        const caught = await catchUp(candidate, filter);
        if (caught === "unavailable") return unavailable();
        if (caught === "ok") {
          take(candidate);
          return true;
        }
      }
      const loaded = await loadFilter(l2, keys, filter);
      if (loaded.kind === "unavailable") return unavailable();
      if (loaded.kind === "damaged") {
        unusable("damaged", loaded.reason);
        return true;
      }
      take({ bloom: loaded.bloom, filter, synced: filter.changedAt });
      switching = false;
      await shelf?.put(filter, loaded.bloom, filter.changedAt);
      return true;
    } finally {
      switching = false;
    }
  }

  /** Serves `loaded` from now on, unless a rebuild in this isolate installed a newer version meanwhile. */
  function take(loaded: View): void {
    const newerHere = view && view.filter.version !== loaded.filter.version && view.filter.builtAt > loaded.filter.builtAt;
    if (!newerHere) {
      view = loaded;
      loads++;
    }
    setHealth("ok");
  }

  function unavailable(): false {
    setHealth("unavailable");
    return false;
  }

  function stateOf(now: number, checkUnderWay: boolean): KnownIdsState {
    if (health === "cold") return checkUnderWay ? "loading" : "cold";
    if (health !== "ok") return health;
    if (switching) return "loading";
    if (l2.breaker.state() === "open") return "unavailable";
    if (view && now - view.filter.builtAt > maxAgeMs) return "stale";
    return "ready";
  }

  return {
    /** "absent" only when the copy may answer and does not hold `id`. */
    lookup: (id: string, now: number): KnownIdLookup => (!serving(now) ? "unknown" : view!.bloom.has(id) ? "listed" : "absent"),

    /** Ids this isolate accepted, whatever Redis says: extra bits only ever cost false positives. */
    addLocally(ids: readonly string[]): void {
      if (view) ids.forEach((id) => view!.bloom.add(id));
    },

    /** Brings the copy in step with `meta`. false: Redis did not answer (the copy is then "unavailable"). */
    async follow(meta: Meta): Promise<boolean> {
      if (!meta.current) {
        unusable(meta.damaged ? "damaged" : "missing", meta.damaged ? "a segment vanished" : undefined);
        return true;
      }
      return view && view.filter.version === meta.current.version ? sync(view, meta.current) : load(meta.current);
    },

    /** Nothing usable in Redis: the copy is dropped (it could only be wrong), and its memory with it. */
    unusable,
    unavailable,

    /** A version this isolate built: served without reading it back. */
    install(bloom: Bloom, filter: FilterMeta): void {
      view = { bloom, filter, synced: filter.changedAt };
      setHealth("ok");
    },

    state: stateOf,
    serving,
    /** Read only: the filter this copy holds, and how far into its log of adds. */
    current: (): Readonly<View> | null => view,
    loads: () => loads,
  };
}
