// What the benchmark shows and keeps: the progress line while it runs, the
// table and ratios on stdout, and the JSON + Markdown files in bench/results/.
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, release, totalmem } from "node:os";
import { join } from "node:path";
import type { Live } from "./load";
import type { ScenarioResult, Settings } from "./scenarios";
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

/** The key ratios and per-scenario details, as lines of text. */
export function keyFigures(results: ScenarioResult[], r: Ratios): string[] {
  const lines: string[] = [];
  const x = (value: number | null) => (value === null ? "–" : `${value.toFixed(2)}×`);
  const conns = results.find((res) => res.name !== "herd")?.concurrency ?? "";
  if (r.l1P50OverStaticP50 !== null) lines.push(`L1-hit page p50 ÷ static p50: ${x(r.l1P50OverStaticP50)} at ${conns}, ${x(r.l1P50OverStaticP50Unloaded)} at 1 connection`);
  if (r.l1RpsOverStaticRps !== null) lines.push(`L1-hit page req/s ÷ static req/s: ${x(r.l1RpsOverStaticRps)}`);
  if (r.l2P50OverL1P50 !== null) lines.push(`L2-hit page p50 ÷ L1-hit p50: ${x(r.l2P50OverL1P50)} at ${conns}, ${x(r.l2P50OverL1P50Unloaded)} at 1 connection`);
  if (r.missP50OverL1P50 !== null) lines.push(`miss page p50 ÷ L1-hit p50: ${x(r.missP50OverL1P50)}`);
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
        (tiers ? `, ${pct(tiers.l2! / Math.max(1, l2.unloaded!.requests), 1)} at 1 connection` : ""),
    );
  }
  const miss = results.find((res) => res.name === "miss");
  if (miss) lines.push(`miss: ${pct(miss.extra.l2WritesKept as number | null, 1)} of the fills' L2 writes were kept at ${miss.concurrency} (the rest dropped)`);
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

export function markdown(report: Report): string {
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
