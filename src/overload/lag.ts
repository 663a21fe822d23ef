// How late this isolate runs: the delay of a 1 ms timer beyond its 1 ms, the
// queue of ready work ahead of any callback (a reply's, a new request's).
// Admission (./admission.ts) reads it to decide whether a page that needs new
// work may start it.
//
// In Workers the clock moves only across I/O, and a timer's callback is I/O:
// the time it reads is when it ran. One probe is out at a time, started by
// whichever request finds none (the meter is plain data; the timer belongs
// to that request and runs under its `waitUntil`). A probe that has been out
// longer than the last sample is itself a measure: a stalled isolate is seen
// as it stalls, not only once the timer fires. A probe whose request was
// cancelled before its timer fired is forgotten after `probeLostMs`.
import type { Clock } from "../shared/clock";

export interface LagMeter {
  /** Starts a probe if none is out and the last one is older than `everyMs`; cheap otherwise. */
  sample(background: (work: Promise<unknown>) => void): void;
  /** The lag now, in ms: the last sample (while recent), or the age of the probe still out if that is larger. */
  lagMs(): number;
}

export interface LagMeterOptions {
  clock: Clock;
  /** Probes at most this often: a timer every 25 ms is nothing, and a stall is seen within it. */
  everyMs?: number;
  /** A sample older than this says nothing about now (an idle isolate's last busy moment). */
  sampleLifeMs?: number;
  /** A probe out this long is taken for lost (its request was cancelled), not for a stall. */
  probeLostMs?: number;
}

export function createLagMeter({ clock, everyMs = 25, sampleLifeMs = 1000, probeLostMs = 5000 }: LagMeterOptions): LagMeter {
  let lastLagMs = 0;
  let lastSampledAt = -Infinity;
  /** When the probe that is out started; undefined when none is. */
  let probeStartedAt: number | undefined;

  return {
    sample(background) {
      const now = clock.now();
      if (probeStartedAt !== undefined && now - probeStartedAt < probeLostMs) return;
      if (now - lastSampledAt < everyMs) return;
      const startedAt = now;
      probeStartedAt = startedAt;
      background(
        new Promise<void>((resolve) =>
          setTimeout(() => {
            const firedAt = clock.now();
            // A probe taken for lost and replaced says nothing any more.
            if (probeStartedAt === startedAt) {
              lastLagMs = Math.max(0, firedAt - startedAt - 1);
              lastSampledAt = firedAt;
              probeStartedAt = undefined;
            }
            resolve();
          }, 1),
        ),
      );
    },
    lagMs() {
      const now = clock.now();
      const sampled = now - lastSampledAt < sampleLifeMs ? lastLagMs : 0;
      const outstanding = probeStartedAt !== undefined && now - probeStartedAt < probeLostMs ? Math.max(0, now - probeStartedAt - 1) : 0;
      return Math.max(sampled, outstanding);
    },
  };
}
