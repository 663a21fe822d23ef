// The cache's read path for one page (docs/architecture.md#the-request-path):
// `read(id, resources)` does all the work; nothing calls a `set`. The steps
// (L1, the location tier, L2, the fill and the origin) are pageSteps.ts's,
// what they pass on pageRequest.ts's. This file wires them, puts a page's
// copy in the location tier once the last of its fills landed
// (`keepInLocation`), and applies purge judgements to every copy on the way
// (PurgeKnowledge below).
import type { Background } from "../shared/subrequests";
import { isCore, type Config } from "../config";
import type { OriginClient } from "../origin/client";
import { PAGE_SUBJECT, RESOURCES, type ResourceName, type ResourceTypes } from "../origin/resources";
import type { Clock } from "../shared/clock";
import { createLeaseTable, ISOLATE_LATE_MS } from "../shared/leases";
import { entryState, markedStale, onlyForErrorsFrom, type Entry } from "./entry";
import { createFill, type FillContext } from "./fill/fill";
import { createFillBatch } from "./l2/fillBatch";
import { createOutbox, type OutboxStats } from "./l2/outbox";
import { createFlights, type Flights } from "./fill/flights";
import { createHotness } from "./hotness";
import { entryKey } from "./keys";
import { createL1, type L1 } from "./l1";
import type { L2, ReadAlong } from "./l2/l2";
import { createL2Entries, type L2ValueStats } from "./l2/l2Entries";
import { keptWith, type LocationCache, type LocationPart, type LocationStats } from "./location/location";
import { filledMeanwhile, underWay, readCopies, readFromL1, readFromL2, readFromLocation, readFromOrigin, shedPage, type PageTools } from "./pageSteps";
import { visitorLeft, type LaterParts, type PageData, type PageRead, type PageRequest, type Pending, type Timings } from "./pageRequest";
import type { Departures, PageAdmission } from "../overload";
import type { LagMeter } from "../shared/lag";
import { createRejections } from "./fill/rejections";
import type { PurgeStamp } from "./location/purgeStamp";
import { createRefreshes } from "./fill/refreshes";
import type { Served } from "./served";

/** Fills in flight and taken over (fill/flights.ts), and the claims and writes of the outbox (null without L2). */
export type FillStats = ReturnType<Flights["stats"]> & { outbox: OutboxStats | null };

/** The purges this isolate knows of (see invalidation/watcher.ts). */
interface PurgeKnowledge {
  /** What they make of an entry: still good, stale (soft purge), or gone (hard purge). */
  judge(entry: Entry, id: string, resource: ResourceName, tags: readonly string[]): "ok" | "stale" | "gone";
  /** When the resource was last purged (0 if never): see PurgedAt. */
  purgedAt(id: string, resource: ResourceName, tags: readonly string[]): PurgedAt;
  /** The position in the purge log this isolate has read up to (null: not yet read). */
  stamp(): PurgeStamp | null;
  /** Whether this isolate knows every id purge recorded after `stamp`. */
  vouches(stamp: PurgeStamp): boolean;
  /** Copies fetched before this may have been purged by purges not yet read here (0: none; see invalidation/watcher.ts). */
  unsureBefore?(): number;
  /** What a lock claim going out now reads along for them (the purge log's position; null: nothing now). */
  readAlong?(): ReadAlong | null;
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
  /** The location tier (null or absent: off, or no Cache API here). */
  location?: LocationCache | null;
  clock: Clock;
  random?: () => number;
  sleep?: (ms: number) => Promise<void>;
  /** Which pages may start new work, and what becomes of work nobody waits for (none in unit tests: all is admitted). */
  overload?: { pages: PageAdmission; departures: Departures; lag: Pick<LagMeter, "lagMs"> };
}

/**
 * What purges do to L1. A fill in flight is not touched: its result carries
 * its fetch time, and the purge judges it when it is read.
 */
export interface L1Purging {
  forget(key: string): void;
  markStale(key: string, at: number): void;
  /** Every L1 entry usable only when the origin fails for it (see L1.keepOnlyForErrors). */
  keepOnlyForErrors(at: number): void;
}

/** `streams`: parts the page may go on without, once the others are read, and get in its PageRead's `later` (a streamed page). */
type ReadOptions = Pick<PageRequest, "listed" | "visitor" | "client" | "streams">;

export interface ReadThrough extends L1Purging {
  /**
   * Reads the resources of one product (which of them a product absent or
   * failed leaves out: pageSteps.ts, readFromOrigin). `background` receives
   * work that must outlive the response.
   */
  read(id: string, resources: readonly ResourceName[], background: Background, options?: ReadOptions): Promise<PageRead>;
  /**
   * The copies of one resource of many products that this isolate can serve
   * without the origin: from L1, then from L2 in one round trip. For lists
   * (the home page), which must stay cheap however many products they show.
   */
  readCached<R extends ResourceName>(ids: readonly string[], resource: R, background: Background): Promise<Map<string, ResourceTypes[R]>>;
  readonly l1: L1;
  readonly l2: L2 | null;
  /** Fills in flight in this isolate, and those taken over from a request that vanished or overran its bound. */
  fillStats(): FillStats;
  /** Values read from L2 that were not valid entries, and how many of them were deleted. */
  l2ValueStats(): L2ValueStats;
  /** What the location tier did in this isolate (null: off). */
  locationStats(): LocationStats | null;
}

/**
 * Whether Redis left a call about `key` unanswered because it does not
 * answer (it hangs), not because of its pace or this isolate's: it answered
 * this isolate before (`answeredBefore`, l2.answered(key) when the call was
 * sent, is not 0: a fresh isolate's first calls open a connection and may
 * be slow, and a herd after a deploy must not take that for silence),
 * nothing since, and this isolate reads its replies on time.
 */
export function redisSilence(l2: Pick<L2, "answered"> | null, isolateLate: () => boolean) {
  return (key: string, answeredBefore: number): boolean => l2 !== null && answeredBefore > 0 && l2.answered(key) === answeredBefore && !isolateLate();
}

export function createReadThrough(deps: ReadThroughDeps): ReadThrough {
  const { config, l2, clock } = deps;
  const random = deps.random ?? Math.random;
  const l1 = createL1({ maxBytes: config.l1MaxBytes, clock });
  const rejections = createRejections({ config, clock, random });
  const l2Entries = createL2Entries({ config, l2, clock });
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const overload = deps.overload;
  /**
   * Running later than it reads replies on time (shared/leases.ts), this
   * isolate may read a reply after its budget ran out, so that a call without
   * an answer is not taken for a Redis that hangs; without the overload parts (unit tests), always.
   */
  const isolateLate = () => (overload ? overload.lag.lagMs() > ISOLATE_LATE_MS : true);
  const redisSilent = redisSilence(l2, isolateLate);
  const location = deps.location ?? null;
  /** The isolate's lock claims and fill writes on their way to L2, which claim calls carry (l2/outbox.ts). */
  const outbox = l2 && createOutbox(l2, { clock, sleep, maxWaitMs: config.lockTtlMs, readAlong: () => deps.purges?.readAlong?.() ?? null });
  const fillFromL2AndOrigin = createFill({
    ...deps,
    outbox,
    l2Entries,
    random,
    sleep,
    departures: overload?.departures,
    redisSilent,
  });
  /** A fill's entry (from L2 or the origin) goes to the location tier with the other parts of its page, once they landed too. */
  const flights = createFlights({
    config,
    clock,
    fill: fillFromL2AndOrigin,
    l1,
    rejections,
    landed: (_key, context) => keepInLocation(context.id, context.resource, context.background),
  });
  const hotness = createHotness({ hotPerMinute: config.hotPerMinute, clock });
  /** The page subject's tags (the product's), which tag purges match, from the best copy this isolate has. */
  function tagsOf(id: string): readonly string[] {
    return l1.tags(entryKey(config.keyPrefix, PAGE_SUBJECT, id)) ?? [];
  }

  function judged(entry: Entry | undefined, id: string, resource: ResourceName, tags?: readonly string[]): Entry | undefined {
    if (!entry || !deps.purges) return entry;
    const verdict = deps.purges.judge(entry, id, resource, tags ?? tagsOf(id));
    if (verdict === "gone") return undefined;
    return verdict === "stale" ? markedStale(entry, clock.now()) : entry;
  }

  /**
   * L1's copy as known purges leave it. A copy fetched before purges this
   * isolate is still reading (a bulk re-price read in the background:
   * invalidation/watcher.ts) is usable only on error: the page takes Redis's
   * copy, which those purges' ids were applied to, with its fill's claim.
   */
  function fromL1(key: string, id: string, resource: ResourceName): Entry | undefined {
    const entry = judged(l1.entry(key), id, resource);
    if (!entry || entry.fetchedAt >= (deps.purges?.unsureBefore?.() ?? 0)) return entry;
    return { ...entry, ...onlyForErrorsFrom(entry, clock.now()) };
  }

  /**
   * Puts the location tier's copy of `id`'s parts kept with `resource`
   * (location.ts, keptWith): what L1 holds of each, as this isolate's purge
   * knowledge leaves it, stamped with the purge-log position it has read.
   * Sound because the parts are judged now: a purge up to that position has
   * made each part gone (left out) or stale already. Not while another of
   * those parts is being filled here: the last fill of a page to land puts
   * the copy, once, with all of them. Not a part this isolate keeps only as
   * its own "no data" after a useless origin answer (fill/rejections.ts).
   */
  function keepInLocation(id: string, resource: ResourceName, background: Background): void {
    if (!location) return;
    const resources = keptWith(resource);
    const keys = resources.map((part) => entryKey(config.keyPrefix, part, id));
    if (keys.some((key) => flights.running(key))) return;
    const parts: LocationPart[] = [];
    for (const [index, part] of resources.entries()) {
      // As judged here, not as fromL1 leaves it while purges are read ahead: the copy is stamped with the
      // position this isolate has read up to, and an isolate that takes it judges it by the purges after that.
      const entry = rejections.of(keys[index]!) ? undefined : judged(l1.entry(keys[index]!), id, part);
      if (entry) parts.push({ resource: part, entry });
    }
    location.put(id, parts, deps.purges?.stamp() ?? null, background);
  }

  function fillContext(resource: ResourceName, id: string, { background, batch }: PageRequest): FillContext {
    const purgedAt = () => deps.purges?.purgedAt(id, resource, tagsOf(id)) ?? { hard: 0, any: 0 };
    const purged = purgedAt();
    return { resource, id, background, batch, notBefore: purged.hard, freshAfter: purged.any, purgedAt: () => purgedAt().any, freshBeyond: 0 };
  }

  const refreshes = createRefreshes({ clock, random, origin: deps.origin, flights, fillContext });
  const tools: PageTools = {
    config,
    clock,
    l1,
    l2,
    l2Entries,
    location,
    flights,
    rejections,
    reading: createLeaseTable<string, true>({ clock }),
    lookingUpForRefresh: createLeaseTable<string, true>({ clock }),
    judged,
    fromL1,
    // Without purge knowledge (unit tests of the life cycle) every copy is vouched for: there are no purges.
    vouches: (stamp) => deps.purges?.vouches(stamp) ?? true,
    fillContext,
    keepInLocation,
    ...refreshes,
    redisSilent,
  };

  /** The tiers a page reads past L1, in order (cache/pageSteps.ts): each serves what it can and passes the rest on. */
  const tiersPastL1 = [
    ...(location ? [{ name: "location" as const, read: readFromLocation }] : []),
    ...(l2 ? [{ name: "l2" as const, read: readFromL2 }] : []),
  ];

  /**
   * L1, then, for what it lacks, the location tier, L2 and the origin: new
   * work, started only when the isolate admits it (overload/admission.ts)
   * and only while the visitor is there. A page whose visitor left gets no
   * more steps; the parts still pending are left out (nobody reads the answer).
   */
  async function readPage(id: string, resources: readonly ResourceName[], request: PageRequest): Promise<PageRead> {
    const data: Record<string, Served<unknown>> = {};
    const timings: Timings = {};
    let started: number;
    let pending = readFromL1(tools, id, resources, request, data);
    if (pending.length === 0 || visitorLeft(request)) return { data: data as PageData, timings };
    const readRest = async () => {
      // The visitor may have left while the page waited for its turn.
      if (visitorLeft(request)) return;
      for (const tier of tiersPastL1) {
        started = clock.now();
        pending = await tier.read(tools, id, pending, request, data);
        timings[tier.name] = clock.now() - started;
        if (pending.length === 0 || visitorLeft(request)) return;
      }
      if (tiersPastL1.length > 0) pending = filledMeanwhile(tools, id, pending, data);
      if (pending.length > 0) {
        started = clock.now();
        await readFromOrigin(tools, id, pending, request, data);
        timings.origin ??= clock.now() - started;
      }
    };
    /** A core part the page has no copy of: shed, the page is a 503. */
    const bare = (item: Pending) => isCore(config, item.resource) && entryState(item.fallback, clock.now()) === "expired";
    const readAdmitted = async (): Promise<PageRead> => {
      if (!deps.overload) {
        await readRest();
        return { data: data as PageData, timings };
      }
      const subject = pending.find((item) => item.resource === PAGE_SUBJECT);
      const overShare = await deps.overload.pages.admitPage({
        subjectKey: subject?.key,
        joins: () => (subject ? underWay(tools, subject.key) : pending.every((item) => underWay(tools, item.key))),
        // A copy the page would not show (stock kept only for the origin's failures: "availability unknown") is no such
        // copy: shed at once, a saturated isolate showed that default on a fifth of its pages.
        withCopies: pending.every((item) => item.fallback !== undefined && RESOURCES[item.resource].showStaleIfError),
        sheddable: !pending.some(bare),
        async read(afterWait) {
          // A page that waited for its turn looks at L1 again first (and again before the origin, in readRest).
          if (afterWait) pending = filledMeanwhile(tools, id, pending, data);
          if (pending.length > 0) await readRest();
        },
        async shed(why) {
          pending = filledMeanwhile(tools, id, pending, data);
          // The last resort before a 503, as after a failed fill (pageSteps.ts, fallBack): a page refused for busyness
          // with a core part it has no copy of reads L2 once (as for an unlisted product: no claims), for a copy another
          // isolate filled while it waited. Not a client's excess (a 429): its next page would read again.
          if (why === "busy" && pending.some(bare)) pending = await readFromL2(tools, id, pending, { ...request, listed: false }, data);
          if (pending.length === 0) return undefined;
          return shedPage(tools, pending, data) ? "stale" : "refused";
        },
        visitor: request.visitor,
        client: request.client,
      });
      return overShare ? { data: data as PageData, timings, overShare } : { data: data as PageData, timings };
    };
    if (!pending.some((item) => request.streams?.includes(item.resource))) return readAdmitted();
    // Answered as soon as the core is read (pageSteps.ts, readFromOrigin); the read, and its admission, go on for the rest
    // while the visitor is there, or until the page leaves it (a stream cancelled).
    const stop = new AbortController();
    request.visitor = request.visitor ? AbortSignal.any([request.visitor, stop.signal]) : stop.signal;
    let parts: LaterParts = {};
    const coreRead = new Promise<undefined>((resolve) => {
      request.coreRead = (later) => {
        parts = later;
        timings.origin = clock.now() - started;
        resolve(undefined);
      };
    });
    const whole = readAdmitted();
    // Once the core is read, each later part's read says what became of it: the whole read's end is nobody's answer.
    whole.catch(() => undefined);
    return (await Promise.race([whole, coreRead])) ?? { data: data as PageData, timings, later: { parts, leave: () => stop.abort() } };
  }

  return {
    l1,
    l2,
    fillStats: () => ({ ...flights.stats(), outbox: outbox?.stats() ?? null }),
    l2ValueStats: () => ({ ...l2Entries.stats }),
    locationStats: () => (location ? { ...location.stats } : null),
    forget(key) {
      l1.cache.delete(key);
      rejections.forget(key);
    },
    markStale(key, at) {
      l1.markStale(key, at);
      rejections.forget(key);
    },
    keepOnlyForErrors(at) {
      l1.keepOnlyForErrors(at);
      rejections.forgetAll();
    },
    readCached: (ids, resource, background) => readCopies(tools, ids, resource, background),

    async read(id, resources, background, options) {
      // Writes that L2 could not take while it was failing go out once it answers again;
      // while it is skipped, a PING now and then asks whether it does.
      if (l2) {
        l2.recoverIfDue(background);
        if (l2.backlogSize() > 0) background(l2.flushBacklog());
      }
      // This read's fills claim their locks and poll for other isolates' results together (l2/fillBatch.ts).
      return readPage(id, resources, {
        ...options,
        background,
        batch: l2 ? createFillBatch(l2, sleep, background, outbox ?? undefined) : undefined,
        hot: hotness.offer(id),
      });
    },
  };
}
