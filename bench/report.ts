// What the benchmark shows and keeps: the progress line while it runs, the
// table and ratios on stdout, and the JSON + Markdown files in bench/results/.
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, release, totalmem } from "node:os";
import { join } from "node:path";
import { costLine, costPerMillion, loadPrices } from "./cost";
import type { Live } from "./load";
import type { ScenarioResult, Settings } from "./scenario";
import type { FilterBuild } from "./stack";

// ---------------------------------------------------------------- progress

/**
 * One line on stderr, rewritten in place on a terminal (every 0.5 s), or a
 * plain line every 5 s when stderr is a file or a pipe (CI logs). stderr, so
 * that stdout holds only the results.
 */
export class Progress {
  private timer: NodeJS.Timeout | undefined;
  private label = "";
  private phaseStarted = Date.now();
  private phaseMs: number | undefined;
  private lastRequests = 0;
  private lastAt = Date.now();
  private rate = 0;
  private readonly tty = Boolean(process.stderr.isTTY);

  constructor(readonly live: Live) {}

  start(): void {
    this.timer = setInterval(() => this.draw(), this.tty ? 500 : 5000);
    this.timer.unref();
  }

  /** A new phase: its label, expected length, and request counts from zero. */
  set(label: string, ms?: number): void {
    this.label = label;
    this.phaseStarted = this.lastAt = Date.now();
    this.phaseMs = ms;
    this.live.requests = this.live.errors = this.lastRequests = this.rate = 0;
    this.draw();
  }

  /** A line that stays (a finished scenario, a warning). */
  note(text: string): void {
    this.clear();
    process.stderr.write(`${text}\n`);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.clear();
  }

  private clear(): void {
    if (this.tty) process.stderr.write("\r\x1b[2K");
  }

  private draw(): void {
    const now = Date.now();
    if (now - this.lastAt >= 400) {
      this.rate = ((this.live.requests - this.lastRequests) * 1000) / (now - this.lastAt);
      this.lastRequests = this.live.requests;
      this.lastAt = now;
    }
    const elapsed = ((now - this.phaseStarted) / 1000).toFixed(1);
    const of = this.phaseMs === undefined ? "" : ` / ${(this.phaseMs / 1000).toFixed(0)} s`;
    const line =
      `${this.label} · ${elapsed} s${of} · ${this.live.requests.toLocaleString("en-US")} req · ` +
      `${Math.round(this.rate).toLocaleString("en-US")} req/s · ${this.live.errors} errors`;
    if (this.tty) process.stderr.write(`\r\x1b[2K${line.slice(0, (process.stderr.columns || 120) - 1)}`);
    else process.stderr.write(`${line}\n`);
  }
}

// ---------------------------------------------------------------- machine

export interface Machine {
  cpu: string;
  cores: number;
  memoryGiB: number;
  os: string;
  node: string;
  versions: Record<string, string>;
  git: { commit: string; dirtyFiles: number } | null;
}

export function describeMachine(versions: Record<string, string>): Machine {
  let cpu = cpus()[0]?.model ?? "unknown";
  try {
    cpu = /^model name\s*:\s*(.+)$/m.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? cpu;
  } catch {
    // not Linux: os.cpus() has it
  }
  return {
    cpu,
    cores: cpus().length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    os: `${process.platform} ${release()}`,
    node: process.version,
    versions,
    git: gitState(),
  };
}

/** The commit measured, and whether the work tree differed from it (others edit src/ meanwhile). */
function gitState(): Machine["git"] {
  try {
    const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
    const dirty = execFileSync("git", ["status", "--porcelain", "--", "src", "templates"], { encoding: "utf8" });
    return { commit, dirtyFiles: dirty.split("\n").filter(Boolean).length };
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------- figures

export interface Ratios {
  /** L1-hit page p50 ÷ /healthz p50: what a cached page costs over the cheapest answer. */
  l1P50OverStaticP50: number | null;
  /** L1-hit page req/s ÷ /healthz req/s. */
  l1RpsOverStaticRps: number | null;
  /** The same, one request at a time: the cost without queueing. */
  l1P50OverStaticP50Unloaded: number | null;
  l2P50OverL1P50: number | null;
  l2P50OverL1P50Unloaded: number | null;
  missP50OverL1P50: number | null;
  zipfNoOriginShare: number | null;
  zipfIdealNoOriginShare: number | null;
  herdProductFetchesPerRound: number[] | null;
  herdInventoryFetchesPerRound: number[] | null;
  /** zipf-steady: share of pages served without an origin fetch. */
  zipfSteadyNoOriginShare: number | null;
  /** zipf-steady: the worker's L2 round trips (MGET + EVALSHA + EVAL) per page view. */
  zipfSteadyL2CallsPerPage: number | null;
  /** Each fault scenario against the healthy zipf-steady of the same run (or, without it, its own phase before the fault). */
  faults: FaultRatios[];
}

interface FaultRatios {
  name: string;
  /** What the ratios compare with. */
  against: "zipf-steady" | "its own phase before the fault";
  /** The fault's whole window ÷ the healthy run. */
  p50: number | null;
  p99: number | null;
  /** The fault's window once every instance's L2 breaker was open ÷ the healthy p99 (redis faults). */
  p99BreakerOpen: number | null;
  breakerOpenP99Ms: number | null;
  healthyP50Ms: number;
  healthyP99Ms: number;
  errorRate: number;
  healthyErrorRate: number;
  http5xx: number;
  /** Origin requests per page during the fault ÷ in the healthy run. */
  originPerPage: number | null;
  /** The same two ratios against the scenario's own phase before the fault (same instances, same minute of a shared machine). */
  p50VsBefore: number | null;
  p99VsBefore: number | null;
  p99BreakerOpenVsBefore: number | null;
  /** Product-service requests per page whose product was not in L1, during the fault: at most 1 (fetched once, coalesced in the isolate) means no stampede. */
  faultProductFetchesPerL1Miss: number | null;
  faultOriginPerPage: number | null;
  healthyOriginPerPage: number | null;
}

export function ratios(results: ScenarioResult[]): Ratios {
  const get = (name: string) => results.find((r) => r.name === name);
  const div = (a: number | undefined, b: number | undefined) => (a !== undefined && b ? round(a / b, 2) : null);
  const staticRun = get("static")?.load;
  const l1 = get("l1-hit")?.load;
  const zipf = get("zipf");
  const herdRounds = get("herd")?.extra.rounds as Array<Record<string, number>> | undefined;
  return {
    l1P50OverStaticP50: div(l1?.latencyMs.p50, staticRun?.latencyMs.p50),
    l1RpsOverStaticRps: div(l1?.rps, staticRun?.rps),
    l1P50OverStaticP50Unloaded: div(get("l1-hit")?.unloaded?.p50, get("static")?.unloaded?.p50),
    l2P50OverL1P50: div(get("l2-hit")?.load.latencyMs.p50, l1?.latencyMs.p50),
    l2P50OverL1P50Unloaded: div(get("l2-hit")?.unloaded?.p50, get("l1-hit")?.unloaded?.p50),
    missP50OverL1P50: div(get("miss")?.load.latencyMs.p50, l1?.latencyMs.p50),
    zipfNoOriginShare: zipf?.load.noOriginShare ?? null,
    zipfIdealNoOriginShare: (zipf?.extra.idealNoOriginShare as number | null | undefined) ?? null,
    herdProductFetchesPerRound: herdRounds?.map((r) => r.product ?? 0) ?? null,
    herdInventoryFetchesPerRound: herdRounds?.map((r) => r.inventory ?? 0) ?? null,
    zipfSteadyNoOriginShare: get("zipf-steady")?.load.noOriginShare ?? null,
    zipfSteadyL2CallsPerPage: (get("zipf-steady")?.extra.l2CallsPerPage as number | null | undefined) ?? null,
    faults: FAULT_SCENARIOS.flatMap((name) => {
      const fault = get(name);
      return fault ? [faultRatios(fault, get("zipf-steady"))] : [];
    }),
  };
}

/** The fault scenarios (steady.ts), compared with zipf-steady. */
const FAULT_SCENARIOS = ["redis-hang", "origin-down", "redis-down"];

/** The parts of a phase summary (steady.ts PhaseSummary) the report reads. */
interface PhaseFigures {
  name: string;
  seconds: number;
  requests: number;
  p50: number;
  p99: number;
  errors: number;
  errorRate: number;
  http5xx: number;
  pages: number;
  noOriginShare: number | null;
  origin: Record<string, number>;
  originPerPage: number | null;
  productTier: Record<string, number>;
  cores?: { workerd: number; others: number };
  failureSamples?: Array<{ atMs: number; path: string; status: number | string; cacheStatus: string }>;
}

function phasesOf(result: ScenarioResult): PhaseFigures[] {
  return (result.extra.phases as PhaseFigures[] | undefined) ?? [];
}

function faultRatios(fault: ScenarioResult, healthy: ScenarioResult | undefined): FaultRatios {
  const div = (a: number | null | undefined, b: number | null | undefined) => (a !== null && a !== undefined && b ? round(a / b, 2) : null);
  const phases = phasesOf(fault);
  const before = phases[0];
  const window = fault.extra.faultWindow as PhaseFigures | null | undefined;
  const open = phases.find((phase) => phase.name.endsWith("L2 breaker open"));
  const base = healthy
    ? {
        p50: healthy.load.latencyMs.p50,
        p99: healthy.load.latencyMs.p99,
        errorRate: healthy.load.errorRate,
        originPerPage: healthy.load.pages ? Object.values(healthy.origin).reduce((a, b) => a + b, 0) / healthy.load.pages : null,
      }
    : { p50: before?.p50 ?? 0, p99: before?.p99 ?? 0, errorRate: before?.errorRate ?? 0, originPerPage: before?.originPerPage ?? null };
  return {
    name: fault.name,
    against: healthy ? "zipf-steady" : "its own phase before the fault",
    p50: div(window?.p50, base.p50),
    p99: div(window?.p99, base.p99),
    p99BreakerOpen: div(open?.p99, base.p99),
    p50VsBefore: div(window?.p50, before?.p50),
    p99VsBefore: div(window?.p99, before?.p99),
    p99BreakerOpenVsBefore: div(open?.p99, before?.p99),
    breakerOpenP99Ms: open?.p99 ?? null,
    healthyP50Ms: base.p50,
    healthyP99Ms: base.p99,
    errorRate: window?.errorRate ?? 0,
    healthyErrorRate: base.errorRate,
    http5xx: window?.http5xx ?? 0,
    originPerPage: div(window?.originPerPage, base.originPerPage),
    faultProductFetchesPerL1Miss: window && window.pages - (window.productTier.l1 ?? 0) > 0 ? round((window.origin.product ?? 0) / (window.pages - (window.productTier.l1 ?? 0)), 3) : null,
    faultOriginPerPage: window?.originPerPage ?? null,
    healthyOriginPerPage: base.originPerPage === null ? null : round(base.originPerPage, 4),
  };
}

function round(value: number, digits: number): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

const pct = (share: number | null | undefined, digits = 1) => (share === null || share === undefined ? "–" : `${(share * 100).toFixed(digits)}%`);
const num = (value: number) => value.toLocaleString("en-US");

function tierCell(result: ScenarioResult): string {
  const { productTier, pages } = result.load;
  if (pages === 0) return "–";
  return [productTier.l1, productTier.l2, productTier.origin].map((n) => pct(n / pages, 0)).join(" / ");
}

function originCell(result: ScenarioResult): string {
  const o = result.origin;
  return [o.product, o.inventory, o.reviews, o.recommendations].map((n) => num(n ?? 0)).join(" / ");
}

const COLUMNS = [
  "scenario",
  "concurrency",
  "requests",
  "req/s",
  "p50 ms",
  "p99 ms",
  "p50 @1 conn",
  "errors",
  "product l1 / l2 / origin",
  "no origin fetch",
  "origin prod / inv / rev / rec",
  "L2 calls/req",
];

function rows(results: ScenarioResult[]): string[][] {
  return results.map((r) => [
    r.name,
    r.concurrency,
    num(r.load.requests),
    num(r.load.rps),
    r.load.latencyMs.p50.toFixed(2),
    r.load.latencyMs.p99.toFixed(2),
    r.unloaded ? r.unloaded.p50.toFixed(2) : "–",
    `${r.load.errors} (${pct(r.load.errorRate, 2)})`,
    tierCell(r),
    pct(r.load.noOriginShare, 2),
    originCell(r),
    r.l2CallsPerRequest === null ? "–" : r.l2CallsPerRequest.toFixed(2),
  ]);
}

/** Where the time and the CPU went: the worker's Server-Timing, cores busy by process, L2 breaker polls. */
const COST_COLUMNS = [
  "scenario",
  "worker ms: l2 / origin / render / total",
  "cores: workerd / load gen / origin+gw / redis / others",
  "breaker open",
  "origin failures",
];

function costRows(results: ScenarioResult[]): string[][] {
  return results.map((r) => {
    const t = r.load.serverTimingMeanMs;
    const c = r.cores;
    const polls = Object.values(r.l2BreakerPolls).reduce((a, b) => a + b, 0);
    const open = (r.l2BreakerPolls.open ?? 0) + (r.l2BreakerPolls["half-open"] ?? 0);
    const failures = Object.entries(r.load.originFailures);
    return [
      r.name,
      t.total === undefined ? "–" : [t.l2, t.origin, t.render, t.total].map((v) => (v ?? 0).toFixed(1)).join(" / "),
      ["workerd", "load generator", "origin + gateway", "redis", "other processes"].map((role) => (c[role] ?? 0).toFixed(2)).join(" / "),
      polls ? `${open} of ${polls} polls` : "–",
      failures.length ? failures.map(([key, n]) => `${key}×${n}`).join(", ") : "none",
    ];
  });
}

/** A plain-text table: columns padded to their widest cell. */
function plainTable(columns: string[], body: string[][], leftColumns: number): string {
  const all = [columns, ...body];
  const widths = columns.map((_, i) => Math.max(...all.map((row) => row[i]!.length)));
  const line = (row: string[]) => row.map((cell, i) => (i < leftColumns ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join("  ");
  return [line(columns), widths.map((w) => "-".repeat(w)).join("  "), ...body.map(line)].join("\n");
}

function mdTable(columns: string[], body: string[][], leftColumns: number): string {
  const line = (row: string[]) => `| ${row.join(" | ")} |`;
  return [line(columns), line(columns.map((_, i) => (i < leftColumns ? "---" : "---:"))), ...body.map(line)].join("\n");
}

export function textTable(results: ScenarioResult[]): string {
  return plainTable(COLUMNS, rows(results), 2);
}

export function textCostTable(results: ScenarioResult[]): string {
  return plainTable(COST_COLUMNS, costRows(results), 1);
}

function markdownTable(results: ScenarioResult[]): string {
  return mdTable(COLUMNS, rows(results), 2);
}

const L1_TARGET = '(target ≈ 1×: an L1-hit page "costs about what a static string does", src/config/defaults.ts)';
const NO_TARGET = "(no target set)";

/** Key figures of the steady, fault, shards and hot-product scenarios, each with its target. */
function steadyFigures(results: ScenarioResult[], r: Ratios): string[] {
  const lines: string[] = [];
  const x = (value: number | null | undefined) => (value === null || value === undefined ? "–" : `${value.toFixed(2)}×`);
  const ms = (value: number | null | undefined) => (value === null || value === undefined ? "–" : `${value.toFixed(1)} ms`);
  const get = (name: string) => results.find((res) => res.name === name);

  const steady = get("zipf-steady");
  if (steady) {
    const warm = steady.extra.warm as { products: number; seconds: number; pass: string } | undefined;
    const l1 = steady.extra.l1WarmUp as { seconds: number } | undefined;
    lines.push(
      `zipf-steady: pages served without an origin fetch: ${pct(r.zipfSteadyNoOriginShare, 2)} (target ≥ 99%) — ` +
        `L2 warmed for ${num(warm?.products ?? 0)} products (${warm?.pass === "inventory" ? "reused, inventory rewritten" : "written"} in ${warm?.seconds} s), L1 by ${l1?.seconds} s of Zipf, then ${steady.load.seconds} s measured on ${steady.concurrency}`,
    );
    const tiers = steady.load.resourceTiers;
    const tierText = Object.entries(tiers)
      .map(([resource, t]) => {
        const total = t.l1 + t.l2 + t.origin + t.none;
        return `${resource} ${[t.l1, t.l2, t.origin].map((n) => pct(total ? n / total : null, 1)).join(" / ")} (stale ${pct(total ? t.stale / total : null, 1)})`;
      })
      .join("; ");
    lines.push(`zipf-steady: hit ratio per tier, l1 / l2 / origin (served stale, refreshing in the background): ${tierText} ${NO_TARGET}`);
    const perPage = steady.extra.redisCommandsPerPage as Record<string, number> | undefined;
    lines.push(
      `zipf-steady: Redis calls per page view: ${r.zipfSteadyL2CallsPerPage === null ? "–" : r.zipfSteadyL2CallsPerPage.toFixed(3)} (target ≤ 0.2) — ` +
        `MGET + EVALSHA + EVAL from redis-server's INFO commandstats deltas (one per worker round trip; commands inside scripts not counted again); ` +
        `by command per page: ${perPage ? Object.entries(perPage).map(([name, n]) => `${name} ${n}`).join(", ") : "–"}`,
    );
    const o = steady.origin;
    const pages = steady.load.pages || 1;
    lines.push(
      `zipf-steady: origin fetches: product ${num(o.product ?? 0)}, inventory ${num(o.inventory ?? 0)}, reviews ${num(o.reviews ?? 0)}, recommendations ${num(o.recommendations ?? 0)} ` +
        `= ${((Object.values(o).reduce((a, b) => a + b, 0) / pages) * 1000).toFixed(1)} per 1,000 pages ${NO_TARGET}`,
    );
    const pagesServed = steady.load.pages || steady.load.requests;
    if (pagesServed && r.zipfSteadyL2CallsPerPage !== null) {
      const cost = costPerMillion(
        {
          requests: 1,
          cpuMs: ((steady.cores.workerd ?? 0) * steady.load.seconds * 1000) / pagesServed,
          redisCommands: r.zipfSteadyL2CallsPerPage,
          redisBytes: 0,
          originFetches: Object.values(o).reduce((a, b) => a + b, 0) / pagesServed,
        },
        loadPrices(),
      );
      lines.push(
        `zipf-steady: cost per million page views (bench/prices.json; CPU = workerd's process CPU, Redis = the calls per page above, bandwidth not measured here): ${costLine(cost)} ${NO_TARGET}`,
      );
    }
    lines.push(
      r.l1P50OverStaticP50 !== null
        ? `zipf-steady: L1-hit page ÷ static string, same invocation: p50 ${x(r.l1P50OverStaticP50)} at ${results.find((res) => res.name === "l1-hit")?.concurrency}, ${x(r.l1P50OverStaticP50Unloaded)} at 1 connection ${L1_TARGET}`
        : "zipf-steady: L1-hit page ÷ static string: static and l1-hit did not both run in this invocation",
    );
  }

  for (const f of r.faults) {
    const res = get(f.name)!;
    const opened = res.extra.breakerOpenedAfterMs as Array<number | null> | undefined;
    const window = res.extra.faultWindow as PhaseFigures | null | undefined;
    const parts = [
      `${f.name} vs ${f.against} (fault window of ${window?.seconds ?? "–"} s): p50 ${ms(window?.p50)} = ${x(f.p50)}, p99 ${ms(window?.p99)} = ${x(f.p99)} of ${ms(f.healthyP50Ms)} / ${ms(f.healthyP99Ms)}` +
        (f.against === "zipf-steady" ? ` (vs its own phase before the fault: ${x(f.p50VsBefore)} / ${x(f.p99VsBefore)})` : "") +
        ` ${NO_TARGET}`,
    ];
    if (opened) {
      parts.push(
        `L2 breaker opened after ${opened.map((at) => (at === null ? "never" : `${at} ms`)).join(" / ")} (per instance); ` +
          `p99 once open ${ms(f.breakerOpenP99Ms)} = ${x(f.p99BreakerOpen)} the healthy p99` +
          (f.against === "zipf-steady" ? `, ${x(f.p99BreakerOpenVsBefore)} its own before-phase p99` : "") +
          " (target ≤ 1.5×)",
      );
    }
    parts.push(
      `5xx ${f.http5xx} (target 0${f.name === "origin-down" ? " for products in L1 or L2; a product with nothing usable gets the 503 page" : ""}); ` +
        `error rate ${pct(f.errorRate, 2)} vs ${pct(f.healthyErrorRate, 2)}; ` +
        `origin requests per page ${f.faultOriginPerPage ?? "–"} vs ${f.healthyOriginPerPage ?? "–"} = ${x(f.originPerPage)}` +
        (f.name === "origin-down"
          ? " (attempts the refusing origin counted)"
          : `; product fetches per page whose product was not in L1: ${f.faultProductFetchesPerL1Miss ?? "–"} (target ≈ 1: no stampede, one fetch per key per isolate; ` +
            "a little more once an isolate has heard nothing from L2 for 5 s and refreshes entries older than 60 s, once each)"),
    );
    lines.push(parts.join("; "));
    // A few failed answers, the fault's own first (all are in the scenario's details): what Cache-Status said about them.
    const samples = phasesOf(res)
      .map((phase, order) => ({ phase, order: phase.name === "before" || phase.name === "after" ? order + 100 : order }))
      .sort((a, b) => a.order - b.order)
      .flatMap(({ phase }) => (phase.failureSamples ?? []).map((failed) => ({ phase: phase.name, failed })))
      .slice(0, FAILURE_LINES);
    for (const { phase, failed } of samples) {
      lines.push(`${f.name}: a ${failed.status} in phase "${phase}" (${failed.atMs} ms in): ${failed.path} — Cache-Status: ${failed.cacheStatus || "none"}`);
    }
  }

  const shards = get("shards");
  if (shards) {
    const killed = shards.extra.killed as string;
    const owned = (shards.extra.shards as Array<{ name: string; idShare: number }>).find((shard) => shard.name === killed)?.idShare ?? null;
    const byShard = shards.extra.pagesByShard as Record<string, Record<string, { pages: number; errors: number; l1: number; l2: number; origin: number }>>;
    const after = { pages: 0, l1Miss: 0, lost: 0, deadL2: 0, liveMiss: 0, liveL2: 0, deadPages: 0 };
    for (const [phase, counts] of Object.entries(byShard)) {
      if (!phase.startsWith(`${killed} killed`)) continue;
      for (const [name, c] of Object.entries(counts)) {
        after.pages += c.pages;
        const miss = c.l2 + c.origin;
        after.l1Miss += miss;
        if (name === killed) {
          after.lost += miss;
          after.deadL2 += c.l2;
          after.deadPages += c.pages;
        } else {
          after.liveMiss += miss;
          after.liveL2 += c.l2;
        }
      }
    }
    const window = shards.extra.afterKill as PhaseFigures | null | undefined;
    const states = (shards.extra.breakerStatesAtEnd as Array<Record<string, string>>).map((s, i) => `instance ${i + 1}: ${Object.entries(s).map(([name, state]) => `${name} ${state}`).join(", ")}`).join("; ");
    lines.push(
      `shards: after ${killed} was killed: ${window?.errors ?? "–"} errors (target 0) in ${num(window?.requests ?? 0)} requests; ` +
        `pages that lost L2 (product not in L1 and held by ${killed}): ${pct(after.l1Miss ? after.lost / after.l1Miss : null, 1)} of the pages that needed L2, ${after.deadL2} of them served from L2 ` +
        `(${killed} holds ${pct(owned, 1)} of the ids and got ${pct(after.pages ? after.deadPages / after.pages : null, 1)} of the requests; target ≈ its share); ` +
        `the live shards served ${pct(after.liveMiss ? after.liveL2 / after.liveMiss : null, 1)} of their L1-miss pages from L2; breakers at the end: ${states}`,
    );
  }

  const hot = get("hot-product");
  if (hot) {
    const h = hot.extra.hot as { answers: number; staleAfterFirst: number; forwardedAfterFirst: number; p50: number; p99: number; errors: number };
    const o = hot.extra.originFetchesForHot as Record<string, number>;
    lines.push(
      `hot-product: ${hot.extra.hotId} at 20/s for ${hot.extra.seconds} s (inventory ttl ${hot.extra.inventoryTtlS} s): ${num(h.answers)} answers, ` +
        `stale after each instance's first: ${h.staleAfterFirst} (target 0), forwarded to the origin after the first: ${h.forwardedAfterFirst} (target 0), errors ${h.errors}; ` +
        `origin fetches for it: inventory ${o.inventory ?? 0} (target ≈ one per ttl: ${hot.extra.expectedInventoryFetches}), product ${o.product ?? 0}, reviews ${o.reviews ?? 0}, recommendations ${o.recommendations ?? 0}; ` +
        `its p50 ${ms(h.p50)}, p99 ${ms(h.p99)}`,
    );
  }
  return lines;
}

/** Failed answers quoted per fault scenario in the key figures. */
const FAILURE_LINES = 2;

const PHASE_COLUMNS = ["scenario", "phase", "s", "requests", "p50 ms", "p99 ms", "errors", "5xx", "no origin fetch", "product l1 / l2 / origin", "origin prod / inv / rev / rec", "origin/page", "cores: workerd / others"];

function phaseRows(results: ScenarioResult[]): string[][] {
  return results.flatMap((res) =>
    // A phase without a single request (the breaker opened within milliseconds) says nothing.
    phasesOf(res).filter((phase) => phase.requests > 0).map((phase) => {
      const pages = phase.pages;
      const t = phase.productTier;
      return [
        res.name,
        phase.name,
        phase.seconds.toFixed(1),
        num(phase.requests),
        phase.p50.toFixed(2),
        phase.p99.toFixed(2),
        num(phase.errors),
        num(phase.http5xx),
        pct(phase.noOriginShare, 2),
        pages ? [t.l1 ?? 0, t.l2 ?? 0, t.origin ?? 0].map((n) => pct(n / pages, 0)).join(" / ") : "–",
        ["product", "inventory", "reviews", "recommendations"].map((service) => num(phase.origin[service] ?? 0)).join(" / "),
        phase.originPerPage === null ? "–" : phase.originPerPage.toFixed(3),
        // /proc counts CPU in 10 ms ticks: over less than a second the figure is noise.
        phase.cores && phase.seconds >= 1 ? `${phase.cores.workerd.toFixed(2)} / ${phase.cores.others.toFixed(2)}` : "–",
      ];
    }),
  );
}

/** The fault and shard scenarios' phases (before / during / after), or "" when none ran. */
export function textPhaseTable(results: ScenarioResult[]): string {
  const body = phaseRows(results);
  return body.length ? plainTable(PHASE_COLUMNS, body, 2) : "";
}

/** The key ratios and per-scenario details, as lines of text. */
export function keyFigures(results: ScenarioResult[], r: Ratios): string[] {
  const lines: string[] = [];
  const x = (value: number | null) => (value === null ? "–" : `${value.toFixed(2)}×`);
  const conns = results.find((res) => res.name !== "herd")?.concurrency ?? "";
  if (r.l1P50OverStaticP50 !== null) lines.push(`L1-hit page p50 ÷ static p50: ${x(r.l1P50OverStaticP50)} at ${conns}, ${x(r.l1P50OverStaticP50Unloaded)} at 1 connection ${L1_TARGET}`);
  if (r.l1RpsOverStaticRps !== null) lines.push(`L1-hit page req/s ÷ static req/s: ${x(r.l1RpsOverStaticRps)} ${L1_TARGET}`);
  if (r.l2P50OverL1P50 !== null) lines.push(`L2-hit page p50 ÷ L1-hit p50: ${x(r.l2P50OverL1P50)} at ${conns}, ${x(r.l2P50OverL1P50Unloaded)} at 1 connection ${NO_TARGET}`);
  if (r.missP50OverL1P50 !== null) lines.push(`miss page p50 ÷ L1-hit p50: ${x(r.missP50OverL1P50)} ${NO_TARGET}`);
  const zipf = results.find((res) => res.name === "zipf");
  if (zipf) {
    lines.push(
      `zipf: pages served without an origin fetch (measured phase): ${pct(r.zipfNoOriginShare, 2)} (target ≥ 99%); ` +
        `an ideal never-expiring cache starting cold: ${pct(r.zipfIdealNoOriginShare, 2)}` +
        (r.zipfNoOriginShare !== null && r.zipfIdealNoOriginShare ? ` (the tier reaches ${pct(r.zipfNoOriginShare / r.zipfIdealNoOriginShare, 1)} of it)` : "") +
        "; " +
        `${num(zipf.extra.distinctProductsRequested as number)} distinct products requested`,
    );
  }
  const herd = results.find((res) => res.name === "herd");
  if (herd && r.herdProductFetchesPerRound) {
    lines.push(
      `herd: origin fetches per round — product ${r.herdProductFetchesPerRound.join(", ")}; ` +
        `inventory ${r.herdInventoryFetchesPerRound?.join(", ")} (target 1 each); ` +
        `${herd.load.collapsed} of ${herd.load.pages} pages say "collapsed"`,
    );
  }
  const l2 = results.find((res) => res.name === "l2-hit");
  if (l2) {
    const tiers = l2.unloaded?.productTier;
    lines.push(
      `l2-hit: ${pct(l2.extra.l2EntriesPresentBeforeB as number, 1)} of the entries were in L2 when B asked (filled through A with ${l2.extra.fillConnections} connections); ` +
        `product from L2 on ${pct(l2.load.pages ? l2.load.productTier.l2 / l2.load.pages : null, 1)} of pages at ${l2.concurrency}` +
        (tiers ? `, ${pct(tiers.l2! / Math.max(1, l2.unloaded!.requests), 1)} at 1 connection` : "") +
        ` ${NO_TARGET}`,
    );
  }
  const miss = results.find((res) => res.name === "miss");
  if (miss) lines.push(`miss: ${pct(miss.extra.l2WritesKept as number | null, 1)} of the fills' L2 writes were kept at ${miss.concurrency} (the rest dropped) ${NO_TARGET}`);
  lines.push(...steadyFigures(results, r));
  for (const res of results) {
    const open = (res.l2BreakerPolls.open ?? 0) + (res.l2BreakerPolls["half-open"] ?? 0);
    if (open) lines.push(`${res.name}: the L2 circuit breaker was open in ${open} of ${Object.values(res.l2BreakerPolls).reduce((a, b) => a + b, 0)} polls`);
    const kinds = Object.entries(res.load.errorKinds);
    if (kinds.length) lines.push(`${res.name}: socket errors ${kinds.map(([k, n]) => `${k}×${n}`).join(", ")}`);
    const bad = Object.entries(res.load.statuses).filter(([status]) => !/^[23]/.test(status));
    if (bad.length) lines.push(`${res.name}: error answers ${bad.map(([s, n]) => `HTTP ${s}×${n}`).join(", ")}`);
    for (const body of res.load.errorBodies) lines.push(`${res.name}: a 5xx answer said: ${body}`);
  }
  return lines;
}

// ---------------------------------------------------------------- files

export interface Report {
  startedAt: string;
  finishedAt: string;
  command: string;
  settings: Settings;
  /** Whether the known-ids filter was built in L2 for the run (null: the run stopped before). */
  knownIdsFilter: FilterBuild | null;
  machine: Machine;
  scenarios: ScenarioResult[];
  ratios: Ratios;
  workerLogLines: number;
  /** Distinct lines the instances logged, labelled by scenario, with their counts. */
  workerLog: Array<{ count: number; line: string }>;
}

function markdown(report: Report): string {
  const m = report.machine;
  const s = report.settings;
  const out = [
    `# Benchmark: edge product pages — ${report.startedAt}`,
    "",
    `Command: \`${report.command}\``,
    "",
    `Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}; Node ${m.node}; ` +
      `workerd ${m.versions.workerd}, wrangler ${m.versions.wrangler}, miniflare ${m.versions.miniflare}` +
      (m.git ? `; commit ${m.git.commit}${m.git.dirtyFiles ? ` + ${m.git.dirtyFiles} uncommitted file(s) in src/ or templates/` : ""}` : ""),
    "",
    `Setup: ${s.connections} connections for throughput scenarios; demo origin ${s.catalogSize.toLocaleString("en-US")} products, ` +
      `${s.originLatencyMs} ± ${s.originJitterMs} ms per service request; L2 = redis-server behind the Upstash REST gateway; ` +
      `each worker instance is one Miniflare (workerd) process serving HTTP on loopback; load from a separate process. ` +
      `Worker settings: ${Object.keys(s.vars).length ? Object.entries(s.vars).map(([k, v]) => `${k}=${v}`).join(", ") : "the tier's defaults"}.` +
      (s.quick ? " Quick mode: short phases, figures are rough." : ""),
    "",
    `Known-ids filter: ${report.knownIdsFilter?.built ? `built once for the run (${report.knownIdsFilter.detail})` : `not built${report.knownIdsFilter ? ` (${report.knownIdsFilter.detail})` : ""}: the worker let every id through`}.`,
    "",
    markdownTable(report.scenarios),
    "",
    "Latency: request written → last byte read, at the stated concurrency; \"p50 @1 conn\": the same requests one at a time, after the measured phase. Tiers: which tier served the `product` resource " +
      "(Cache-Status). \"no origin fetch\": pages without any `pp-origin` member. Origin: requests each service received during the measured phase. " +
      "L2 calls: MGET + EVALSHA + EVAL that reached Redis, per request.",
    "",
    "Where the time and the CPU went (measured phases):",
    "",
    mdTable(COST_COLUMNS, costRows(report.scenarios), 1),
    "",
    "Worker ms: mean Server-Timing of the pages (workerd's clock only moves on I/O: render time is coarse). Cores: CPU time per wall second, " +
      "by process (\"load gen\" is the benchmark's own process, which also drives Miniflare; \"others\": everything else on the machine). " +
      "Breaker open: /healthz polls (every 250 ms per instance) that found the L2 circuit breaker open or half-open.",
    "",
    ...(phaseRows(report.scenarios).length
      ? [
          "Fault scenarios by phase (each answer counts in the phase its request was sent in; origin: requests each service received in the phase):",
          "",
          mdTable(PHASE_COLUMNS, phaseRows(report.scenarios), 2),
          "",
        ]
      : []),
    "## Key figures",
    "",
    ...keyFigures(report.scenarios, report.ratios).map((line) => `- ${line}`),
    "",
    "## Scenarios",
    "",
  ];
  for (const r of report.scenarios) {
    out.push(`### ${r.name}`, "", r.description, "");
    out.push(`- latency ms: p50 ${r.load.latencyMs.p50}, p90 ${r.load.latencyMs.p90}, p99 ${r.load.latencyMs.p99}, max ${r.load.latencyMs.max}, mean ${r.load.latencyMs.mean}`);
    out.push(`- statuses: ${JSON.stringify(r.load.statuses)}; mean body ${r.load.meanBytes} bytes; measured ${r.load.seconds} s`);
    out.push(`- redis calls: ${JSON.stringify(r.redis)}; L2 breaker after: ${r.l2Breaker.join(", ")}; breaker polls: ${JSON.stringify(r.l2BreakerPolls)}`);
    out.push(`- worker Server-Timing means (ms): ${JSON.stringify(r.load.serverTimingMeanMs)}; cores busy: ${JSON.stringify(r.cores)}`);
    if (Object.keys(r.extra).length) out.push(`- ${JSON.stringify(r.extra)}`);
    for (const note of r.notes) out.push(`- note: ${note}`);
    out.push("");
  }
  if (report.workerLogLines) {
    out.push(
      `## Worker log (${report.workerLogLines} lines, ${report.workerLog.length} distinct)`,
      "",
      "```",
      ...report.workerLog.map(({ count, line }) => `${count}× ${line}`),
      "```",
      "",
    );
  }
  return out.join("\n");
}

/** Writes `<stamp>.json`, `<stamp>.md` and overwrites `latest.md`; returns the paths. */
export function writeReport(dir: string, report: Report): string[] {
  mkdirSync(dir, { recursive: true });
  const stamp = report.startedAt.replace(/[:.]/g, "-").replace(/-\d{3}Z$/, "Z") + (report.settings.quick ? "-quick" : "");
  const json = join(dir, `${stamp}.json`);
  const md = join(dir, `${stamp}.md`);
  const latest = join(dir, "latest.md");
  const text = markdown(report);
  writeFileSync(json, `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(md, text);
  writeFileSync(latest, text);
  return [json, md, latest];
}
