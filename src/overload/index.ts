// An isolate under more load than it can take (docs/architecture.md#overload):
// how late it runs (./lag.ts), how many cold pages it takes on at once
// (./limit.ts), which page goes next and which is refused (./admission.ts),
// and what becomes of work whose visitors left (./departures.ts).
import { createAdmission, type Admission, type AdmissionOptions, type AdmissionStats } from "./admission";
import { createDepartures, type Departures, type DepartureStats } from "./departures";
import { createLagMeter, type LagMeter } from "./lag";

export { Departed, departed } from "./departures";
export type { Admission, Departures, LagMeter };

/** The bounds of admission (its options, each documented there) and how long a fill nobody waits for counts against the limit. */
type OverloadOptions = Omit<AdmissionOptions, "lateness"> & { backgroundFillMs: number };

export interface Overload {
  lag: LagMeter;
  admission: Admission;
  departures: Departures;
  stats(): { admission: AdmissionStats; departures: DepartureStats };
}

export function createOverload(options: OverloadOptions): Overload {
  const lag = createLagMeter({ clock: options.clock });
  const admission = createAdmission({ ...options, lateness: () => lag.lagMs() });
  // Work nobody waits for takes the limit's spare room only.
  const departures = createDepartures({ clock: options.clock, backgroundFillMs: options.backgroundFillMs, room: admission.spareRoom });
  return { lag, admission, departures, stats: () => ({ admission: admission.stats(), departures: departures.stats() }) };
}
