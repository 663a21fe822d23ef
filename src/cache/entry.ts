// One cached resource and its life cycle (docs/architecture.md#entry-life-cycle).
// Every entry carries its own deadlines, fixed (with jitter) when it was
// fetched, so that every isolate and Redis agree on what it is at any time.
import type { ResourcePolicy } from "../config";
import { DEFAULTS } from "../config/defaults";
import type { OriginAnswer } from "../origin/client";

export interface Entry<T = unknown> {
  /** `null` means "the origin says this does not exist" (negative caching). */
  data: T | null;
  /** The origin's `version` (0 for absent entries): writes never go backwards. */
  version: number;
  fetchedAt: number;
  freshUntil: number;
  /** End of stale-while-revalidate: served at once while one refresh runs. */
  staleUntil: number;
  /** End of stale-if-error: served only when the origin fails. */
  errorUntil: number;
}

export type EntryState = "fresh" | "stale" | "usable-on-error" | "expired";

/**
 * The JSON text an entry read from L1 keeps its data as (`withDataOnRead`).
 * Its presence marks an entry that holds data, known without parsing it; and
 * keeping or encoding the entry again reuses the text, with no parse and
 * stringify (a location copy re-encodes every part of its page from L1 each
 * time one of them is refreshed). A property, which a spread copy
 * (markedStale) keeps.
 */
const DATA_JSON = Symbol("data as JSON text");

/**
 * An entry whose `data` is parsed from `json` on its first read, once. L1
 * keeps data as JSON text (cache/l1.ts), and most reads of it need only the
 * deadlines and the version: a page whose HTML is already rendered never
 * reads its data. `json` must be the JSON.stringify of a found entry's data
 * (never "null").
 */
export function withDataOnRead<T>(deadlines: Omit<Entry<T>, "data">, json: string): Entry<T> {
  let data: T | undefined;
  let parsed = false;
  const entry: Entry<T> & { [DATA_JSON]: string } = {
    version: deadlines.version,
    fetchedAt: deadlines.fetchedAt,
    freshUntil: deadlines.freshUntil,
    staleUntil: deadlines.staleUntil,
    errorUntil: deadlines.errorUntil,
    [DATA_JSON]: json,
    get data(): T {
      if (!parsed) {
        data = JSON.parse(json) as T;
        parsed = true;
      }
      return data as T;
    },
  };
  return entry;
}

/** The JSON.stringify of the entry's data, when the entry carries it (read from L1); undefined otherwise. */
export function dataJson(entry: Entry): string | undefined {
  return (entry as { [DATA_JSON]?: string })[DATA_JSON];
}

/** Whether the origin said there is no such thing (negative entry), without parsing data kept for later. */
export function isAbsent(entry: Entry): boolean {
  return !(DATA_JSON in entry) && entry.data === null;
}

export function entryState(entry: Entry | undefined, now: number): EntryState {
  if (!entry) return "expired";
  if (now < entry.freshUntil) return "fresh";
  if (now < entry.staleUntil) return "stale";
  if (now < entry.errorUntil) return "usable-on-error";
  return "expired";
}

/**
 * TTL jitter, against mass expiry (a cache stampede when copies filled
 * together all expire at once): each copy's freshness is its TTL shortened
 * by a uniform random share of at most this, so that copies filled together
 * expire over the last tenth of their TTL, and none is fresh longer than
 * the TTL a shop set.
 */
export const TTL_JITTER = 0.1;

/** The deadlines of an entry fetched `now` under `policy`, its TTL jittered (`random` 0: not at all). Absent entries get `negativeTtl` and no grace. */
export function deadlinesFor(
  found: boolean,
  policy: ResourcePolicy,
  now: number,
  random: () => number,
): Pick<Entry, "fetchedAt" | "freshUntil" | "staleUntil" | "errorUntil"> {
  const freshUntil = now + Math.round((found ? policy.ttl : policy.negativeTtl) * (1 - TTL_JITTER * random()) * 1000);
  const graceUntil = (seconds: number) => (found ? freshUntil + seconds * 1000 : freshUntil);
  return { fetchedAt: now, freshUntil, staleUntil: graceUntil(policy.swr), errorUntil: graceUntil(policy.staleIfError) };
}

/** The entry of the origin's `answer` to a request sent `requestedAt` (absent: null data, version 0). */
export function answerEntry<T extends { version: number }>(
  answer: OriginAnswer<T>,
  policy: ResourcePolicy,
  requestedAt: number,
  random: () => number,
): Entry<T> {
  const deadlines = deadlinesFor(answer.found, policy, requestedAt, random);
  return answer.found ? { data: answer.data, version: answer.data.version, ...deadlines } : { data: null, version: 0, ...deadlines };
}

/** Of two copies of one resource, the one to keep: newer origin data first, then the later fetch. */
export function newerOf<T>(a: Entry<T> | undefined, b: Entry<T> | undefined): Entry<T> | undefined {
  if (!a) return b;
  if (!b) return a;
  if (a.version !== b.version) return a.version > b.version ? a : b;
  return a.fetchedAt >= b.fetchedAt ? a : b;
}

/**
 * The deadlines of a copy kept only for the origin's failures from `at` on:
 * neither fresh nor stale past it, usable on error as long as it was (what
 * purges this isolate may have missed leave it: invalidation/watcher.ts).
 */
export function onlyForErrorsFrom({ freshUntil, staleUntil }: Pick<Entry, "freshUntil" | "staleUntil">, at: number): Pick<Entry, "freshUntil" | "staleUntil"> {
  return { freshUntil: Math.min(freshUntil, at), staleUntil: Math.min(staleUntil, at) };
}

/**
 * The entry as a soft purge at `at` leaves it: no longer fresh, and servable
 * while it refreshes. The purge watcher decides that an entry is stale; the
 * mark itself belongs to the entry's life cycle.
 */
export function markedStale(entry: Entry, at: number): Entry {
  if (entry.freshUntil <= at) return entry;
  return { ...entry, freshUntil: at, staleUntil: Math.max(entry.staleUntil, at + DEFAULTS.softPurgeGraceMs) };
}
