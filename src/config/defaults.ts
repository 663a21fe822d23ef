// The defaults of the settings a shop may change (through a wrangler var: see ./index.ts and the README), and
// the numbers several modules share, each with the invariant it keeps. A number one module uses lives beside it.
import { RESOURCE_NAMES, RESOURCES, type ResourceName, type ResourcePolicy } from "../origin/resources";
import { ISOLATE_STALL_MS } from "../shared/leases";

/** Each resource's policy as the registry gives it (origin/resources.ts, where each number has its reason). */
export const DEFAULT_POLICIES = Object.fromEntries(RESOURCE_NAMES.map((name) => [name, RESOURCES[name].defaults])) as Record<ResourceName, ResourcePolicy>;

export const DEFAULTS = {
  /**
   * 32 MiB of a Worker isolate's 128 MB: room for tens of thousands of entries and the runtime. L1_MAX_BYTES may ask for twice this
   * at most, so that all an isolate keeps stays within 84 MiB, over 40 MB short of the heap past which it is killed
   * (docs/architecture.md, "Bounded memory and work"). Sizes are counted as twice the JSON length (codec.ts), close to what V8 holds.
   */
  l1MaxBytes: 32 * 1024 * 1024,
  /**
   * Rendered pages kept per isolate, keyed by the versions they were made from (8 MiB ≈ 800 product pages of
   * 10 KB): an L1-hit page then costs about what a static string does. Counted apart from L1's own bound.
   */
  renderedPagesMaxBytes: 8 * 1024 * 1024,
  /**
   * A Redis round trip at the edge takes a few ms; past this a visitor should not wait for it.
   * Not less: an isolate busy rendering dozens of pages handles a reply some ms after it arrived,
   * and a budget spent on that sends pages to the origin although their entries were in L2.
   */
  l2TimeoutMs: 100,
  /**
   * = ISOLATE_STALL_MS, a fill's lock claim (misses only, on their way to the origin anyway): a claim's reply
   * read late by a stalled isolate is still on time, so that a loaded isolate does not duplicate fills.
   */
  l2ClaimTimeoutMs: ISOLATE_STALL_MS,
  /**
   * The budget of a call off the visitor's path: L2 writes (fills, purges, reports), the known-ids filter's own
   * L2 calls (its 8-KB segments are larger than entries), a location put. Longer than a visitor's, so that load
   * does not drop them; a store that hangs, or a put whose request vanished, holds a background place this long
   * at most, and a fill's write held for a claim call to carry it waits this long at most (cache/l2/outbox.ts).
   */
  backgroundCallMs: 1000,
  /**
   * A fill's cross-isolate lock (Nginx's proxy_cache_lock_timeout, 5 s by default): the longest a filler holds it, so
   * that a crashed holder blocks nobody for longer, and the longest a loser waits for the winner's result in L2 before
   * fetching itself, since the winner may hold it that long. The wait ends at once when the winner lets go without
   * writing (its fetch failed), so it is long only when the winner is alive but slow, as an isolate flooded by a herd is.
   */
  lockTtlMs: 3000,
  /** First poll of a lock's loser for the winner's result, doubled each time: the winner usually needs one origin round trip. */
  lockPollFirstMs: 10,
  /**
   * Origin fetches in flight per isolate (ORIGIN_MAX_CONCURRENT); as many more wait in a queue, each within its call's
   * deadline (tier.ts). Little's law: slots = fetches a second × the origin's latency, so 256 carry ~480 fetches a second from
   * one isolate at 530 ms. Coalescing is what keeps a herd off the origin; this cap only bounds an isolate that asks for many
   * different things at once, and one much smaller turns an origin's slowdown into 503s for fetches it would have answered.
   */
  originMaxConcurrent: 256,
  /**
   * Pages needing new work in progress at once per isolate at most, and waiting for their turn at most (COLD_PAGES_MAX): a bound on
   * what the isolate takes on, as many as the origin's slots. Below it, how many go at once is the isolate's limit (overload/limit.ts).
   */
  coldPagesMax: 256,
  /**
   * How long a cold page without a copy to show waits for its turn (COLD_PAGE_WAIT_MS) before the 503: a pause of the
   * isolate is waited out, a saturated isolate answers within this. The wait is off the CPU and its queue is bounded
   * (coldPagesMax), so it costs latency, not work: a first view after 2 s is a slow page, a 503 is a lost one.
   */
  coldPageWaitMs: 2000,
  /**
   * A notable event that repeats (an origin failure per service, a slow page, an invalid L2 value per reason, a purge-log
   * record that is not a purge) is logged at most once per this interval; the rest are counted as `suppressed`.
   */
  logEveryMs: 10_000,
  /**
   * Every breaker's numbers, L2's and each origin service's (shared/breaker.ts): it opens on at least this many
   * failures among the last 4× as many calls, and at least half of them. Few: until it opens, each failure costs a
   * visitor (a hung service, a whole budget); a hung Redis costs an isolate about this many cold pages' L2 budgets.
   * Not one or two: a rate needs calls to be one. What a burst's few late replies would add is kept out otherwise:
   * time-outs must span the isolate's longest stall, and a failure while another call succeeded is not counted.
   */
  breakerFailures: 5,
  /**
   * How long a breaker stays open before one probe: a failing service gets no calls for a while, and a recovered
   * one is probed before a visitor's retry comes (the pages' Retry-After counts it: http/errorPage.ts).
   */
  breakerCoolDownMs: 2000,
  /** Each isolate reads the purge log at most this often: the bound on how long a purged page can still be served. */
  purgePollMs: 1000,
  /**
   * A soft-purged entry is served stale at least this long while it refreshes: the staleness a shop
   * accepts for a purge. An isolate blind to purges (Redis out: invalidation/watcher.ts) takes
   * every purge it may have missed as a soft one, refreshing entries fetched longer ago than this.
   */
  softPurgeGraceMs: 60_000,
  /**
   * Requests a minute (in one isolate) from which a product is hot at every moment (cache/hotness.ts): once a second, the rate
   * refresh-ahead promises never to serve stale. A product asked for much less often is served stale while it revalidates instead.
   */
  hotPerMinute: 60,
  /**
   * One in this many plain pages (every part fresh from L1) is written to the fleet's dataset, standing for as many: most of the traffic,
   * and the part that says least; a quarter of the points' cost of writing every page (docs/architecture.md, "The fleet view": cost).
   */
  fleetPageSample: 10,
  /**
   * Share of its ttl before expiry at which a fresh entry of a hot product is refreshed in the background: a
   * product asked for once a second is never served stale (a quarter of the shortest default ttl, inventory's
   * 10 s, halved by the isolate's spread, is over a second), and no visitor waits for its refresh.
   */
  refreshAheadShare: 0.25,
  /** Values over this many bytes are compressed before they go to L2. */
  compressAboveBytes: 1024,
  /**
   * The longest value read from L2 that is decoded at all, in characters, checked before anything else; longer
   * entries are not written either. Every write must fit one request with its script (the dev gateway takes 1 MiB,
   * Upstash 10 MB), and product JSON compresses several times over, so the largest entry above stays well within it.
   */
  l2ValueMaxChars: 768 * 1024,
  /**
   * How far in the future an entry read from L2 may say it was fetched: isolates' clocks agree to well under a second,
   * and an entry "fetched" later than this would be served fresh, and escape purges, for as long as it claims. The
   * same for a purge read from the log: one "recorded" later would purge everything fetched until then, on every read.
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
  /** Ids of one call: what one bounded Lua call applies (a purge's ids, the filter's add, the fleet's hot list: warming/hotReport.ts). */
  ids: 1000,
  /**
   * Tags of one purge: each raises a mark per resource, which every isolate keeps (invalidation/knownPurges.ts,
   * PURGES_REMEMBERED), and the wide log holds a tag purge whole for every visitor's sync to read: 100 take 500
   * of the 10,000 marks and a few KB of the log, so that no one purge crowds out the others.
   */
  tags: 100,
  /** Bytes of a request body: 1,000 ids of 40 characters fit with room to spare. */
  bodyBytes: 64 * 1024,
} as const;
