// What each data point the tier writes to Workers Analytics Engine holds, column by column. Analytics Engine's
// columns are positional (index1, blob1..blob20, double1..double20), so the writer (fleet.ts) and the operator's
// queries (dev/fleet/queries.ts) both take the positions from here and from nowhere else. Positions are forever:
// a column that changes meaning misreads every point written before it, so new figures take new positions, and
// resources take theirs in RESOURCE_NAMES' order (a new resource appended to RESOURCES takes the next blob).
import { RESOURCE_NAMES, type ResourceName } from "../origin/resources";

/** The dataset `wrangler.toml` binds as FLEET, and the table the queries read. */
export const FLEET_DATASET = "edge_product_pages";

/**
 * What a point is about, in index1: Analytics Engine samples each index on its own, so the rare kinds (a
 * breaker that opened, a purge reaching an isolate) keep their full resolution however many pages there are.
 */
export type PointKind = "page" | "origin" | "breaker" | "purge";

/** How a page ended: the status page's outcomes (metrics.ts), and `left`, a visitor gone before the answer (never rendered). */
export type FleetOutcome = "ok" | "absent" | "filtered" | "unavailable" | "left";

/** Blob positions (1-based, as Analytics Engine names them). */
export const BLOB = {
  /** Every kind: the isolate (the status page's name for it) and its location (`request.cf.colo`; "local" off the platform). */
  isolate: 1,
  colo: 2,
  /** page: its route ("/products/:id" or "/"); origin: the service; breaker: its name; purge: "hard" | "soft". */
  what: 3,
  /** page: its FleetOutcome; origin: the call's outcome (found, absent, timeout, overloaded…); breaker: the state it entered. */
  outcome: 4,
  /** page: the product id ("home" for the home page); breaker: the state it left. */
  detail: 5,
} as const;

/** page: the tier that answered each resource (l1, location, l2, origin, failed; "" when the page did not read it). */
export function resourceBlob(resource: ResourceName): number {
  return 6 + RESOURCE_NAMES.indexOf(resource);
}

/** Double positions (1-based). */
export const DOUBLE = {
  /** Every kind: how many events this point stands for (pages are sampled: see FLEET_PAGE_SAMPLE). Sums are `SUM(_sample_interval * double1)`. */
  weight: 1,
  /** page: the HTTP status. */
  status: 2,
  /** page: ms from arrival to its data read; purge: ms from the purge's recording to this isolate applying it. */
  ms: 3,
  /** page: resources answered from each tier, then those that failed (the status page's per-tier counts, summed over resources). */
  l1: 4,
  location: 5,
  l2: 6,
  origin: 7,
  failed: 8,
  /** page: resources served stale while refreshed, and kept only for the origin's failures. */
  stale: 9,
  staleIfError: 10,
  /** page: resources that waited for another request's or isolate's fill. */
  collapsed: 11,
  /** page: sections shown with their default content. */
  defaulted: 12,
  /** page: 1 when it was a 503 because this isolate shed the work (overload), not because a service failed. */
  shed: 13,
  /**
   * page: the L2 calls (HTTP requests to Redis: a pipeline or script is one) and origin fetches its request made
   * before its answer; work that goes on after it (a fill's write, a background refresh) is not counted here.
   */
  l2Calls: 14,
  originFetches: 15,
  /** page: a streamed page's sections sent after its first byte, and those of them past their bound (shown with their default). */
  streamed: 16,
  late: 17,
} as const;

/** Tiers a resource answer counts in, as the page's doubles name them. */
export const ANSWER_TIERS = ["l1", "location", "l2", "origin", "failed"] as const;

export const blob = (position: number) => `blob${position}`;
export const double = (position: number) => `double${position}`;
