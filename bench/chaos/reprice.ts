// bench:chaos's bulk re-price: the shop's backend purging BULK.purges × 1,000
// products nobody reads (ids beyond the catalog), a few purges at once, to
// the instances in turn, each retried until 202. Measured: how long it took;
// Redis's commands in the window after it (the MONITOR census) against the
// L1 entries the isolates held; and, from the oracle's answers for the warm
// (hot) pages, their p99 before and after (and during, shown), and the share of warm
// pages an isolate no longer served from L1 afterwards: the tier should keep
// L1 for the products not purged.
import { setTimeout as sleep } from "node:timers/promises";
import type { RedisProbe } from "../../dev/harness/redisProbe";
import { productId } from "../../dev/origin/catalog";
import { PAGE_SUBJECT } from "../../src/origin/resources";
import { percentile, statusOf } from "../lib/probe";
import { type ProbeRecord, tierOf } from "./oracle";
import type { PriceChange } from "./priceChanger";
import { BULK, BULK_LIMITS } from "./plan";
import { purgeUntilAccepted } from "./purge";

export interface RepriceRun {
  start: number;
  end: number;
  /** Every attempt's answer by status ("none": no answer). */
  statuses: Record<string, number>;
  acknowledged: number;
  /** The isolates' L1 entries (status l1.entries, summed) right before. */
  l1Entries: number | null;
  /** Redis commands sent (MONITOR) over the `seconds` after the re-price, by command. */
  after: { seconds: number; sent: Record<string, number>; total: number };
}

/** Redis commands sent over the quiet stretch right before a re-price: the load's own rate, to tell the re-price's from it. */
export interface RepriceBaseline {
  seconds: number;
  total: number;
}

/** Runs the re-price, then the census of the window after it (`afterMs`). */
export async function bulkReprice(o: {
  targets: readonly string[];
  token: string;
  redis: RedisProbe;
  now: () => number;
  afterMs: number;
  signal: AbortSignal;
}): Promise<RepriceRun> {
  const readings = await Promise.all(o.targets.map(statusOf));
  const entries = readings.map((s) => s?.l1.entries);
  const l1Entries = entries.every((n) => typeof n === "number") ? entries.reduce((sum, n) => sum! + n!, 0)! : null;
  const statuses: Record<string, number> = {};
  let acknowledged = 0;
  let next = 0;
  const start = o.now();
  const post = async (k: number) => {
    const body = JSON.stringify({
      ids: Array.from({ length: BULK.idsPerPurge }, (_, j) => productId(BULK.firstIndex + k * BULK.idsPerPurge + j)),
      resources: [PAGE_SUBJECT],
    });
    const inst = await purgeUntilAccepted({
      targets: o.targets,
      token: o.token,
      body,
      first: k,
      timeoutMs: 10_000,
      stopped: () => o.signal.aborted,
      onAttempt: (status) => void (statuses[status || "none"] = (statuses[status || "none"] ?? 0) + 1),
    });
    if (inst !== null) acknowledged++;
  };
  await Promise.all(
    Array.from({ length: BULK.concurrency }, async () => {
      for (let k = next++; k < BULK.purges; k = next++) await post(k);
    }),
  );
  const end = o.now();
  const census = await o.redis.census(() => sleep(o.afterMs, undefined, { signal: o.signal }).catch(() => undefined));
  const total = Object.values(census.sent).reduce((sum, n) => sum + n, 0);
  return { start, end, statuses, acknowledged, l1Entries, after: { seconds: census.seconds, sent: census.sent, total } };
}

/** The oracle's view of a re-price: warm pages' p99 and L1 kept, each against its limit. */
export function repriceFigures(
  run: RepriceRun,
  records: readonly ProbeRecord[],
  changes: readonly PriceChange[],
  o: { beforeMs: number; afterMs: number; l2TimeoutMs: number; baseline: RepriceBaseline | null },
) {
  const from = run.start - o.beforeMs;
  const until = run.end + o.afterMs;
  // The warm pages: the hot products, but those whose price changed (purged) around the re-price.
  const changed = new Set(changes.filter((c) => c.changedAt >= from && c.changedAt <= until).map((c) => c.id));
  const warm = records.filter((r) => r.hot && r.status === 200 && !changed.has(r.id));
  const p99 = (a: number, b: number) => {
    const ms = warm
      .filter((r) => r.sent >= a && r.sent < b)
      .map((r) => r.answered - r.sent)
      .sort((x, y) => x - y);
    return ms.length ? Math.round(percentile(ms, 99) * 10) / 10 : null;
  };
  const before = p99(from, run.start);
  const during = p99(run.start, run.end);
  const after = p99(run.end, run.end + o.beforeMs);
  const p99Limit = before === null ? null : Math.round((BULK_LIMITS.p99Factor * before + o.l2TimeoutMs) * 10) / 10;
  // Pages an isolate served from L1 (the product part) before, asked of it again from the re-price's start to the window's end.
  const inL1 = new Set(
    warm.filter((r) => r.sent >= from && r.sent < run.start && tierOf(r.cacheStatus, PAGE_SUBJECT) === "pp-l1").map((r) => `${r.inst} ${r.id}`),
  );
  const later = new Map<string, string[]>();
  for (const r of warm) {
    const key = `${r.inst} ${r.id}`;
    if (r.sent >= run.start && r.sent < until && inL1.has(key)) later.set(key, [...(later.get(key) ?? []), tierOf(r.cacheStatus, PAGE_SUBJECT)]);
  }
  const left: Record<string, number> = {};
  for (const tiers of later.values()) {
    const away = tiers.find((tier) => tier !== "pp-l1");
    if (away !== undefined) left[away || "?"] = (left[away || "?"] ?? 0) + 1;
  }
  const leftCount = Object.values(left).reduce((sum, n) => sum + n, 0);
  const share = later.size ? leftCount / later.size : null;
  return {
    seconds: Math.round((run.end - run.start) / 100) / 10,
    p99: { before, during, after, limit: p99Limit, ok: p99Limit === null || after === null ? null : after <= p99Limit },
    l1: { pages: later.size, left: leftCount, byTier: left, share, ok: share === null ? null : share <= BULK_LIMITS.leftL1Share },
    commandsPerL1Entry: run.l1Entries ? Math.round((run.after.total / run.l1Entries) * 1000) / 1000 : null,
    redis: redisBeyondLoad(run, o.baseline),
  };
}
export type RepriceFigures = ReturnType<typeof repriceFigures>;

/**
 * The Redis commands the minute after a re-price sent beyond the load's own
 * rate (the quiet stretch before it), against the L1 entries the isolates
 * held: what re-reading pages L1 lost would cost. At most 5% of them.
 */
function redisBeyondLoad(run: RepriceRun, baseline: RepriceBaseline | null) {
  if (!baseline || baseline.seconds <= 0 || !run.l1Entries || run.after.seconds <= 0) return null;
  const perSecond = { before: baseline.total / baseline.seconds, after: run.after.total / run.after.seconds };
  const extra = Math.max(0, Math.round((perSecond.after - perSecond.before) * run.after.seconds));
  const share = extra / run.l1Entries;
  return {
    perSecond: { before: Math.round(perSecond.before * 10) / 10, after: Math.round(perSecond.after * 10) / 10 },
    extra,
    share,
    ok: share <= BULK_LIMITS.leftL1Share,
  };
}
