// What one page's read carries from step to step (docs/architecture.md#the-request-path):
// the request itself (where its background work goes, its fills' batch, its
// purge stamp, its visitor), what is still pending after each step, and the
// steps' timings. The read path (readThrough.ts, pageSteps.ts) and the
// background refreshes (fill/refreshes.ts) both take it; it imports none of them.
import type { Background } from "../shared/subrequests";
import type { ResourceName, ResourceTypes } from "../origin/resources";
import type { Entry } from "./entry";
import type { FillCalls } from "./l2/fillBatch";
import type { Served, Tier } from "./served";

export type PageData = { [R in ResourceName]?: Served<ResourceTypes[R]> };

/**
 * How long the steps that wait on I/O took, ms; absent when the step did not
 * run. No L1 or render time: in Workers the clock moves only across I/O, so
 * work on the CPU alone always measures 0.
 */
export interface Timings {
  location?: number;
  l2?: number;
  origin?: number;
}

/**
 * A page's data and its steps' timings; `overShare`: its new work was shed
 * while its client held more than its share of the cold work
 * (overload/admission.ts): the page is the client's own excess (a 429).
 */
export interface PageRead {
  data: PageData;
  timings: Timings;
  overShare?: boolean;
  /**
   * Asked for with `streams` (readThrough.ts): the parts still at the origin
   * once the core was read (not in `data`), and `leave`, which stops their
   * work as a visitor's leaving does.
   */
  later?: { parts: LaterParts; leave(): void };
}

/** Parts a page gets after its core (a streamed page's): each one's read, which settles with what it served. */
export type LaterParts = { [R in ResourceName]?: Promise<Served<ResourceTypes[R]>> };

/** One page read: where its background work goes, and the batch its fills' lock claims share. */
export interface PageRequest {
  background: Background;
  batch?: FillCalls;
  /** The known-ids filter lists the page's subject: it exists, but for the filter's false positives. */
  listed?: boolean;
  /** Whether the subject is asked for often in this isolate (hotness.ts): hot ones are refreshed ahead. */
  hot?: boolean;
  /** The visitor's request signal, which aborts when they leave: no new work is started for nobody. Absent: nobody leaves. */
  visitor?: AbortSignal;
  /** Who asks (http/client.ts), for the order in which waiting cold pages go; absent: "unknown". */
  client?: string;
  /** The parts the page may send after its first byte (readThrough.ts, `streams`): never a core one. */
  streams?: readonly ResourceName[];
  /**
   * Set for a page that may be streamed (readThrough.ts): called once, when
   * the other parts are read, none of the core failed, and those of
   * `streams` still at the origin (`later`) are late.
   */
  coreRead?: (later: LaterParts) => void;
  /**
   * Set by the L2 step: Redis did not answer this page's read although the
   * isolate reads replies on time (it hangs, and its breaker has not opened
   * yet). The page's fills then claim no lock: a claim would wait out its
   * budget for nothing.
   */
  l2Silent?: boolean;
}

/** The visitor of this read has left: no further step is started for it (overload/departures.ts). */
export function visitorLeft(request: PageRequest): boolean {
  return request.visitor?.aborted === true;
}

/** A resource the steps so far could not serve. */
export interface Pending {
  resource: ResourceName;
  key: string;
  /** Best copy at hand that is still usable if the origin fails, and where it came from. */
  fallback?: Entry;
  fallbackTier?: Tier;
  /** L2 answered this request about the key (its read found it or found nothing): no last-resort read is worth making. */
  l2Answered?: boolean;
}
