// The request path of the cache, in one read (docs/architecture.md#the-request-path):
//
//   for each resource the page needs:  L1 ──▶ L2 (one round trip for all) ──▶ origin (coalesced fill)
//
// fresh ⇒ serve; stale ⇒ serve now and refresh in the background, once;
// missing or expired ⇒ fill; the fill failed ⇒ serve what is usable on error.
//
// One fill per key in this isolate, shared by every request that wants it
// while it runs. The fill belongs to the request that started it (and runs
// under its `waitUntil`); the others never await its promise: they watch, on
// timers of their own, for the plain result it leaves (src/shared/leases.ts,
// pollUntil). The fill is a lease: once past its bound, whatever became of
// its request, the next reader starts a new one. lru-cache's own
// `fetchMethod` coalescing is not used for this: it cannot be taken over, and
// it aborts an in-flight fetch (an AbortController of the request that
// started it) from whichever request evicts or overwrites the key, which
// Workers refuse ("Cannot perform I/O on behalf of a different request").
import { LRUCache } from "lru-cache";
import type { Config } from "../config";
import { isAnswerAboutId, OriginError, type OriginClient, type OriginFailure } from "../origin/client";
import { PAGE_SUBJECT, type ResourceName, type ResourceTypes } from "../origin/resources";
import type { Clock } from "../shared/clock";
import { deadlinesFor, entryState, markedStale, newerOf, type Entry } from "./entry";
import { createFill, fillBoundMs, type FillContext } from "./fill";
import { createFillBatch, type FillBatch } from "./fillBatch";
import { createLeaseTable, pollUntil, within } from "../shared/leases";
import { entryKey } from "./keys";
import { createHotness, type Heat } from "./hotness";
import { DEFAULTS } from "../config/defaults";
import type { L2 } from "./l2";
import { createL2Entries, type L2ValueStats } from "./l2Entries";

type Tier = "l1" | "l2" | "origin";

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

type PageData = { [R in ResourceName]?: Served<ResourceTypes[R]> };

interface Timings {
  l1: number;
  l2: number;
  origin: number;
}

/** The purges this isolate knows of (see invalidation/watcher.ts). */
interface PurgeKnowledge {
  /** What they make of an entry: still good, stale (soft purge), or gone (hard purge). */
  judge(entry: Entry, id: string, resource: ResourceName, tags: readonly string[]): "ok" | "stale" | "gone";
  /** When the resource was last purged (0 if never): see PurgedAt. */
  purgedAt(id: string, resource: ResourceName, tags: readonly string[]): PurgedAt;
}

/** When a resource was last purged: copies fetched before `hard` are not to be used at all, before `any` not as fresh. */
export interface PurgedAt {
  hard: number;
  any: number;
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
 * What purges do to L1. A fill in flight is not touched: its result carries
 * its fetch time, and the purge judges it when it is read.
 */
export interface L1Purging {
  forget(key: string): void;
  markStale(key: string, at: number): void;
  forgetAll(): void;
}

export interface ReadThrough extends L1Purging {
  /**
   * Reads the resources of one product. `background` receives work that must
   * outlive the response. When the product is among them and turns out absent
   * or failed, the others are left out unless L1 or L2 had them: there is no
   * page to show them on, and the origin is not asked for them.
   */
  read(id: string, resources: readonly ResourceName[], background: (work: Promise<unknown>) => void): Promise<{ data: PageData; timings: Timings }>;
  /**
   * The copies of one resource of many products that this isolate can serve
   * without the origin: from L1, then from L2 in one round trip. For lists
   * (the home page), which must stay cheap however many products they show.
   */
  readCached<R extends ResourceName>(ids: readonly string[], resource: R, background: (work: Promise<unknown>) => void): Promise<Map<string, ResourceTypes[R]>>;
  readonly l1: LRUCache<string, Stored>;
  readonly l2: L2 | null;
  /** Fills in flight in this isolate, and those taken over from a request that vanished or overran its bound. */
  fillStats(): { inFlight: number; takenOver: number };
  /** Values read from L2 that were not valid entries, and how many of them were deleted. */
  l2ValueStats(): L2ValueStats;
}

/**
 * What L1 holds for an entry: its deadlines and its data as JSON text, parsed
 * again when read. A JSON string of ASCII or Latin-1 text takes one byte per
 * character in V8, where the parsed object graph takes several times that
 * (object headers, property slots, a string each): so the same bytes of L1
 * hold about twice as many products, at the price of a JSON.parse per read of
 * a few microseconds (bench/profile). A product's tags, which purge judging
 * reads on every request, are kept parsed beside it.
 */
interface Stored extends Omit<Entry, "data"> {
  json: string;
  tags?: readonly string[];
}

/** Bytes an L1 slot costs besides its JSON: the Stored object, the string's header, lru-cache's slots for it. */
const STORED_OVERHEAD_BYTES = 192;

/** Bytes L1 charges for a stored entry: its JSON at one byte a character, or two where V8 must keep it as UTF-16. */
export function storedSize(json: string): number {
  return (/[^\u0000-\u00ff]/.test(json) ? 2 * json.length : json.length) + STORED_OVERHEAD_BYTES;
}

function toStored(entry: Entry): Stored {
  const { data, ...deadlines } = entry;
  const tags = (data as { tags?: unknown } | null)?.tags;
  return { ...deadlines, json: JSON.stringify(data), ...(Array.isArray(tags) ? { tags: tags as string[] } : {}) };
}

/** The entry again; its JSON was validated before it was stored (an origin answer, or an L2 value through the codec). */
function fromStored(stored: Stored): Entry {
  const { json, tags: _tags, ...deadlines } = stored;
  return { ...deadlines, data: JSON.parse(json) as unknown };
}

/** A fill in flight: the end of its lease, and, once it settled, its outcome (plain data, read by the requests that joined it). */
interface Flight {
  until: number;
  settled?: { entry: Entry } | { error: unknown };
}

/** A key's L2 read counts as under way this long past its budget (a read whose request vanished lapses then). */
const READ_LEASE_GRACE_MS = 50;

/** An origin answer about one id that the tier could not use, and the "no data" entry that stands for it until it lapses. */
interface Rejection {
  failure: OriginFailure;
  noData: Entry;
}

/** One page read: where its background work goes, and the batch its fills' Redis calls share. */
interface PageRequest {
  background: (work: Promise<unknown>) => void;
  batch?: FillBatch;
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
  const random = deps.random ?? Math.random;
  const l2Entries = createL2Entries({ config, l2, clock });
  const fill = createFill({
    ...deps,
    l2Entries,
    random,
    sleep: deps.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms))),
  });

  /** Fills in flight in this isolate, by key: leases that end at the fill's bound. */
  const fills = createLeaseTable<string, Flight>({ clock });
  let takenOver = 0;
  /** Keys a request of this isolate is reading from L2 right now (leases that end with the read's budget). */
  const reading = createLeaseTable<string, true>({ clock });

  const l1 = new LRUCache<string, Stored>({
    // The byte bound is the only bound that protects a 128 MB isolate (lru-cache #227).
    maxSize: config.l1MaxBytes,
    sizeCalculation: (stored) => storedSize(stored.json),
    // lru-cache drops an entry once it is no longer usable even on error;
    // the entry's own deadlines decide between fresh and stale before that.
    ttlAutopurge: false,
    perf: { now: () => clock.now() },
  });

  /**
   * Origin answers about one id that the tier could not use (a 400 or 422, a
   * body that breaks the contract: origin/client.ts, isAnswerAboutId), by
   * key, until they lapse. Such a key is not asked again meanwhile, by a
   * fill or a refresh, so junk ids and an origin bug for one product cost one
   * call per `rejectedAnswerTtl`, where each would otherwise be asked on
   * every request. A reader with a copy at hand serves it; one without gets
   * the "no data" entry (a 404 page for a product).
   */
  const rejections = new LRUCache<string, Rejection>({ max: DEFAULTS.rejectedAnswersMax });

  function rejectionOf(key: string): Rejection | undefined {
    const rejection = rejections.get(key);
    if (rejection && rejection.noData.freshUntil > clock.now()) return rejection;
    if (rejection) rejections.delete(key);
    return undefined;
  }

  function rememberRejection(key: string, resource: ResourceName, failure: OriginFailure): Rejection {
    const policy = config.policies[resource];
    const ttl = Math.min(policy.negativeTtl, DEFAULTS.rejectedAnswerTtl);
    const deadlines = deadlinesFor(false, { ...policy, negativeTtl: ttl }, clock.now(), config.ttlJitter, random);
    const rejection = { failure, noData: { data: null, version: 0, ...deadlines } };
    rejections.set(key, rejection);
    return rejection;
  }

  const hotness = createHotness({ warmPerMinute: config.warmPerMinute, hotPerMinute: config.hotPerMinute, clock });
  /**
   * How much of the refresh-ahead share this isolate uses, drawn once in
   * [0.5, 1). Isolates hold copies of one L2 write, with the same deadlines:
   * with the same share they would all refresh a popular product at the same
   * moment, race for its lock, and the losers would poll L2 until the
   * winner wrote. Apart, the first to refresh writes L2, and the others'
   * claims find its copy there (one call, no lock, no origin fetch).
   */
  const refreshAheadSpread = 0.5 + random() / 2;

  /** A warm or hot product's fresh entry near its end: refreshed now, so that it is never served stale. */
  function dueForRefreshAhead(entry: Entry, heat: Exclude<Heat, "cold">): boolean {
    const margin = (entry.freshUntil - entry.fetchedAt) * DEFAULTS.refreshAheadShare[heat] * refreshAheadSpread;
    return entry.freshUntil - clock.now() <= margin;
  }

  /** The entry as known purges leave it: unchanged, marked stale, or gone. */
  function judged(entry: Entry | undefined, id: string, resource: ResourceName, tags: readonly string[]): Entry | undefined {
    if (!entry || !deps.purges) return entry;
    const verdict = deps.purges.judge(entry, id, resource, tags);
    if (verdict === "gone") return undefined;
    return verdict === "stale" ? markedStale(entry, clock.now()) : entry;
  }

  /** The page subject's tags (the product's), which tag purges match, from the best copy this isolate has. */
  function tagsOf(id: string): readonly string[] {
    return l1.peek(entryKey(config.keyPrefix, PAGE_SUBJECT, id))?.tags ?? [];
  }

  function fillContext(resource: ResourceName, id: string, { background, batch }: PageRequest): FillContext {
    const purged = deps.purges?.purgedAt(id, resource, tagsOf(id)) ?? { hard: 0, any: 0 };
    return { resource, id, background, batch, notBefore: purged.hard, freshAfter: purged.any, freshBeyond: 0 };
  }

  function keep(key: string, entry: Entry): void {
    l1.set(key, toStored(entry), { ttl: Math.max(1, entry.errorUntil - clock.now()) });
  }

  function fromL1(key: string): Entry | undefined {
    const stored = l1.peek(key);
    return stored && fromStored(stored);
  }

  /**
   * Joins the fill of `key` in flight in this isolate, or starts one in this
   * request. The fill runs under this request's `waitUntil`, so that the
   * requests that joined it get their answer even if this visitor leaves.
   */
  function fillOrJoin(key: string, context: FillContext): { flight: Flight; work?: Promise<Entry> } {
    const running = fills.holder(key);
    if (running) return { flight: running };
    const rejection = rejectionOf(key);
    if (rejection) {
      const error = new OriginError(context.resource, rejection.failure, "the origin's last answer about this id was of no use");
      return { flight: { until: clock.now(), settled: { error } } };
    }
    // Those who join wait on their own timers until `until` at most: a request
    // whose only pending work is another request's I/O is taken for hung and
    // cancelled in Workers, and this bound is what it costs if that request goes away.
    const flight: Flight = { until: clock.now() + fillBoundMs(config, context.resource) };
    const work = fill(key, context).then(
      (entry) => {
        keep(key, entry);
        flight.settled = { entry };
        fills.release(key, flight);
        return entry;
      },
      (error: unknown) => {
        if (isAnswerAboutId(error)) rememberRejection(key, context.resource, error.failure);
        flight.settled = { error };
        fills.release(key, flight);
        throw error;
      },
    );
    fills.take(key, flight.until, flight);
    context.background(work.catch(() => undefined));
    return { flight, work };
  }

  function refreshInBackground(key: string, resource: ResourceName, id: string, request: PageRequest, freshBeyond = 0): void {
    // At most one fill per key: a refresh already under way is left alone,
    // not repeated, and not waited for.
    if (fills.holder(key)) return;
    // Under load the origin's slots go to visitors with nothing to show: this
    // one has a copy, and a later request will refresh it.
    if (!deps.origin.acceptsRefresh()) return;
    fillOrJoin(key, { ...fillContext(resource, id, request), freshBeyond, refresh: true });
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

  /**
   * The fill's result, waited for on this request's own timer until the
   * fill's bound; a joined fill that overran it (its request vanished) is
   * taken over once.
   */
  async function awaitFill(key: string, context: FillContext): Promise<{ entry: Entry; joined: boolean }> {
    for (let attempt = 0; attempt < 2; attempt++) {
      const { flight, work } = fillOrJoin(key, context);
      if (work) {
        const entry = await within(work, flight.until - clock.now(), () => undefined);
        if (entry) return { entry, joined: false };
        break;
      }
      const settled = await pollUntil(() => flight.settled, flight.until, clock.now);
      if (settled && "entry" in settled) return { entry: settled.entry, joined: true };
      if (settled) throw settled.error;
      // Another reader may have taken it over and finished meanwhile.
      const landed = fromL1(key);
      if (landed && landed.fetchedAt >= context.freshAfter && entryState(landed, clock.now()) === "fresh") return { entry: landed, joined: true };
      takenOver++;
    }
    throw new OriginError(context.resource, "timeout", "the fill took longer than its bound");
  }

  async function fillOne(id: string, item: Pending, request: PageRequest): Promise<Served<unknown>> {
    const context = fillContext(item.resource, id, request);
    const forward = item.fallback ? "stale" : "miss";
    try {
      const { entry, joined } = await awaitFill(item.key, context);
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
      const inL1 = judged(fromL1(item.key), id, item.resource, tagsOf(id));
      const fallback = newerOf(newerOf(item.fallback, fromFill), inL1);
      if ((!fallback || entryState(fallback, clock.now()) === "expired") && l2 && l2.breaker.state() !== "closed") {
        // A double fault: the origin failed, and L2 was skipped because its
        // breaker is open (Redis failed a moment ago). Another isolate may
        // have stored this entry since: one read, as the last resort before a 503.
        const [value] = await l2.readMany([item.key], { force: true, background: request.background });
        const lastResort = judged(value ? l2Entries.read(item.key, value, item.resource, id, request.background) : undefined, id, item.resource, tagsOf(id));
        const state = entryState(lastResort, clock.now());
        if (lastResort && state !== "expired") {
          keep(item.key, lastResort);
          return served(item.resource, lastResort, "l2", state === "fresh" ? "fresh" : "stale-if-error", { forward, failure });
        }
      }
      if (fallback && entryState(fallback, clock.now()) !== "expired") {
        const tier = fallback === item.fallback ? (item.fallbackTier ?? "l1") : fallback === fromFill ? "l2" : "l1";
        return served(item.resource, fallback, tier, "stale-if-error", { forward, failure });
      }
      // Nothing to serve, and the origin's answer was about this id: "no
      // data" for a short while, kept in L1 as a 404 would be.
      if (isAnswerAboutId(error)) {
        const { noData } = rejectionOf(item.key) ?? rememberRejection(item.key, item.resource, error.failure);
        keep(item.key, noData);
        return served(item.resource, noData, "origin", "fresh", { forward, failure });
      }
      return { resource: item.resource, outcome: "failed", data: null, collapsed: false, forward, failure };
    }
  }

  async function readPage(id: string, resources: readonly ResourceName[], request: PageRequest): Promise<{ data: PageData; timings: Timings }> {
    const { background } = request;
    const data: Record<string, Served<unknown>> = {};
    const timings: Timings = { l1: 0, l2: 0, origin: 0 };

    // 1. L1
    let started = clock.now();
    let pending: Pending[] = [];
    const tags = tagsOf(id);
    const heat = hotness.offer(id);
    for (const resource of resources) {
      const key = entryKey(config.keyPrefix, resource, id);
      const entry = judged(fromL1(key), id, resource, tags);
      const state = entryState(entry, clock.now());
      if (entry && state === "fresh") {
        data[resource] = served(resource, entry, "l1", "fresh");
        if (heat !== "cold" && dueForRefreshAhead(entry, heat)) refreshInBackground(key, resource, id, request, entry.freshUntil);
      } else if (entry && state === "stale") {
        data[resource] = served(resource, entry, "l1", "stale");
        refreshInBackground(key, resource, id, request);
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
    const busy = (item: Pending) => fills.holder(item.key) !== undefined || reading.holder(item.key) !== undefined;
    const joining = pending.filter(busy);
    const toRead = pending.filter((item) => !busy(item));
    if (l2 && toRead.length > 0) {
      started = clock.now();
      const readUntil = started + config.l2TimeoutMs + READ_LEASE_GRACE_MS;
      for (const item of toRead) reading.take(item.key, readUntil, true);
      const values = await l2.readMany(toRead.map((item) => item.key), { background }).finally(() => {
        for (const item of toRead) reading.release(item.key, true);
      });
      const stillPending: Pending[] = joining;
      for (const [index, item] of toRead.entries()) {
        const value = values?.[index];
        const fromL2 = judged(value ? l2Entries.read(item.key, value, item.resource, id, background) : undefined, id, item.resource, tagsOf(id));
        const best = newerOf(item.fallback, fromL2);
        const state = entryState(best, clock.now());
        if (best && best === fromL2 && (state === "fresh" || state === "stale")) {
          keep(item.key, best);
          data[item.resource] = served(item.resource, best, "l2", state);
          if (state === "stale") refreshInBackground(item.key, item.resource, id, request);
        } else {
          const usable = state === "usable-on-error" ? best : undefined;
          stillPending.push({ ...item, fallback: usable, fallbackTier: usable === fromL2 ? "l2" : "l1" });
        }
      }
      pending = stillPending;
      timings.l2 = clock.now() - started;
    }

    // 3. Origin, through the coalescing fill. The other resources are about
    // the page's subject (the product, origin/resources.ts): when it must be
    // filled, it goes first, and when there is none to show (absent, or
    // failed with nothing usable) the others are not fetched at all. An id
    // that names no product costs one origin fetch, not four; a cold page
    // pays one origin round trip more.
    if (pending.length > 0) {
      started = clock.now();
      const subject = pending.find((item) => item.resource === PAGE_SUBJECT);
      if (subject && pending.length > 1) {
        data[PAGE_SUBJECT] = await fillOne(id, subject, request);
        const rest: Pending[] = [];
        for (const item of pending) {
          if (item === subject) continue;
          // Filled by another request while this one waited for the subject: no fill of its own.
          const landed = judged(fromL1(item.key), id, item.resource, tagsOf(id));
          if (landed && entryState(landed, clock.now()) === "fresh") data[item.resource] = served(item.resource, landed, "l1", "fresh");
          else rest.push(item);
        }
        pending = rest;
      }
      const subjectOutcome = data[PAGE_SUBJECT]?.outcome;
      if (subjectOutcome !== undefined && subjectOutcome !== "found") pending = [];
      const filled = await Promise.all(pending.map((item) => fillOne(id, item, request)));
      for (const result of filled) data[result.resource] = result;
      timings.origin = clock.now() - started;
    }

    return { data: data as PageData, timings };
  }

  return {
    l1,
    l2,
    fillStats: () => ({ inFlight: fills.size(), takenOver }),
    l2ValueStats: () => ({ ...l2Entries.stats }),
    forget(key) {
      l1.delete(key);
      rejections.delete(key);
    },
    markStale(key, at) {
      const entry = fromL1(key);
      if (entry) keep(key, markedStale(entry, at));
      rejections.delete(key);
    },
    forgetAll() {
      l1.clear();
      rejections.clear();
    },
    async readCached(ids, resource, background) {
      const found = new Map<string, any>();
      const usable = (entry: Entry | undefined) => entry !== undefined && entry.data !== null && entryState(entry, clock.now()) !== "expired";
      const missing: { id: string; key: string }[] = [];
      for (const id of ids) {
        const key = entryKey(config.keyPrefix, resource, id);
        const entry = judged(fromL1(key), id, resource, tagsOf(id));
        if (usable(entry)) found.set(id, entry!.data);
        else missing.push({ id, key });
      }
      if (!l2 || missing.length === 0) return found;
      const values = await l2.readMany(missing.map(({ key }) => key), { background });
      for (const [index, { id, key }] of missing.entries()) {
        const value = values[index];
        const entry = judged(value ? l2Entries.read(key, value, resource, id, background) : undefined, id, resource, tagsOf(id));
        if (!usable(entry)) continue;
        keep(key, entry!);
        found.set(id, entry!.data);
      }
      return found;
    },

    async read(id, resources, background) {
      // Writes that L2 could not take while it was failing go out once it answers again.
      if (l2 && l2.backlogSize() > 0) background(l2.flushBacklog());
      // The Redis calls of this read's fills and refreshes, made together.
      return readPage(id, resources, { background, batch: l2 ? createFillBatch(l2, background) : undefined });
    },
  };
}
