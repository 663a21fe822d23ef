// Where the purge log stood when an isolate of this data center last read it,
// kept in the location tier (the data center's Cache API) so that the
// isolates of a data center share one read of the log instead of each
// making its own every half `PURGE_POLL_MS` (issue 49: what grows with the
// number of isolates). An isolate whose own position is the one found here
// knows every purge recorded before that read was sent, as if it had read
// the log itself then (watcher.ts): it goes on without a Redis call. Any
// other answer, or none, and it reads Redis as before.
//
// Any Worker on the zone can write there, as with the page copies
// (cache/location/location.ts): what comes back is checked for its shape,
// and the watcher takes it only as its own read (watcher.ts). The zone's own
// Workers are trusted, as with the copies (docs/architecture.md#invalidation).
import { locationUrlOf, type LocationStore } from "../cache/location/location";
import type { PurgeStamp } from "../cache/location/purgeStamp";
import { DEFAULTS } from "../config/defaults";
import { readBounded } from "../shared/body";
import { storedRecord, type PurgeRecord } from "./record";
import { within } from "../shared/leases";
import { subrequest } from "../shared/subrequests";
import { sha256Hex } from "../shared/hash";

/** A page's response header: `<upTo>|<records>|<SHA-256 of the body, hex>`; the body, the log's members one a line. */
const PAGE_HEADER = "pp-purge-page";
const PAGE = /^(\d{1,16})\|(\d{1,4})\|([0-9a-f]{64})$/;

/** The response header: `<era>|<seq>|<readAt>`, readAt when the read was sent (ms since the epoch). */
const POSITION_HEADER = "pp-purge-position";
const POSITION = /^(\d{1,16})\|(\d{1,16})\|(\d{1,16})$/;

/** A read of the log: the position it found, and when it was sent. */
export interface SharedPosition extends PurgeStamp {
  readAt: number;
}

/** A page of the log as an isolate of this data center read it: the records after `from`, up to `upTo`. */
interface SharedPage {
  upTo: number;
  records: PurgeRecord[];
}

export interface PositionShelf {
  /** The last read of the log some isolate here shared; undefined when there is none usable, or no answer in time. */
  read(): Promise<SharedPosition | undefined>;
  /**
   * Shares a read of the log (in the background: nobody waits for it), with
   * the pages it read to get there, each under the number it starts after
   * (put before the position, so that whoever finds the position finds them).
   */
  put(
    position: SharedPosition,
    pages: readonly { from: number; upTo: number; members: readonly string[] }[],
    background: (work: Promise<unknown>) => void,
  ): void;
  /** The page of `era`'s log that starts after `from`, as some isolate here read it; undefined when there is none usable, or no answer in time. */
  page(era: string, from: number): Promise<SharedPage | undefined>;
}

export function createPositionShelf(deps: {
  publicUrl: string;
  keyPrefix: string;
  open: () => Promise<LocationStore>;
  clock?: { now(): number };
}): PositionShelf {
  const url = locationUrlOf(deps.publicUrl, `${deps.keyPrefix}:purge:position`);
  const pageUrl = (era: string, from: number) => locationUrlOf(deps.publicUrl, `${deps.keyPrefix}:purge:page:${era}:${from}`);
  const now = () => (deps.clock ?? Date).now();

  /**
   * A page is taken only whole and as the log holds it: its digest, each
   * member a purge record (the log's own check: record.ts), numbered after
   * `from` and up to `upTo`, in order, as many as it says. Anything else is
   * a miss, and the isolate reads Redis.
   */
  async function lookPage(era: string, from: number): Promise<SharedPage | undefined> {
    const store = await deps.open();
    const response = await subrequest(() => store.match(pageUrl(era, from)), DEFAULTS.locationTimeoutMs);
    if (!response) return undefined;
    const match = PAGE.exec(response.headers.get(PAGE_HEADER) ?? "");
    if (!match) {
      await response.body?.cancel();
      return undefined;
    }
    const [upTo, count, digest] = [Number(match[1]), Number(match[2]), match[3]!];
    const body = await readBounded(response, DEFAULTS.purgeSyncMaxBytes + DEFAULTS.purgeSyncMaxRecords);
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

  async function look(): Promise<SharedPosition | undefined> {
    const store = await deps.open();
    const response = await subrequest(() => store.match(url), DEFAULTS.locationTimeoutMs);
    if (!response) return undefined;
    await response.body?.cancel();
    const match = POSITION.exec(response.headers.get(POSITION_HEADER) ?? "");
    if (!match) return undefined;
    const [seq, readAt] = [Number(match[2]), Number(match[3])];
    return Number.isSafeInteger(seq) && Number.isSafeInteger(readAt) ? { era: match[1]!, seq, readAt } : undefined;
  }

  return {
    page: (era, from) =>
      within(
        lookPage(era, from).catch(() => undefined),
        DEFAULTS.locationTimeoutMs,
        () => undefined,
      ),
    // Bounded as a page's lookup is (location.ts): a sync waits no longer for the shelf than a page for its copy,
    // and a lookup that hung held the sync's lease, and every other sync behind it, while Redis answered.
    read: () =>
      within(
        look().catch(() => undefined),
        DEFAULTS.locationTimeoutMs,
        () => undefined,
      ),
    put(position, pages, background) {
      const work = (async () => {
        const store = await deps.open();
        await Promise.all(
          pages.map(async (page) => {
            const text = page.members.join("\n");
            const body = new TextEncoder().encode(text);
            const response = new Response(body, {
              // A page never changes (a number names one purge within its era); kept a minute, the longest a sync reads behind.
              headers: { "Cache-Control": "public, max-age=60", [PAGE_HEADER]: `${page.upTo}|${page.members.length}|${await sha256Hex(body)}` },
            });
            await subrequest(() => store.put(pageUrl(position.era, page.from), response), DEFAULTS.locationPutMs);
          }),
        );
        const response = new Response(null, {
          // Kept a minute: a reader takes it only while it is younger than half a poll (watcher.ts).
          headers: { "Cache-Control": "public, max-age=60", [POSITION_HEADER]: `${position.era}|${position.seq}|${Math.floor(position.readAt)}` },
        });
        await subrequest(() => store.put(url, response), DEFAULTS.locationPutMs);
      })().catch(() => undefined); // Not shared: the others read Redis, as before.
      background(work);
    },
  };
}
