// An isolate under more load than it can take (docs/architecture.md#overload):
// how late it runs (./lag.ts), how many cold pages it takes on at once
// (./limit.ts), which page goes next and which is refused (./admission.ts),
// how long a cold page is held while most visitors leave (./patience.ts), and
// what becomes of work whose visitors left (./departures.ts).
import { createAdmission, type Admission, type AdmissionOptions, type AdmissionStats } from "./admission";
import { createDepartures, type Departures, type DepartureStats } from "./departures";
import { createLagMeter, type LagMeter } from "./lag";
import { createColdLimit } from "./limit";
import { ONE_BROWSER } from "./client";
import { createPatience, type PatienceOptions, type PatienceStats } from "./patience";
import { createPageAdmission, type PageAdmission } from "./pageAdmission";

export { Departed, departed } from "./departures";
export { INTERVAL_MS } from "./limit";
export type { Departures, LagMeter, PageAdmission };

/**
 * The bounds of admission (its options, each documented there), how long a
 * fill nobody waits for counts against the limit, and `turnLeaseMs`: how
 * long a page waiting for its turn holds its product's place at most
 * (./pageAdmission.ts).
 */
type OverloadOptions = Omit<AdmissionOptions, "lateness" | "limit" | "patience" | "maxHoldMs"> & {
  backgroundFillMs: number;
  hold: Omit<PatienceOptions, "clock">;
  turnLeaseMs: number;
};

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
  const patience = createPatience({ ...options.hold, clock: options.clock });
  const admission = createAdmission({ ...options, lateness: () => lag.lagMs(), limit, patience, maxHoldMs: options.hold.maxHoldMs });
  // Work nobody waits for takes the limit's spare room only.
  const departures = createDepartures({ clock: options.clock, backgroundFillMs: options.backgroundFillMs, room: admission.spareRoom });
  return {
    lag,
    admission,
    pages: createPageAdmission({ admission, clock: options.clock, turnLeaseMs: options.turnLeaseMs }),
    departures,
    stats: () => ({ admission: admission.stats(), departures: departures.stats(), hold: patience.stats() }),
  };
}
