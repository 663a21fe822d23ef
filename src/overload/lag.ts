// How late this isolate runs: how long a reply waits in it before it is
// read, the queue new requests wait in too (docs/architecture.md#overload,
// "The lag"). The limit of cold pages (./limit.ts) reads it at every reply.
// - Each L2 call and origin service reports its time from send to reply
//   read. A service answers in about the same time whatever the isolate
//   does, so its replies' running average (an EWMA decaying with time, as
//   Finagle's Peak EWMA) beyond its fastest reply of the last
//   10-20 s (BBR's min-RTT filter) is the time its replies waited to be
//   read. The lag is the smallest over the services heard from in the last
//   second: the isolate's queue delays them all alike, a service that got
//   slower only its own.
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
 * The window of a service's fastest reply: BBR's min-RTT filter (10 s,
 * draft-cardwell-iccrg-bbr-congestion-control): long enough to hold an
 * idle moment, short enough to follow a Redis that got slower for good.
 * The fastest is taken over the last one to two windows.
 */
const FASTEST_WINDOW_MS = 10_000;
/**
 * A service's reading older than this says nothing about now: a second,
 * several of a service's replies apart under load (an origin service's reply
 * comes hundreds of ms after the last one), so that the smallest lag is taken
 * over every service the pages in progress use.
 */
const READING_LIFE_MS = 1000;
/** The least weight of a reply in its service's average: a few dozen replies read in one moment make it. */
const REPLY_WEIGHT = 0.1;

export function createLagMeter({ clock, onReading }: LagMeterOptions): LagMeter {
  let late = { ms: 0, at: Number.NEGATIVE_INFINITY };
  /** Per source, the fastest reply of the current window and of the one before, and the running average. */
  const sources = new Map<string, ReplyTimes>();

  /** The smallest lag of the sources heard from recently: a delay they all show is the isolate's. */
  function replyLagMs(now: number): number {
    let smallest = Number.POSITIVE_INFINITY;
    for (const times of sources.values()) {
      if (now - times.lastReplyAt >= READING_LIFE_MS) continue;
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
      if (now - times.windowStartedAt >= FASTEST_WINDOW_MS) {
        times.fastestBefore = times.fastestNow;
        times.fastestNow = Infinity;
        times.windowStartedAt = now;
      }
      times.fastestNow = Math.min(times.fastestNow, ms);
      // A reply weighs by the time since the one before (a busy moment's average is gone one interval after it,
      // however few replies come then), and at least REPLY_WEIGHT (replies read in one moment still count).
      const weight = Math.max(REPLY_WEIGHT, 1 - Math.exp(-(now - times.lastReplyAt) / INTERVAL_MS));
      times.averageMs += weight * (ms - times.averageMs);
      times.lastReplyAt = now;
      onReading?.();
    },
    lagMs() {
      const now = clock.now();
      return Math.max(now - late.at < READING_LIFE_MS ? late.ms : 0, replyLagMs(now));
    },
  };
}
