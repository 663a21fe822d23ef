// bench:soak's pass/fail checks: no 5xx, no unhandled errors, a flat heap,
// throughput held to the end, limiter slots freed, cold products served in
// time, no breaker opened, no L2 read skipped.
import { change, type Answer, type LogCounts, type Snapshot } from "../lib/probe";
import type { DepartingCounts } from "./cancel";
import { COLD_MS, HEAP_LIMIT_MB } from "./plan";
import { departingText, pagesOf, type Window } from "./windowTable";

export interface SoakEnd {
  windows: Window[];
  herdAnswers: Answer[];
  cold: Array<{ status: number; ms: number }>;
  logCounts: LogCounts;
  /** Each instance's snapshot before the herd, and after the cold products. */
  first: Snapshot[];
  last: Snapshot[];
  slots: { slotsFreeMs: number | null; slotsKnown: boolean; slotsText: string };
  departingTotal: DepartingCounts | null;
  /** Windows per throughput figure, and their length. */
  plan: { period: number; windowS: number };
}

/** The checks as rows: what, the value, pass / FAIL / n/a / info. */
export function soakChecks({ windows, herdAnswers, cold, logCounts, first, last, slots, departingTotal, plan }: SoakEnd): string[][] {
  const { slotsFreeMs, slotsKnown, slotsText } = slots;
  const fivexx =
    windows.reduce((n, w) => n + (w.statuses["5xx"] ?? 0), 0) + herdAnswers.filter((a) => a.status >= 500).length + cold.filter((c) => c.status >= 500).length;
  const periods: number[] = [];
  // Pages served well (2xx) per second: fast 503s must not pass for throughput.
  const okPerS = (w: Window) => (w.rps * (w.statuses["2xx"] ?? 0)) / Math.max(1, pagesOf(w));
  for (let i = 0; i < windows.length; i += plan.period)
    periods.push(windows.slice(i, i + plan.period).reduce((n, w) => n + okPerS(w), 0) / windows.slice(i, i + plan.period).length);
  const heapVerdicts = first.map((_, k) => {
    const changes = windows.map((w) => w.instances[k]!);
    if (changes.length === 0 || changes.some((c) => c.heap === null || c.l1MB === null)) return { ok: null, text: "n/a" };
    // L1 grows by design up to its cap: growth is judged on the heap held beyond it.
    const beyondL1 = changes.map((c) => Math.round((c.heap!.afterGcMB - c.l1MB!) * 10) / 10);
    // The limit is for what is held (after GC); the heap found before it is shown, not judged (V8 collects lazily).
    const [peakKept, peakFound] = [Math.max(...changes.map((c) => c.heap!.afterGcMB)), Math.max(...changes.map((c) => c.heap!.usedMB))];
    const peaks = `peak ${peakKept} MB after GC (${peakFound} MB found)`;
    // Window 1 is the warm-up; with fewer than 3 windows there is nothing to compare the last one with.
    if (beyondL1.length < 3) return { ok: peakKept < HEAP_LIMIT_MB ? null : false, text: `too short to judge growth; ${peaks}` };
    const reference = Math.max(...beyondL1.slice(1, -1));
    const last = beyondL1.at(-1)!;
    return {
      ok: last <= Math.max(reference * 1.1, reference + 2) && peakKept < HEAP_LIMIT_MB,
      text: `beyond L1: last ${last} MB vs ≤ ${reference} MB in windows 2..n−1; ${peaks}`,
    };
  });
  const l2Skipped = first.map((_, k) => change(first[k]!, last[k]!).l2?.skipped ?? null);
  // Breaker state changes from before the herd to after the cold products: exact with `breakerTransitions`,
  // else the breakers whose last change (`breakerChanges`) fell in that time (any that changed at all).
  const breakers = first.map((_, k) => change(first[k]!, last[k]!).breakers);
  const verdict = (ok: boolean | null) => (ok === null ? "n/a" : ok ? "pass" : "FAIL");
  const checks = [
    ["no 5xx (herd, wrk, cold)", String(fivexx), verdict(fivexx === 0)],
    ['no unhandled_error / "Cannot perform I/O" log lines', `${logCounts.unhandled} / ${logCounts.io}`, verdict(logCounts.unhandled + logCounts.io === 0)],
    // Expected, not a fault: a request that waited on another's fill or slot
    // was cancelled by its visitor, and workerd drops its continuation.
    ["workerd's \"resolved from a different request context\" warnings (a cancelled waiter's continuation dropped)", String(logCounts.crossRequest), "info"],
    [
      `heap flat after warm-up, below ${HEAP_LIMIT_MB} MB`,
      heapVerdicts.map((h) => h.text).join(" · "),
      verdict(heapVerdicts.some((h) => h.ok === null) ? null : heapVerdicts.every((h) => h.ok)),
    ],
    [
      `last ${plan.period * plan.windowS} s 2xx/s ≥ 0.9 × the best ${plan.period * plan.windowS} s`,
      `${Math.round(periods.at(-1) ?? 0)} vs ${Math.round(Math.max(...periods))}`,
      verdict(periods.length > 1 ? periods.at(-1)! >= 0.9 * Math.max(...periods) : null),
    ],
    ["limiter slots 0 within 2 s after the load", slotsText, verdict(!slotsKnown ? null : slotsFreeMs !== null && slotsFreeMs <= 2000)],
    [
      `cold products answer 200 within ${COLD_MS / 1000} s, right after the load`,
      cold.map((c) => `${c.status || "none"} in ${c.ms} ms`).join(", "),
      verdict(cold.every((c) => c.status === 200 && c.ms <= COLD_MS)),
    ],
    [
      "no breaker opened (state changes of any breaker, herd to cold products)",
      breakers.map((b) => (b === null ? "n/a" : `${b.exact ? "" : "≥"}${b.count}${b.names.length ? ` (${b.names.join(", ")})` : ""}`)).join(" · "),
      verdict(breakers.some((b) => b === null) ? null : breakers.every((b) => b!.count === 0)),
    ],
    [
      "L2 reads skipped by the breaker = 0",
      l2Skipped.map((n) => n ?? "n/a").join(" · "),
      verdict(l2Skipped.some((n) => n === null) ? null : l2Skipped.every((n) => n === 0)),
    ],
    ...(departingTotal ? [["departing visitors: sent / left in flight / left unsent / answered (by status)", departingText(departingTotal), "info"]] : []),
  ];
  return checks;
}
