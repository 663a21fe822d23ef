// The location tier: the Workers Cache API of this data center, shared by
// every isolate there and kept across deploys and restarts, between L1 and
// L2 (docs/architecture.md#the-location-tier).
//
// A copy is stored as L2 stores it (l2/codec.ts: version and deadlines in clear,
// the data, gzipped when large) under a synthetic URL built from the Redis
// key (itself built only from a validated id), with the purge-log position
// its isolate had read when it got the data (PurgeStamp). Any Worker on the
// zone can write there, so what comes back is checked as L2's values are
// (size, header, schema for its key); anything else is a miss. This file
// only stores and reads copies: whether one may be served (the purges it
// missed, the stamp this isolate can vouch for) is the read path's call
// (pageSteps.ts, readFromLocation).
//
// A copy can be deleted only in the data center that holds it, and purges
// are recorded in Redis, so nothing here is ever deleted on a purge: every
// copy is judged on every read, as L1's entries are.
import type { Config } from "../../config";
import { DEFAULTS } from "../../config/defaults";
import type { ResourceName } from "../../origin/resources";
import type { Clock } from "../../shared/clock";
import { createLeaseTable, within } from "../../shared/leases";
import { subrequest } from "../../shared/subrequests";
import { readBounded } from "../../shared/body";
import { decodeEntry, encodeEntry } from "../l2/codec";
import type { Entry } from "../entry";
import { longestLifeMs } from "../l2/l2Entries";
import type { PurgeStamp } from "./purgeStamp";

/** The named cache the tier keeps its copies in, apart from the zone's default cache. */
export const LOCATION_CACHE_NAME = "pp-location";
/**
 * The path under the shop's own address (PUBLIC_URL) that the copies' URLs
 * use: a path the worker serves nothing at. Cloudflare asks that a cache
 * key's host be the zone's own: another host costs a DNS lookup per call.
 */
const LOCATION_PATH = "/__pp-location/";
/** The response header that carries a copy's purge stamp: `<era>|<seq>`. */
const STAMP_HEADER = "pp-purge-stamp";
const STAMP = /^(\d{0,16})\|(\d{1,16})$/;
/** Bytes of a body read at most: a valid value of l2ValueMaxChars characters takes at most 3 bytes each in UTF-8 (no surrogates in JSON's escapes). */
const MAX_BODY_BYTES = DEFAULTS.l2ValueMaxChars * 3;

/** What of the Cache API the tier uses (a fake one in unit tests). */
export type LocationStore = Pick<Cache, "match" | "put">;

/** A copy read back: its entry, checked against its key, and the stamp it was put with. */
interface LocationCopy {
  entry: Entry;
  stamp: PurgeStamp;
}

/** What the location tier did in this isolate since it started (status page). */
export interface LocationStats {
  /** Parts looked up, and those served from a copy. */
  lookups: number;
  hits: number;
  /** Copies not served: not valid values, purged (by id, tag or all), or stamped before what this isolate can vouch for. */
  invalid: number;
  purged: number;
  unvouched: number;
  /** Lookups that failed or took longer than locationTimeoutMs. */
  errors: number;
  /** Puts that completed, failed, or were dropped past locationPutsInFlight (or for a stamp this isolate cannot give). */
  puts: number;
  putsFailed: number;
  putsDropped: number;
}

export interface LocationCache {
  /** The valid copies of `items`, all looked up at once; undefined for each one missing, invalid or not answered in time. */
  read(items: readonly { key: string; resource: ResourceName; id: string }[]): Promise<(LocationCopy | undefined)[]>;
  /** Stores `entry` under `key` in the background, stamped with `stamp`; dropped when too many puts are under way. */
  put(key: string, entry: Entry, stamp: PurgeStamp | null, background: (work: Promise<unknown>) => void): void;
  /** The read path's verdicts on the copies it was given. */
  note(outcome: "hit" | "purged" | "unvouched"): void;
  readonly stats: Readonly<LocationStats>;
}

/** The synthetic URL of the copy of the Redis key `key` (built only from validated ids: cache/keys.ts) under the shop's address. */
export function locationUrl(publicUrl: string, key: string): string {
  return `${publicUrl}${LOCATION_PATH}${encodeURIComponent(key)}`;
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

export function createLocationCache(deps: { config: Config; clock: Clock; open: () => Promise<LocationStore> }): LocationCache {
  const { config, clock } = deps;
  const stats: LocationStats = { lookups: 0, hits: 0, invalid: 0, purged: 0, unvouched: 0, errors: 0, puts: 0, putsFailed: 0, putsDropped: 0 };
  const putsUnderWay = createLeaseTable<number, true>({ clock, capacity: DEFAULTS.locationPutsInFlight });
  let tickets = 0;

  async function readOne(store: LocationStore, item: { key: string; resource: ResourceName; id: string }): Promise<LocationCopy | undefined> {
    const response = await subrequest(() => store.match(locationUrl(config.publicUrl, item.key)), DEFAULTS.locationTimeoutMs);
    if (!response) return undefined;
    const stamp = parsedStamp(response.headers.get(STAMP_HEADER));
    const value =
      response.status === 200 && stamp ? await readBounded(response, MAX_BODY_BYTES).then((bytes) => bytes && new TextDecoder().decode(bytes)) : undefined;
    if (!stamp || value === undefined) {
      await response.body?.cancel();
      stats.invalid++;
      return undefined;
    }
    const maxLifeMs = longestLifeMs(config.policies[item.resource], config.ttlJitter);
    const decoded = decodeEntry(value, { resource: item.resource, id: item.id, now: clock.now(), maxLifeMs });
    if (!("entry" in decoded)) {
      stats.invalid++;
      return undefined;
    }
    return { entry: decoded.entry, stamp };
  }

  async function putOne(key: string, value: string, ttlSeconds: number, stamp: string, ticket: number): Promise<void> {
    try {
      const store = await deps.open();
      const response = new Response(value, {
        headers: { "Cache-Control": `public, max-age=${ttlSeconds}`, "Content-Type": "text/plain; charset=utf-8", [STAMP_HEADER]: stamp },
      });
      await subrequest(() => store.put(locationUrl(config.publicUrl, key), response), DEFAULTS.locationPutMs);
      stats.puts++;
    } catch {
      // Not stored (the subrequest budget spent, the cache refusing): L1 and L2 still hold the copy.
      stats.putsFailed++;
    } finally {
      putsUnderWay.release(ticket, true);
    }
  }

  return {
    stats,
    async read(items) {
      stats.lookups += items.length;
      const lookups = (async () => {
        const store = await deps.open();
        return Promise.all(
          items.map((item) =>
            readOne(store, item).catch(() => {
              stats.errors++;
              return undefined;
            }),
          ),
        );
      })().catch(() => items.map(() => undefined));
      const copies = await within(lookups, DEFAULTS.locationTimeoutMs, () => undefined);
      if (!copies) stats.errors++;
      return copies ?? items.map(() => undefined);
    },
    put(key, entry, stamp, background) {
      const stampText = stamp && stampHeader(stamp);
      // Kept until it is no longer usable even on error, as L1 and L2 keep it.
      const ttlSeconds = Math.floor((entry.errorUntil - clock.now()) / 1000);
      const value = stampText && ttlSeconds > 0 ? encodeEntry(entry, config.compressAboveBytes) : undefined;
      const ticket = ++tickets;
      if (!value || !stampText || !putsUnderWay.take(ticket, clock.now() + DEFAULTS.locationPutMs, true)) {
        stats.putsDropped++;
        return;
      }
      background(putOne(key, value, ttlSeconds, stampText, ticket));
    },
    note(outcome) {
      if (outcome === "hit") stats.hits++;
      else stats[outcome]++;
    },
  };
}
