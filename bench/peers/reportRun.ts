// The parts of bench:peers' report about the run itself: its head (command,
// machine, generator, the fixed offered load, the generator's ceiling, the
// neighbours) and its tail (how each system was set up, what the workers
// logged). The method behind them is prose in bench/peers/README.md.
import { find, limited, NEIGHBOUR_CORES, TIERS, type PeersReport } from "./figures";
import { method, ms, num, pct } from "./format";
import { SCENARIO_LABELS } from "./plan";

export function runHead(report: PeersReport): string[] {
  const m = report.machine;
  const v = m.versions;
  const s = report.settings;
  const d = report.durations;
  const rows = report.rows;
  const c = report.ceiling;
  const out: string[] = [];
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
    `**Generator**: wrk, 2 threads, \`bench/lib/zipf.lua\`: Zipf(s = 1.0) over ${num(s.catalogSize - 1)} products, the same draws for every system; **saturation**: closed loop at ${s.connections} connections; **paced**: ${num(s.rate ?? 0)} req/s on a fixed schedule over ${s.pacedConnections} connections, late sends counted. Errors: answers ≥ 400, socket errors and timeouts (5 s). ${method("The method", "the-generator-wrk-two-modes")}.`,
    "",
  );
  if (report.calibration) {
    const k = report.calibration;
    const tierSat = find(rows, "tier", "saturation");
    out.push(
      `**The fixed offered load** is half the tier's saturation rate on a fresh stack (${method("calibration", "order-of-events")}): the walk, a ${d.probeS}-s closed-loop probe (${num(k.probe.rps)} req/s), ${d.warmUpS} + ${d.fixedS} s paced at half of that (${num(k.provisionalRate)} req/s), then ${d.saturationS} s of saturation: ${num(k.saturation.rps)} req/s (p50 ${ms(k.saturation.p50Ms)} ms, p99 ${ms(k.saturation.p99Ms)} ms) → half the higher of the two closed loops = **${num(k.rate)} req/s**` +
        (tierSat ? ` = ${pct(k.rate / tierSat.load.rps)} of the tier's saturation rate in its own run below` : "") +
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
  return out;
}

const vars = (o: Record<string, string>) =>
  Object.entries(o)
    .map(([k, val]) => `\`${k}=${val}\``)
    .join(", ");

export function setup(report: PeersReport): string[] {
  const out = ["## Setup", ""];
  for (const sys of report.systems) out.push(`- **${sys.name}**: ${sys.description}. ${sys.check}.`);
  out.push(
    "",
    `Render-only upstream of the peers (${method("why", "what-runs")}): the tier's own bundle, 2 instances per peer (and tier-off's 2), with ${vars(report.renderOnlyVars)}.`,
    "",
    `Tier settings: ${Object.entries(report.tierVars)
      .map(([name, v]) => `${name}: ${Object.keys(v).length ? vars(v) : "the defaults"}`)
      .join("; ")}.`,
    "",
  );
  for (const sys of report.systems.filter((x) => !TIERS.includes(x.name))) {
    out.push(`<details><summary>${sys.name} configuration</summary>`, "", "```", sys.config.trim(), "```", "", "</details>", "");
  }
  const log = report.workerLog.filter(({ line }) => !/"event":"known_ids","state":"(ok|ready|loading)"/.test(line));
  if (log.length)
    out.push("## What the workers logged", "", ...log.slice(0, 20).map(({ count, line }) => `- ${count}× \`${line.slice(0, 300).replace(/`/g, "'")}\``), "");
  return out;
}
