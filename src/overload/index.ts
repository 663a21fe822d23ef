// An isolate under more load than it can take (docs/architecture.md#overload):
// how late it runs (./lag.ts), which pages may start new work (./admission.ts),
// how long a cold page is held while most visitors leave (./patience.ts), and
// what becomes of work whose visitors left (./departures.ts).
import { createAdmission, type Admission, type AdmissionOptions, type AdmissionStats } from "./admission";
import { createDepartures, type Departures, type DeparturesOptions, type DepartureStats } from "./departures";
import { createLagMeter, type LagMeter } from "./lag";
import { createPatience, type PatienceOptions, type PatienceStats } from "./patience";
import { createPageAdmission, type PageAdmission } from "./pageAdmission";

export { Departed, departed } from "./departures";
export type { Departures, LagMeter, PageAdmission };

/**
 * The bounds of admission and of departures (their options, each documented
 * there); the lag meter is made here. `turnLeaseMs`: how long a page waiting
 * for its turn holds its product's place at most (./pageAdmission.ts).
 */
type OverloadOptions = Omit<AdmissionOptions, "lag" | "patience" | "maxHoldMs"> &
  DeparturesOptions & { hold: Omit<PatienceOptions, "clock">; turnLeaseMs: number };

export interface Overload {
  lag: LagMeter;
  admission: Admission;
  /** Where a page's new work meets admission (./pageAdmission.ts). */
  pages: PageAdmission;
  departures: Departures;
  stats(): { admission: AdmissionStats; departures: DepartureStats; hold: PatienceStats };
}

export function createOverload(options: OverloadOptions): Overload {
  const lag = createLagMeter({ clock: options.clock });
  const patience = createPatience({ ...options.hold, clock: options.clock });
  const admission = createAdmission({ ...options, lag, patience, maxHoldMs: options.hold.maxHoldMs });
  const departures = createDepartures(options);
  return {
    lag,
    admission,
    pages: createPageAdmission({ admission, clock: options.clock, turnLeaseMs: options.turnLeaseMs }),
    departures,
    stats: () => ({ admission: admission.stats(), departures: departures.stats(), hold: patience.stats() }),
  };
}
