// bench:chaos's one excused kind of stale price: a purge Redis lost with its
// data before every isolate could read it. The tier chooses to keep such a
// copy (docs/architecture.md#invalidation: "A copy that can then show a
// purged price is one whose purge this isolate did not read (it could not
// follow the log, or Redis lost it), and only while the origin fails for that
// product"; dropping L1 instead turned a Redis that lost its data and a
// failing origin into 503s). The oracle (judgeFreshness) excuses an old price
// shown after its purge's deadline only when every condition below holds,
// counts it apart, and calls any other a violation.
import { member } from "../../dev/harness/cacheStatus";
import { PAGE_SUBJECT } from "../../src/origin/resources";
import type { Span, Timeline } from "./faults";
import type { PriceChange } from "./priceChanger";

/** What the report says of an excused one, and where the choice is written down. */
export const LOST_PURGE = "purge lost with Redis's data, served as stale-if-error while the origin failed";
export const LOST_PURGE_DOC = "docs/architecture.md#invalidation";

/**
 * The data-losing Redis restart that took a purge's log entry before every
 * isolate could have read it: one whose loss (redis-server killed, its data
 * gone) began at or after the purge's 202 and less than one purge-log poll
 * (`pollMs`) plus the slack the deadline allows (one L2 round trip, and the
 * gateway's added latency then) after it. null: none did.
 */
function lossAfter(ackAt: number, timeline: Timeline, times: { pollMs: number; l2TimeoutMs: number }): Span | null {
  const window = times.pollMs + times.l2TimeoutMs;
  const within = window + timeline.slowMs(ackAt, ackAt + window);
  const losses = timeline.records.flatMap((r) => (r.lost ? [r.lost] : [])).sort((x, y) => x.start - y.start);
  return losses.find((lost) => lost.start >= ackAt && lost.start - ackAt < within) ?? null;
}

/** Whether the page's price came from a copy kept for the origin's failures: its product part stale-if-error (Cache-Status). */
function priceStaleIfError(cacheStatus: string): boolean {
  try {
    const part = member(cacheStatus, PAGE_SUBJECT);
    return part.includes("fwd=stale") && part.endsWith(`detail="${PAGE_SUBJECT} stale-if-error"`);
  } catch {
    return false;
  }
}

/**
 * Why an old price in a 200 is the documented exception, or null (a
 * violation). `missed`: every change newer than the price shown whose
 * deadline had passed. All must hold: each missed purge was acknowledged by
 * another isolate than the one that answered (the one that records a purge
 * applies it), and lost with Redis's data within a poll of its 202
 * (lossAfter); the page's price was served stale-if-error; and the origin
 * was failing or hanging for the product (a fault on it or on all, the
 * breaker's tail included) when the request was sent.
 */
export function lostPurgeExcuse(
  answer: { inst: number; sent: number; cacheStatus: string },
  missed: readonly PriceChange[],
  timeline: Timeline,
  times: { pollMs: number; l2TimeoutMs: number },
): string | null {
  if (missed.length === 0) return null;
  for (const change of missed) {
    if (change.ackAt === null || change.ackInst === answer.inst) return null;
    if (!lossAfter(change.ackAt, timeline, times)) return null;
  }
  if (!priceStaleIfError(answer.cacheStatus)) return null;
  if (!timeline.originFailing(PAGE_SUBJECT, answer.sent)) return null;
  return LOST_PURGE;
}
