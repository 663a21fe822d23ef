// What a read gives the page for one resource: the data, where it came from
// and how it stood (the page's headers say all of it: http/headers.ts).
import type { OriginFailure } from "../origin/failure";
import type { ResourceName } from "../origin/resources";
import { isAbsent, type Entry } from "./entry";

/** Where a copy came from: this isolate, this data center (the Cache API), Redis, or the origin. */
export type Tier = "l1" | "location" | "l2" | "origin";

export interface Served<T> {
  resource: ResourceName;
  /** `found`: data to show; `absent`: the origin says there is none; `failed`: nothing usable. */
  outcome: "found" | "absent" | "failed";
  data: T | null;
  entry?: Entry<T>;
  /** Where the answer came from; `undefined` when nothing was usable. */
  tier?: Tier;
  /** How the entry stood: fresh, within stale-while-revalidate, or only within stale-if-error. */
  freshness?: "fresh" | "stale" | "stale-if-error";
  /** This request waited for a fill that another request or isolate ran. */
  collapsed: boolean;
  /** Why the origin was asked (for Cache-Status `fwd=`): a miss, a stale copy, or caching off (CACHING=off). */
  forward?: "miss" | "stale" | "bypass";
  /** Why the origin could not answer, when it could not. */
  failure?: OriginFailure;
}

export function served(
  resource: ResourceName,
  entry: Entry,
  tier: Tier,
  freshness: Served<unknown>["freshness"],
  extra: Partial<Served<unknown>> = {},
): Served<unknown> {
  return {
    resource,
    outcome: isAbsent(entry) ? "absent" : "found",
    // Read through: an L1 entry parses its data only when a render reads it (entry.ts, withDataOnRead).
    get data() {
      return entry.data;
    },
    entry,
    tier,
    freshness,
    collapsed: false,
    ...extra,
  };
}

/** Nothing usable for `resource`: `extra` says why the origin was asked and why it could not answer. */
export function failed(resource: ResourceName, extra: Pick<Served<unknown>, "forward" | "failure">): Served<unknown> {
  return { resource, outcome: "failed", data: null, collapsed: false, ...extra };
}
