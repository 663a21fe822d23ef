// The filter's copy in the location tier, one per version: the segments one after the other, with the number of adds they include and
// their SHA-256 (docs/architecture.md, "The known-ids filter", "Across a fleet"). Any Worker on the zone could write it: what comes
// back is checked (length, bytes, digest, adds no more than Redis's and within its log) and anything else is a miss, never a filter.
import { locationUrlOf, putInLocation, type LocationStore } from "../cache/location/location";
import { KEY_TTL_MS, KNOWN_IDS_LIMITS } from "./limits";
import { readBounded } from "../shared/body";
import { within } from "../shared/leases";
import { subrequest } from "../shared/subrequests";
import { Bloom, byteLengthFor } from "./bloom";
import type { FilterMeta } from "./meta";
import { sha256Hex } from "../shared/hash";

/** The response header with the number of adds the copy includes. */
const SYNCED_HEADER = "pp-kid-synced";
/** The response header with the SHA-256 (hex) of the body: a copy whose body does not hash to it is refused. */
const DIGEST_HEADER = "pp-kid-digest";

export type FilterShelf = ReturnType<typeof createFilterShelf>;

export function createFilterShelf(deps: {
  publicUrl: string;
  keyPrefix: string;
  open: () => Promise<LocationStore>;
  /** The budget of one look or put: the background calls' (a look gets as long as a put of the same bytes through the same cache). */
  callMs: number;
  spreadMs?: number;
  random?: () => number;
}) {
  const spreadMs = deps.spreadMs ?? KNOWN_IDS_LIMITS.locationSpreadMs;
  const random = deps.random ?? Math.random;
  /** Copies taken, looked for in vain, refused (invalid, or too far behind), put, and puts that failed. */
  const stats = { hits: 0, misses: 0, refused: 0, puts: 0, putsFailed: 0 };
  const urlOf = (version: string) => locationUrlOf(deps.publicUrl, `${deps.keyPrefix}:kid:${version}`);

  async function lookOnce(filter: FilterMeta): Promise<{ bloom: Bloom; synced: number } | "missing" | "refused"> {
    const response = await (async () => {
      const store = await deps.open();
      return subrequest(() => store.match(urlOf(filter.version)), deps.callMs);
    })().catch(() => undefined);
    if (!response) return "missing";
    const synced = Number(response.headers.get(SYNCED_HEADER));
    const digest = response.headers.get(DIGEST_HEADER) ?? "";
    const length = byteLengthFor(filter.m);
    const usable =
      response.status === 200 &&
      Number.isSafeInteger(synced) &&
      synced >= 0 &&
      synced <= filter.changedAt &&
      filter.changedAt - synced <= KNOWN_IDS_LIMITS.logCap;
    if (!usable) {
      await response.body?.cancel();
      return "refused";
    }
    const body = await within(readBounded(response, length), deps.callMs, () => undefined).catch(() => undefined);
    if (!body || body.length !== length || (await sha256Hex(body)) !== digest) return "refused";
    try {
      return { bloom: new Bloom(filter, body), synced };
    } catch {
      // A byte with its top bit set: not a segment this tier wrote.
      return "refused";
    }
  }

  return {
    stats: stats as Readonly<typeof stats>,
    /**
     * This location's copy of `filter`'s version, and how many of its adds it includes; null when there is none usable.
     * On a miss, waits a random part of the spread and looks once more (a neighbour may be loading it).
     */
    async read(filter: FilterMeta): Promise<{ bloom: Bloom; synced: number } | null> {
      let found = await lookOnce(filter);
      if (found === "missing" && spreadMs > 0) {
        await new Promise((resolve) => setTimeout(resolve, random() * spreadMs));
        found = await lookOnce(filter);
      }
      if (found === "missing") stats.misses++;
      else if (found === "refused") stats.refused++;
      else stats.hits++;
      return typeof found === "string" ? null : found;
    },
    /** Keeps `bloom`, which includes `synced` adds of `filter`'s version, as this location's copy. */
    async put(filter: FilterMeta, bloom: Bloom, synced: number): Promise<void> {
      try {
        // A copy: adds to this isolate's filter meanwhile must not change the bytes after their digest.
        const body = bloom.bytes.slice();
        // Kept as long as the version's keys live in Redis.
        const headers = { "Content-Type": "application/octet-stream", [SYNCED_HEADER]: String(synced), [DIGEST_HEADER]: await sha256Hex(body) };
        await putInLocation(deps.open, urlOf(filter.version), body, Math.floor(KEY_TTL_MS / 1000), headers, deps.callMs);
        stats.puts++;
      } catch {
        // Not kept (the cache refusing, the subrequest budget spent): the next isolate reads Redis, as before.
        stats.putsFailed++;
      }
    },
  };
}
