// Every policy number of the tier lives here, with the reason for it.
// The ones a shop tunes (TTLs, L1 size, timeouts, lock times...) can be overridden
// through a wrangler var (see ./index.ts and the README); the rest are the tier's own.
import { RESOURCE_NAMES, RESOURCES, type ResourceName, type ResourcePolicy } from "../origin/resources";
import { FILLS_AT_ONCE } from "../shared/subrequests";

/** Each resource's policy as the registry gives it (origin/resources.ts, where each number has its reason). */
export const DEFAULT_POLICIES = Object.fromEntries(RESOURCE_NAMES.map((name) => [name, RESOURCES[name].defaults])) as Record<ResourceName, ResourcePolicy>;

export const DEFAULTS = {
  /**
   * 32 MiB of a Worker isolate's 128 MB: room for tens of thousands of
   * entries and the runtime. L1_MAX_BYTES may ask for twice this at most
   * (config/index.ts). An isolate is killed past 128 MB of heap, and
   * everything this tier keeps must fit with room to spare: L1 (≤ 64 MiB) +
   * rendered pages (8 MiB) + the known-ids filter held twice while a new
   * version loads (≤ 2 × 6 MiB) = 84 MiB, leaving over 40 MB for the
   * runtime, the code and the requests in flight. Sizes are counted as
   * twice the JSON length (codec.ts), close to what V8 holds.
   */
  l1MaxBytes: 32 * 1024 * 1024,
  /**
   * Rendered pages kept per isolate, keyed by the versions they were made
   * from (8 MiB ≈ 800 product pages of 10 KB): an L1-hit page then costs about what
   * a static string does. Counted apart from L1's own bound.
   */
  renderedPagesMaxBytes: 8 * 1024 * 1024,
  /**
   * A Redis round trip at the edge takes a few ms; past this a visitor should
   * not wait for it. Not less: an isolate busy rendering dozens of pages
   * handles a reply some ms after it arrived, and a budget spent on that
   * sends pages to the origin although their entries were in L2.
   */
  l2TimeoutMs: 100,
  /** A fill's lock claim (misses only, on their way to the origin anyway): longer, so that a loaded isolate does not duplicate fills. */
  l2ClaimTimeoutMs: 250,
  /**
   * The budget of a call off the visitor's path: L2 writes (fills, purges,
   * reports), the known-ids filter's own L2 calls (its 8-KB segments are
   * larger than entries), a location put (its place held this long at most,
   * a put whose request vanished giving it back then). Longer than a
   * visitor's, so that load does not drop them; a store that hangs holds a
   * background place this long at most. A fill's write held for a claim
   * call to carry it waits this long at most too (cache/l2/outbox.ts).
   */
  backgroundCallMs: 1000,
  /**
   * A fill's cross-isolate lock (Nginx's proxy_cache_lock_timeout, 5 s by
   * default): the longest a filler holds it, so that a crashed holder blocks
   * nobody for longer, and the longest a loser waits for the winner's result
   * in L2 before fetching itself, since the winner may hold it that long. The
   * wait ends at once when the winner lets go without writing (its fetch
   * failed), so it is long only when the winner is alive but slow, as an
   * isolate flooded by a herd is.
   */
  lockTtlMs: 3000,
  /** First poll of a lock's loser for the winner's result, doubled each time: the winner usually needs one origin round trip. */
  lockPollFirstMs: 10,
  /** Polls never further apart than this: a winner that writes late is seen soon after, at a few Redis reads a second. */
  lockPollMaxMs: 160,
  /**
   * Origin fetches in flight per isolate (ORIGIN_MAX_CONCURRENT); more wait
   * in a queue (below). Little's law: slots = fetches a second × the
   * origin's latency, so 256 carry ~480 fetches a second from one isolate
   * at 530 ms. Coalescing is what keeps a herd off the origin; this cap only
   * bounds an isolate that asks for many different things at once, and one
   * much smaller turns an origin's slowdown into 503s for fetches it would
   * have answered.
   */
  originMaxConcurrent: 256,
  /**
   * Pages needing new work in progress at once per isolate at most, and
   * waiting for their turn at most (COLD_PAGES_MAX): a bound on what the
   * isolate takes on, as many as the origin's slots. Below it, how many go
   * at once is the isolate's limit (overload/limit.ts).
   */
  coldPagesMax: 256,
  /**
   * How long a cold page without a copy to show waits for its turn
   * (COLD_PAGE_WAIT_MS) before the 503: a pause of the isolate is waited
   * out, a saturated isolate answers within this. The wait is off the CPU
   * and its queue is bounded (coldPagesMax), so it costs latency, not work:
   * a first view after 2 s is a slow page, a 503 is a lost one.
   */
  coldPageWaitMs: 2000,
  /** A product page whose data took this long to read is logged (`slow_page`, rate-limited): a healthy read takes tens of ms. */
  slowPageMs: 1000,
  /**
   * A notable event that repeats (an origin failure per service, a slow page,
   * an invalid L2 value per reason, a purge-log record that is not a purge) is
   * logged at most once per this interval; the rest are counted as `suppressed`.
   */
  logEveryMs: 10_000,
  /** Callers that may queue for an origin slot; more get stale data, a default or a 503 at once. */
  originMaxQueued: 256,
  /** How long a caller queues for an origin slot, at most: the wait also counts against the service's timeout. */
  originQueueWaitMs: 1000,
  /**
   * Failures (among the last 4× as many calls, and at least half of them) that open one origin service's breaker: a failing
   * service is then not called for a while. Ten, not a handful: under a
   * burst an overloaded origin times out a few calls, and opening on those
   * would turn a slow origin into 503s for everybody.
   */
  originBreakerFailures: 10,
  /** How long that breaker stays open before one probe. */
  originBreakerCoolDownMs: 2000,
  /** Failures (among the last 20 calls, and at least half of them) that open the L2 breaker, and how long it stays open before a probe. */
  l2BreakerFailures: 5,
  l2BreakerCoolDownMs: 5000,
  /** Each isolate reads the purge log at most this often: the bound on how long a purged page can still be served. */
  purgePollMs: 1000,
  /** Without news of purges for this long (L2 out), an isolate counts itself blind... */
  purgeBlindAfterMs: 5000,
  /** ...and then refreshes entries older than this, so staleness stays bounded while Redis is out. */
  purgeBlindMaxAgeMs: 60_000,
  /** A soft-purged entry is served stale at least this long while it refreshes. */
  softPurgeGraceMs: 60_000,
  /** Purges kept in the log for isolates catching up (invalidation/log.ts). */
  purgeLogMax: 1000,
  /**
   * One read of the log, a page: an isolate further behind (a bulk re-price
   * of hundreds of purges of 1,000 ids each, about 11 KB each) reads the
   * next page at once, in the background, until it has read every purge
   * (invalidation/watcher.ts). One read stays small enough for its L2 budget
   * however many purges were recorded meanwhile.
   */
  purgeSyncMaxRecords: 100,
  purgeSyncMaxBytes: 256 * 1024,
  /**
   * Pages one sync reads before it starts over instead (8 MiB: about 700
   * purges of 1,000 ids). Starting over keeps L1 only for the origin's
   * failures, so every page the isolate then serves is read from Redis
   * again: a re-price of 300,000 products made every warm page of every
   * isolate a Redis read (p99 6-13 ms -> 86-91 ms), for products nobody
   * changed. Reading the purges themselves costs what was purged; past
   * this, the log is more than re-reading the pages L1 holds (at most
   * L1_MAX_BYTES, and only those visited) would cost.
   */
  purgeCatchUpMaxPages: 32,
  /**
   * Fields of the purge marks hash at most: (resource, tag) pairs purged
   * within the retention. Past it, marks older than the retention go first,
   * then the oldest, folded into the `~floor` field (everything fetched
   * before it is gone: a new isolate refetches more, never serves a purged
   * entry).
   */
  purgeMarksMax: 20_000,
  /** How long a purge marker blocks older fills: longer than any fill can take. */
  purgeMarkerTtlMs: 60_000,
  /** The purge counter and log outlive quiet periods; they are rewritten with every purge. */
  purgeSeqTtlMs: 30 * 86_400_000,
  purgeLogTtlMs: 2 * 86_400_000,
  /** Recent id purges an isolate remembers for judging (races with fills in flight); older ones were applied to L1 and Redis. */
  recentIdPurges: 10_000,
  /** Requests a minute (in one isolate) from which a product is warm, and hot (see cache/hotness.ts). */
  warmPerMinute: 6,
  hotPerMinute: 60,
  /**
   * One in this many plain pages (every part fresh from L1) is written to the
   * fleet's dataset, standing for as many: most of the traffic, and the part
   * that says least. At 10 million pages a day (90% plain, 0.1 origin calls
   * a page, each a point too), every page written is ~$80 a month over the
   * plan's 10 million points; one in 10 of the plain ones, ~$19 (README,
   * "Seeing the fleet").
   */
  fleetPageSample: 10,
  /** Products warmed per run (cron or `npm run warm`'s default), and how fast: 200 at 10 a second is 20 s and at most 80 origin fetches a second. */
  warming: { top: 200, perSecond: 10, concurrency: FILLS_AT_ONCE },
  /**
   * Each isolate's report of its most requested products to Redis
   * (warming/hotReport.ts): `counted` per period in a bounded top-K whatever
   * the traffic, the top `reported` sent every `everyMs`; the fleet's sorted
   * set keeps the top `kept` and expires `ttlMs` after the last report.
   */
  hotReport: { counted: 50, reported: 20, everyMs: 60_000, kept: 1000, ttlMs: 86_400_000 },
  /**
   * Share of its ttl before expiry at which a fresh entry of a warm / hot
   * product is refreshed in the background: a product asked for once a
   * second is never served stale, and no visitor waits for its refresh.
   */
  refreshAheadShare: { warm: 0.1, hot: 0.25 },
  /** Values over this many bytes are compressed before they go to L2. */
  compressAboveBytes: 1024,
  /**
   * The longest value read from L2 that is decoded at all, in characters,
   * checked before anything else; longer entries are not written either.
   * Every write must fit one request with its script (the dev gateway takes
   * 1 MiB, Upstash 10 MB), and product JSON compresses several times over,
   * so the largest entry above stays well within it.
   */
  l2ValueMaxChars: 768 * 1024,
  /**
   * How far in the future an entry read from L2 may say it was fetched:
   * isolates' clocks agree to well under a second, and an entry "fetched"
   * later than this would be served fresh, and escape purges, for as long
   * as it claims. The same for a purge read from the log: one "recorded"
   * later would purge everything fetched until then, on every read.
   */
  l2MaxClockSkewMs: 60_000,
  /**
   * Subrequests one invocation (a request or a cron run) may make: the Free
   * plan allows 50, so 45 leaves a margin. A cold product page makes about
   * 20. Paid plans allow 1,000 or more: raise it there, so that cron runs
   * (warming, filter rebuilds) can do their whole job in one invocation.
   */
  maxSubrequests: 45,
  /** Key prefix in Redis: `pp:v1:prod:p-000123`. Bump the version to orphan every old entry. */
  keyPrefix: "pp:v1",
} as const;

/** The bounds of an admin call: a `/__purge` request (README, "Purging"), and a `/__known-ids` one (ids, bodyBytes). */
export const ADMIN_LIMITS = {
  /** Ids of one call: what one bounded Lua call applies (a purge's ids, the filter's add). */
  ids: 1000,
  tags: 100,
  /** Bytes of a request body: 1,000 ids of 40 characters fit with room to spare. */
  bodyBytes: 64 * 1024,
} as const;
