// Background refreshes of copies being served (stale, or fresh near their
// end for a warm or hot product): when they start, how many at once, and how
// they share Redis calls. A refresh is a fill nobody waits for (flights.ts);
// with L2, those of many requests are sent together (l2/sendQueue.ts), no more
// at once than the origin has slots for.
import { DEFAULTS } from "../../config/defaults";
import type { OriginClient } from "../../origin/client";
import type { ResourceName } from "../../origin/resources";
import type { Clock } from "../../shared/clock";
import type { Entry } from "../entry";
import type { FillContext } from "./fill";
import { createFillBatch } from "../l2/fillBatch";
import type { Flights } from "./flights";
import type { L2 } from "../l2/l2";
import type { ClaimOutbox } from "../l2/claimOutbox";
import type { Heat } from "../hotness";
import type { PageRequest } from "../pageRequest";
import { createSendQueue, type SendStats } from "../l2/sendQueue";

/** A background refresh waiting to be sent (see createSendQueue): `freshBeyond` for a refresh ahead. */
interface QueuedRefresh {
  key: string;
  resource: ResourceName;
  id: string;
  freshBeyond: number;
}

export interface RefreshesDeps {
  l2: L2 | null;
  /** The isolate's lock claims, which the refreshes' claims join (l2/claimOutbox.ts). */
  outbox?: ClaimOutbox;
  clock: Clock;
  sleep: (ms: number) => Promise<void>;
  random: () => number;
  origin: Pick<OriginClient, "refreshRoom">;
  flights: Flights;
  fillContext(resource: ResourceName, id: string, request: PageRequest): FillContext;
}

/** What the read path's steps call to refresh (pageSteps.ts, PageTools). */
export interface RefreshTools {
  /** Refreshes a copy being served, in the background; `freshBeyond`: a refresh ahead of that deadline. */
  refresh(key: string, resource: ResourceName, id: string, request: PageRequest, freshBeyond?: number): void;
  /** A warm or hot product's fresh entry near its end, to refresh now so that it is never served stale. */
  dueForRefreshAhead(entry: Entry, heat: Heat): boolean;
}

export interface Refreshes extends RefreshTools {
  /** The send queue's figures (null without L2: each refresh starts at once). */
  stats(): SendStats | null;
}

export function createRefreshes({ l2, outbox, clock, sleep, random, origin, flights, fillContext }: RefreshesDeps): Refreshes {
  /**
   * Keys of the refreshes the sends below started; plain strings, each
   * dropped once its fill no longer runs (a lease: see flights.ts). Only the
   * sends add and prune them (without L2 there are no sends, and no keys).
   */
  const started = new Set<string>();
  function underWay(): number {
    for (const key of started) if (!flights.running(key)) started.delete(key);
    return started.size;
  }

  /**
   * At most one fill per key: a refresh already under way is left alone,
   * not repeated, and not waited for. Under load the origin's slots go to
   * visitors with nothing to show: this one has a copy, and a later request
   * will refresh it. (Asked again when a queued refresh is sent: the copy
   * may have been filled meanwhile, and the origin's load have changed.)
   */
  function start(key: string, resource: ResourceName, id: string, request: PageRequest, freshBeyond: number): boolean {
    if (flights.running(key) || origin.refreshRoom() === 0) return false;
    flights.start(key, { ...fillContext(resource, id, request), freshBeyond, refresh: true });
    return true;
  }

  /** Refreshes of many requests, sent together (with no L2 there are no Redis calls to save: each starts at once). */
  const queue =
    l2 &&
    createSendQueue<QueuedRefresh>({
      clock,
      sleep,
      windowMs: DEFAULTS.refreshWindowMs,
      maxPerSend: DEFAULTS.refreshesPerSend,
      maxQueued: DEFAULTS.sendQueueMax,
      maxWaitMs: DEFAULTS.refreshMaxWaitMs,
      keyOf: (refresh) => refresh.key,
      send(batch, background) {
        const request: PageRequest = { background, batch: createFillBatch(l2, sleep, background, outbox) };
        // No more than the origin has slots for: a refresh past the room would win its lock only to be
        // shed by the limiter, then cost a release. Those started before and still claiming hold no slot
        // yet, so they count against the room too (those already fetching count twice: on the safe side).
        let room = origin.refreshRoom() - underWay();
        for (const { key, resource, id, freshBeyond } of batch) {
          if (room <= 0) break;
          if (!start(key, resource, id, request, freshBeyond)) continue;
          started.add(key);
          room--;
        }
      },
    });

  /**
   * How much of the refresh-ahead share this isolate uses, drawn once in
   * [0.5, 1). Isolates hold copies of one L2 write, with the same deadlines:
   * with the same share they would all refresh a popular product at the same
   * moment, race for its lock, and the losers would poll L2 until the
   * winner wrote. Apart, the first to refresh writes L2, and the others'
   * claims find its copy there (one call, no lock, no origin fetch).
   */
  const refreshAheadSpread = 0.5 + random() / 2;

  return {
    refresh(key, resource, id, request, freshBeyond = 0) {
      if (flights.running(key)) return;
      if (queue) queue.add({ key, resource, id, freshBeyond }, request.background);
      else start(key, resource, id, request, freshBeyond);
    },
    dueForRefreshAhead(entry: Entry, heat: Heat) {
      if (heat === "cold") return false;
      const margin = (entry.freshUntil - entry.fetchedAt) * DEFAULTS.refreshAheadShare[heat] * refreshAheadSpread;
      return entry.freshUntil - clock.now() <= margin;
    },
    stats: () => (queue ? queue.stats() : null),
  };
}
