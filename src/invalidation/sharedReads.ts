// The reads of the purge log that the isolates of a data center share, kept in the location tier (docs/architecture.md#invalidation, "The
// data center's isolates share their reads"):
//
//   position  where the log stood when an isolate here last read it, when
//             that read was sent, and where it read from
//   pages     what each read returned, under the number it starts after: a
//             page never changes (a number names one purge within its era)
//   reading   that an isolate here is reading the log from a number, since
//             when (a lease, as memcache's against thundering herds)
//
// The watcher (watcher.ts) takes any of them only as it would its own read. What comes back is checked for its shape, a page for its digest
// and each member as a purge record (record.ts); anything else is a miss.
import { locationUrlOf, lookupWithin, putInLocation, type LocationStore } from "../cache/location/location";
import type { PurgeStamp } from "../cache/location/purgeStamp";
import { readBounded } from "../shared/body";
import { sha256Hex } from "../shared/hash";
import { ISOLATE_LATE_MS } from "../shared/leases";
import { subrequest, type Background } from "../shared/subrequests";
import { PAGE_MAX_BYTES, PAGE_MAX_PURGES } from "./log";
import { storedRecord, type PurgeRecord } from "./record";

/** The position's header: `<era>|<seq>|<readAt>|<from>`, readAt when the read was sent (ms since the epoch). */
const POSITION_HEADER = "pp-purge-position";
/** A reading's header: `<era>|<from>|<since>`. */
const READING_HEADER = "pp-purge-reading";
/** A page's header: `<upTo>|<members>|<SHA-256 of the body, hex>`; the body, the log's members one a line. */
const PAGE_HEADER = "pp-purge-page";
const PAGE = /^(\d{1,16})\|(\d{1,4})\|([0-9a-f]{64})$/;

/** A read of the log: the position it found, when it was sent, and the number it read from (its page is kept under it). */
export interface SharedPosition extends PurgeStamp {
  readAt: number;
  from: number;
}

/** An isolate here reading the log of `era` from `from` (the number it stood at), sent at `since`. */
export interface SharedReading {
  era: string;
  from: number;
  since: number;
}

/** A page of the log as an isolate here read it: the records after the number it is kept under, up to `upTo`. */
export interface SharedPage {
  upTo: number;
  records: PurgeRecord[];
}

export type LogShelf = ReturnType<typeof createLogShelf>;

export function createLogShelf(deps: { publicUrl: string; keyPrefix: string; open: () => Promise<LocationStore>; now?: () => number }) {
  const urlOf = (name: string) => locationUrlOf(deps.publicUrl, `${deps.keyPrefix}:purge:${name}`);
  const positionUrl = urlOf("position");
  const readingUrl = urlOf("reading");
  const pageUrl = (era: string, from: number) => urlOf(`page:${era}:${from}`);
  const now = deps.now ?? Date.now;

  async function lookUp(url: string): Promise<Response | undefined> {
    const store = await deps.open();
    return subrequest(() => store.match(url), ISOLATE_LATE_MS);
  }

  /** A header of `fields` whole numbers, `|`-separated: the era (kept as text), then the others as numbers; or undefined. */
  function header(url: string, name: string, fields: number): Promise<[string, ...number[]] | undefined> {
    // Bounded as a page's lookup is: a lookup that hung held the sync's lease, and every sync behind it, while Redis answered.
    return lookupWithin(async () => {
      const response = await lookUp(url);
      if (!response) return undefined;
      await response.body?.cancel();
      const [era, ...rest] = (response.headers.get(name) ?? "").split("|");
      if (rest.length !== fields - 1 || ![era, ...rest].every((field) => /^\d{1,16}$/.test(field!))) return undefined;
      const numbers = rest.map(Number);
      return numbers.every(Number.isSafeInteger) ? [era!, ...numbers] : undefined;
    });
  }

  /** Puts a response under `url`; settles, never fails, once it is put or given up (then the others read Redis, as before). */
  function share(url: string, body: Uint8Array | null, headers: Record<string, string>): Promise<unknown> {
    // Kept a minute: a position is taken only while younger than half a poll, a reading while younger than a
    // sync's wait, and a page never changes and is wanted only by an isolate a few reads behind (watcher.ts).
    return putInLocation(deps.open, url, body, 60, headers).catch(() => undefined);
  }

  /**
   * A page is taken only whole and as the log holds it: its digest, each member a purge record, numbered after `from` and up to `upTo`, in
   * order, as many as it says.
   */
  async function lookPage(era: string, from: number): Promise<SharedPage | undefined> {
    const response = await lookUp(pageUrl(era, from));
    if (!response) return undefined;
    const match = PAGE.exec(response.headers.get(PAGE_HEADER) ?? "");
    if (!match) {
      await response.body?.cancel();
      return undefined;
    }
    const [upTo, count, digest] = [Number(match[1]), Number(match[2]), match[3]!];
    const body = await readBounded(response, PAGE_MAX_BYTES + PAGE_MAX_PURGES);
    if (!body || upTo <= from || (await sha256Hex(body)) !== digest) return undefined;
    const members = count === 0 ? [] : new TextDecoder().decode(body).split("\n");
    if (members.length !== count) return undefined;
    const records: PurgeRecord[] = [];
    let last = from;
    for (const member of members) {
      const record = storedRecord(member, now());
      if (!record || record.seq <= last || record.seq > upTo) return undefined;
      records.push(record);
      last = record.seq;
    }
    return { upTo, records };
  }

  return {
    /** The last read of the log some isolate here shared; undefined when there is none usable, or no answer in time. */
    async read(): Promise<SharedPosition | undefined> {
      const found = await header(positionUrl, POSITION_HEADER, 4);
      return found && found[3]! <= found[1]! ? { era: found[0], seq: found[1]!, readAt: found[2]!, from: found[3]! } : undefined;
    },
    /** Shares a read of the log (in the background: nobody waits for it), once `after` settled (the puts of its pages: a position is never there before them). */
    put(position: SharedPosition, background: Background, after: Promise<unknown> = Promise.resolve()): void {
      const header = `${position.era}|${position.seq}|${Math.floor(position.readAt)}|${position.from}`;
      background(after.then(() => share(positionUrl, null, { [POSITION_HEADER]: header })));
    },
    /** The read of the log some isolate here said it is making; undefined when none, or no answer in time. */
    async reading(): Promise<SharedReading | undefined> {
      const found = await header(readingUrl, READING_HEADER, 3);
      return found && { era: found[0], from: found[1]!, since: found[2]! };
    },
    /** Says that this isolate is reading the log (in the background). */
    putReading(reading: SharedReading, background: Background): void {
      background(share(readingUrl, null, { [READING_HEADER]: `${reading.era}|${reading.from}|${Math.floor(reading.since)}` }));
    },
    /** The page of `era`'s log after `from`, as an isolate here read it; undefined when none is usable, or no answer in time. */
    page: (era: string, from: number): Promise<SharedPage | undefined> => lookupWithin(() => lookPage(era, from)),
    /** Shares a page read from Redis: `members` as the log holds them, numbered after `from` and up to `upTo` (in the background); settles once it is put or given up. */
    putPage(era: string, page: { from: number; upTo: number; members: readonly string[] }, background: Background): Promise<unknown> {
      const body = new TextEncoder().encode(page.members.join("\n"));
      const work = sha256Hex(body)
        .then((digest) => share(pageUrl(era, page.from), body, { [PAGE_HEADER]: `${page.upTo}|${page.members.length}|${digest}` }))
        .catch(() => undefined);
      background(work);
      return work;
    },
  };
}
