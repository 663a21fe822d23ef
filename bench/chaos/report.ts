// bench:chaos's tables (printed, and written to bench/results/chaos.md with
// the run's figures in chaos.json): the schedule, one row per segment (each
// fault window, settling and quiet stretch), one per fault, the violations'
// examples, the purges retried through a Redis fault, the herds, the bulk
// re-price, the isolates, the verdicts.
import type { WrkFigures } from "../lib/wrk";
import type { heapFlat } from "./isolate";
import { faultName, type Timeline } from "./faults";
import { LOST_PURGE, LOST_PURGE_DOC } from "./lostPurge";
import { type Failure, type FreshnessViolation, isCached, type ProbeRecord, probeFigures, purgeDeadline, type TierTimes } from "./oracle";
import { WATCH } from "./plan";
import type { PriceChange } from "./priceChanger";
import type { HerdResult, StretchVerdict } from "./protection";
import type { RepriceFigures, RepriceRun } from "./reprice";
import type { Segment } from "./schedule";

/** One segment as it ran (ms from the load's start), with the quiet stretch's origin verdict. */
export interface SegmentRow extends Segment {
  start: number;
  end: number;
  stretch: StretchVerdict | null;
}

const verdict = (ok: boolean | null) => (ok === null ? "n/a" : ok ? "PASS" : "**FAIL**");
const counts = (c: Record<string, number | string>) =>
  Object.entries(c)
    .map(([k, n]) => `${k}: ${n}`)
    .join(", ") || "–";
const ms = (v: number | null) => (v === null ? "–" : String(v));
const s = (msFromStart: number) => (msFromStart / 1000).toFixed(1);
/** Stale prices among `fresh`: "violations", and "(+N excused)" when the documented exception excused some. */
const staleCell = (fresh: readonly FreshnessViolation[]) => {
  const excused = fresh.filter((v) => v.excused !== null).length;
  return `${fresh.length - excused}${excused ? ` (+${excused} excused)` : ""}`;
};

/** wrk's whole run: what it sent against its pace, its statuses, and whether it kept the pace (sends left late: the isolates fell behind). */
export function wrkLine(w: WrkFigures, rate: number): string {
  const e = w.errors;
  const seconds = w.durationUs / 1e6;
  return `${w.requests.toLocaleString("en-US")} requests (paced at ${rate} req/s), 2xx ${w.statuses["2xx"] ?? 0} / 4xx ${w.statuses["4xx"] ?? 0} / 5xx ${w.statuses["5xx"] ?? 0}; socket errors (a deploy breaks wrk's connections: they count here): connect ${e.connect}, read ${e.read}, write ${e.write}, time-outs ${e.timeout}; p50 ${(w.p50Us / 1000).toFixed(1)} ms, p99 ${(w.p99Us / 1000).toFixed(1)} ms over ${seconds.toFixed(0)} s; ${w.late} sends late (at most ${Math.round(w.lateMaxMs)} ms)`;
}

/** Failures in [a, b) by verdict: "violations / excused / allowed · not served". */
function failureCells(failures: readonly Failure[], a: number, b: number): string {
  const within = failures.filter((f) => f.sent >= a && f.sent < b);
  const n = (v: Failure["verdict"]) => within.filter((f) => f.verdict === v).length;
  return `${n("violation")} / ${n("excused")} / ${n("allowed")} · ${n("not served")}${n("restart") ? ` · restart ${n("restart")}` : ""}`;
}

export interface ChaosInput {
  rows: SegmentRow[];
  /** wrk's load over the whole run (null: it failed), and its pace. */
  wrk: WrkFigures | null;
  rate: number;
  timeline: Timeline;
  records: readonly ProbeRecord[];
  /** The price changes, and the tier's settings their deadlines are made of. */
  changes: readonly PriceChange[];
  times: TierTimes;
  /** The prober's own event-loop lateness over [a, b), its largest (ms): answers read late are timed late. */
  proberLagMax: (a: number, b: number) => number;
  fresh: readonly FreshnessViolation[];
  failures: readonly Failure[];
  herds: readonly HerdResult[];
  bulk: { fault: number; run: RepriceRun; figures: RepriceFigures }[];
  isolate: {
    logs: { unhandled: number; io: number; crossRequest: number };
    heap: ReturnType<typeof heapFlat>;
    slots: { slotsFreeMs: number | null; slotsKnown: boolean; slotsText: string };
    work: { ms: number | null; gauges: Record<string, number | "n/a">; ok: boolean | null };
  };
}

function timelineTable(rows: readonly SegmentRow[], i: ChaosInput): string {
  const head = [
    "| s | state | probes | oracle statuses | cached p99 ms | cold p99 ms | prober's own lag, max ms | stale (excused) | failures: violations / excused / allowed · not served | origin fetches (quiet) |",
    "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | --- | --- |",
  ];
  const lines = rows.map((row) => {
    const p = probeFigures(i.records, row.start, row.end);
    const stale = staleCell(i.fresh.filter((v) => v.sent >= row.start && v.sent < row.end));
    const state = row.state === "fault" ? row.active.map(faultName).join(" + ") : row.state;
    const stretch = !row.stretch
      ? ""
      : row.stretch.ok === null
        ? `n/a: ${row.stretch.worst}`
        : `${verdict(row.stretch.ok)} ${row.stretch.keys} keys, ${row.stretch.over} over; worst ${row.stretch.worst}`;
    return `| ${s(row.start)}–${s(row.end)} | ${state} | ${p.count} | ${counts(p.statuses)} | ${ms(p.cachedP99)} | ${ms(p.coldP99)} | ${i.proberLagMax(row.start, row.end)} | ${stale} | ${failureCells(i.failures, row.start, row.end)} | ${stretch} |`;
  });
  return [...head, ...lines].join("\n");
}

function faultTable(i: ChaosInput): string {
  const head = [
    "| fault | s (as run) | probes | oracle statuses | cached p99 ms | cold p99 ms | prober's own lag, max ms | stale (excused) | failures: violations / excused / allowed · not served | herd |",
    "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | --- | --- |",
  ];
  const lines = i.timeline.records.map((r) => {
    const name = faultName(r.fault);
    const p = probeFigures(i.records, r.span.start, r.span.end);
    const stale = staleCell(i.fresh.filter((v) => v.faults.includes(name)));
    const mine = i.failures.filter((f) => f.faults.includes(name));
    const herd = i.herds.find((h) => h.fault === r.fault.n);
    return `| ${name} | ${s(r.span.start)}–${s(r.span.end)} | ${p.count} | ${counts(p.statuses)} | ${ms(p.cachedP99)} | ${ms(p.coldP99)} | ${i.proberLagMax(r.span.start, r.span.end)} | ${stale} | ${failureCells(mine, -Infinity, Infinity)} | ${herd ? `${verdict(herd.ok)} ${herd.fetches ? counts(herd.fetches) : "n/a"} (≤ ${herd.bound})` : ""} |`;
  });
  return [...head, ...lines].join("\n");
}

function examples(i: ChaosInput): string[] {
  const staleOnes = i.fresh.filter((v) => v.excused === null);
  const excused = i.fresh.filter((v) => v.excused !== null);
  // Violations first: they are what a reader looks for.
  const fresh = [...staleOnes, ...excused]
    .slice(0, 15)
    .map(
      (v) =>
        `| ${v.id} | ${v.inst + 1} | ${s(v.sent)} | ${v.lateMs} | ${v.shown} | ${v.expected} | ${s(v.ackAt)} (#${v.ackInst + 1}) | ${v.excused === null ? "violation" : `excused: ${v.excused}`} | \`${v.cacheStatus}\` | ${v.faults.join(", ") || "none"} |`,
    );
  // Violations first: they are what a reader looks for.
  const served = [...i.failures.filter((f) => f.verdict === "violation"), ...i.failures.filter((f) => f.verdict === "excused")];
  const byFault = new Map<string, number>();
  for (const f of served.filter((f) => f.verdict === "violation"))
    for (const name of f.faults.length ? f.faults : ["no fault"]) byFault.set(name, (byFault.get(name) ?? 0) + 1);
  const failures = served
    .slice(0, 15)
    .map(
      (f) =>
        `| ${f.id} | ${f.inst + 1} | ${s(f.sent)} | ${f.status || "none"} | ${f.ms} | ${f.verdict}: ${f.reason} | ${f.faults.join(", ") || "none"} | ${f.history || "–"} | \`${f.cacheStatus}\` |`,
    );
  return [
    `### Freshness violations (${staleOnes.length}, and ${excused.length} excused; the first 15)`,
    "",
    `Excused: ${excused.length} ${excused.length === 1 ? "answer" : "answers"} with a ${LOST_PURGE} (each purge missed acknowledged by another isolate less than one purge-log poll and one L2 round trip before Redis lost its data; the price's part stale-if-error; the origin failing or hanging for the product): the documented exception, ${LOST_PURGE_DOC}. Any other old price is a violation.`,
    "",
    ...(fresh.length
      ? [
          "| product | instance | sent s | ms after the deadline | shown | expected | purge 202 s (instance) | verdict | Cache-Status | faults then |",
          "| --- | ---: | ---: | ---: | --- | --- | --- | --- | --- | --- |",
          ...fresh,
        ]
      : ["none"]),
    "",
    `### Failures of served pages (${served.filter((f) => f.verdict === "violation").length} violations, ${served.filter((f) => f.verdict === "excused").length} excused; the first 15)`,
    "",
    `Violations per fault: ${counts(Object.fromEntries(byFault))}. Excused, by reason: ${counts(
      served.filter((f) => f.verdict === "excused").reduce<Record<string, number>>((c, f) => ((c[f.reason] = (c[f.reason] ?? 0) + 1), c), {}),
    )}.`,
    "",
    ...(failures.length
      ? [
          "| product | instance | sent s | status | ms | verdict | faults then | its last 200s (instance, s, product/inventory tier) | Cache-Status |",
          "| --- | ---: | ---: | ---: | ---: | --- | --- | --- | --- |",
          ...failures,
        ]
      : ["none"]),
  ];
}

/** Each purge a purge-through-redis had retried through its Redis outage: its 202, its deadline, what the prober saw then. */
function throughTable(i: ChaosInput): string[] {
  const through = i.changes.filter((c) => c.fault !== null);
  if (!through.length) return ["No purge-through-redis in this schedule."];
  const lines = through.map((c) => {
    const record = i.timeline.records.find((r) => r.fault.n === c.fault);
    const name = record ? faultName(record.fault) : `#${c.fault}`;
    if (c.ackAt === null) return `| ${name} | ${c.id} | ${s(c.changedAt)} | ${c.attempts} | never | – | – | – |`;
    const deadline = purgeDeadline(c.ackAt, i.timeline, i.times);
    const seen = i.records.filter((r) => r.id === c.id && r.status === 200 && r.sent >= c.ackAt! && r.sent < c.ackAt! + WATCH.afterMs);
    const stale = staleCell(i.fresh.filter((v) => v.id === c.id && v.ackAt === Math.round(c.ackAt!)));
    return `| ${name} | ${c.id} | ${s(c.changedAt)} | ${c.attempts} | ${s(c.ackAt)} (#${c.ackInst! + 1}) | ${s(deadline)} | ${seen.length} (${seen.filter((r) => r.sent > deadline).length}) | ${stale} |`;
  });
  return [
    `| fault | product | changed s | purge attempts | purge 202 s (instance) | deadline s | 200s sent in the ${WATCH.afterMs / 1000} s after the 202 (after the deadline) | stale after the deadline (excused) |`,
    "| --- | --- | ---: | ---: | --- | ---: | --- | ---: |",
    ...lines,
  ];
}

function herdTable(herds: readonly HerdResult[]): string[] {
  if (!herds.length) return ["No herd in this schedule."];
  return [
    "| fault | product | at s | answers | p50 / max ms | origin fetches per service | of those failed by the origin | Redis faulted | bound (answered fetches) | verdict |",
    "| --- | --- | ---: | --- | --- | --- | --- | ---: | --- |",
    ...herds.map(
      (h) =>
        `| #${h.fault} | ${h.id} | ${s(h.at)} | ${counts(h.statuses)} | ${h.p50Ms} / ${h.maxMs} | ${h.fetches ? counts(h.fetches) : "n/a (counters reset meanwhile)"} | ${h.failures ? counts(h.failures) : "n/a"} | ${h.redisFaulted ? "yes" : "no"} | ${h.bound} | ${verdict(h.ok)} |`,
    ),
  ];
}

function bulkLines(bulk: ChaosInput["bulk"]): string[] {
  if (!bulk.length) return ["No bulk re-price in this schedule."];
  return bulk.flatMap(({ fault, run, figures: f }) => [
    `- **#${fault}**: ${run.acknowledged} purges acknowledged in ${f.seconds} s (${s(run.start)}–${s(run.end)} s; attempts ${counts(run.statuses)}).`,
    `- Warm pages (the hot products, those re-priced around it left out) p99: before ${ms(f.p99.before)} ms, after ${ms(f.p99.after)} ms (limit 2 × before + one L2 budget = ${ms(f.p99.limit)} ms: ${verdict(f.p99.ok)}); during the re-price ${ms(f.p99.during)} ms.`,
    `- Warm pages an isolate served from L1 before, no longer from L1 once (from the re-price's start to the window's end): ${f.l1.left} of ${f.l1.pages} (${f.l1.share === null ? "n/a" : `${(f.l1.share * 100).toFixed(1)}%`}; ${counts(f.l1.byTier)}); at most 5%: ${verdict(f.l1.ok)}.`,
    `- Redis commands sent in the ${run.after.seconds} s after: ${run.after.total} (${counts(run.after.sent)}) against ${run.l1Entries ?? "n/a"} L1 entries held before (${f.commandsPerL1Entry ?? "n/a"} per entry).`,
    f.redis
      ? `- Beyond the load's own rate (${f.redis.perSecond.before} commands a second in the quiet stretch before; ${f.redis.perSecond.after} after): ${f.redis.extra} commands, ${(f.redis.share * 100).toFixed(2)}% of the L1 entries held; at most 5%: ${verdict(f.redis.ok)}.`
      : "- Beyond the load's own rate: n/a (no census of the stretch before).",
  ]);
}

/** The verdict rows: [check, value, verdict]. */
function verdicts(i: ChaosInput): string[][] {
  const violations = i.failures.filter((f) => f.verdict === "violation").length;
  const excused = i.failures.filter((f) => f.verdict === "excused").length;
  const staleExcused = i.fresh.filter((v) => v.excused !== null).length;
  const stale = i.fresh.length - staleExcused;
  const stretches = i.rows.flatMap((r) => (r.stretch && r.stretch.ok !== null ? [r.stretch] : []));
  const herds = i.herds.filter((h) => h.ok !== null);
  const heap = i.isolate.heap.instances
    .map(
      (h, k) =>
        `#${k + 1} ${h.beyondL1MB[0] ?? "?"} → ${h.beyondL1MB[1] ?? "?"} MB (${h.ratio ?? "?"}×; whole heap ${h.heapMB[0] ?? "?"} → ${h.heapMB[1] ?? "?"} MB)`,
    )
    .join(" · ");
  const work = i.isolate.work;
  const rows: [string, string, boolean | null][] = [
    ["0 freshness violations", `${stale} (excused ${staleExcused}: ${LOST_PURGE}, the documented exception, ${LOST_PURGE_DOC})`, stale === 0],
    ["0 non-200 answers for served pages", `${violations} (excused ${excused})`, violations === 0],
    [
      "0 unhandled errors",
      `${i.isolate.logs.unhandled} (I/O ${i.isolate.logs.io}, cross-request ${i.isolate.logs.crossRequest})`,
      i.isolate.logs.unhandled === 0,
    ],
    ["heap flat (after GC, beyond L1: end ≤ 1.5 × or + 16 MB its reading after the warm-up)", heap, i.isolate.heap.ok],
    ["origin slots back to 0", i.isolate.slots.slotsText, i.isolate.slots.slotsKnown ? i.isolate.slots.slotsFreeMs !== null : null],
    ["fills, sends, cold pages back to 0", `${work.ms === null ? "not within 10 s" : `${work.ms} ms`}: ${counts(work.gauges)}`, work.ok],
    [
      "origin fetches within bound in quiet stretches",
      `${stretches.filter((x) => !x.ok).length} of ${stretches.length} stretches over`,
      stretches.length ? stretches.every((x) => x.ok) : null,
    ],
    [
      "herds: answered origin fetches ≤ 1 per service (≤ instances, Redis faulted)",
      `${herds.filter((h) => !h.ok).length} of ${herds.length} over`,
      herds.length ? herds.every((h) => h.ok) : null,
    ],
    [
      "bulk re-price: L1 kept (≤ 5% of warm pages leave it)",
      i.bulk.map((b) => `${b.figures.l1.left} / ${b.figures.l1.pages}`).join(", ") || "–",
      i.bulk.length ? (i.bulk.some((b) => b.figures.l1.ok === false) ? false : i.bulk.every((b) => b.figures.l1.ok) ? true : null) : null,
    ],
    [
      "bulk re-price: Redis commands beyond the load's in the minute after ≤ 5% of L1 entries",
      i.bulk
        .map((b) => (b.figures.redis ? `${b.figures.redis.extra} of ${b.run.l1Entries} (${(b.figures.redis.share * 100).toFixed(2)}%)` : "n/a"))
        .join(", ") || "–",
      i.bulk.length ? (i.bulk.some((b) => b.figures.redis?.ok === false) ? false : i.bulk.every((b) => b.figures.redis?.ok) ? true : null) : null,
    ],
    [
      "bulk re-price: warm p99 after ≤ 2 × before + one L2 budget",
      i.bulk.map((b) => `${ms(b.figures.p99.before)} → ${ms(b.figures.p99.after)} (≤ ${ms(b.figures.p99.limit)})`).join(", ") || "–",
      i.bulk.length ? (i.bulk.some((b) => b.figures.p99.ok === false) ? false : i.bulk.every((b) => b.figures.p99.ok) ? true : null) : null,
    ],
  ];
  return rows.map(([check, value, ok]) => [check, value, verdict(ok)]);
}

/** Per fault, the slowest answers of cached pages (every part from L1 or the location), with the tier's own Server-Timing: where to look first. */
function slowestCached(i: ChaosInput, perFault = 3): string[] {
  const lines = i.timeline.records.flatMap((r) =>
    i.records
      .filter((q) => q.sent >= r.span.start && q.sent < r.span.end && q.status !== 0 && isCached(q.cacheStatus))
      .sort((a, b) => b.answered - b.sent - (a.answered - a.sent))
      .slice(0, perFault)
      .map((q) => `| ${faultName(r.fault)} | ${s(q.sent)} | ${q.inst + 1} | ${Math.round(q.answered - q.sent)} | ${q.status} | \`${q.serverTiming}\` |`),
  );
  if (!lines.length) return ["none"];
  return ["| fault | sent s | instance | ms | status | Server-Timing |", "| --- | ---: | ---: | ---: | ---: | --- |", ...lines];
}

/** Every table after the schedule, as printed and written. */
export function chaosTables(i: ChaosInput): string {
  const verdictRows = verdicts(i);
  return [
    "## Segments (the oracle's answers by time sent)",
    "",
    `wrk's load beside it, the whole run: ${i.wrk ? wrkLine(i.wrk, i.rate) : "no figures (wrk failed)"}.`,
    "",
    timelineTable(i.rows, i),
    "",
    "## Faults (as run: from the fault's start to its undo)",
    "",
    faultTable(i),
    "",
    ...examples(i),
    "",
    "## Purges retried through a Redis fault (purge-through-redis)",
    "",
    ...throughTable(i),
    "",
    "## The slowest answers of cached pages, per fault",
    "",
    ...slowestCached(i),
    "",
    "## Herds (200 requests at once for a cold product)",
    "",
    ...herdTable(i.herds),
    "",
    "## Bulk re-price",
    "",
    ...bulkLines(i.bulk),
    "",
    "## Verdicts",
    "",
    "| check | value | verdict |",
    "| --- | --- | --- |",
    ...verdictRows.map((r) => `| ${r.join(" | ")} |`),
  ].join("\n");
}
