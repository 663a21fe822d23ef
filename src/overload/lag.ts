// How late this isolate runs: how long a reply waits in it before it is
// read, the queue new requests wait in too (docs/architecture.md#overload,
// "The lag"). The limit of cold pages (./limit.ts) reads it at every reply.
// - Each L2 call and origin service reports its time from send to reply
//   read. A service answers in about the same time whatever the isolate
//   does, so the running average beyond that service's fastest of the last
//   10-20 s is the time its replies waited to be read. The lag is the
//   smallest over the services heard from in the last second: the
//   isolate's queue delays them all alike, a service that got slower only
//   its own.
// - An L2 call that timed out reports how late it was noticed
//   (cache/l2/l2Guard.ts): a fresh isolate has no reply to measure by yet.
// A stall without replies needs no measure of its own: the limit is read
// only when a reply comes, and the first reply after the stall shows it.
// In Workers the clock moves only across I/O, and a reply is I/O: the time
// read then is when it was handled.
import type { Clock } from "../shared/clock";
import { INTERVAL_MS } from "./limit";

export interface LagMeter {
  /** A call to `source` (L2 by default, or an origin service) answered in `ms`, send to reply read. */
  observeReply(ms: number, source?: string): void;
  /** An L2 call timed out because this isolate ran `ms` late. */
  observeLate(ms: number): void;
  /** The lag now, in ms: the larger of the replies' and the last late time-out's, each while recent. */
  lagMs(): number;
}

export interface LagMeterOptions {
  clock: Clock;
  /** A reading older than this says nothing about now (an idle isolate's last busy moment). */
  sampleLifeMs?: number;
  /** The fastest reply is looked for over the last one to two of these windows: long enough to see an idle moment, short enough to follow a Redis that got slower. */
  fastestWindowMs?: number;
  /** Called after each reply or late time-out is taken in: the moments ./limit.ts reads the lag. */
  onReading?: () => void;
}

interface ReplyTimes {
  fastestNow: number;
  fastestBefore: number;
  windowStartedAt: number;
  averageMs: number;
  lastReplyAt: number;
}

/**
 * Weight of each new reply in the running average of reply times: a few
 * dozen replies make it, and time too: a reply after a gap of one CoDel
 * interval (./limit.ts) weighs 63%. A busy moment followed by a trickle of
 * replies (a purge sync now and then) would otherwise keep the average of
 * that moment for seconds, and hold cold pages back in an isolate that is
 * idle.
 */
const REPLY_WEIGHT = 0.1;

export function createLagMeter({ clock, sampleLifeMs = 1000, fastestWindowMs = 10_000, onReading }: LagMeterOptions): LagMeter {
  let late = { ms: 0, at: Number.NEGATIVE_INFINITY };
  /** Per source, the fastest reply of the current window and of the one before, and the running average. */
  const sources = new Map<string, ReplyTimes>();

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
    observeLate(ms) {
      late = { ms, at: clock.now() };
      onReading?.();
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
      // After a quiet spell the average starts again from this reply.
      const sinceLast = now - times.lastReplyAt;
      const weight = sinceLast >= sampleLifeMs ? 1 : Math.max(REPLY_WEIGHT, 1 - Math.exp(-sinceLast / INTERVAL_MS));
      times.averageMs += weight * (ms - times.averageMs);
      times.lastReplyAt = now;
      onReading?.();
    },
    lagMs() {
      const now = clock.now();
      return Math.max(now - late.at < sampleLifeMs ? late.ms : 0, replyLagMs(now));
    },
  };
}
