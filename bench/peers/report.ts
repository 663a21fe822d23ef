// What `npm run bench:peers` writes: a Markdown report (the generator and its
// ceiling, saturation and fixed-load tables, the targets with pass/miss,
// origin requests per page at equal freshness, Redis commands, cost per
// million page views, faults, CPU, configurations) and two SVG charts (p99
// latency, origin requests per 1,000 pages).
import { costLine, costPerMillion, pricesNote, usd, type CostPerMillion, type Prices } from "../lib/cost";
import { writeResults, type Machine } from "../lib/report";
import type { Phase } from "../lib/wrk";
import type { Census } from "../lib/redis";
import { SCENARIO_LABELS, type Calibration, type Ceiling, type Durations, type IdleCost, type Row, type ScenarioName } from "./scenarios";
import { barChartSvg, type BarSeries } from "../lib/chart";
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

const SERIES: Array<BarSeries & { key: SystemName }> = [
  { key: "nginx", name: "Nginx proxy_cache", color: "#2f7d32" },
  { key: "varnish", name: "Varnish", color: "#6a3d9a" },
  { key: "tier", name: "tier (defaults)", color: "#e07b00" },
  { key: "tier-300s", name: "tier (300 s, peers' freshness)", color: "#f2b66d" },
];
const TIERS: SystemName[] = ["tier", "tier-300s"];
/** "others" (processes outside the run) above this many cores in a phase is reported: a neighbour took part of the machine. */
const NEIGHBOUR_CORES = 0.25;
/** Roles that are not a system's own CPU (procs.ts cpuSample). */
const NOT_OWN = new Set(["harness", "wrk", "other workerd", "others"]);

const num = (n: number) => Math.round(n).toLocaleString("en-US");
const ms = (v: number) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
const x = (v: number | null) => (v === null || !Number.isFinite(v) ? "–" : `${v.toFixed(2)}×`);
const f3 = (v: number) => (v >= 10 ? v.toFixed(1) : v >= 1 ? v.toFixed(2) : v.toFixed(3));
const pct = (share: number) => `${(share * 100).toFixed(share > 0 && share < 0.001 ? 3 : 2)}%`;

function compactMs(v: number): string {
  if (v >= 1000) return `${(v / 1000).toFixed(v >= 10_000 ? 0 : 1)} s`;
  return `${v >= 10 ? v.toFixed(0) : v.toFixed(1)}`;
}

function find(rows: Row[], system: SystemName, scenario: ScenarioName): Row | undefined {
  return rows.find((r) => r.system === system && r.scenario === scenario);
}

function mdTable(columns: string[], body: string[][], left: number): string {
  const line = (cells: string[]) => `| ${cells.join(" | ")} |`;
  return [line(columns), line(columns.map((_, i) => (i < left ? "---" : "---:"))), ...body.map(line)].join("\n");
}

const perPage = (n: number, r: Row) => n / Math.max(1, r.load.requests);
const originPerPage = (r: Row) => perPage(r.originTotal, r);
/** CPU ms per request of the system's own processes, or of one role. */
function cpuMs(r: Row, role?: string): number {
  const s = r.cpu.seconds;
  const seconds = role
    ? (s[role] ?? 0)
    : Object.entries(s)
        .filter(([k]) => !NOT_OWN.has(k))
        .reduce((a, [, v]) => a + v, 0);
  return (seconds * 1000) / Math.max(1, r.load.requests);
}
const ownRoles = (r: Row) => Object.keys(r.cpu.seconds).filter((k) => !NOT_OWN.has(k));

/** "⚠" when a figure is within 80% of what the generator itself can do. */
function limited(report: PeersReport, phase: Phase): string | null {
  const c = report.ceiling;
  if (!c) return null;
  if (phase.askedRate !== null) return phase.askedRate >= 0.8 * c.paced.rps ? `asked rate ≥ 80% of the paced generator's ${num(c.paced.rps)} req/s` : null;
  return phase.rps >= 0.8 * c.closed.rps ? `≥ 80% of wrk's ${num(c.closed.rps)} req/s` : null;
}

// ---------------------------------------------------------------- figures

interface Targets {
  lines: Array<{ text: string; pass: boolean | null }>;
}

function targets(report: PeersReport): Targets {
  const rows = report.rows;
  const t = find(rows, "tier", "saturation");
  const h = find(rows, "tier", "healthz");
  const tf = find(rows, "tier", "fixed");
  const nf = find(rows, "nginx", "fixed");
  const lines: Targets["lines"] = [];
  const verdict = (ok: boolean | null) => ok;
  if (t && h) {
    const page = cpuMs(t, "workerd");
    const floor = cpuMs(h, "workerd");
    const ratio = page / floor;
    lines.push({
      text: `CPU per page ≤ 2× the /healthz floor: workerd ${page.toFixed(3)} CPU-ms per page vs ${floor.toFixed(3)} per /healthz = ${x(ratio)}`,
      pass: verdict(ratio <= 2),
    });
    const rps = t.load.rps / Math.max(1, h.load.rps);
    lines.push({ text: `req/s ≥ 0.5× /healthz req/s: ${num(t.load.rps)} vs ${num(h.load.rps)} = ${x(rps)}`, pass: verdict(rps >= 0.5) });
    const cached = find(rows, "tier", "cached");
    if (cached) {
      lines.push({
        text: `(information, not the target: the same two on the cached set, every page a hit: ${x(cpuMs(cached, "workerd") / floor)} the floor's CPU, ${x(cached.load.rps / Math.max(1, h.load.rps))} its req/s)`,
        pass: null,
      });
    }
  } else lines.push({ text: "CPU per page and req/s vs the /healthz floor: the tier's saturation and /healthz phases did not both run", pass: null });
  if (tf && nf) {
    lines.push({
      text: `fixed offered load, p99 ≤ Nginx p99: ${ms(tf.load.p99Ms)} vs ${ms(nf.load.p99Ms)} ms = ${x(tf.load.p99Ms / nf.load.p99Ms)}`,
      pass: tf.load.p99Ms <= nf.load.p99Ms,
    });
    lines.push({
      text: `fixed offered load, p50 ≤ 1.5× Nginx p50: ${ms(tf.load.p50Ms)} vs ${ms(nf.load.p50Ms)} ms = ${x(tf.load.p50Ms / nf.load.p50Ms)}`,
      pass: tf.load.p50Ms <= 1.5 * nf.load.p50Ms,
    });
    const floorFixed = find(rows, "tier", "healthz-fixed");
    if (floorFixed) {
      lines.push({
        text: `(information, not the target: at the same rate the runtime's floor, /healthz, answers with p50 ${ms(floorFixed.load.p50Ms)} ms = ${x(floorFixed.load.p50Ms / nf.load.p50Ms)} Nginx's p50, and p99 ${ms(floorFixed.load.p99Ms)} ms; the tier's pages: p50 ${x(tf.load.p50Ms / floorFixed.load.p50Ms)} the floor's)`,
        pass: null,
      });
    }
  } else lines.push({ text: "fixed offered load vs Nginx: the tier and Nginx did not both run", pass: null });
  if (tf) lines.push({ text: `fixed offered load, 0 errors: ${num(tf.load.errors)} in ${num(tf.load.requests)}`, pass: tf.load.errors === 0 });
  return { lines };
}

/** Redis commands per page view for billing: the census's "sent" (what the gateway got), else Redis's own count. */
function commandsSentPerPage(report: PeersReport, system: SystemName): { perPage: number; source: string } | null {
  const c = report.census[system];
  if (c?.pages) return { perPage: sum(c.sent) / c.pages, source: "sent, census" };
  const r = find(report.rows, system, "saturation");
  if (r?.redis) return { perPage: perPage(r.redis.total, r), source: "Redis's count, with calls inside scripts" };
  return null;
}

function cost(report: PeersReport, system: SystemName): { c: CostPerMillion; source: string } | null {
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

const sum = (o: Record<string, number>) => Object.values(o).reduce((a, b) => a + b, 0);
const split = (o: Record<string, number>, pages: number, top = 8) =>
  Object.entries(o)
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([k, n]) => `${k} ${f3(n / Math.max(1, pages))}`)
    .join(", ") || "none";

// ---------------------------------------------------------------- charts

const LATENCY_GROUPS: ScenarioName[] = ["fixed", "saturation", "cached", "origin-slow", "origin-down", "price-change", "redis-down"];
const ORIGIN_GROUPS: ScenarioName[] = ["warm-up", "fixed", "saturation", "origin-slow", "price-change"];

function charts(report: PeersReport): { latency: string; origin: string } {
  const systems = SERIES.filter((s) => report.systems.some((x) => x.name === s.key));
  const when = `${report.startedAt.slice(0, 16).replace("T", " ")} UTC${report.settings.quick ? " · quick run" : ""}`;
  const lat = LATENCY_GROUPS.filter((sc) => report.rows.some((r) => r.scenario === sc));
  const latency = barChartSvg({
    title: "p99 latency per phase, p50 marked (wrk; lower is better)",
    subtitle: `saturation phases: closed loop, ${report.settings.connections} conn; the others paced at ${num(report.settings.rate ?? 0)} req/s (${report.settings.pacedConnections} conn) · Zipf(1.0), ${num(report.settings.catalogSize)} products · ${when} · log scale`,
    yLabel: "latency, ms (log scale)",
    groups: lat.map((sc) => SCENARIO_LABELS[sc]),
    series: systems,
    values: lat.map((sc) => systems.map((s) => find(report.rows, s.key, sc)?.load.p99Ms ?? null)),
    scale: "log",
    label: compactMs,
    marker: { values: lat.map((sc) => systems.map((s) => find(report.rows, s.key, sc)?.load.p50Ms ?? null)), legend: "p50" },
    note: (gi, si) => {
      const r = find(report.rows, systems[si]!.key, lat[gi]!);
      const rate = r ? r.load.errors / Math.max(1, r.load.requests) : 0;
      return rate >= 0.001 ? `${(rate * 100).toFixed(rate < 0.1 ? 1 : 0)}% err` : null;
    },
  });
  const org = ORIGIN_GROUPS.filter((sc) => report.rows.some((r) => r.scenario === sc));
  const origin = barChartSvg({
    title: "Origin requests per 1,000 pages (lower is better)",
    subtitle: `product + inventory + reviews + recommendations, counted by each system's own demo origin · ${when}`,
    yLabel: "origin requests per 1,000 pages",
    groups: org.map((sc) => SCENARIO_LABELS[sc]),
    series: systems,
    values: org.map((sc) =>
      systems.map((s) => {
        const r = find(report.rows, s.key, sc);
        return r ? originPerPage(r) * 1000 : null;
      }),
    ),
    scale: "linear",
    label: num,
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
  const c = report.ceiling;
  const out: string[] = [];
  const present = SERIES.filter((x) => report.systems.some((y) => y.name === x.key)).map((x) => x.key);
  out.push(
    `# bench:peers — this tier vs Varnish vs Nginx proxy_cache — ${report.startedAt}`,
    "",
    `Command: \`${report.command}\` (finished ${report.finishedAt})${s.quick ? ". **Quick mode: short phases, rough figures.**" : ""}`,
    "",
    `Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}, shared with other work (see "others" in the CPU table): absolute figures move from run to run; compare systems within this run. ` +
      `Versions: Node ${m.node}; workerd ${v.workerd}, wrangler ${v.wrangler}, miniflare ${v.miniflare}; nginx ${v.nginx}; ${v.varnish}; wrk ${v.wrk}` +
      (m.git ? `; commit ${m.git.commit}${m.git.dirtyFiles ? ` + ${m.git.dirtyFiles} uncommitted file(s) in src/ or templates/` : ""}` : "") +
      ".",
    "",
    `**Generator**: wrk (C, 2 threads; thread i sends to target i, so each of the tier's 2 instances gets one thread and half the connections) with \`bench/lib/zipf.lua\`: Zipf(s = 1.0) over ${num(s.catalogSize - 1)} products (the coldest left for the herd), ranks mapped to ids with \`npm run bench\`'s shuffle, each phase with its own seed, so every system gets the same draws. ` +
      `Two modes: **saturation**, closed loop at ${s.connections} connections (\`wrk -t2 -c${s.connections}\`); **paced**, a constant offered rate of ${num(s.rate ?? 0)} req/s on a fixed schedule over ${s.pacedConnections} connections (zipf.lua's \`delay()\`, a wrk2-style schedule: a free connection takes the next send time; a send that finds no connection free goes out late and is counted). ` +
      `Not autocannon (its rate limit lets each connection send its share of a second as fast as it can, then stop: bursts, and closed loop per connection) nor h2load (every client replays the same URI list, and with HTTP/1.1 a client waits for each answer unless it pipelines). Errors: answers ≥ 400, socket errors and timeouts (5 s).`,
    "",
  );
  if (report.calibration) {
    const k = report.calibration;
    out.push(
      `**The fixed offered load** is half the tier's saturation rate, measured first on a fresh tier stack of its own in the state the runs below measure theirs: the walk, a ${d.probeS}-s closed-loop probe (${num(k.probe.rps)} req/s), ${d.warmUpS} + ${d.fixedS} s paced at half of that (${num(k.provisionalRate)} req/s), then ${d.saturationS} s of saturation: ${num(k.saturation.rps)} req/s (p50 ${ms(k.saturation.p50Ms)} ms, p99 ${ms(k.saturation.p99Ms)} ms) → half the higher of the two closed loops (one run on a shared machine can come out slow) = **${num(k.rate)} req/s**` +
        (find(rows, "tier", "saturation")
          ? ` = ${pct(k.rate / find(rows, "tier", "saturation")!.load.rps)} of the tier's saturation rate in its own run below`
          : "") +
        ".",
      "",
    );
  } else out.push(`**The fixed offered load**: ${num(s.rate ?? 0)} req/s, given with --rate.`, "");
  if (c) {
    out.push(
      `**Generator ceiling** (one page Nginx has cached, \`${c.path}\`, ${c.seconds} s, wrk and Nginx sharing the ${m.cores} cores): closed loop ${num(c.closed.rps)} req/s at ${c.connections} connections (p50 ${ms(c.closed.p50Ms)} ms, p99 ${ms(c.closed.p99Ms)} ms); ` +
        `the paced mode asked for 1,000,000 req/s achieved ${num(c.paced.rps)} req/s. A figure at ≥ 80% of these is flagged ⚠ below: it would measure the generator, not the server.`,
      "",
    );
    const flagged = rows.filter((r) => r.scenario !== "herd" && limited(report, r.load));
    out.push(
      flagged.length
        ? `Flagged: ${flagged.map((r) => `${r.system} ${SCENARIO_LABELS[r.scenario]} (${limited(report, r.load)})`).join("; ")}.`
        : "No figure of this run is within 80% of the generator's ceiling.",
      "",
    );
  } else out.push("**Generator ceiling**: not measured (Nginx did not run).", "");
  const busy = rows.filter((r) => r.cpu.wallS >= 1 && (r.cpu.seconds.others ?? 0) / r.cpu.wallS >= NEIGHBOUR_CORES);
  out.push(
    busy.length
      ? `**Neighbours**: processes outside this run used ≥ ${NEIGHBOUR_CORES} cores on average during ${busy.map((r) => `${r.system} ${SCENARIO_LABELS[r.scenario]} (${((r.cpu.seconds.others ?? 0) / r.cpu.wallS).toFixed(2)})`).join(", ")}: those figures had less of the machine than the others; compare them with care.`
      : `**Neighbours**: processes outside this run used < ${NEIGHBOUR_CORES} cores on average in every phase.`,
    "",
  );

  // Headline tables.
  const sat = [...present.map((name) => find(rows, name, "saturation")), ...present.map((name) => find(rows, name, "cached"))].filter((r): r is Row =>
    Boolean(r),
  );
  const nginxSat = find(rows, "nginx", "saturation");
  const healthz = find(rows, "tier", "healthz");
  out.push(
    "## Saturation",
    "",
    `Closed loop, ${s.connections} connections, ${d.saturationS} s, after the walk, the warm-up and the fixed-load phase: the same Zipf draws for every system, so a faster system also sees more of the tail. "cached set": then ${d.cachedS} s of Zipf over the ${num(d.walkRanks)} walked ranks only, every page cached (the tier: in L1 or L2; inventory still refreshed by its policy): what a hit costs. CPU per page: CPU-seconds of the system's own processes (/proc) ÷ pages; workerd = its worker instances only (the peers' render-only workers work on misses only).`,
    "",
    mdTable(
      ["system", "req/s", "× nginx", "p50 ms", "p99 ms", "errors", "CPU-ms / page (own)", "workerd CPU-ms / page", "origin req / page", "generator"],
      [
        ...sat.map((r) => [
          r.scenario === "cached" ? `${r.system}, cached set` : r.system,
          num(r.load.rps),
          (r.scenario === "cached" ? find(rows, "nginx", "cached") : nginxSat)
            ? x(r.load.rps / (r.scenario === "cached" ? find(rows, "nginx", "cached")! : nginxSat!).load.rps)
            : "–",
          ms(r.load.p50Ms),
          ms(r.load.p99Ms),
          num(r.load.errors),
          `${cpuMs(r).toFixed(3)} (${ownRoles(r).join(" + ")})`,
          cpuMs(r, "workerd").toFixed(3),
          f3(originPerPage(r)),
          limited(report, r.load) ? `⚠ ${limited(report, r.load)}` : "ok",
        ]),
        ...(healthz
          ? [
              [
                "tier /healthz (floor)",
                num(healthz.load.rps),
                nginxSat ? x(healthz.load.rps / nginxSat.load.rps) : "–",
                ms(healthz.load.p50Ms),
                ms(healthz.load.p99Ms),
                num(healthz.load.errors),
                `${cpuMs(healthz).toFixed(3)}`,
                cpuMs(healthz, "workerd").toFixed(3),
                "–",
                limited(report, healthz.load) ? "⚠" : "ok",
              ],
            ]
          : []),
      ],
      1,
    ),
    "",
  );
  const fixed = present.map((name) => find(rows, name, "fixed")).filter((r): r is Row => Boolean(r));
  const floorFixed = find(rows, "tier", "healthz-fixed");
  const nginxFixed = find(rows, "nginx", "fixed");
  out.push(
    "## Fixed offered load",
    "",
    `Paced at ${num(s.rate ?? 0)} req/s for ${d.fixedS} s over ${s.pacedConnections} connections, after the walk (the top ${num(d.walkRanks)} Zipf ranks asked for once each, not measured) and a ${d.warmUpS}-s warm-up at the same rate: every system gets the same requests. "late": sends that found no connection free (their latency leaves out the wait); 0 means the load was open-loop throughout. Achieved = answers ÷ the schedule's span.`,
    "",
    mdTable(
      ["system", "asked req/s", "achieved req/s", "late (max ms)", "p50 ms", "p99 ms", "max ms", "errors", "p50 × nginx", "p99 × nginx", "origin req / page"],
      [...fixed, ...(floorFixed ? [floorFixed] : [])].map((r) => [
        r === floorFixed ? "tier /healthz (floor)" : r.system,
        num(r.load.askedRate ?? 0),
        num(r.load.rps),
        `${num(r.load.late)} (${r.load.lateMaxMs})`,
        ms(r.load.p50Ms),
        ms(r.load.p99Ms),
        ms(r.load.maxMs),
        num(r.load.errors),
        nginxFixed ? x(r.load.p50Ms / nginxFixed.load.p50Ms) : "–",
        nginxFixed ? x(r.load.p99Ms / nginxFixed.load.p99Ms) : "–",
        r === floorFixed ? "–" : f3(originPerPage(r)),
      ]),
      1,
    ),
    "",
    ...(floorFixed
      ? [
          "The /healthz row: the tier's instances answering a static string at the same rate, connections and schedule: the runtime's own latency, beneath which no page can go.",
          "",
        ]
      : []),
    "## Targets",
    "",
    ...targets(report).lines.map(
      (l) => `- **${l.pass === null ? (l.text.startsWith("(information") ? "info" : "n/a") : l.pass ? "pass" : "miss"}** — ${l.text}`,
    ),
    "",
    `![p99 latency per system and phase](${images.latency})`,
    "",
  );

  // Equal freshness.
  out.push(
    "## Origin requests per page, at two freshness settings",
    "",
    `The peers cache the whole page for ${report.systems.length ? "300" : "300"} s (then serve it stale while refreshing); the tier's defaults keep inventory fresh for 10 s (reviews 600 s, recommendations 900 s, product 300 s). tier-300s is the same tier with every page resource fresh for 300 s and stale-while-revalidate 3600 s (\`CACHE_POLICIES\`, below). Warm-up and fixed load: identical requests for every system, after the walk of the top ${num(d.walkRanks)} ranks (so the tail still brings first fetches); saturation: more requests for a faster system, so a larger share of hits.`,
    "",
    mdTable(
      ["system", "warm-up", "fixed load", "saturation", "fixed load per 1,000 pages: product / inventory / reviews / recommendations"],
      present.map((name) => {
        const cell = (sc: ScenarioName) => {
          const r = find(rows, name, sc);
          return r ? f3(originPerPage(r)) : "–";
        };
        const f = find(rows, name, "fixed");
        return [
          name,
          cell("warm-up"),
          cell("fixed"),
          cell("saturation"),
          f ? ["product", "inventory", "reviews", "recommendations"].map((k) => f3(perPage(f.origin[k] ?? 0, f) * 1000)).join(" / ") : "–",
        ];
      }),
      1,
    ),
    "",
    `![origin requests per 1,000 pages](${images.origin})`,
    "",
  );

  // Redis.
  const tiers = TIERS.filter((t) => present.includes(t));
  if (tiers.length) {
    out.push("## Redis commands", "");
    for (const name of tiers) {
      const r = find(rows, name, "saturation");
      const cen = report.census[name];
      if (r?.redis) {
        out.push(
          `- **${name}, saturation run** (Redis's own count, \`INFO commandstats\` before and after; an EVALSHA and each redis.call inside it count once each): ` +
            `**${f3(perPage(r.redis.total, r))} commands per page** (${num(r.redis.total)} for ${num(r.load.requests)} pages): ${split(r.redis.byCommand, r.load.requests)}; ` +
            `bytes per page to Redis ${num(perPage(r.redis.netInBytes, r))}, from Redis ${num(perPage(r.redis.netOutBytes, r))} (\`total_net_input_bytes\` / \`total_net_output_bytes\`, RESP between the gateway and redis-server).`,
        );
      }
      if (cen) {
        const sent = sum(cen.sent);
        const inside = sum(cen.inScripts);
        out.push(
          `- **${name}, census** (${cen.seconds} s of saturation with MONITOR on, not measured otherwise; ${num(cen.pages)} pages): commands **sent by the gateway ${f3(sent / Math.max(1, cen.pages))} per page** (${split(cen.sent, cen.pages)}); ` +
            `run inside scripts ${f3(inside / Math.max(1, cen.pages))} per page (${split(cen.inScripts, cen.pages)}); Redis's count = the two together, ${f3((sent + inside) / Math.max(1, cen.pages))} per page. ` +
            "dev/gateway keeps no count of its own: MONITOR names the client of each command, and marks those a script ran as `lua`.",
        );
      }
    }
    const idle = report.idle;
    out.push(
      idle
        ? `- **Idle cost** (the calibration tier, ${idle.instances} isolates up, no traffic for ${idle.seconds} s, from 5 s after its load): ${num(idle.usage.total)} commands = **${num(idle.perIsolateHour)} per isolate-hour**${
            idle.usage.total
              ? ` (${Object.entries(idle.usage.byCommand)
                  .map(([k, n]) => `${k} ${n}`)
                  .join(", ")})`
              : ""
          }. A Worker isolate runs code only for a request, so an idle one sends nothing unless a request left work behind.`
        : "- **Idle cost**: not measured (no calibration tier: --rate was given, or the run stopped).",
      "",
    );

    // Cost.
    out.push("## Cost per million page views", "", pricesNote(report.prices), "");
    const body: string[][] = [];
    for (const name of tiers) {
      const k = cost(report, name);
      if (!k) continue;
      const u = k.c.usage;
      body.push([
        name,
        f3(u.cpuMs / 1e6),
        `${f3(u.redisCommands / 1e6)} (${k.source})`,
        f3((u.redisGB * 1e9) / 1e6 / 1000),
        f3(u.originFetches / 1e6),
        usd(k.c.usd.workersRequests),
        usd(k.c.usd.workersCpu),
        usd(k.c.usd.redisCommands),
        usd(k.c.usd.redisBandwidth),
        `**${usd(k.c.usd.total)}**`,
        k.c.usd.redis <= k.c.usd.workers ? "yes" : "**no**",
      ]);
    }
    if (body.length) {
      out.push(
        mdTable(
          [
            "system",
            "CPU-ms / page",
            "Redis commands / page",
            "Redis KB / page",
            "origin fetches / page",
            "Workers requests",
            "Workers CPU",
            "Redis commands",
            "Redis bandwidth",
            "total",
            "Redis ≤ Workers",
          ],
          body,
          1,
        ),
        "",
        "Per page from the saturation run (CPU: workerd's process CPU on this machine, which counts the runtime's own work too: an upper bound for the CPU time Cloudflare bills, which counts the isolate's) and the census (commands), origin fetches from the fixed-load phase. " +
          `The peers at the same load: ${
            present
              .filter((p) => !TIERS.includes(p))
              .map((p) => {
                const f = find(rows, p, "fixed");
                return f ? `${p} ${num(originPerPage(f) * 1e6)} origin fetches per million pages` : null;
              })
              .filter(Boolean)
              .join(", ") || "not run"
          }.`,
        "",
      );
      for (const name of tiers) {
        const k = cost(report, name);
        if (k) out.push(`- ${name}: ${costLine(k.c)}`);
      }
      out.push("");
    }
  }

  // Faults.
  const faultRows = rows.filter((r) => ["herd", "origin-slow", "origin-down", "price-change", "redis-down"].includes(r.scenario));
  if (faultRows.length) {
    out.push(
      "## Faults and the cold herd",
      "",
      `Paced at ${num(s.rate ?? 0)} req/s for ${d.faultS} s (price change: ${d.priceLoadS} s) but the herd (${"1,000"} requests at once from Node, sockets opened first: a burst, not a rate). After each origin fault: ${d.pauseS} s idle and ${d.recoverS} s of paced load, not measured.`,
      "",
      mdTable(
        [
          "system",
          "scenario",
          "requests",
          "req/s",
          "late",
          "p50 ms",
          "p99 ms",
          "errors (rate)",
          "origin requests",
          "product / inventory / reviews / recs",
          "new price served after",
        ],
        faultRows.map((r) => [
          r.system,
          SCENARIO_LABELS[r.scenario],
          num(r.load.requests),
          num(r.load.rps),
          r.load.askedRate ? num(r.load.late) : "–",
          ms(r.load.p50Ms),
          ms(r.load.p99Ms),
          `${num(r.load.errors)} (${pct(r.load.errors / Math.max(1, r.load.requests))})`,
          num(r.originTotal),
          ["product", "inventory", "reviews", "recommendations"].map((k) => num(r.origin[k] ?? 0)).join(" / "),
          r.staleness ? stalenessCell(r) : "–",
        ]),
        2,
      ),
      "",
    );
    const priceRows = rows.filter((r) => r.staleness);
    if (priceRows.length) {
      out.push(
        mdTable(
          [
            "price change",
            "product",
            "old → new",
            "done right after the change",
            "purge call",
            "new price served after",
            "old-price answers / polls",
            "poll errors",
            "entry age at the change",
          ],
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
        "The hot product is the Zipf rank-1 product. The change is made through the origin's admin API; then Varnish gets `PURGE`, the tier `POST /__purge` (one instance; the other hears of it from the purge log in Redis), Nginx nothing: open-source Nginx has no purge, so its copy stays until `proxy_cache_valid 200 300s` runs out. The poll (every 50 ms, every target, until every answer shows the new price for 1 s) goes on without load, in the background, up to the cap.",
        "",
      );
    }
  }

  // CPU.
  out.push(
    "## Where the CPU went",
    "",
    "Cores busy (CPU-seconds ÷ wall seconds) during each phase, by process: workerd = the system's own worker instances; nginx / varnish = the server's process tree; origin(+gateway) = its demo origin (the tier's also runs the gateway); redis = redis-server; wrk = the generator (its user + system time from the shell that ran it: it has exited when the phase ends); harness = this Node process; other workerd = systems still up in the background (the idle calibration tier, Nginx during its price poll); others = the rest of the machine (other sessions: a high figure means the run competed with a neighbour).",
    "",
    mdTable(
      ["system", "phase", "workerd", "nginx / varnish", "origin (+gw)", "redis", "wrk", "harness", "other workerd", "others"],
      rows.map((r) => {
        const c = (role: string) => {
          const v = r.cpu.seconds[role];
          return v === undefined ? "–" : (v / Math.max(0.001, r.cpu.wallS)).toFixed(2);
        };
        return [
          r.system,
          SCENARIO_LABELS[r.scenario],
          c("workerd"),
          r.cpu.seconds.nginx !== undefined ? c("nginx") : c("varnish"),
          r.cpu.seconds.origin !== undefined ? c("origin") : c("origin+gateway"),
          c("redis"),
          c("wrk"),
          c("harness"),
          c("other workerd"),
          c("others"),
        ];
      }),
      2,
    ),
    "",
    "## Answers that were not 2xx/3xx",
    "",
  );
  const bad = rows.filter((r) => r.load.errors > 0);
  if (!bad.length) out.push("None.", "");
  for (const r of bad)
    out.push(
      `- ${r.system} · ${SCENARIO_LABELS[r.scenario]}: ${Object.entries(r.load.errorKinds)
        .map(([k, n]) => `${k} ×${num(n)}`)
        .join(", ")}`,
    );
  if (bad.length) out.push("");
  const notes = rows.flatMap((r) => r.notes.map((n) => `${r.system} · ${SCENARIO_LABELS[r.scenario]}: ${n}`));
  if (notes.length) out.push("Notes:", "", ...notes.map((n) => `- ${n}`), "");

  // Setup.
  out.push("## Setup", "");
  for (const sys of report.systems) out.push(`- **${sys.name}**: ${sys.description}. ${sys.check}.`);
  out.push(
    "",
    `Render-only upstream of the peers: the tier's own bundle in Miniflare (workerd), 2 instances per peer, without L2 (no UPSTASH vars) and with ${Object.entries(
      report.renderOnlyVars,
    )
      .map(([k, val]) => `\`${k}=${val}\``)
      .join(", ")}: every entry is fresh for 1 s at most and never served stale, so a peer miss costs the four origin calls and the render a tier miss costs.`,
    "",
    `Tier settings: ${Object.entries(report.tierVars)
      .map(
        ([name, vars]) =>
          `${name}: ${
            Object.keys(vars).length
              ? Object.entries(vars)
                  .map(([k, val]) => `\`${k}=${val}\``)
                  .join(", ")
              : "the defaults"
          }`,
      )
      .join("; ")}.`,
    "",
  );
  for (const sys of report.systems.filter((x) => !TIERS.includes(x.name))) {
    out.push(`<details><summary>${sys.name} configuration</summary>`, "", "```", sys.config.trim(), "```", "", "</details>", "");
  }
  const log = report.workerLog.filter(({ line }) => !/"event":"known_ids","state":"(ok|ready|loading)"/.test(line));
  if (log.length)
    out.push("## What the workers logged", "", ...log.slice(0, 20).map(({ count, line }) => `- ${count}× \`${line.slice(0, 300).replace(/`/g, "'")}\``), "");
  return out.join("\n");
}

function stalenessCell(row: Row): string {
  const s = row.staleness;
  if (!s) return "";
  if (s.seconds === null) return s.pending ? "pending" : `not within ${s.capS} s`;
  return `${s.seconds.toFixed(2)} s`;
}

// ---------------------------------------------------------------- files

export function writePeersReport(report: PeersReport): { written: string[]; summary: string } {
  const { latency, origin } = charts(report);
  const text = markdown(report, { latency: "peers-latency.svg", origin: "peers-origin.svg" });
  const written = writeResults("peers", { ".md": `${text}\n`, "-latency.svg": latency, "-origin.svg": origin, ".json": JSON.stringify(report, null, 2) });
  // stdout: from the generator to the cost, without the charts and the configurations.
  const summary = text
    .slice(
      text.indexOf("**Generator ceiling**") >= 0 ? text.indexOf("**Generator ceiling**") : text.indexOf("**Neighbours**"),
      text.indexOf("## Faults and the cold herd") > 0 ? text.indexOf("## Faults and the cold herd") : text.indexOf("## Where the CPU went"),
    )
    .replace(/^!\[.*\n/gm, "");
  return { written, summary };
}
