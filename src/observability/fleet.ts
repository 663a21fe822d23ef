// What the fleet sees: one data point per page view (one in `pageSample` of those fresh from L1, weighted),
// origin call, breaker change and purge reaching an isolate, written to Workers Analytics Engine (the FLEET
// binding; docs/architecture.md, "The fleet view"). Without the binding nothing is written.
import type { OriginOutcome } from "../origin/failure";
import type { ResourceName } from "../origin/resources";
import type { BreakerState } from "../shared/breaker";
import type { Clock } from "../shared/clock";
import { createRateLimitedLog } from "../shared/log";
import { DEFAULTS } from "../config/defaults";
import { callsOfThisInvocation, type Background } from "../shared/subrequests";
import type { PageRecord } from "./metrics";
import { BLOB, DOUBLE, type FleetOutcome, type PointKind, resourceBlob } from "./fleetPoints";

/** The binding's one method (workers-types' AnalyticsEngineDataset, whose write returns nothing on the platform). */
export interface FleetDataset {
  writeDataPoint(point?: AnalyticsEngineDataPoint): unknown;
}

/** A page as the status page counts it (metrics.ts), and what the fleet adds. */
export interface FleetPage extends Omit<PageRecord, "outcome" | "hot"> {
  /** The route, as app.ts names it. */
  route: "/products/:id" | "/";
  outcome: FleetOutcome;
  status: number;
  /** From the request's arrival to its data read. */
  ms?: number;
  /** A 503 because this isolate shed the work, not because a service failed. */
  shed?: boolean;
}

export type Fleet = ReturnType<typeof createFleet>;

export interface FleetOptions {
  isolateId: string;
  pageSample: number;
  clock: Clock;
  random?: () => number;
}

/**
 * The most purge-reach points one sync writes, both modes together: a sample of 16 quantiles per mode puts each within
 * 1/16 of the distribution, and the points stay well within Analytics Engine's 250 per invocation beside the page's own.
 */
const PURGE_POINTS_PER_SYNC = 32;

/** Columns given by position (1-based) as a dense array up to the last one given, the others empty; isolate and colo always. */
function columns<T>(given: Record<number, T>, empty: T, least: number): T[] {
  const last = Math.max(least, ...Object.keys(given).map(Number));
  return Array.from({ length: last }, (_, i) => given[i + 1] ?? empty);
}

export function createFleet(dataset: FleetDataset | undefined, options: FleetOptions) {
  const random = options.random ?? Math.random;
  // An isolate runs in one location: learned from its pages, named on its other points ("local" off the platform).
  let colo = "local";
  const failureLog = createRateLimitedLog({ intervalMs: DEFAULTS.logEveryMs, clock: options.clock });

  function write(kind: PointKind, blobs: Record<number, string>, doubles: Record<number, number>, background?: Background): void {
    if (!dataset) return;
    const point = {
      indexes: [kind],
      blobs: columns({ ...blobs, [BLOB.isolate]: options.isolateId, [BLOB.colo]: colo }, "", BLOB.colo),
      doubles: columns(doubles, 0, DOUBLE.weight),
    };
    try {
      // The platform's write returns nothing. The local recorder's binding (dev/fleet/recorderBinding.js) offers
      // a delivery, which must live on with a request: taken only by a caller that has one to keep it alive.
      const offered = dataset.writeDataPoint(point) as { deliver?: () => Promise<unknown> | undefined } | undefined;
      const delivery = background && typeof offered?.deliver === "function" ? offered.deliver() : undefined;
      if (delivery) background!(delivery);
    } catch (error) {
      // A point the platform refuses costs the fleet view one point, never the page.
      failureLog(kind, "fleet_write_failed", { kind, message: String(error) }, "warn");
    }
  }

  return {
    /** `pageColo`: the request's `cf.colo`. `background`: the request's waitUntil. */
    page(page: FleetPage, pageColo: string | undefined, background: Background): void {
      if (pageColo) colo = pageColo;
      const served = page.served ?? [];
      const plain = page.outcome === "ok" && !page.defaulted?.length && served.every((s) => s.tier === "l1" && s.freshness === "fresh" && !s.collapsed);
      const weight = plain ? options.pageSample : 1;
      if (plain && weight > 1 && random() * weight >= 1) return;
      const blobs: Record<number, string> = { [BLOB.what]: page.route, [BLOB.outcome]: page.outcome, [BLOB.detail]: page.id };
      const doubles: Record<number, number> = { [DOUBLE.weight]: weight, [DOUBLE.status]: page.status, [DOUBLE.ms]: page.ms ?? 0 };
      const add = (position: number) => (doubles[position] = (doubles[position] ?? 0) + 1);
      for (const s of served) {
        const answered = s.outcome === "failed" ? "failed" : (s.tier ?? "failed");
        blobs[resourceBlob(s.resource)] = answered;
        add(DOUBLE[answered]);
        if (s.freshness === "stale") add(DOUBLE.stale);
        else if (s.freshness === "stale-if-error") add(DOUBLE.staleIfError);
        if (s.collapsed) add(DOUBLE.collapsed);
      }
      for (const kind of ["defaulted", "streamed", "late"] as const) if (page[kind]?.length) doubles[DOUBLE[kind]] = page[kind].length;
      if (page.shed) doubles[DOUBLE.shed] = 1;
      const calls = callsOfThisInvocation();
      if (calls?.l2) doubles[DOUBLE.l2Calls] = calls.l2;
      if (calls?.origin) doubles[DOUBLE.originFetches] = calls.origin;
      write("page", blobs, doubles, background);
    },

    origin(service: ResourceName, outcome: OriginOutcome): void {
      write("origin", { [BLOB.what]: service, [BLOB.outcome]: outcome }, { [DOUBLE.weight]: 1 });
    },

    breaker(name: string, from: BreakerState, to: BreakerState): void {
      write("breaker", { [BLOB.what]: name, [BLOB.outcome]: to, [BLOB.detail]: from }, { [DOUBLE.weight]: 1 });
    },

    /**
     * How long after their recording the purges one sync applied reached this isolate. A sync catching up on a
     * bulk re-price applies hundreds: past PURGE_POINTS_PER_SYNC, evenly spaced quantiles of each mode's
     * reaches, each weighted by the purges it stands for, so that the fleet's counts and percentiles stay whole.
     */
    purgesReached(reaches: readonly { mode: "hard" | "soft"; ms: number }[], background: Background): void {
      for (const mode of ["hard", "soft"] as const) {
        const ms = reaches.filter((reach) => reach.mode === mode).map((reach) => Math.max(0, reach.ms));
        if (ms.length === 0) continue;
        ms.sort((a, b) => a - b);
        const points = Math.min(ms.length, PURGE_POINTS_PER_SYNC / 2);
        const weight = ms.length / points;
        for (let i = 0; i < points; i++) {
          const at = ms[Math.min(ms.length - 1, Math.floor((i + 0.5) * weight))]!;
          write("purge", { [BLOB.what]: mode }, { [DOUBLE.weight]: weight, [DOUBLE.ms]: at }, background);
        }
      }
    },
  };
}
