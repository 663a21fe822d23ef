// Background refreshes of copies being served (stale, or fresh near their end for a hot product): when they start, and how many at once. A
// refresh is a fill nobody waits for (flights.ts), started by the page that served the copy, under its `waitUntil`; its claim shares a call
// with the isolate's other claims and writes (l2/outbox.ts). No more run at once than the origin has slots for.
import { DEFAULTS } from "../../config/defaults";
import type { OriginClient } from "../../origin/client";
import type { ResourceName } from "../../origin/resources";
import type { Clock } from "../../shared/clock";
import type { Entry } from "../entry";
import type { FillContext } from "./fill";
import type { Flights } from "./flights";
import type { PageRequest } from "../pageRequest";

export interface RefreshesDeps {
  clock: Clock;
  random: () => number;
  origin: Pick<OriginClient, "refreshRoom">;
  flights: Flights;
  fillContext(resource: ResourceName, id: string, request: PageRequest): FillContext;
}

/** What the read path's steps call to refresh (pageSteps.ts, PageTools). */
export interface RefreshTools {
  /** Refreshes a copy being served, in the background; `freshBeyond`: a refresh ahead of that deadline. */
  refresh(key: string, resource: ResourceName, id: string, request: PageRequest, freshBeyond?: number): void;
  /** A hot product's fresh entry near its end, to refresh now so that it is never served stale. */
  dueForRefreshAhead(entry: Entry): boolean;
}

export function createRefreshes({ clock, random, origin, flights, fillContext }: RefreshesDeps): RefreshTools {
  /**
   * Keys of the refreshes started here; plain strings, each dropped once its fill no longer runs (a lease: see flights.ts). A refresh still
   * claiming its lock holds no origin slot yet, but will: it counts against the room.
   */
  const started = new Set<string>();
  function underWay(): number {
    for (const key of started) if (!flights.running(key)) started.delete(key);
    return started.size;
  }

  /**
   * This isolate's part of refreshAheadShare, drawn once in [0.5, 1): isolates holding one L2 write's copies would otherwise all refresh a
   * popular product at once, racing for its lock; spread, later claims find the first one's copy (one call, no lock, no fetch).
   */
  const refreshAheadSpread = 0.5 + random() / 2;

  return {
    /**
     * At most one fill per key: a refresh already under way is left alone, not repeated, and not waited for. Under load the origin's slots
     * go to visitors with nothing to show: this one has a copy, and a later request will refresh it.
     */
    refresh(key, resource, id, request, freshBeyond = 0) {
      if (flights.running(key) || origin.refreshRoom() - underWay() <= 0) return;
      flights.start(key, { ...fillContext(resource, id, request), freshBeyond, refresh: true });
      started.add(key);
    },
    dueForRefreshAhead(entry: Entry) {
      const margin = (entry.freshUntil - entry.fetchedAt) * DEFAULTS.refreshAheadShare * refreshAheadSpread;
      return entry.freshUntil - clock.now() <= margin;
    },
  };
}
