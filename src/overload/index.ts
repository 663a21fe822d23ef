// An isolate under more load than it can take (docs/architecture.md#overload), its parts assembled once.
import { createAdmission, createPageAdmission, type AdmissionOptions, type PageAdmission } from "./admission";
import { createDepartures, type Departures } from "./departures";
import { createLagMeter, type LagMeter } from "../shared/lag";
import { createColdLimit, INTERVAL_MS, TARGET_MS } from "./limit";
import { ISOLATE_LATE_MS } from "../shared/leases";
import { ONE_BROWSER } from "./fairShare";
import { createPatience } from "./patience";

export { Departed, departed } from "./departures";
export { UNKNOWN_CLIENT } from "./fairShare";
export type { Departures, PageAdmission };
export type Overload = ReturnType<typeof createOverload>;

/** The bounds of admission (documented there), and how long a fill nobody waits for counts against the limit. */
export function createOverload(options: Omit<AdmissionOptions, "limit" | "patience"> & { backgroundFillMs: number }) {
  const { clock, maxColdPages, coldPageWaitMs } = options;
  const limit = createColdLimit({ clock, min: Math.min(ONE_BROWSER, maxColdPages), max: maxColdPages });
  // The limit's sample at each reply is the isolate's lag (the smallest over the services), not that reply's own wait.
  const lag: LagMeter = createLagMeter({ clock, intervalMs: INTERVAL_MS, stepMs: TARGET_MS, onReading: () => limit.sample(lag.lagMs()) });
  // The hold: one interval at most. Its window = the hold and the wait: the longest a page waits before its work starts, so
  // every leaver whose work the hold could have spared is in it. Its pages = COLD_PAGES_MAX: as many as admission takes on.
  const patience = createPatience({ clock, maxHoldMs: INTERVAL_MS, windowMs: INTERVAL_MS + coldPageWaitMs, pagesKept: maxColdPages });
  const admission = createAdmission({ ...options, limit, patience });
  // Work nobody waits for takes the limit's spare room only.
  const departures = createDepartures({ clock, backgroundFillMs: options.backgroundFillMs, room: admission.spareRoom });
  return {
    lag,
    admission,
    // A page waiting for its turn holds its product's place through its hold and its wait, and a late reply's grace.
    // At most as many products as admission holds pages: those in progress and those waiting.
    pages: createPageAdmission({ admission, clock, turnLeaseMs: INTERVAL_MS + coldPageWaitMs + ISOLATE_LATE_MS, places: 2 * maxColdPages }),
    departures,
    stats: () => ({ admission: { lagMs: lag.lagMs(), ...admission.stats() }, departures: departures.stats(), hold: patience.stats() }),
  };
}
