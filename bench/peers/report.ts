// What `npm run bench:peers` writes: a Markdown report with one table
// (system × scenario), the price-change details, CPU, errors and the
// configurations used, plus two SVG charts (p99 latency, origin fetches).
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Machine } from "../report";
import { SCENARIO_LABELS, type durations, type Row, type ScenarioName } from "./scenarios";
import { barChartSvg, type BarSeries } from "./svg";
import type { Settings, SystemName } from "./systems";

export interface Calibration {
  path: string;
  seconds: number;
  node: { rps: number; p50: number; p99: number; errors: number };
  wrk: { rps: number; p50: number | null; p99: number | null } | null;
}

export interface PeersReport {
  startedAt: string;
  finishedAt: string;
  command: string;
  settings: Settings;
  durations: ReturnType<typeof durations>;
  machine: Machine;
  systems: Array<{ name: SystemName; description: string; check: string; config: string }>;
  renderOnlyVars: Record<string, string>;
  calibration: Calibration | null;
  rows: Row[];
  workerLog: Array<{ count: number; line: string }>;
}

const SCENARIOS: ScenarioName[] = ["steady", "herd", "origin-slow", "origin-down", "price-change", "redis-down"];
const SERIES: Array<BarSeries & { key: SystemName }> = [
  { key: "nginx", name: "Nginx proxy_cache", color: "#2f7d32" },
  { key: "varnish", name: "Varnish", color: "#6a3d9a" },
  { key: "tier", name: "this tier (2 isolates, L1 + L2)", color: "#e07b00" },
];

const num = (n: number) => n.toLocaleString("en-US");
const pct = (share: number) => `${(share * 100).toFixed(share > 0 && share < 0.001 ? 3 : 2)}%`;
const ms = (v: number) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));

function compact(v: number): string {
  if (v >= 1_000_000) return `${(v / 1_000_000).toFixed(1)}M`;
  if (v >= 10_000) return `${(v / 1000).toFixed(0)}k`;
  if (v >= 1000) return `${(v / 1000).toFixed(1)}k`;
  return String(Math.round(v));
}

function compactMs(v: number): string {
  if (v >= 1000) return `${(v / 1000).toFixed(v >= 10_000 ? 0 : 1)} s`;
  return `${v >= 10 ? v.toFixed(0) : v.toFixed(1)}`;
}

export function stalenessCell(row: Row): string {
  const s = row.staleness;
  if (!s) return "";
  if (s.seconds === null) return s.pending ? "pending" : `not within ${s.capS} s`;
  return `${s.seconds.toFixed(2)} s`;
}

function errorsCell(row: Row): string {
  return `${num(row.load.errors)} (${pct(row.load.errorRate)})`;
}

const COLUMNS = ["system", "scenario", "concurrency", "requests", "req/s", "p50 ms", "p99 ms", "errors (rate)", "origin fetches", "origin product", "new price served after"];

function tableRows(rows: Row[]): string[][] {
  return rows.map((r) => [
    r.system,
    SCENARIO_LABELS[r.scenario],
    r.concurrency,
    num(r.load.requests),
    num(r.load.rps),
    ms(r.load.latencyMs.p50),
    ms(r.load.latencyMs.p99),
    errorsCell(r),
    num(r.originTotal),
    num(r.origin.product ?? 0),
    stalenessCell(r) || "–",
  ]);
}

function mdTable(columns: string[], body: string[][], left: number): string {
  const line = (cells: string[]) => `| ${cells.join(" | ")} |`;
  return [line(columns), line(columns.map((_, i) => (i < left ? "---" : "---:"))), ...body.map(line)].join("\n");
}

function plainTable(columns: string[], body: string[][], left: number): string {
  const all = [columns, ...body];
  const widths = columns.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((c, i) => (i < left ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  return [line(columns), widths.map((w) => "-".repeat(w)).join("  "), ...body.map(line)].join("\n");
}

function find(rows: Row[], system: SystemName, scenario: ScenarioName): Row | undefined {
  return rows.find((r) => r.system === system && r.scenario === scenario);
}

// ---------------------------------------------------------------- charts

function charts(report: PeersReport): { latency: string; origin: string } {
  const systems = SERIES.filter((s) => report.systems.some((x) => x.name === s.key));
  const scenarios = SCENARIOS.filter((sc) => report.rows.some((r) => r.scenario === sc));
  const groups = scenarios.map((sc) => SCENARIO_LABELS[sc]);
  const when = `${report.startedAt.slice(0, 16).replace("T", " ")} UTC${report.settings.quick ? " · quick run" : ""}`;
  const latency = barChartSvg({
    title: "p99 latency per scenario, with p50 marked (lower is better)",
    subtitle: `${report.settings.connections} connections, Zipf(1.0) over ${num(report.settings.catalogSize)} products; herd: 1,000 requests at once · ${when} · log scale`,
    yLabel: "latency, ms (log scale)",
    groups,
    series: systems,
    values: scenarios.map((sc) => systems.map((s) => find(report.rows, s.key, sc)?.load.latencyMs.p99 ?? null)),
    scale: "log",
    label: compactMs,
    marker: { values: scenarios.map((sc) => systems.map((s) => find(report.rows, s.key, sc)?.load.latencyMs.p50 ?? null)), legend: "p50" },
    note: (gi, si) => {
      const r = find(report.rows, systems[si]!.key, scenarios[gi]!);
      return r && r.load.errorRate >= 0.001 ? `${(r.load.errorRate * 100).toFixed(r.load.errorRate < 0.1 ? 1 : 0)}% err` : null;
    },
  });
  const origin = barChartSvg({
    title: "Requests reaching the origin per scenario (lower is better)",
    subtitle: `product + inventory + reviews + recommendations, counted by each system's own demo origin · ${when} · log(1 + n) scale`,
    yLabel: "origin requests (log scale)",
    groups,
    series: systems,
    values: scenarios.map((sc) => systems.map((s) => find(report.rows, s.key, sc)?.originTotal ?? null)),
    scale: "symlog",
    label: compact,
  });
  return { latency, origin };
}

// ---------------------------------------------------------------- markdown

function markdown(report: PeersReport, images: { latency: string; origin: string }): string {
  const m = report.machine;
  const v = m.versions;
  const s = report.settings;
  const d = report.durations;
  const rows = report.rows;
  const out: string[] = [];
  out.push(
    `# bench:peers — this tier vs Varnish vs Nginx proxy_cache — ${report.startedAt}`,
    "",
    `Command: \`${report.command}\` (finished ${report.finishedAt})`,
    "",
    `Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}. Versions: Node ${m.node}; workerd ${v.workerd}, wrangler ${v.wrangler}, miniflare ${v.miniflare}; nginx ${v.nginx}; ${v.varnish}; wrk ${v.wrk}` +
      (m.git ? `; commit ${m.git.commit}${m.git.dirtyFiles ? ` + ${m.git.dirtyFiles} uncommitted file(s) in src/ or templates/` : ""}` : "") +
      ".",
    "",
    `Load: the benchmark's own generator (\`bench/load.ts\` \`runLoad\`: closed-loop HTTP/1.1 keep-alive clients in Node, ${s.connections} connections; the tier's ${report.systems.find((x) => x.name === "tier") ? "two instances each get half of them" : "instances split them"}), the same for every system; ` +
      `Zipf(s = 1.0) over ${num(s.catalogSize)} products with the seeds of \`npm run bench\`, the same sequence for every system. Demo origin ${s.originLatencyMs} ± ${s.originJitterMs} ms per service request, one per system. ` +
      `Phases, in Zipf requests (the same draws for every system; each phase capped at ${d.capMs / 1000} s): warm-up ${num(d.warmUp)} (not measured), steady ${num(d.steady)}, herd 1,000 at once, origin +500 ms ${num(d.slow)}, ${num(d.recover)} unmeasured, origin down ${num(d.down)} (after ${d.pauseMs / 1000} s idle and ${num(d.recover)} unmeasured), price change under ${d.priceLoadMs / 1000} s of load (by time; after ${d.pauseMs / 1000} s idle and ${num(d.recover)} unmeasured; poll every 50 ms, capped at ${d.priceCapMs / 1000} s), Redis down ${num(d.redisDown)} (tier only, after ${num(d.recover)} unmeasured)` +
      (s.quick ? ". **Quick mode: short phases, rough figures.**" : "."),
    "",
  );
  if (report.calibration) {
    const c = report.calibration;
    out.push(
      `Load generator ceiling: one page Nginx has cached (\`${c.path}\`), ${c.seconds} s at ${s.connections} connections: the Node generator ${num(c.node.rps)} req/s (p50 ${ms(c.node.p50)} ms, p99 ${ms(c.node.p99)} ms)` +
        (c.wrk ? `, wrk (C, 2 threads) ${num(c.wrk.rps)} req/s (p50 ${c.wrk.p50 === null ? "?" : ms(c.wrk.p50)} ms, p99 ${c.wrk.p99 === null ? "?" : ms(c.wrk.p99)} ms)` : "") +
        ". Peer req/s near the first figure are the generator's limit on this 2-core machine, not the server's.",
      "",
    );
  }
  out.push("## Results", "", mdTable(COLUMNS, tableRows(rows), 3), "");
  out.push(
    "requests / req/s / p50 / p99: measured phase only, request written → last byte read. errors: answers outside 2xx/3xx plus socket errors and timeouts (10 s); the load asks only for existing products, so no 404 is expected and none is excluded. " +
      "origin fetches: requests the system's demo origin received (product + inventory + reviews + recommendations; refused connections count) from the reset before the scenario to its end (herd: until 1 s after). " +
      "new price served after: from the committed change at the origin until every answer through the system (every instance, polled every 50 ms) showed the new price for at least 1 s.",
    "",
    `![p99 latency per system and scenario](${images.latency})`,
    "",
    `![origin requests per system and scenario](${images.origin})`,
    "",
  );

  // Key comparisons computed from the rows.
  const lines: string[] = [];
  const steady = (sys: SystemName) => find(rows, sys, "steady");
  const t = steady("tier");
  for (const peer of ["nginx", "varnish"] as const) {
    const p = steady(peer);
    if (t && p && p.load.rps) {
      lines.push(
        `steady: the tier serves ${(t.load.rps / p.load.rps).toFixed(2)}× ${peer}'s req/s (${num(t.load.rps)} vs ${num(p.load.rps)}), p50 ${ms(t.load.latencyMs.p50)} vs ${ms(p.load.latencyMs.p50)} ms, p99 ${ms(t.load.latencyMs.p99)} vs ${ms(p.load.latencyMs.p99)} ms; ` +
          `origin requests per page ${(t.originTotal / Math.max(1, t.load.requests)).toFixed(3)} vs ${(p.originTotal / Math.max(1, p.load.requests)).toFixed(3)} (product only: ${((t.origin.product ?? 0) / Math.max(1, t.load.requests)).toFixed(3)} vs ${((p.origin.product ?? 0) / Math.max(1, p.load.requests)).toFixed(3)})`,
      );
    }
  }
  for (const r of rows.filter((x) => x.scenario === "herd")) {
    lines.push(`herd (${r.system}, ${r.extra.id}): origin product ${r.origin.product}, inventory ${r.origin.inventory}, reviews ${r.origin.reviews}, recommendations ${r.origin.recommendations}; p50 ${ms(r.load.latencyMs.p50)} ms, max ${ms(r.load.latencyMs.max)} ms; ${r.load.errors} errors`);
  }
  for (const r of rows) {
    const cpuMs = cpuPerRequest(r);
    if (r.scenario === "steady" && cpuMs !== null) lines.push(`steady (${r.system}): ${cpuMs.toFixed(2)} ms of CPU per request in the system's own processes (${cpuRoleList(r)})`);
  }
  if (lines.length) out.push("## Key comparisons", "", ...lines.map((l) => `- ${l}`), "");

  // Price change.
  const priceRows = rows.filter((r) => r.staleness);
  if (priceRows.length) {
    out.push(
      "## Price change",
      "",
      mdTable(
        ["system", "product", "old → new", "done right after the change", "purge call", "new price served after", "old-price answers / polls", "poll errors", "entry age at the change"],
        priceRows.map((r) => {
          const p = r.staleness!;
          return [
            r.system,
            p.id,
            `${p.oldPrice} → ${p.newPrice}`,
            p.purge,
            p.purgeMs === null ? "–" : `${p.purgeMs} ms`,
            stalenessCell(r),
            `${num(p.oldAnswers)} / ${num(p.polls)}`,
            num(p.pollErrors),
            `≤ ${p.entryAgeS} s`,
          ];
        }),
        2,
      ),
      "",
      "The hot product is the Zipf rank-1 product. The change is made through the origin's admin API (`POST /__admin/products/:id {price}`); then Varnish gets `PURGE` on the page, the tier `POST /__purge` (one instance; the other learns it from the purge log in Redis within PURGE_POLL_MS), Nginx nothing: open-source Nginx has no purge, so its copy stays until `proxy_cache_valid 200 300s` runs out (entry age at the change + the remaining ttl). When the change is not seen within the load phase, polling goes on without load, in the background while the next system runs, up to the cap.",
      "",
    );
  }

  // CPU and errors.
  out.push(
    "## Where the CPU went",
    "",
    "Cores busy during each measured phase, by process tree: workerd = every workerd this run started (render-only workers for the peers, the tier's instances for the tier); nginx / varnish = the server's process tree; origin = that system's demo origin (for the tier, with the gateway and redis-server); load generator = this Node process; others = the rest of the machine (other sessions on a shared machine). CPU ms/request = the system's own processes (workerd + server + origin[+gateway+redis]) per measured request.",
    "",
    mdTable(
      ["system", "scenario", "workerd", "nginx / varnish", "origin (+gw+redis)", "load gen", "others", "CPU ms / request"],
      rows.map((r) => {
        const c = r.cores;
        const server = c.nginx ?? c.varnish;
        const origin = c.origin ?? c["origin+gateway+redis"];
        const per = cpuPerRequest(r);
        return [r.system, SCENARIO_LABELS[r.scenario], f2(c.workerd), server === undefined ? "–" : f2(server), f2(origin), f2(c["load generator"]), f2(c.others), per === null ? "–" : per.toFixed(2)];
      }),
      2,
    ),
    "",
    "## Answers that were not 2xx/3xx",
    "",
  );
  const bad = rows.filter((r) => r.load.errors > 0);
  if (!bad.length) out.push("None.", "");
  for (const r of bad) {
    const statuses = Object.entries(r.load.statuses).filter(([st]) => !/^[23]/.test(st)).map(([st, n]) => `HTTP ${st}×${num(n)}`);
    const kinds = Object.entries(r.load.errorKinds).map(([k, n]) => `${k}×${num(n)}`);
    out.push(`- ${r.system} · ${SCENARIO_LABELS[r.scenario]}: ${[...statuses, ...kinds].join(", ")}${r.load.errorBodies.length ? ` — e.g. "${r.load.errorBodies[0]!.slice(0, 160)}"` : ""}`);
  }
  if (bad.length) out.push("");
  const notes = rows.flatMap((r) => r.notes.map((n) => `${r.system} · ${SCENARIO_LABELS[r.scenario]}: ${n}`));
  if (notes.length) out.push("Notes:", "", ...notes.map((n) => `- ${n}`), "");

  // Setup.
  out.push("## Setup", "");
  for (const sys of report.systems) out.push(`- **${sys.name}**: ${sys.description}. ${sys.check}.`);
  out.push(
    "",
    `Render-only upstream of the peers: the tier's own bundle in Miniflare (workerd), 2 instances per peer, without L2 (no UPSTASH vars) and with ${Object.entries(report.renderOnlyVars)
      .map(([k, val]) => `\`${k}=${val}\``)
      .join(", ")}: every entry is fresh for 1 s at most and never served stale, so a peer miss costs the four origin calls and the render a tier miss costs.`,
    "",
  );
  for (const sys of report.systems.filter((x) => x.name !== "tier")) {
    out.push(`<details><summary>${sys.name} configuration</summary>`, "", "```", sys.config.trim(), "```", "", "</details>", "");
  }
  const log = report.workerLog.filter(({ line }) => !/"event":"known_ids","state":"(ok|ready|loading)"/.test(line));
  if (log.length) {
    out.push("## What the workers logged", "", ...log.slice(0, 20).map(({ count, line }) => `- ${count}× \`${line.slice(0, 300).replace(/`/g, "'")}\``), "");
  }
  return out.join("\n");
}

function f2(v: number | undefined): string {
  return v === undefined ? "–" : v.toFixed(2);
}

function ownRoles(r: Row): string[] {
  return Object.keys(r.cores).filter((role) => role !== "load generator" && role !== "others");
}

function cpuRoleList(r: Row): string {
  return ownRoles(r).join(" + ");
}

function cpuPerRequest(r: Row): number | null {
  if (!r.load.requests || !r.load.seconds) return null;
  const cores = ownRoles(r).reduce((sum, role) => sum + (r.cores[role] ?? 0), 0);
  return (cores * r.load.seconds * 1000) / r.load.requests;
}

// ---------------------------------------------------------------- files

export function writePeersReport(dir: string, report: PeersReport): { written: string[]; table: string } {
  mkdirSync(dir, { recursive: true });
  const stamp = report.startedAt.replace(/:/g, "-").replace(/\.\d+Z$/, "Z") + (report.settings.quick ? "-quick" : "");
  const { latency, origin } = charts(report);
  const base = join(dir, `peers-${stamp}`);
  const files: Array<[string, string]> = [
    [`${base}.md`, markdown(report, { latency: `peers-${stamp}-latency.svg`, origin: `peers-${stamp}-origin.svg` })],
    [`${base}-latency.svg`, latency],
    [`${base}-origin.svg`, origin],
    [`${base}.json`, JSON.stringify(report, null, 2)],
    [join(dir, "peers-latest.md"), markdown(report, { latency: "peers-latency.svg", origin: "peers-origin.svg" })],
    [join(dir, "peers-latency.svg"), latency],
    [join(dir, "peers-origin.svg"), origin],
  ];
  for (const [file, text] of files) writeFileSync(file, text.endsWith("\n") ? text : `${text}\n`);
  return { written: files.map(([file]) => file), table: plainTable(COLUMNS, tableRows(report.rows), 3) };
}
