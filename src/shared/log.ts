// Structured logs: one JSON line per notable event (a breaker changing state,
// a configuration error, a purge recorded, an origin failure), never one per
// cache hit. Workers Logs and `wrangler tail` keep console output as is, so a
// line is `{"ts":"…","event":"…",…fields}`; error-level events go to
// console.error, warnings to console.warn, the rest to console.log.
import type { Clock } from "./clock";

export type LogLevel = "info" | "warn" | "error";

export function logEvent(event: string, fields: Record<string, unknown> = {}, level: LogLevel = "info"): void {
  let line: string;
  try {
    line = JSON.stringify({ ts: new Date().toISOString(), event, ...fields });
  } catch {
    // A field that cannot be serialised (a cycle, a BigInt) must not turn logging into an error.
    line = JSON.stringify({ ts: new Date().toISOString(), event, unserialisable: true });
  }
  if (level === "error") console.error(line);
  else if (level === "warn") console.warn(line);
  else console.log(line);
}

/**
 * Logs the event unless a line with the same `key` went out less than
 * `intervalMs` ago; held-back lines are counted and reported as
 * `suppressed` on the next line that goes out for the key.
 */
export type RateLimitedLog = (key: string, event: string, fields?: Record<string, unknown>, level?: LogLevel) => void;

/**
 * At most one line per key per `intervalMs`. Keys are a small fixed set
 * (service names), so the memory is bounded by the caller's choice of keys;
 * a bound of 64 keys guards against a caller that gets that wrong.
 */
export function createRateLimitedLog(options: { intervalMs: number; clock: Clock; log?: typeof logEvent }): RateLimitedLog {
  const { intervalMs, clock } = options;
  const log = options.log ?? logEvent;
  const state = new Map<string, { lastAt: number; suppressed: number }>();
  return (key, event, fields = {}, level = "error") => {
    const now = clock.now();
    const seen = state.get(key);
    if (seen && now - seen.lastAt < intervalMs) {
      seen.suppressed++;
      return;
    }
    if (!seen && state.size >= 64) state.delete(state.keys().next().value!);
    state.set(key, { lastAt: now, suppressed: 0 });
    log(event, { ...fields, suppressed: seen?.suppressed ?? 0 }, level);
  };
}
