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
import { within } from "../shared/leases";
import { subrequest } from "../shared/subrequests";

/** The response header: `<era>|<seq>|<readAt>`, readAt when the read was sent (ms since the epoch). */
const POSITION_HEADER = "pp-purge-position";
const POSITION = /^(\d{1,16})\|(\d{1,16})\|(\d{1,16})$/;

/** A read of the log: the position it found, and when it was sent. */
export interface SharedPosition extends PurgeStamp {
  readAt: number;
}

export interface PositionShelf {
  /** The last read of the log some isolate here shared; undefined when there is none usable, or no answer in time. */
  read(): Promise<SharedPosition | undefined>;
  /** Shares a read of the log (in the background: nobody waits for it). */
  put(position: SharedPosition, background: (work: Promise<unknown>) => void): void;
}

export function createPositionShelf(deps: { publicUrl: string; keyPrefix: string; open: () => Promise<LocationStore> }): PositionShelf {
  const url = locationUrlOf(deps.publicUrl, `${deps.keyPrefix}:purge:position`);

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
    // Bounded as a page's lookup is (location.ts): a sync waits no longer for the shelf than a page for its copy,
    // and a lookup that hung held the sync's lease, and every other sync behind it, while Redis answered.
    read: () =>
      within(
        look().catch(() => undefined),
        DEFAULTS.locationTimeoutMs,
        () => undefined,
      ),
    put(position, background) {
      const work = (async () => {
        const store = await deps.open();
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
