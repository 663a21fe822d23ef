// The request path of the cache, in one read (design.md, "The picture"):
//
//   for each resource the page needs:  L1 ──▶ L2 (one round trip for all) ──▶ origin (coalesced fill)
//
// fresh ⇒ serve; stale ⇒ serve now and refresh in the background, once;
// missing or expired ⇒ fill; the fill failed ⇒ serve what is usable on error.
import { LRUCache } from "lru-cache";
import type { Config } from "../config";
import { OriginError, type OriginClient, type OriginFailure } from "../origin/client";
import type { ResourceName, ResourceTypes } from "../origin/types";
import type { Clock } from "./clock";
import { decodeEntry } from "./codec";
import { entryState, newerOf, type Entry } from "./entry";
import { markedStale } from "../invalidation/watcher";
import { createFill, type FillContext } from "./fill";
import { entryKey } from "./keys";
import { createHotness, type Heat } from "./hotness";
import { DEFAULTS } from "../config/defaults";
import type { L2 } from "./l2";

export type Tier = "l1" | "l2" | "origin";

export interface Served<T> {
  resource: ResourceName;
  /** `found`: data to show; `absent`: the origin says there is none; `failed`: nothing usable. */
  outcome: "found" | "absent" | "failed";
  data: T | null;
  entry?: Entry<T>;
  /** Where the answer came from; `undefined` when nothing was usable. */
  tier?: Tier;
  /** How the entry stood: fresh, within stale-while-revalidate, or only within stale-if-error. */
  freshness?: "fresh" | "stale" | "stale-if-error";
  /** This request waited for a fill that another request or isolate ran. */
  collapsed: boolean;
  /** Why the origin was asked (for Cache-Status `fwd=`). */
  forward?: "miss" | "stale";
  /** Why the origin could not answer, when it could not. */
  failure?: OriginFailure;
}

export type PageData = { [R in ResourceName]?: Served<ResourceTypes[R]> };

export interface Timings {
  l1: number;
  l2: number;
  origin: number;
}

/** The purges this isolate knows of (see invalidation/watcher.ts). */
export interface PurgeKnowledge {
  /** What they make of an entry: still good, stale (soft purge), or gone (hard purge). */
  judge(entry: Entry, id: string, resource: ResourceName, tags: readonly string[]): "ok" | "stale" | "gone";
  /** When the resource was last hard-purged (0 if never): older copies are not to be used. */
  hardPurgedAt(id: string, resource: ResourceName, tags: readonly string[]): number;
}

export interface ReadThroughDeps {
  config: Config;
  /** None in unit tests of the life cycle. */
  purges?: PurgeKnowledge;
  origin: OriginClient;
  l2: L2 | null;
  clock: Clock;
  random?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

/**
 * Purges reach L1 through these, never through lru-cache directly: in
 * Workers an lru-cache `set`/`delete` on a key whose fill is in flight would
 * abort that fill from another request's context, which the runtime refuses
 * ("Cannot perform I/O on behalf of a different request"). A key being
 * filled is left alone; its result carries its fetch time, and the purge
 * judges it when it is read.
 */
export interface L1Purging {
  forget(key: string): void;
  markStale(key: string, at: number): void;
  forgetAll(): void;
}

export interface ReadThrough extends L1Purging {
  /** Reads the resources of one product. `background` receives work that must outlive the response. */
  read(id: string, resources: readonly ResourceName[], background: (work: Promise<unknown>) => void): Promise<{ data: PageData; timings: Timings }>;
  readonly l1: LRUCache<string, Entry, FillContext>;
  readonly l2: L2 | null;
}

interface Pending {
  resource: ResourceName;
  key: string;
  /** Best copy at hand that is still usable if the origin fails, and where it came from. */
  fallback?: Entry;
  fallbackTier?: Tier;
}

export function createReadThrough(deps: ReadThroughDeps): ReadThrough {
  const { config, l2, clock } = deps;
  const fill = createFill({
    ...deps,
    random: deps.random ?? Math.random,
    sleep: deps.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms))),
  });

  /** Keys whose fill is in flight in this isolate (see L1Purging). */
  const filling = new Set<string>();
  /** Keys a request of this isolate is reading from L2 right now. */
  const reading = new Set<string>();

  const l1 = new LRUCache<string, Entry, FillContext>({
    // The byte bound is the only bound that protects a 128 MB isolate (lru-cache #227).
    maxSize: config.l1MaxBytes,
    sizeCalculation: (entry) => entry.size,
    // lru-cache drops an entry once it is no longer usable even on error;
    // the entry's own deadlines decide between fresh and stale before that.
    ttlAutopurge: false,
    perf: { now: () => clock.now() },
    // A failed refresh keeps the old entry: it may still serve on error.
    noDeleteOnFetchRejection: true,
    fetchMethod: async (key, _stale, { options, context }) => {
      filling.add(key);
      try {
        const work = fill(key, context);
        // Other requests may be waiting on this fill: it must outlive its
        // own request, even if that visitor goes away.
        context.background(work.catch(() => undefined));
        const entry = await work;
        options.ttl = Math.max(1, entry.errorUntil - clock.now());
        return entry;
      } finally {
        filling.delete(key);
      }
    },
  });

  const hotness = createHotness({ warmPerMinute: config.warmPerMinute, hotPerMinute: config.hotPerMinute, clock });

  /** A warm or hot product's fresh entry near its end: refreshed now, so that it is never served stale. */
  function dueForRefreshAhead(entry: Entry, heat: Exclude<Heat, "cold">): boolean {
    const margin = (entry.freshUntil - entry.fetchedAt) * DEFAULTS.refreshAheadShare[heat];
    return entry.freshUntil - clock.now() <= margin;
  }

  /** The entry as known purges leave it: unchanged, marked stale, or gone. */
  function judged(entry: Entry | undefined, id: string, resource: ResourceName, tags: readonly string[]): Entry | undefined {
    if (!entry || !deps.purges) return entry;
    const verdict = deps.purges.judge(entry, id, resource, tags);
    if (verdict === "gone") return undefined;
    return verdict === "stale" ? markedStale(entry, clock.now()) : entry;
  }

  /** The product's tags, which tag purges match, from the best copy this isolate has. */
  function tagsOf(id: string): readonly string[] {
    const product = l1.peek(entryKey(config.keyPrefix, "product", id))?.data as { tags?: string[] } | null | undefined;
    return product?.tags ?? [];
  }

  function fillContext(resource: ResourceName, id: string, background: FillContext["background"]): FillContext {
    return { resource, id, background, notBefore: deps.purges?.hardPurgedAt(id, resource, tagsOf(id)) ?? 0, freshBeyond: 0 };
  }

  function keep(key: string, entry: Entry): void {
    // A fill under way will store its own, newer, result (see L1Purging).
    if (filling.has(key)) return;
    l1.set(key, entry, { ttl: Math.max(1, entry.errorUntil - clock.now()) });
  }

  function forget(key: string): void {
    if (!filling.has(key)) l1.delete(key);
  }

  function refreshInBackground(key: string, resource: ResourceName, id: string, background: FillContext["background"], freshBeyond = 0): void {
    // lru-cache runs at most one fill per key: a refresh already under way is
    // left alone, not repeated (and not waited for: the fill keeps its own
    // request alive, see fetchMethod).
    if (filling.has(key)) return;
    void l1.fetch(key, { forceRefresh: true, context: { ...fillContext(resource, id, background), freshBeyond } }).catch(() => undefined);
  }

  /**
   * The longest a fill can take: its lock claim, then at most the wait for
   * another isolate and the service's origin timeout. A request waiting on a
   * fill waits on its own timer too: in Workers a request whose only pending
   * work is another request's I/O is taken for hung and cancelled, and this
   * bound is also what it costs if that other request goes away.
   */
  function fillBoundMs(resource: ResourceName): number {
    return DEFAULTS.l2ClaimTimeoutMs + config.lockWaitMs + config.policies[resource].originTimeoutMs + 100;
  }

  function served(resource: ResourceName, entry: Entry, tier: Tier, freshness: Served<unknown>["freshness"], extra: Partial<Served<unknown>> = {}): Served<unknown> {
    return {
      resource,
      outcome: entry.data === null ? "absent" : "found",
      data: entry.data,
      entry,
      tier,
      freshness,
      collapsed: false,
      ...extra,
    };
  }

  async function fillOne(id: string, item: Pending, background: FillContext["background"]): Promise<Served<unknown>> {
    const context = fillContext(item.resource, id, background);
    const status: LRUCache.Status<string, Entry, FillContext> = {};
    const forward = item.fallback ? "stale" : "miss";
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new OriginError(item.resource, "timeout", "the fill took longer than its bound")), fillBoundMs(item.resource));
      });
      const entry = await Promise.race([l1.fetch(item.key, { forceRefresh: true, context, status }), deadline]);
      if (!entry) throw new OriginError(item.resource, "unreachable", "fill aborted");
      const joined = status.fetch === "inflight";
      return served(item.resource, entry, joined ? "origin" : context.via === "l2" ? "l2" : "origin", "fresh", {
        collapsed: joined || context.via === "l2",
        forward,
      });
    } catch (error) {
      const failure: OriginFailure = error instanceof OriginError ? error.failure : "unreachable";
      // The best copy at hand: what this request had, what the fill found in
      // L2 (kept in L1 for the requests that joined it), or what they kept.
      const fromFill = judged(context.olderCopy, id, item.resource, tagsOf(id));
      if (fromFill && entryState(fromFill, clock.now()) !== "expired") keep(item.key, fromFill);
      const inL1 = judged(l1.peek(item.key), id, item.resource, tagsOf(id));
      const fallback = newerOf(newerOf(item.fallback, fromFill), inL1);
      if (fallback && entryState(fallback, clock.now()) !== "expired") {
        const tier = fallback === item.fallback ? (item.fallbackTier ?? "l1") : fallback === fromFill ? "l2" : "l1";
        return served(item.resource, fallback, tier, "stale-if-error", { forward, failure });
      }
      return { resource: item.resource, outcome: "failed", data: null, collapsed: false, forward, failure };
    } finally {
      clearTimeout(timer);
    }
  }

  return {
    l1,
    l2,
    forget,
    markStale(key, at) {
      const entry = l1.peek(key);
      if (entry) keep(key, markedStale(entry, at));
    },
    forgetAll() {
      for (const key of [...l1.keys()]) forget(key);
    },
    async read(id, resources, background) {
      const data: Record<string, Served<unknown>> = {};
      const timings: Timings = { l1: 0, l2: 0, origin: 0 };

      // 1. L1
      let started = clock.now();
      let pending: Pending[] = [];
      const tags = tagsOf(id);
      const heat = hotness.offer(id);
      for (const resource of resources) {
        const key = entryKey(config.keyPrefix, resource, id);
        const entry = judged(l1.peek(key), id, resource, tags);
        const state = entryState(entry, clock.now());
        if (entry && state === "fresh") {
          data[resource] = served(resource, entry, "l1", "fresh");
          if (heat !== "cold" && dueForRefreshAhead(entry, heat)) refreshInBackground(key, resource, id, background, entry.freshUntil);
        } else if (entry && state === "stale") {
          data[resource] = served(resource, entry, "l1", "stale");
          refreshInBackground(key, resource, id, background);
        } else {
          pending.push({ resource, key, fallback: state === "usable-on-error" ? entry : undefined, fallbackTier: "l1" });
        }
      }
      timings.l1 = clock.now() - started;

      // 2. L2: one round trip for everything L1 could not serve.
      // A burst of visitors for one cold product costs one L2 read and one
      // fill per isolate: while a key is being read or filled here, the
      // others go straight to the fill (whose lock claim also returns a
      // fresh L2 copy).
      const busy = (item: Pending) => filling.has(item.key) || reading.has(item.key);
      const joining = pending.filter(busy);
      const toRead = pending.filter((item) => !busy(item));
      if (l2 && toRead.length > 0) {
        started = clock.now();
        for (const item of toRead) reading.add(item.key);
        const values = await l2.readMany(toRead.map((item) => item.key)).finally(() => {
          for (const item of toRead) reading.delete(item.key);
        });
        const stillPending: Pending[] = joining;
        for (const [index, item] of toRead.entries()) {
          const value = values?.[index];
          const fromL2 = judged(value ? await decodeEntry(value) : undefined, id, item.resource, tagsOf(id));
          const best = newerOf(item.fallback, fromL2);
          const state = entryState(best, clock.now());
          if (best && best === fromL2 && (state === "fresh" || state === "stale")) {
            keep(item.key, best);
            data[item.resource] = served(item.resource, best, "l2", state);
            if (state === "stale") refreshInBackground(item.key, item.resource, id, background);
          } else {
            const usable = state === "usable-on-error" ? best : undefined;
            stillPending.push({ ...item, fallback: usable, fallbackTier: usable === fromL2 ? "l2" : "l1" });
          }
        }
        pending = stillPending;
        timings.l2 = clock.now() - started;
      }

      // 3. Origin, through the coalescing fill.
      if (pending.length > 0) {
        started = clock.now();
        const filled = await Promise.all(pending.map((item) => fillOne(id, item, background)));
        for (const result of filled) data[result.resource] = result;
        timings.origin = clock.now() - started;
      }

      return { data: data as PageData, timings };
    },
  };
}
