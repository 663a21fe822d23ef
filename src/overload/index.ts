// An isolate under more load than it can take (docs/architecture.md#overload):
// how late it runs (./lag.ts), how many cold pages it takes on at once
// (./limit.ts), which page goes next and which is refused (./admission.ts),
// how long a cold page is held while most visitors leave (./patience.ts), and
// what becomes of work whose visitors left (./departures.ts).
import { createAdmission, type Admission, type AdmissionOptions, type AdmissionStats } from "./admission";
import { createDepartures, type Departures, type DepartureStats } from "./departures";
import { createLagMeter, type LagMeter } from "./lag";
import { createColdLimit, INTERVAL_MS } from "./limit";
import { ISOLATE_LATE_MS } from "../shared/leases";
import { ONE_BROWSER } from "./client";
import { createPatience, type PatienceStats } from "./patience";
import { createPageAdmission, type PageAdmission } from "./pageAdmission";

export { Departed, departed } from "./departures";
export type { Departures, LagMeter, PageAdmission };

/** The bounds of admission (its options, each documented there), and how long a fill nobody waits for counts against the limit. */
type OverloadOptions = Omit<AdmissionOptions, "lateness" | "limit" | "patience"> & { backgroundFillMs: number };

export interface Overload {
  lag: LagMeter;
  admission: Admission;
  /** Where a page's new work meets admission (./pageAdmission.ts). */
  pages: PageAdmission;
  departures: Departures;
  stats(): { admission: AdmissionStats; departures: DepartureStats; hold: PatienceStats };
}

export function createOverload(options: OverloadOptions): Overload {
  const limit = createColdLimit({ clock: options.clock, min: Math.min(ONE_BROWSER, options.maxColdPages), max: options.maxColdPages });
  // The limit's sample at each reply is the isolate's lag (./lag.ts: the smallest over the services), not that reply's own wait.
  const lag: LagMeter = createLagMeter({ clock: options.clock, onReading: () => limit.sample(lag.lagMs()) });
  // The hold while most visitors leave is one interval (./patience.ts).
  const patience = createPatience({ clock: options.clock, maxHoldMs: INTERVAL_MS });
  const admission = createAdmission({ ...options, lateness: () => lag.lagMs(), limit, patience });
  // Work nobody waits for takes the limit's spare room only.
  const departures = createDepartures({ clock: options.clock, backgroundFillMs: options.backgroundFillMs, room: admission.spareRoom });
  return {
    lag,
    admission,
    // A page waiting for its turn holds its product's place through its hold and its wait, and a late reply's grace.
    pages: createPageAdmission({ admission, clock: options.clock, turnLeaseMs: INTERVAL_MS + options.coldPageWaitMs + ISOLATE_LATE_MS }),
    departures,
    stats: () => ({ admission: admission.stats(), departures: departures.stats(), hold: patience.stats() }),
  };
}
