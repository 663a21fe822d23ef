// How late this isolate runs: how long its work waits behind the work
// already queued in it (docs/architecture.md#overload, "New work starts only
// while the isolate keeps up", has each measure's reason and measurement).
// Admission (./admission.ts) reads it. Three measures, the largest recent
// one counts:
// - How late replies are read: each L2 call and origin service reports its
//   time from send to reply read; the running average beyond the fastest of
//   the last 10-20 s, per service, is the time its replies waited to be read.
//   The lag is the smallest over the services heard from in the last second:
//   the isolate's queue delays them all alike, a service that got slower only
//   its own.
// - How late a call that timed out was noticed (cache/l2/l2Guard.ts): a
//   fresh isolate has no reply to measure by yet.
// - How late a 1 ms timer fires, for a stall with no L2 traffic: one probe
//   at a time, started by whichever request finds none out, every `everyMs`
//   at most; a probe still out counts already, so a stall is seen as it
//   happens.
// In Workers the clock moves only across I/O, and a reply or a timer is I/O:
// the time read then is when it was handled.
import type { Background } from "../shared/subrequests";
import type { Clock } from "../shared/clock";
import { INTERVAL_MS } from "./limit";

export interface LagMeter {
  /** Starts a timer probe if none is out and the last one is older than `everyMs`; cheap otherwise. */
  sample(background: Background): void;
  /** A call to `source` (L2 by default, or an origin service) answered in `ms`, send to reply read. */
  observeReply(ms: number, source?: string): void;
  /** An L2 call timed out because this isolate ran `ms` late. */
  observeLate(ms: number): void;
  /** The lag now, in ms: the larger of the replies' and the timer's, each while recent. */
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
  /** The fastest reply is looked for over the last one to two of these windows: long enough to see an idle moment, short enough to follow a Redis that got slower. */
  fastestWindowMs?: number;
  /** Each reply's wait to be read (its time beyond its source's fastest), and each late-noticed time-out's lateness, as it is measured: the samples of ./limit.ts. */
  onSample?: (ms: number) => void;
}

interface ReplyTimes {
  fastestNow: number;
  fastestBefore: number;
  windowStartedAt: number;
  averageMs: number;
  lastReplyAt: number;
}

/** Weight of each new reply in the running average of reply times: a few dozen replies make it... */
const REPLY_WEIGHT = 0.1;
/**
 * ...and time too: a reply after a gap of one CoDel interval (./limit.ts) weighs 63%. A busy
 * moment followed by a trickle of replies (a purge sync now and then) would
 * otherwise keep the average of that moment for seconds, and hold cold pages
 * back in an isolate that is idle.
 */

export function createLagMeter({
  clock,
  everyMs = 25,
  sampleLifeMs = 1000,
  probeLostMs = 5000,
  fastestWindowMs = 10_000,
  onSample,
}: LagMeterOptions): LagMeter {
  let lastLagMs = 0;
  let lastSampledAt = -Infinity;
  /** When the probe that is out started; undefined when none is. */
  let probeStartedAt: number | undefined;

  /** Per source, the fastest reply of the current window and of the one before, and the running average. */
  const sources = new Map<string, ReplyTimes>();

  function timerLagMs(now: number): number {
    const sampled = now - lastSampledAt < sampleLifeMs ? lastLagMs : 0;
    const outstanding = probeStartedAt !== undefined && now - probeStartedAt < probeLostMs ? Math.max(0, now - probeStartedAt - 1) : 0;
    return Math.max(sampled, outstanding);
  }

  /** The smallest lag of the sources heard from recently: a delay they all show is the isolate's. */
  function replyLagMs(now: number): number {
    let smallest = Number.POSITIVE_INFINITY;
    for (const times of sources.values()) {
      if (now - times.lastReplyAt >= sampleLifeMs) continue;
      smallest = Math.min(smallest, Math.max(0, times.averageMs - Math.min(times.fastestNow, times.fastestBefore)));
    }
    return smallest === Number.POSITIVE_INFINITY ? 0 : smallest;
  }

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
    observeLate(ms) {
      lastLagMs = ms;
      lastSampledAt = clock.now();
      onSample?.(ms);
    },
    observeReply(ms, source = "l2") {
      const now = clock.now();
      let times = sources.get(source);
      // Sources are L2 and the origin's few services: a handful of entries.
      if (!times) sources.set(source, (times = { fastestNow: Infinity, fastestBefore: Infinity, windowStartedAt: now, averageMs: ms, lastReplyAt: -Infinity }));
      if (now - times.windowStartedAt >= fastestWindowMs) {
        times.fastestBefore = times.fastestNow;
        times.fastestNow = Infinity;
        times.windowStartedAt = now;
      }
      times.fastestNow = Math.min(times.fastestNow, ms);
      onSample?.(ms - Math.min(times.fastestNow, times.fastestBefore));
      // After a quiet spell the average starts again from this reply.
      const sinceLast = now - times.lastReplyAt;
      const weight = sinceLast >= sampleLifeMs ? 1 : Math.max(REPLY_WEIGHT, 1 - Math.exp(-sinceLast / INTERVAL_MS));
      times.averageMs += weight * (ms - times.averageMs);
      times.lastReplyAt = now;
    },
    lagMs() {
      const now = clock.now();
      return Math.max(timerLagMs(now), replyLagMs(now));
    },
  };
}
