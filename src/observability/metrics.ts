// What this isolate has been doing, in bounded memory: counters in a ring of one-minute buckets, a top-K of the
// products asked for, and the last state of every breaker (docs/architecture.md, "The status page and logs").
// Bucket boundaries follow the tier's clock, so tests move time by hand.
import type { BreakerState } from "../shared/breaker";
import type { Clock } from "../shared/clock";
import type { Served } from "../cache/served";
import type { OriginOutcome } from "../origin/failure";
import { RESOURCE_NAMES, type ResourceName } from "../origin/resources";
import { COUNTERS_PER_KEY, createTopK } from "./topK";

/** A bucket: one minute, the unit of the status page's windows and chart. */
export const BUCKET_MS = 60_000;
/** Buckets kept: the longest window the status page shows (last15m), in minutes. */
export const MAX_BUCKETS = 15;
/** Hot products reported (the K of the top-K). */
export const HOT_PRODUCTS = 20;
/** Space-saving counters behind them (topK.ts): with 100, every product asked for by more than 1% of the pages is counted. */
export const HOT_COUNTERS = COUNTERS_PER_KEY * HOT_PRODUCTS;

/** How a product page ended: the status page's outcomes (docs/architecture.md, "The status page and logs"; 429s are `unavailable`). */
type PageOutcome = "ok" | "absent" | "filtered" | "unavailable";

/** Failures that never reached the service: this isolate shed the call. */
const SHED: ReadonlySet<OriginOutcome> = new Set<OriginOutcome>(["overloaded", "circuit-open"]);

/**
 * Per resource, as the status page's table names them (docs/architecture.md): answers by tier (a
 * stale-if-error answer counts for its copy's), stale, stale-if-error, failed, collapsed and defaulted;
 * streamed (sent after a streamed page's first byte) and late (of those, defaulted past their bound).
 */
interface ResourceCounts {
  l1: number;
  location: number;
  l2: number;
  origin: number;
  stale: number;
  staleIfError: number;
  failed: number;
  collapsed: number;
  defaulted: number;
  streamed: number;
  late: number;
}

/** Per service: calls that reached it (whatever the answer), those that failed, and those not made (slots full, breaker open). */
interface OriginCounts {
  fetches: number;
  errors: number;
  shed: number;
}

interface Bucket {
  /** Start of the minute, ms since the epoch. */
  start: number;
  pages: number;
  outcomes: Record<PageOutcome, number>;
  /** 200 pages with at least one defaulted section. */
  degradedPages: number;
  resources: Record<ResourceName, ResourceCounts>;
  origin: Record<ResourceName, OriginCounts>;
}

export type ResourceSummary = ReturnType<typeof summarizeResource>;
export type WindowSummary = ReturnType<typeof summarizeWindow>;
export type MinutePoint = ReturnType<typeof minutePoint>;

export interface BreakerNote {
  name: string;
  state: BreakerState;
  /** When it entered that state; null when it never changed. */
  since: number | null;
  /** State changes since the isolate started (a breaker that flaps shows here). */
  changes: number;
}

export interface PageRecord {
  id: string;
  outcome: PageOutcome;
  /** What each resource's read gave (none for `filtered`). */
  served?: readonly Pick<Served<unknown>, "resource" | "tier" | "freshness" | "outcome" | "collapsed">[];
  /** Sections shown with defaults. */
  defaulted?: readonly string[];
  /** A streamed page's sections sent after its first byte (served or defaulted), and those of them past their bound. */
  streamed?: readonly string[];
  late?: readonly string[];
  /** Whether the id is offered to the hot products (default: a product page's is; the home page's "home" is not). */
  hot?: boolean;
}

export type Metrics = ReturnType<typeof createMetrics>;

function emptyResource(): ResourceCounts {
  return { l1: 0, location: 0, l2: 0, origin: 0, stale: 0, staleIfError: 0, failed: 0, collapsed: 0, defaulted: 0, streamed: 0, late: 0 };
}

function perResource<T>(make: (resource: ResourceName) => T): Record<ResourceName, T> {
  return Object.fromEntries(RESOURCE_NAMES.map((name) => [name, make(name)])) as Record<ResourceName, T>;
}

function emptyBucket(start: number): Bucket {
  return {
    start,
    pages: 0,
    outcomes: { ok: 0, absent: 0, filtered: 0, unavailable: 0 },
    degradedPages: 0,
    resources: perResource(emptyResource),
    origin: perResource(() => ({ fetches: 0, errors: 0, shed: 0 })),
  };
}

const ratio = (part: number, whole: number): number | null => (whole > 0 ? part / whole : null);

function summarizeResource(counts: ResourceCounts) {
  const answers = counts.l1 + counts.location + counts.l2 + counts.origin + counts.failed;
  return {
    ...counts,
    /** l1 + location + l2 + origin + failed. */
    answers,
    /** (l1 + location + l2) / answers; null without answers (and so for each ratio without its whole). */
    hitRatio: ratio(counts.l1 + counts.location + counts.l2, answers),
    l1Ratio: ratio(counts.l1, answers),
    /** location / (answers − l1): what the data center's cache caught of what L1 missed. */
    locationRatio: ratio(counts.location, answers - counts.l1),
    /** l2 / (answers − l1): what L2 caught of what L1 missed (after the location tier). */
    l2Ratio: ratio(counts.l2, answers - counts.l1),
    originRatio: ratio(counts.origin, answers),
  };
}

/** With errors / fetches; null without fetches. */
function summarizeOrigin(counts: OriginCounts) {
  return { ...counts, errorRatio: ratio(counts.errors, counts.fetches) };
}

function addInto<T extends object>(into: T, from: T): void {
  for (const key of Object.keys(from) as (keyof T)[]) (into[key] as number) += from[key] as number;
}

function countPage(bucket: Bucket, page: PageRecord): void {
  bucket.pages++;
  bucket.outcomes[page.outcome]++;
  for (const served of page.served ?? []) {
    const counts = bucket.resources[served.resource];
    if (served.outcome === "failed") counts.failed++;
    else if (served.tier) counts[served.tier]++;
    if (served.freshness === "stale") counts.stale++;
    else if (served.freshness === "stale-if-error") counts.staleIfError++;
    if (served.collapsed) counts.collapsed++;
  }
  for (const kind of ["defaulted", "streamed", "late"] as const)
    for (const name of page[kind] ?? []) {
      const counts = bucket.resources[name as ResourceName];
      if (counts) counts[kind]++;
    }
  if (page.outcome === "ok" && (page.defaulted?.length ?? 0) > 0) bucket.degradedPages++;
}

/** Sums of `buckets`, from `from` (the start of the oldest minute counted: the current minute is partial). */
function summarizeWindow(buckets: readonly Bucket[], from: number, minutes: number) {
  const sum = emptyBucket(from);
  const total = emptyResource();
  const originTotal = { fetches: 0, errors: 0, shed: 0 };
  for (const bucket of buckets) {
    sum.pages += bucket.pages;
    sum.degradedPages += bucket.degradedPages;
    addInto(sum.outcomes, bucket.outcomes);
    for (const resource of RESOURCE_NAMES) {
      for (const into of [sum.resources[resource], total]) addInto(into, bucket.resources[resource]);
      for (const into of [sum.origin[resource], originTotal]) addInto(into, bucket.origin[resource]);
    }
  }
  return {
    minutes,
    from,
    pages: sum.pages,
    outcomes: sum.outcomes,
    degradedPages: sum.degradedPages,
    resources: perResource((resource) => summarizeResource(sum.resources[resource])),
    /** All resources together. */
    total: summarizeResource(total),
    origin: perResource((resource) => summarizeOrigin(sum.origin[resource])),
    originTotal: summarizeOrigin(originTotal),
  };
}

/** One minute of the status page's chart; a minute with no bucket is all zeros. */
function minutePoint(start: number, bucket: Bucket | undefined) {
  const { pages, total, originTotal } = summarizeWindow(bucket ? [bucket] : [], start, 1);
  // `answers`: resource answers of the minute, all resources; its hits are those of L1 and L2.
  const hitRatio = ratio(total.l1 + total.l2, total.answers);
  return { start, pages, answers: total.answers, hitRatio, originFetches: originTotal.fetches, originErrors: originTotal.errors };
}

export function createMetrics({ clock }: { clock: Clock }) {
  const ring: Bucket[] = [];
  const hot = createTopK<string>(HOT_COUNTERS);
  const breakerNotes = new Map<string, BreakerNote>();
  const startedAt = clock.now();

  const minuteOf = (now: number) => Math.floor(now / BUCKET_MS) * BUCKET_MS;

  /** The bucket of the current minute, made (and the ring trimmed) when the minute is new. */
  function current(): Bucket {
    const start = minuteOf(clock.now());
    const last = ring[ring.length - 1];
    // A clock that went back (tests, or a corrected system clock) counts into the newest bucket.
    if (last && last.start >= start) return last;
    const bucket = emptyBucket(start);
    ring.push(bucket);
    const horizon = start - MAX_BUCKETS * BUCKET_MS;
    while (ring.length > MAX_BUCKETS || (ring[0] && ring[0].start <= horizon)) ring.shift();
    return bucket;
  }

  return {
    recordPage(page: PageRecord): void {
      countPage(current(), page);
      // Products that exist (or may: a 503) and are asked for; 404s are not "hot".
      if (page.hot !== false && (page.outcome === "ok" || page.outcome === "unavailable")) hot.offer(page.id);
    },

    recordOriginFetch(service: ResourceName, outcome: OriginOutcome): void {
      const counts = current().origin[service];
      if (SHED.has(outcome)) counts.shed++;
      else {
        counts.fetches++;
        // Abandoned: cut short by the tier because nobody waited any more, not an error of the service.
        if (outcome !== "found" && outcome !== "absent" && outcome !== "abandoned") counts.errors++;
      }
    },

    /** A breaker changed state (called from its onChange). */
    noteBreaker(name: string, state: BreakerState): void {
      breakerNotes.set(name, { name, state, since: clock.now(), changes: (breakerNotes.get(name)?.changes ?? 0) + 1 });
    },

    /** Sums of the current minute and the `minutes − 1` before it (1 ≤ minutes ≤ MAX_BUCKETS). */
    window(minutes: number) {
      const span = Math.min(MAX_BUCKETS, Math.max(1, Math.floor(minutes)));
      const from = minuteOf(clock.now()) - (span - 1) * BUCKET_MS;
      const held = ring.filter((bucket) => bucket.start >= from);
      return summarizeWindow(held, from, span);
    },

    /** One point per minute, oldest first, the current minute last: `MAX_BUCKETS` points. */
    perMinute() {
      const now = minuteOf(clock.now());
      return Array.from({ length: MAX_BUCKETS }, (_, i) => {
        const start = now - (MAX_BUCKETS - 1 - i) * BUCKET_MS;
        const bucket = ring.find((held) => held.start === start);
        return minutePoint(start, bucket);
      });
    },

    /** The buckets held (oldest first), for tests. */
    buckets: (): readonly Bucket[] => ring,
    /** Breakers that changed state at least once, by name. */
    breakers: () => [...breakerNotes.values()],
    hot,
    startedAt,
    /** A random name for this isolate, so that two status pages can be told apart. */
    isolateId: crypto.randomUUID().slice(0, 8),
  };
}
