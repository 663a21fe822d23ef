// What bench:peers keeps of a run (PeersReport, written as peers.json) and the
// figures the report derives from it: rows by system and phase, per-page
// counts, CPU per page, the generator's limit, the targets, the cost.
import { PAGE_RESOURCES } from "../../src/origin/resources";
import { costPerMillion, type CostPerMillion, type Prices } from "../lib/cost";
import type { Census } from "../../dev/harness/redisProbe";
import type { Machine } from "../lib/report";
import type { Phase } from "../lib/wrk";
import type { Ceiling, IdleCost, Calibration } from "./calibration";
import { ms, num, sum, x } from "./format";
import type { Durations, Row, ScenarioName } from "./plan";
import type { Settings, SystemName } from "./systems";

export interface PeersReport {
  startedAt: string;
  finishedAt: string;
  command: string;
  settings: Settings;
  durations: Durations;
  machine: Machine;
  systems: Array<{ name: SystemName; description: string; check: string; config: string }>;
  renderOnlyVars: Record<string, string>;
  tierVars: Record<string, Record<string, string>>;
  /** The tier's saturation on a fresh stack, and the paced rate taken from it; null with --rate. */
  calibration: (Calibration & { rate: number }) | null;
  ceiling: Ceiling | null;
  idle: IdleCost | null;
  rows: Row[];
  census: Partial<Record<SystemName, Census & { pages: number }>>;
  prices: Prices;
  workerLog: Array<{ count: number; line: string }>;
}

/** The systems in the order the report lists them. */
const SYSTEM_ORDER: SystemName[] = ["nginx", "varnish", "tier", "tier-300s", "tier-location", "tier-off"];
export const TIERS: SystemName[] = ["tier", "tier-300s", "tier-location"];
/** "others" (processes outside the run) above this many cores in a phase is reported: a neighbour took part of the machine. */
export const NEIGHBOUR_CORES = 0.25;
/** Roles that are not a system's own CPU (procs.ts cpuSample). */
const NOT_OWN = new Set(["harness", "wrk", "other workerd", "others"]);

/** The systems that ran, in the report's order. */
export const present = (report: PeersReport) => SYSTEM_ORDER.filter((name) => report.systems.some((s) => s.name === name));

export function find(rows: Row[], system: SystemName, scenario: ScenarioName): Row | undefined {
  return rows.find((r) => r.system === system && r.scenario === scenario);
}

export const perPage = (n: number, r: Row) => n / Math.max(1, r.load.requests);
export const originPerPage = (r: Row) => perPage(r.originTotal, r);
/** The origin's requests of a row per page resource (the registry's order), each by `format`, "a / b / …". */
export const perResource = (r: Row, format: (n: number) => string) => PAGE_RESOURCES.map((k) => format(r.origin[k] ?? 0)).join(" / ");

/** CPU ms per request of the system's own processes, or of one role. */
export function cpuMs(r: Row, role?: string): number {
  const s = r.cpu.seconds;
  const seconds = role
    ? (s[role] ?? 0)
    : Object.entries(s)
        .filter(([k]) => !NOT_OWN.has(k))
        .reduce((a, [, v]) => a + v, 0);
  return (seconds * 1000) / Math.max(1, r.load.requests);
}
export const ownRoles = (r: Row) => Object.keys(r.cpu.seconds).filter((k) => !NOT_OWN.has(k));

/** Why a figure may measure the generator: within 80% of what it can do; null when it is not. */
export function limited(report: PeersReport, phase: Phase): string | null {
  const c = report.ceiling;
  if (!c) return null;
  if (phase.askedRate !== null) return phase.askedRate >= 0.8 * c.paced.rps ? `asked rate ≥ 80% of the paced generator's ${num(c.paced.rps)} req/s` : null;
  return phase.rps >= 0.8 * c.closed.rps ? `≥ 80% of wrk's ${num(c.closed.rps)} req/s` : null;
}

/** Issue 30's targets (README, "Performance"): pass, miss, or null (information, or not measured). */
export function targets(report: PeersReport): Array<{ text: string; pass: boolean | null }> {
  const rows = report.rows;
  const t = find(rows, "tier", "saturation");
  const h = find(rows, "tier", "healthz");
  const tf = find(rows, "tier", "fixed");
  const nf = find(rows, "nginx", "fixed");
  const lines: Array<{ text: string; pass: boolean | null }> = [];
  if (t && h) {
    const floor = cpuMs(h, "workerd");
    const ratio = cpuMs(t, "workerd") / floor;
    lines.push({
      text: `CPU per page, steady Zipf ≤ 3× the /healthz floor: workerd ${cpuMs(t, "workerd").toFixed(3)} CPU-ms per page vs ${floor.toFixed(3)} per /healthz = ${x(ratio)}`,
      pass: ratio <= 3,
    });
    const cached = find(rows, "tier", "cached");
    if (cached) {
      const cachedRatio = cpuMs(cached, "workerd") / floor;
      lines.push({
        text: `CPU per page, cached set (every page in L1) ≤ 1.5× the floor: ${cpuMs(cached, "workerd").toFixed(3)} CPU-ms = ${x(cachedRatio)}`,
        pass: cachedRatio <= 1.5,
      });
    }
    const rps = t.load.rps / Math.max(1, h.load.rps);
    lines.push({ text: `req/s at saturation ≥ 0.3× /healthz req/s: ${num(t.load.rps)} vs ${num(h.load.rps)} = ${x(rps)}`, pass: rps >= 0.3 });
  } else lines.push({ text: "CPU per page and req/s vs the /healthz floor: the tier's saturation and /healthz phases did not both run", pass: null });
  const off = find(rows, "tier-off", "saturation");
  const offFixed = find(rows, "tier-off", "fixed");
  if (t && off) {
    const times = t.load.rps / Math.max(1, off.load.rps);
    lines.push({
      text: `req/s ≥ 3× the same worker with caching off (CACHING=off): ${num(t.load.rps)} vs ${num(off.load.rps)} = ${x(times)}`,
      pass: times >= 3,
    });
  } else lines.push({ text: "req/s vs caching off: the tier and tier-off did not both run", pass: null });
  if (tf && offFixed) {
    lines.push({
      text: `fixed offered load, p99 below caching off's: ${ms(tf.load.p99Ms)} vs ${ms(offFixed.load.p99Ms)} ms (caching off answered ${num(offFixed.load.rps)} of the ${num(offFixed.load.askedRate ?? 0)} req/s asked, ${num(offFixed.load.errors)} errors)`,
      pass: tf.load.p99Ms < offFixed.load.p99Ms,
    });
  }
  const floorFixed = find(rows, "tier", "healthz-fixed");
  if (tf && floorFixed) {
    const p50 = tf.load.p50Ms / Math.max(0.001, floorFixed.load.p50Ms);
    lines.push({
      text: `fixed offered load, p50 ≤ 2× the floor's p50 at the same rate: ${ms(tf.load.p50Ms)} vs ${ms(floorFixed.load.p50Ms)} ms = ${x(p50)}`,
      pass: p50 <= 2,
    });
  }
  if (tf && nf) {
    lines.push({
      text: `fixed offered load, p99 ≤ Nginx p99: ${ms(tf.load.p99Ms)} vs ${ms(nf.load.p99Ms)} ms = ${x(tf.load.p99Ms / nf.load.p99Ms)}`,
      pass: tf.load.p99Ms <= nf.load.p99Ms,
    });
  } else lines.push({ text: "fixed offered load vs Nginx: the tier and Nginx did not both run", pass: null });
  if (tf) lines.push({ text: `fixed offered load, 0 errors: ${num(tf.load.errors)} in ${num(tf.load.requests)}`, pass: tf.load.errors === 0 });
  const census = report.census.tier;
  if (census?.pages) {
    const sent = sum(census.sent) / census.pages;
    lines.push({ text: `Redis commands sent per page ≤ 0.4 (what the gateway sent, census): ${sent.toFixed(3)}`, pass: sent <= 0.4 });
  }
  if (t?.redis) {
    const run = perPage(t.redis.total, t);
    lines.push({ text: `Redis commands run per page ≤ 4 (Redis's own count, a script's inner calls included; saturation): ${run.toFixed(2)}`, pass: run <= 4 });
  }
  return lines;
}

/** Redis commands per page view for billing: the census's "sent" (what the gateway got), else Redis's own count. */
function commandsSentPerPage(report: PeersReport, system: SystemName): { perPage: number; source: string } | null {
  const c = report.census[system];
  if (c?.pages) return { perPage: sum(c.sent) / c.pages, source: "sent, census" };
  const r = find(report.rows, system, "saturation");
  if (r?.redis) return { perPage: perPage(r.redis.total, r), source: "Redis's count, with calls inside scripts" };
  return null;
}

/** A tier's cost per million page views: CPU and Redis bytes from its saturation run, commands from the census, origin fetches from the fixed load. */
export function cost(report: PeersReport, system: SystemName): { c: CostPerMillion; source: string } | null {
  const sat = find(report.rows, system, "saturation");
  const fixed = find(report.rows, system, "fixed");
  const sent = commandsSentPerPage(report, system);
  if (!sat || !sent || !sat.redis) return null;
  const c = costPerMillion(
    {
      requests: 1,
      cpuMs: cpuMs(sat, "workerd"),
      redisCommands: sent.perPage,
      redisBytes: perPage(sat.redis.netInBytes + sat.redis.netOutBytes, sat),
      originFetches: fixed ? originPerPage(fixed) : originPerPage(sat),
    },
    report.prices,
  );
  return { c, source: sent.source };
}

/** When the new price showed through every target, or why not. */
export function stalenessCell(row: Row): string {
  const s = row.staleness;
  if (!s) return "";
  if (s.seconds === null) return s.pending ? "pending" : `not within ${s.capS} s`;
  return `${s.seconds.toFixed(2)} s`;
}
