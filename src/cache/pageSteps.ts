// The steps of one page's read (docs/architecture.md#the-request-path): L1,
// the location tier (one copy for the page), L2 (one round trip for all),
// the origin (coalesced fills). Each tier reads its copies its own way and
// vouches for what it can; then one judgement (`judge`) serves or keeps
// every copy alike, and each step takes what the one before left pending.
import type { Background } from "../shared/subrequests";
import { isCore, type Config } from "../config";
import { failureOf, isAnswerAboutId } from "../origin/failure";
import { Departed } from "../overload";
import { PAGE_SUBJECT, type ResourceName, type ResourceTypes } from "../origin/resources";
import type { Clock } from "../shared/clock";
import { ISOLATE_LATE_MS, leaseFor, within, type LeaseTable } from "../shared/leases";
import { entryState, newerOf, type Entry } from "./entry";
import type { FillContext } from "./fill/fill";
import type { Flights } from "./fill/flights";
import { entryKey } from "./keys";
import { tagsOf, type L1 } from "./l1";
import type { L2 } from "./l2/l2";
import type { L2Entries } from "./l2/l2Entries";
import type { LocationCache } from "./location/location";
import type { PurgeStamp } from "./location/purgeStamp";
import type { RefreshTools } from "./fill/refreshes";
import type { Rejections } from "./fill/rejections";
import { failed, served, type Served, type Tier } from "./served";
import { visitorLeft, type Pending, type PageRequest } from "./pageRequest";

/** What the steps read and fill through: the read-through's parts (readThrough.ts). */
export interface PageTools extends RefreshTools {
  config: Config;
  clock: Clock;
  l1: L1;
  l2: L2 | null;
  l2Entries: L2Entries;
  /** The location tier (null: off, or no Cache API here). */
  location: LocationCache | null;
  flights: Flights;
  rejections: Rejections;
  /** Keys a request of this isolate is reading from L2 right now (leases that end with the read's budget). */
  reading: LeaseTable<string, true>;
  /** Products whose page copy a request is looking up in the location tier for refreshes (refreshParts), leases. */
  lookingUpForRefresh: LeaseTable<string, true>;
  /** The entry as known purges leave it: unchanged, marked stale, or gone. `tags`: the product's, when L1 has no copy of it. */
  judged(entry: Entry | undefined, id: string, resource: ResourceName, tags?: readonly string[]): Entry | undefined;
  /** L1's copy of `key`, judged, and usable only on error while purges are read ahead of it (readThrough.ts). */
  fromL1(key: string, id: string, resource: ResourceName): Entry | undefined;
  /** Whether this isolate knows every id purge after `stamp`: a location copy stamped earlier cannot be judged here. */
  vouches(stamp: PurgeStamp): boolean;
  fillContext(resource: ResourceName, id: string, request: PageRequest): FillContext;
  /** Puts the location tier's copy of `id`'s parts kept with `resource`, from L1 (readThrough.ts). */
  keepInLocation(id: string, resource: ResourceName, background: Background): void;
  /** Redis left a call about `key`, sent when it had answered `answeredBefore` calls, unanswered because it does not answer (readThrough.ts). */
  redisSilent(key: string, answeredBefore: number): boolean;
}

/** A step past L1: serves what it can of `pending` into `data`, and returns the rest (readFromOrigin: nothing is left). */
type Step<R = Pending[]> = (tools: PageTools, id: string, pending: Pending[], request: PageRequest, data: Record<string, Served<unknown>>) => Promise<R>;

/** Whether this isolate is reading `key` from L2 or filling it right now: a page that needs it joins that work. */
export function underWay(tools: PageTools, key: string): boolean {
  return tools.flights.running(key) || tools.reading.holder(key) !== undefined;
}

/** The tags tag purges match for every part of a page: the product's in L1, else those of the copy of it at hand. */
function pageTags(tools: PageTools, id: string, subjectData: unknown): readonly string[] {
  return tools.l1.tags(entryKey(tools.config.keyPrefix, PAGE_SUBJECT, id)) ?? tagsOf(subjectData) ?? [];
}

/**
 * What a copy comes to for a part still pending, whichever tier it comes from
 * (the tiers' order: the head of this file): the newer of it and the copy the
 * page holds already to fall back on (newerOf), served if that is this copy,
 * fresh or stale; usable on error only, it is what the part falls back on from
 * now on; past that, the part goes on with nothing to fall back on. The copy is
 * given as known purges leave it (tools.fromL1, tools.judged): only then is
 * any tier's copy as good as another's.
 */
type Judgement = { serve: Entry; state: "fresh" | "stale" } | { pending: Pending };

function judge(copy: Entry | undefined, item: Pending, tier: Tier, now: number): Judgement {
  const best = newerOf(item.fallback, copy);
  const state = entryState(best, now);
  if (copy && best === copy && (state === "fresh" || state === "stale")) return { serve: copy, state };
  const fallback = state === "usable-on-error" ? best : undefined;
  return { pending: { ...item, fallback, fallbackTier: fallback !== undefined && fallback === copy ? tier : item.fallbackTier } };
}

/** A copy a tier past L1 gave, served: kept in L1 for the next page, and a stale one refreshed (once: fill/refreshes.ts). */
function serveFrom(
  tools: PageTools,
  tier: Tier,
  id: string,
  item: Pending,
  { serve, state }: { serve: Entry; state: "fresh" | "stale" },
  request: PageRequest,
  data: Record<string, Served<unknown>>,
): void {
  tools.l1.keep(item.key, serve);
  data[item.resource] = served(item.resource, serve, tier, state);
  if (state === "stale") tools.refresh(item.key, item.resource, id, request);
}

/** 1. L1: serves what it holds fresh or stale; returns the rest. */
export function readFromL1(
  tools: PageTools,
  id: string,
  resources: readonly ResourceName[],
  request: PageRequest,
  data: Record<string, Served<unknown>>,
): Pending[] {
  const { config, clock } = tools;
  const pending: Pending[] = [];
  const toRefresh: RefreshItem[] = [];
  for (const resource of resources) {
    const key = entryKey(config.keyPrefix, resource, id);
    const judgement = judge(tools.fromL1(key, id, resource), { resource, key, fallbackTier: "l1" }, "l1", clock.now());
    if ("pending" in judgement) {
      pending.push(judgement.pending);
      continue;
    }
    const { serve: entry, state } = judgement;
    data[resource] = served(resource, entry, "l1", state);
    // Stale: refreshed. Fresh but near its end, for a hot product: refreshed ahead (hotness.ts).
    if (state === "stale") toRefresh.push({ key, resource, freshBeyond: 0, held: entry });
    else if (request.hot && tools.dueForRefreshAhead(entry)) toRefresh.push({ key, resource, freshBeyond: entry.freshUntil, held: entry });
  }
  if (toRefresh.length > 0) refreshParts(tools, id, toRefresh, request);
  return pending;
}

/** A part L1 served stale or near its end: its key, what a refresh must beat (refresh-ahead), the copy served. */
interface RefreshItem {
  key: string;
  resource: ResourceName;
  freshBeyond: number;
  held: Entry;
}

/**
 * 1a. Refreshes of the parts L1 served stale or near their end: with the
 * location tier, one background lookup of the page's copy first (one per
 * product at a time, a lease), and a part another isolate of this data
 * center refreshed since is taken from it, as readFromLocation would, at
 * no Redis call (why: docs/architecture.md#the-location-tier).
 */
function refreshParts(tools: PageTools, id: string, items: RefreshItem[], request: PageRequest): void {
  const { location, clock } = tools;
  const refresh = (item: RefreshItem) => tools.refresh(item.key, item.resource, id, request, item.freshBeyond || undefined);
  const wanted = items.filter((item) => !tools.flights.running(item.key));
  if (!location || wanted.length === 0) {
    wanted.forEach(refresh);
    return;
  }
  // The lookup's lease: its budget, and the isolate's longest stall (shared/leases.ts) for its answer read late.
  if (!tools.lookingUpForRefresh.take(id, clock.now() + leaseFor(ISOLATE_LATE_MS), true)) return;
  request.background(
    (async () => {
      try {
        const copies = await location.read(
          id,
          wanted.map(({ resource }) => resource),
        );
        for (const [index, item] of wanted.entries()) {
          const copy = copies[index];
          const judged = copy && tools.vouches(copy.stamp) ? tools.judged(copy.entry, id, item.resource) : undefined;
          const fresher =
            judged !== undefined &&
            entryState(judged, clock.now()) === "fresh" &&
            judged.freshUntil > item.freshBeyond &&
            judged.fetchedAt > item.held.fetchedAt;
          if (fresher) {
            location.note("hit");
            tools.l1.keep(item.key, judged);
          } else refresh(item);
        }
      } finally {
        tools.lookingUpForRefresh.release(id, true);
      }
    })(),
  );
}

/**
 * The parts a request that went ahead has filled while this page waited (for
 * its turn, or for its location or L2 read): served from L1, not filled
 * again. A burst for one cold product whose requests all found no fill under
 * way when they looked (none had started yet) would otherwise start one each
 * as the one before ended. The rest keep what they had (a copy to fall back on).
 */
export function filledMeanwhile(tools: PageTools, id: string, pending: Pending[], data: Record<string, Served<unknown>>): Pending[] {
  return pending.filter((item) => {
    const entry = tools.fromL1(item.key, id, item.resource);
    if (!entry || entryState(entry, tools.clock.now()) !== "fresh") return true;
    data[item.resource] = served(item.resource, entry, "l1", "fresh");
    return false;
  });
}

/**
 * 1½. The location tier (location/location.ts): every part L1 could not
 * serve, in one lookup of the page's copy. A part is served only if this
 * isolate vouches for its stamp (tools.vouches), and then judged as its L1
 * entries are (docs/architecture.md#the-location-tier). Keys this isolate
 * is reading or filling already are not looked up: they join that work.
 * What it lacks goes on to L2.
 */
export const readFromLocation: Step = async (tools, id, pending, request, data) => {
  const { clock, location } = tools;
  const toRead = pending.filter((item) => !underWay(tools, item.key));
  if (!location || toRead.length === 0) return pending;
  const copies = await location.read(
    id,
    toRead.map(({ resource }) => resource),
  );
  // Tag purges match the product's tags, for every part of the page: this copy's when L1 holds none.
  const subjectCopy = copies[toRead.findIndex((item) => item.resource === PAGE_SUBJECT)];
  const tags = pageTags(tools, id, subjectCopy?.entry.data);
  // Each part goes on as it was, or with what its copy leaves it, or is served.
  return pending.flatMap((item) => {
    const copy = copies[toRead.indexOf(item)];
    if (!copy) return [item];
    if (!tools.vouches(copy.stamp)) {
      location.note("unvouched");
      return [item];
    }
    const judged = tools.judged(copy.entry, id, item.resource, tags);
    if (!judged) {
      location.note("purged");
      return [item];
    }
    const judgement = judge(judged, item, "location", clock.now());
    if ("pending" in judgement) return [judgement.pending];
    location.note("hit");
    serveFrom(tools, "location", id, item, judgement, request, data);
    return [];
  });
};

/**
 * 2. L2: one round trip for everything L1 could not serve. A key being read
 * or filled here already, one whose L1 copy is past its stale window, and
 * every key of a product the known-ids filter lists (unless L2_READ_REPLICAS)
 * go straight to the fill, whose lock claim returns L2's copy: why,
 * docs/architecture.md#the-request-path, the details under the picture.
 */
export const readFromL2: Step = async (tools, id, pending, request, data) => {
  const { config, clock, l2, reading } = tools;
  if (request.listed && !config.l2ReadReplicas) return pending;
  const straightToFill = (item: Pending) => item.fallback !== undefined || underWay(tools, item.key);
  const stillPending = pending.filter(straightToFill);
  const toRead = pending.filter((item) => !straightToFill(item));
  if (!l2 || toRead.length === 0) return pending;
  const readStarted = clock.now();
  // A page's keys live on its product's shard (l2/shardedL2.ts): the first key's breaker and answers stand for them all.
  const firstKey = toRead[0]!.key;
  const answeredBefore = l2.answered(firstKey);
  // The read counts as under way for pages that join it as long as this isolate may read its reply late (shared/leases.ts).
  const readUntil = readStarted + config.l2TimeoutMs + ISOLATE_LATE_MS;
  for (const item of toRead) reading.take(item.key, readUntil, true);
  const values = await l2
    .readMany(
      toRead.map((item) => item.key),
      { background: request.background },
    )
    .finally(() => {
      for (const item of toRead) reading.release(item.key, true);
    });
  // No answer within the whole budget (not an error at once: a refused call costs nothing to repeat), and Redis silent.
  const timedOut = clock.now() - readStarted >= config.l2TimeoutMs;
  const unanswered = timedOut && l2.accepts(firstKey) && values.every((value) => value === undefined);
  if (unanswered && tools.redisSilent(firstKey, answeredBefore)) request.l2Silent = true;
  const entries = toRead.map((item, index) => {
    const value = values[index];
    return value ? tools.l2Entries.read(item.key, value, item.resource, id, request.background) : undefined;
  });
  // Tag purges match the product's tags, for every part of the page: L2's copy's when L1 holds none.
  const tags = pageTags(tools, id, entries[toRead.findIndex((item) => item.resource === PAGE_SUBJECT)]?.data);
  for (const [index, item] of toRead.entries()) {
    const judgement = judge(tools.judged(entries[index], id, item.resource, tags), item, "l2", clock.now());
    if ("serve" in judgement) serveFrom(tools, "l2", id, item, judgement, request, data);
    else stillPending.push({ ...judgement.pending, l2Answered: values[index] !== undefined });
  }
  // What L2 gave goes to the location tier with the page's other parts; if some still go to their fills, the last of those puts it.
  if (stillPending.length === 0 && entries.some((entry) => entry !== undefined)) tools.keepInLocation(id, toRead[0]!.resource, request.background);
  return stillPending;
};

/**
 * 3. Origin, through the coalescing fill: every pending resource at once
 * when the known-ids filter lists the page's subject (an id it lists wrongly,
 * about 1%, then costs four fetches); otherwise the subject first, and the
 * others not at all when there is none to show. Why: docs/architecture.md#the-request-path.
 */
export const readFromOrigin: Step<void> = async (tools, id, pending, request, data) => {
  const startedAt = tools.clock.now();
  const subject = pending.find((item) => item.resource === PAGE_SUBJECT);
  if (subject && pending.length > 1 && !request.listed) {
    data[PAGE_SUBJECT] = await fillOne(tools, id, subject, request);
    // Filled by another request while this one waited for the subject: no fill of their own.
    pending = filledMeanwhile(
      tools,
      id,
      pending.filter((item) => item !== subject),
      data,
    );
  }
  const subjectOutcome = data[PAGE_SUBJECT]?.outcome;
  if (subjectOutcome !== undefined && subjectOutcome !== "found") return;
  if (visitorLeft(request)) return;
  const fills = pending.map((item) => ({ resource: item.resource, filled: fillOne(tools, id, item, request) }));
  const later = request.coreRead ? fills.filter((fill) => !isCore(tools.config, fill.resource) && request.streams?.includes(fill.resource)) : [];
  const take = (results: Served<unknown>[]) => results.forEach((result) => (data[result.resource] = result));
  take(await Promise.all(fills.filter((fill) => !later.includes(fill)).map((fill) => fill.filled)));
  if (later.length === 0) return;
  const rest = Promise.all(later.map((fill) => fill.filled));
  // The core is read, none of it failed (else the page is a 503, whole). The rest may take as long again as the core
  // did: a page whose parts come together stays whole (its ETag, compressed); past that, it goes on without them, streamed.
  const failedCore = Object.values(data).some((part) => isCore(tools.config, part.resource) && part.outcome === "failed");
  const together = failedCore || (await within(rest, tools.clock.now() - startedAt, () => false));
  if (together) return take(await rest);
  request.coreRead?.(Object.fromEntries(later.map((fill) => [fill.resource, fill.filled])));
  // This read (and the page's admission) ends with the last of its fills.
  await rest;
};

async function fillOne(tools: PageTools, id: string, item: Pending, request: PageRequest, again = false): Promise<Served<unknown>> {
  const context: FillContext = { ...tools.fillContext(item.resource, id, request), visitor: request.visitor, l2Silent: request.l2Silent };
  const forward = item.fallback ? "stale" : "miss";
  try {
    const { entry, joined, via: joinedVia } = await tools.flights.await(item.key, context);
    // L2's copy, handed back by the claim, may be within its stale window or soft-purged: served as such, and refreshed once.
    const judged = context.via !== "origin" || joined ? tools.judged(entry, id, item.resource) : entry;
    if (judged && entryState(judged, tools.clock.now()) !== "fresh") {
      tools.refresh(item.key, item.resource, id, request);
      return served(item.resource, judged, "l2", "stale");
    }
    // Hard-purged while the claim ran (it checked what this isolate knew before): only a fill of its own will do.
    if (!judged && !again) return fillOne(tools, id, { ...item, fallback: undefined }, request, true);
    // The claim found L2's copy: a hit, as an MGET's would be; nothing was forwarded or waited for.
    if (!joined && context.via === "l2") return served(item.resource, judged ?? entry, "l2", "fresh");
    // Joined: from wherever the fill it joined took its entry (a claim's copy of L2's, or another isolate's result, is L2's).
    const via = joined ? joinedVia : context.via;
    return served(item.resource, judged ?? entry, via === "l2" || via === "winner" ? "l2" : "origin", "fresh", {
      collapsed: joined || context.via === "winner",
      forward,
    });
  } catch (error) {
    // Nobody to serve: nothing more is tried for this resource (the page is not answered).
    if (error instanceof Departed) return failed(item.resource, { forward });
    const extra = { forward, failure: failureOf(error) } as const;
    return (await fallBack(tools, id, item, request, context, error, extra)) ?? failed(item.resource, extra);
  }
}

/** What a failed fill serves: the best copy still usable on error, wherever it is, or "no data" for an answer about this id. */
async function fallBack(
  tools: PageTools,
  id: string,
  item: Pending,
  request: PageRequest,
  context: FillContext,
  error: unknown,
  extra: Pick<Served<unknown>, "forward" | "failure">,
): Promise<Served<unknown> | undefined> {
  const { clock, l1, l2 } = tools;
  // The best copy at hand: what this request had, what the fill found in
  // L2 (kept in L1 for the requests that joined it), or what they kept.
  const fromFill = tools.judged(context.olderCopy, id, item.resource);
  if (fromFill && entryState(fromFill, clock.now()) !== "expired") l1.keep(item.key, fromFill);
  const inL1 = tools.fromL1(item.key, id, item.resource);
  const fallback = newerOf(newerOf(item.fallback, fromFill), inL1);
  if ((!fallback || entryState(fallback, clock.now()) === "expired") && l2 && !item.l2Answered && !context.l2Answered) {
    // A double fault: the origin failed, and L2 was not asked, or did not
    // answer (its breaker was open: Redis failed a moment ago; or it had
    // just closed again). Another isolate may have stored this entry since:
    // one read, as the last resort before a 503.
    const [value] = await l2.readMany([item.key], { force: true, background: request.background });
    const lastResort = tools.judged(value ? tools.l2Entries.read(item.key, value, item.resource, id, request.background) : undefined, id, item.resource);
    const state = entryState(lastResort, clock.now());
    if (lastResort && state !== "expired") {
      l1.keep(item.key, lastResort);
      return served(item.resource, lastResort, "l2", state === "fresh" ? "fresh" : "stale-if-error", extra);
    }
  }
  if (fallback && entryState(fallback, clock.now()) !== "expired") {
    const tier = fallback === item.fallback ? (item.fallbackTier ?? "l1") : fallback === fromFill ? "l2" : "l1";
    return served(item.resource, fallback, tier, "stale-if-error", extra);
  }
  // Nothing to serve, and the origin's answer was about this id: "no
  // data" for a short while, kept in L1 as a 404 would be.
  if (isAnswerAboutId(error)) {
    const { noData } = tools.rejections.of(item.key) ?? tools.rejections.remember(item.key, item.resource, error.failure);
    l1.keep(item.key, noData);
    return served(item.resource, noData, "origin", "fresh", extra);
  }
  return undefined;
}

/**
 * A page that needs new work while the isolate cannot take it on
 * (overload/admission.ts): each part L1 could not serve gets its copy usable
 * on error, if it has one, and otherwise fails as "overloaded", as when the
 * origin's slots are full: a core part makes the page a quick 503 with
 * Retry-After, another gets its section's default. Nothing is read or
 * fetched. Returns whether every part had a copy.
 */
export function shedPage(tools: PageTools, pending: Pending[], data: Record<string, Served<unknown>>): boolean {
  let allServed = true;
  for (const item of pending) {
    const forward = item.fallback ? "stale" : "miss";
    if (item.fallback && entryState(item.fallback, tools.clock.now()) !== "expired") {
      data[item.resource] = served(item.resource, item.fallback, item.fallbackTier ?? "l1", "stale-if-error", { forward, failure: "overloaded" });
    } else {
      allServed = false;
      data[item.resource] = failed(item.resource, { forward, failure: "overloaded" });
    }
  }
  return allServed;
}

/** ReadThrough.readCached: the copies of one resource of many products, from L1, then L2. */
export async function readCopies<R extends ResourceName>(
  tools: PageTools,
  ids: readonly string[],
  resource: R,
  background: Background,
): Promise<Map<string, ResourceTypes[R]>> {
  const { config, clock, l1, l2 } = tools;
  const found = new Map<string, ResourceTypes[R]>();
  const usable = (entry: Entry | undefined): entry is Entry<ResourceTypes[R]> & { data: ResourceTypes[R] } =>
    entry !== undefined && entry.data !== null && entryState(entry, clock.now()) !== "expired";
  const missing: { id: string; key: string }[] = [];
  for (const id of ids) {
    const key = entryKey(config.keyPrefix, resource, id);
    const entry = tools.fromL1(key, id, resource);
    if (usable(entry)) found.set(id, entry.data);
    else missing.push({ id, key });
  }
  if (!l2 || missing.length === 0) return found;
  const values = await l2.readMany(
    missing.map(({ key }) => key),
    { background },
  );
  for (const [index, { id, key }] of missing.entries()) {
    const value = values[index];
    const entry = tools.judged(value ? tools.l2Entries.read(key, value, resource, id, background) : undefined, id, resource);
    if (!usable(entry)) continue;
    l1.keep(key, entry);
    found.set(id, entry.data);
  }
  return found;
}
