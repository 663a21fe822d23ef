// An isolate under more load than it can take (docs/architecture.md#overload):
// how late it runs (./lag.ts), how many cold pages it takes on at once
// (./limit.ts), which page goes next and which is refused (./admission.ts),
// how long a cold page is held while most visitors leave (./patience.ts), and
// what becomes of work whose visitors left (./departures.ts).
import { createAdmission, type Admission, type AdmissionOptions, type AdmissionStats } from "./admission";
import { createDepartures, type Departures, type DepartureStats } from "./departures";
import { createLagMeter, type LagMeter } from "./lag";
import { createColdLimit } from "./limit";
import { createPatience, type PatienceOptions, type PatienceStats } from "./patience";

export { Departed, departed } from "./departures";
export type { Admission, Departures, LagMeter };

/** The bounds of admission (its options, each documented there) and how long a fill nobody waits for counts against the limit. */
type OverloadOptions = Omit<AdmissionOptions, "lateness" | "limit" | "patience" | "maxHoldMs"> & {
  backgroundFillMs: number;
  hold: Omit<PatienceOptions, "clock">;
};

export interface Overload {
  lag: LagMeter;
  admission: Admission;
  departures: Departures;
  stats(): { admission: AdmissionStats; departures: DepartureStats; hold: PatienceStats };
}

export function createOverload(options: OverloadOptions): Overload {
  const limit = createColdLimit({ clock: options.clock, max: options.maxColdPages });
  const lag = createLagMeter({ clock: options.clock, onSample: limit.sample });
  const patience = createPatience({ ...options.hold, clock: options.clock });
  const admission = createAdmission({ ...options, lateness: () => lag.lagMs(), limit, patience, maxHoldMs: options.hold.maxHoldMs });
  // Work nobody waits for takes the limit's spare room only.
  const departures = createDepartures({ clock: options.clock, backgroundFillMs: options.backgroundFillMs, room: admission.spareRoom });
  return { lag, admission, departures, stats: () => ({ admission: admission.stats(), departures: departures.stats(), hold: patience.stats() }) };
}
