// L1: this isolate's lru-cache of entries, bounded in bytes.
//
// L1 holds an entry's deadlines and its data as JSON text, parsed again when
// read. A JSON string of ASCII or Latin-1 text takes one byte per character
// in V8, where the parsed object graph takes several times that (object
// headers, property slots, a string each): so the same bytes of L1 hold more
// products, at the price of a JSON.parse per read. A product's tags, which
// purge judging reads on every request, are kept parsed beside it.
import { LRUCache } from "lru-cache";
import type { Clock } from "../shared/clock";
import { dataJson, markedStale, onlyForErrorsFrom, withDataOnRead, type Entry } from "./entry";

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

/** The tags a product's data carries (what tag purges match), without trusting its shape. */
export function tagsOf(data: unknown): readonly string[] | undefined {
  const tags = (data as { tags?: unknown } | null)?.tags;
  return Array.isArray(tags) ? (tags as string[]) : undefined;
}

function toStored(entry: Entry): Stored {
  const { version, fetchedAt, freshUntil, staleUntil, errorUntil, data } = entry;
  const tags = tagsOf(data);
  return { version, fetchedAt, freshUntil, staleUntil, errorUntil, json: dataJson(entry) ?? JSON.stringify(data), ...(tags ? { tags } : {}) };
}

/**
 * The entry again; its JSON was validated before it was stored (an origin
 * answer, or an L2 value through the codec), and is parsed only if the data
 * is read: a page served from the rendered-page cache reads none.
 */
function fromStored(stored: Stored): Entry {
  if (stored.json === "null") {
    const { version, fetchedAt, freshUntil, staleUntil, errorUntil } = stored;
    return { version, fetchedAt, freshUntil, staleUntil, errorUntil, data: null };
  }
  // The deadlines are read off `stored` (no copy of them first: four of these per cached page).
  return withDataOnRead(stored, stored.json);
}

export interface L1 {
  /** The lru-cache itself. */
  readonly cache: LRUCache<string, Stored>;
  /** For the status page: bytes and entries held, and entries pushed out by the byte bound since the isolate started. */
  stats(): { bytes: number; entries: number; evictions: number };
  /** Keeps an entry until it is no longer usable even on error. */
  keep(key: string, entry: Entry): void;
  entry(key: string): Entry | undefined;
  /** The tags of the entry under `key`, without parsing it. */
  tags(key: string): readonly string[] | undefined;
  markStale(key: string, at: number): void;
  /**
   * Every entry from now on usable only when the origin fails for it (its
   * freshness and stale window ended `at`, its error window kept): for an
   * isolate that can no longer tell which of its entries a purge it missed
   * has made gone (invalidation/watcher.ts, starting over).
   */
  keepOnlyForErrors(at: number): void;
}

export function createL1({ maxBytes, clock }: { maxBytes: number; clock: Clock }): L1 {
  // Entries the byte bound pushed out (lru-cache's "evict", not expiry nor
  // overwrite): a count that keeps climbing says L1_MAX_BYTES holds less
  // than the traffic revisits, and that a page not asked for since may be gone.
  let evictions = 0;
  const cache = new LRUCache<string, Stored>({
    // The byte bound is the only bound that protects a 128 MB isolate (lru-cache #227).
    maxSize: maxBytes,
    sizeCalculation: (stored) => storedSize(stored.json),
    // lru-cache drops an entry once it is no longer usable even on error;
    // the entry's own deadlines decide between fresh and stale before that.
    ttlAutopurge: false,
    perf: { now: () => clock.now() },
    dispose: (_stored, _key, reason) => {
      if (reason === "evict") evictions++;
    },
  });

  function keep(key: string, entry: Entry): void {
    cache.set(key, toStored(entry), { ttl: Math.max(1, entry.errorUntil - clock.now()) });
  }

  function entry(key: string): Entry | undefined {
    const stored = cache.peek(key);
    return stored && fromStored(stored);
  }

  return {
    cache,
    stats: () => ({ bytes: cache.calculatedSize, entries: cache.size, evictions }),
    keep,
    entry,
    tags: (key) => cache.peek(key)?.tags,
    markStale(key, at) {
      const found = entry(key);
      if (found) keep(key, markedStale(found, at));
    },
    keepOnlyForErrors(at) {
      // In place, in one pass: its size and its time in lru-cache (the error window) do not change,
      // and entries already handed out have copied their deadlines (fromStored).
      cache.forEach((stored) => Object.assign(stored, onlyForErrorsFrom(stored, at)));
    },
  };
}
