// The known-ids filter's numbers, each with the invariant it keeps. They live here, beside the code that uses them,
// rather than in src/config/defaults.ts: only room and fpRate are read by the configuration (src/config/index.ts).
import { DEFAULTS } from "../config/defaults";

export const KNOWN_IDS_DEFAULTS = {
  /**
   * The filter's room: each build sizes it for the catalog it last listed plus this many ids (the first build,
   * for this many), up to what `maxBytes` holds. It bounds the products created between two daily rebuilds that
   * keep the false-positive rate at fpRate; ≈ 280 KB per isolate at 1% for the demo catalog (10,000 products).
   */
  room: 200_000,
  /**
   * 1 in 100 ids that do not exist still goes on to negative caching and the origin: it makes a crawler of
   * random ids cost the origin 1% of its requests, for 9.6 bits per id. Halving it costs ~1.4 bits per id more.
   */
  fpRate: 0.01,
  /**
   * How often an isolate re-reads the filter's meta (one small GET): new products added by
   * other isolates, and new versions, become visible here within this delay (plus a load).
   */
  refreshMs: 60_000,
  /**
   * A filter built longer ago than this is not trusted (every id is let through): products created while notifications
   * were lost would otherwise be refused until the next rebuild. Two days = a daily rebuild plus one missed run.
   */
  maxAgeMs: 2 * 86_400_000,
} as const;

export const KNOWN_IDS_LIMITS = {
  /**
   * The largest filter, in bytes: each isolate's copy (two while a new version loads) within the memory the tier keeps of a
   * Worker's 128 MB (docs/architecture.md#bounded-memory-and-work). It caps a build's capacity (past it the false-positive rate
   * climbs, never a false negative) and a meta asking for more is refused: a corrupt meta cannot make isolates allocate more.
   */
  maxBytes: 6 * 1024 * 1024,
  /**
   * Ids added to one version are also kept in a list (for other isolates to catch up without
   * reloading every segment), up to this many; past it, isolates reload the segments instead.
   * Ids added during a rebuild beyond it make that rebuild fail (it cannot prove it holds them).
   */
  logCap: 10_000,
  /**
   * = DEFAULTS.lockTtlMs: a new isolate that finds no copy of the filter in the location tier waits a random part
   * of this (full jitter) and looks again before it reads the segments from Redis, as a fill lock's loser waits for
   * the winner's work before doing it itself: isolates started together (a deploy) then read them about once per
   * data center, the first one's put serving the rest. It delays no page: the filter fails open while it loads.
   */
  locationSpreadMs: DEFAULTS.lockTtlMs,
  /**
   * A build announced this recently counts as under way: the quarter-hourly cron, which builds a filter Redis lacks,
   * leaves it be (a second build would replace it). At least a cron invocation's wall time (Cloudflare's 15 minutes), so
   * that no run replaces a build still listing; the double lets one quarter-hourly run pass before the next builds again.
   */
  buildUnderWayMs: 30 * 60_000,
  /**
   * How long a check may run before another may start: the runtime ends `waitUntil` work 30 s after the response (Cloudflare's limit).
   * After a switch, the previous version's keys live this long too: a check that was loading them when the switch came ends within it.
   */
  checkLeaseMs: 30_000,
} as const;

/**
 * Every key of a version lives this long from its build (each rebuild writes a new version with fresh TTLs): as
 * long as the filter may be trusted, plus the longest a build counts as under way, so that a build started as the
 * filter went stale switches before the meta it announced into expires. Past it nothing would serve them: Redis
 * drops them, and the quarter-hourly cron builds the filter again (needsBuilding).
 */
export const KEY_TTL_MS = KNOWN_IDS_DEFAULTS.maxAgeMs + KNOWN_IDS_LIMITS.buildUnderWayMs;
