// The location tier: this data center's Workers Cache API, between L1 and L2 (docs/architecture.md#the-location-tier: what a copy holds,
// why, and why no purge deletes one). Copies read are checked as L2's values are, part by part; the rest is a miss. This file only stores
// and reads them: what a copy holds is readThrough.ts's to say, whether a part may be served pageSteps.ts's (readFromLocation).
import type { Config } from "../../config";
import { DEFAULTS } from "../../config/defaults";
import { PAGE_RESOURCES, RESOURCES, type ResourceName } from "../../origin/resources";
import type { Clock } from "../../shared/clock";
import { createLeaseTable, ISOLATE_LATE_MS, within } from "../../shared/leases";
import { subrequest, type Background } from "../../shared/subrequests";
import { readBounded } from "../../shared/body";
import { decodeEntry, encodeEntry, HEADER_MAX_CHARS } from "../l2/codec";
import { CALL_MAX_ITEMS } from "../l2/l2";
import type { Entry } from "../entry";
import { longestLifeMs } from "../l2/l2Entries";
import type { PurgeStamp } from "./purgeStamp";

/** The named cache the tier keeps its copies in, apart from the zone's default cache. */
export const LOCATION_CACHE_NAME = "pp-location";
/**
 * The path under the shop's own address (PUBLIC_URL) that the copies' URLs use: a path the worker serves nothing at. Cloudflare asks that a
 * cache key's host be the zone's own: another host costs a DNS lookup per call.
 */
const LOCATION_PATH = "/__pp-location/";
/** The response header that carries a copy's purge stamp: `<era>|<seq>`. */
const STAMP_HEADER = "pp-purge-stamp";
const STAMP = /^(\d{0,16})\|(\d{1,16})$/;
/** The response header that frames the body: each part's resource code and its length in characters, in the body's order. */
const PARTS_HEADER = "pp-parts";
const PARTS = /^[a-z]=\d{1,9}(,[a-z]=\d{1,9}){0,7}$/;
/** JSON of a part's data longer than this is gzipped, so that the part stays within a value's cap (l2ValueMaxChars). */
const UNCOMPRESSED_MAX_CHARS = DEFAULTS.l2ValueMaxChars - HEADER_MAX_CHARS;
/** Bytes of one part at most: a valid value of l2ValueMaxChars characters takes at most 3 bytes each in UTF-8 (no surrogates in JSON's escapes). */
const MAX_PART_BYTES = DEFAULTS.l2ValueMaxChars * 3;

/** What of the Cache API the tier uses (a fake one in unit tests). */
export type LocationStore = Pick<Cache, "match" | "put">;

/** A part read back: its entry, checked against its key, and the stamp its copy was put with. */
interface LocationCopy {
  entry: Entry;
  stamp: PurgeStamp;
}

/** A part to keep: the entry as its isolate judged it when the copy was put. */
export interface LocationPart {
  resource: ResourceName;
  entry: Entry;
}

/** What the location tier did in this isolate since it started (status page). */
export interface LocationStats {
  /** Parts looked up, and those served from a copy. */
  lookups: number;
  hits: number;
  /** Parts not served: not valid values, purged (by id, tag or all), or stamped before what this isolate can vouch for. */
  invalid: number;
  purged: number;
  unvouched: number;
  /** Lookups (one per page) that failed or took longer than their budget (ISOLATE_LATE_MS: see createLocationCache). */
  errors: number;
  /** Copies put (one per page), failed, or dropped past PUTS_IN_FLIGHT (or for a stamp this isolate cannot give). */
  puts: number;
  putsFailed: number;
  putsDropped: number;
}

export interface LocationCache {
  /** The valid parts `resources` of `id`'s copy, in one lookup; undefined for each one missing, invalid or not answered in time. */
  read(id: string, resources: readonly ResourceName[]): Promise<(LocationCopy | undefined)[]>;
  /** Stores `parts` as `id`'s copy in the background, stamped with `stamp`; dropped when too many puts are under way. */
  put(id: string, parts: readonly LocationPart[], stamp: PurgeStamp | null, background: Background): void;
  /** The read path's verdicts on the parts it was given. */
  note(outcome: "hit" | "purged" | "unvouched"): void;
  readonly stats: Readonly<LocationStats>;
}

/** The resources kept in one copy with `resource`: a product page's parts together (a page reads them together), any other alone. */
export function keptWith(resource: ResourceName): readonly ResourceName[] {
  return RESOURCES[resource].onProductPage ? PAGE_RESOURCES : [resource];
}

/** The synthetic URL of the copy that holds `resource` of `id` (ids are validated before any key is built: cache/keys.ts). */
export function locationUrl(config: Pick<Config, "publicUrl" | "keyPrefix">, resource: ResourceName, id: string): string {
  const group = RESOURCES[resource].onProductPage ? "page" : RESOURCES[resource].code;
  return locationUrlOf(config.publicUrl, `${config.keyPrefix}:${group}:${id}`);
}

/** The synthetic URL of the location copy named `name` (a key of the tier's own: `pp:v1:page:<id>`, `pp:v1:kid:<version>`). */
export function locationUrlOf(publicUrl: string, name: string): string {
  return `${publicUrl}${LOCATION_PATH}${encodeURIComponent(name)}`;
}

/** Puts `body` under `url`, kept `ttlSeconds`, with `headers`: a subrequest of `callMs` at most (the background calls'). Throws when not put. */
export async function putInLocation(
  open: () => Promise<LocationStore>,
  url: string,
  body: BodyInit | null,
  ttlSeconds: number,
  headers: Record<string, string>,
  callMs: number = DEFAULTS.backgroundCallMs,
): Promise<void> {
  const store = await open();
  const response = new Response(body, { headers: { "Cache-Control": `public, max-age=${ttlSeconds}`, ...headers } });
  await subrequest(() => store.put(url, response), callMs);
}

/** `look` within the budget of a location lookup (ISOLATE_LATE_MS: answered in a ms or two); undefined past it, or when it fails. */
export function lookupWithin<T>(look: () => Promise<T | undefined>): Promise<T | undefined> {
  const none = () => undefined;
  return within(look().catch(none), ISOLATE_LATE_MS, none);
}

function stampHeader(stamp: PurgeStamp): string | undefined {
  const text = `${stamp.era}|${stamp.seq}`;
  return STAMP.test(text) ? text : undefined;
}

function parsedStamp(text: string | null): PurgeStamp | undefined {
  const match = text === null ? null : STAMP.exec(text);
  if (!match) return undefined;
  const seq = Number(match[2]);
  return Number.isSafeInteger(seq) ? { era: match[1]!, seq } : undefined;
}

/** The parts header read: each code's place in the body, or undefined unless it frames exactly `total` characters, each part within L2's bound. */
function parsedParts(text: string | null, total: number): Map<string, { from: number; to: number }> | undefined {
  if (text === null || !PARTS.test(text)) return undefined;
  const parts = new Map<string, { from: number; to: number }>();
  let from = 0;
  for (const field of text.split(",")) {
    const code = field[0]!;
    const length = Number(field.slice(2));
    if (parts.has(code) || length > DEFAULTS.l2ValueMaxChars) return undefined;
    parts.set(code, { from, to: from + length });
    from += length;
  }
  return from === total ? parts : undefined;
}

/**
 * = CALL_MAX_ITEMS: puts in flight per isolate (each a lease of `backgroundCallMs`), as many as an outbox call carries to L2: a fill
 * burst's background writes, to either tier. Past it a put is dropped and counted: L1 and L2 hold the copy; the next location miss puts it.
 */
const PUTS_IN_FLIGHT = CALL_MAX_ITEMS;

/**
 * The location tier. A lookup (one `match` of the page's copy, for the parts L1 lacks) is answered from the data center in a ms or two: its
 * budget is how late this isolate may read a reply and still read it on time (shared/leases.ts, ISOLATE_LATE_MS). Past it the lookup is a
 * miss, costing the page no more than that before L2.
 */
export function createLocationCache(deps: { config: Config; clock: Clock; open: () => Promise<LocationStore> }): LocationCache {
  const { config, clock } = deps;
  const stats: LocationStats = { lookups: 0, hits: 0, invalid: 0, purged: 0, unvouched: 0, errors: 0, puts: 0, putsFailed: 0, putsDropped: 0 };
  const putsUnderWay = createLeaseTable<number, true>({ clock, capacity: PUTS_IN_FLIGHT });
  let tickets = 0;
  const decoder = new TextDecoder();

  async function lookup(id: string, resources: readonly ResourceName[]): Promise<(LocationCopy | undefined)[]> {
    const store = await deps.open();
    const response = await subrequest(() => store.match(locationUrl(config, resources[0]!, id)), ISOLATE_LATE_MS);
    if (!response) return resources.map(() => undefined);
    const stamp = parsedStamp(response.headers.get(STAMP_HEADER));
    const bytes = response.status === 200 && stamp ? await readBounded(response, MAX_PART_BYTES * keptWith(resources[0]!).length) : undefined;
    const body = bytes && decoder.decode(bytes);
    const parts = body !== undefined ? parsedParts(response.headers.get(PARTS_HEADER), body.length) : undefined;
    if (!stamp || body === undefined || !parts) {
      if (!bytes) await response.body?.cancel();
      stats.invalid += resources.length;
      return resources.map(() => undefined);
    }
    return resources.map((resource) => {
      const place = parts.get(RESOURCES[resource].code);
      if (!place) return undefined;
      const value = body.slice(place.from, place.to);
      const decoded = decodeEntry(value, { resource, id, now: clock.now(), maxLifeMs: longestLifeMs(config.policies[resource]) });
      if ("entry" in decoded) return { entry: decoded.entry, stamp };
      stats.invalid++;
      return undefined;
    });
  }

  async function putOne(url: string, body: string, framing: string, ttlSeconds: number, stamp: string, ticket: number): Promise<void> {
    try {
      await putInLocation(deps.open, url, body, ttlSeconds, { "Content-Type": "text/plain; charset=utf-8", [STAMP_HEADER]: stamp, [PARTS_HEADER]: framing });
      stats.puts++;
    } catch {
      // Not stored (the subrequest budget spent, the cache refusing): L1 and L2 still hold the parts.
      stats.putsFailed++;
    } finally {
      putsUnderWay.release(ticket, true);
    }
  }

  /** The body and its framing header: the parts still usable (on error at least), each encoded as for L2; undefined when none is. */
  function encoded(parts: readonly LocationPart[], now: number): { body: string; framing: string; ttlSeconds: number } | undefined {
    let body = "";
    const framing: string[] = [];
    let until = now;
    for (const { resource, entry } of parts) {
      const value = entry.errorUntil > now ? encodeEntry(entry, UNCOMPRESSED_MAX_CHARS) : undefined;
      if (value === undefined) continue;
      body += value;
      framing.push(`${RESOURCES[resource].code}=${value.length}`);
      until = Math.max(until, entry.errorUntil);
    }
    // Kept until its last part is no longer usable even on error, as L1 and L2 keep each.
    const ttlSeconds = Math.floor((until - now) / 1000);
    return framing.length > 0 && ttlSeconds > 0 ? { body, framing: framing.join(","), ttlSeconds } : undefined;
  }

  return {
    stats,
    async read(id, resources) {
      stats.lookups += resources.length;
      const copies = await lookupWithin(() => lookup(id, resources));
      if (!copies) stats.errors++;
      return copies ?? resources.map(() => undefined);
    },
    put(id, parts, stamp, background) {
      const stampText = stamp && stampHeader(stamp);
      const ticket = ++tickets;
      // The place first: past the bound, the parts are not even encoded.
      const placed = !!stampText && parts.length > 0 && putsUnderWay.take(ticket, clock.now() + DEFAULTS.backgroundCallMs, true);
      const copy = placed ? encoded(parts, clock.now()) : undefined;
      if (!copy || !stampText) {
        if (placed) putsUnderWay.release(ticket, true);
        stats.putsDropped++;
        return;
      }
      background(putOne(locationUrl(config, parts[0]!.resource, id), copy.body, copy.framing, copy.ttlSeconds, stampText, ticket));
    },
    note(outcome) {
      stats[outcome === "hit" ? "hits" : outcome]++;
    },
  };
}
