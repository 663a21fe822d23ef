// How late this isolate runs, "the lag": Peak EWMA of each service's replies beyond
// BBR's min-RTT filter, the smallest over the services (docs/architecture.md#overload). Read by
// the limit of cold pages (overload/limit.ts) and by the read path, which trusts a Redis silence only while the isolate is on time.
import type { Clock } from "./clock";
import { ISOLATE_STALL_MS } from "./leases";

export type LagMeter = ReturnType<typeof createLagMeter>;

/** BBR's min-RTT filter window (10 s, draft-cardwell-iccrg-bbr-congestion-control): long enough to hold an idle moment,
 * short enough to follow a service that got slower for good. */
const FASTEST_WINDOW_MS = 10_000;

/**
 * `intervalMs`: the running average's time constant, and `stepMs` the least time a reply weighs for (the limit's CoDel interval
 * and target: overload/limit.ts); `onReading`: called after each reply or late time-out is taken in, the moments the limit reads the lag.
 */
export function createLagMeter({ clock, intervalMs, stepMs, onReading }: { clock: Clock; intervalMs: number; stepMs: number; onReading?: () => void }) {
  let late = { ms: 0, at: Number.NEGATIVE_INFINITY };
  /** Per source (L2 and the origin's few services): the fastest reply of this window and of the one before, the running average. */
  const sources = new Map<string, { fastestNow: number; fastestBefore: number; windowFrom: number; averageMs: number; lastAt: number }>();
  // = ISOLATE_STALL_MS: a reading older than the isolate's longest stall is not explained by the isolate, so it says nothing of now.
  const recent = (at: number, now: number) => now - at < ISOLATE_STALL_MS;
  return {
    /** An L2 call timed out because this isolate ran `ms` late. */
    observeLate(ms: number) {
      late = { ms, at: clock.now() };
      onReading?.();
    },
    /** A call to `source` (L2, or an origin service) answered in `ms`, send to reply read. */
    observeReply(ms: number, source = "l2") {
      // In Workers the clock moves only across I/O, and a reply is I/O: the time read now is when it was handled.
      const now = clock.now();
      let times = sources.get(source);
      if (!times) sources.set(source, (times = { fastestNow: ms, fastestBefore: ms, windowFrom: now, averageMs: ms, lastAt: -Infinity }));
      if (now - times.windowFrom >= FASTEST_WINDOW_MS) Object.assign(times, { fastestBefore: times.fastestNow, fastestNow: ms, windowFrom: now });
      times.fastestNow = Math.min(times.fastestNow, ms);
      // A reply weighs by the time since the one before, as if read `stepMs` after it at least: a busy moment's average is
      // gone an interval after it however few replies come then, and replies read together still move it.
      times.averageMs += (1 - Math.exp(-Math.max(stepMs, now - times.lastAt) / intervalMs)) * (ms - times.averageMs);
      times.lastAt = now;
      onReading?.();
    },
    /** The lag now, ms: the larger of the replies' and the last late time-out's, each while recent. */
    lagMs() {
      const now = clock.now();
      let replies = Number.POSITIVE_INFINITY;
      for (const t of sources.values())
        if (recent(t.lastAt, now)) replies = Math.min(replies, Math.max(0, t.averageMs - Math.min(t.fastestNow, t.fastestBefore)));
      return Math.max(recent(late.at, now) ? late.ms : 0, replies === Number.POSITIVE_INFINITY ? 0 : replies);
    },
  };
}
