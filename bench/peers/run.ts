// `npm run bench:peers [-- --quick]`: this tier against Varnish and Nginx
// proxy_cache, every throughput and latency figure from wrk, one run, with
// charts. See bench/peers/README.md.
//
// Builds the worker bundle once (bench/stack.ts); measures the tier's
// saturation rate on a fresh stack, in the state the systems' runs measure
// theirs (the calibration: half of it is the fixed offered load of every
// paced phase), which then stays up idle for the Redis
// idle cost while the next systems run; then for each system in turn (nginx,
// varnish, tier, tier-300s, tier-off) starts it with its own demo origin, runs the
// scenarios (scenarios.ts) and stops it. Nginx has no purge: its
// price-change poll goes on in the background (no load) until its entry
// expires or the cap, while the next systems run. Writes
// bench/results/peers.md, peers.json, peers-latency.svg and peers-origin.svg
// (bench/lib/report.ts). Every process it starts is stopped at
// the end, on error and on Ctrl-C.
import { benchmarkRun } from "../lib/cleanup";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { parseCommandLine, usageError } from "../../dev/cli";
import { oneOf, wholeNumber } from "../lib/flagValues";
import { describeMachine } from "../lib/report";
import { buildBundle, toolVersions, type WorkerLogs } from "../stack";
import { ensureWrk, Workload } from "../lib/wrk";
import { checkTools, makeTempDir, removeTempDir, type ToolVersions } from "./procs";
import { loadPrices } from "../lib/cost";
import { sleep } from "../lib/sleep";
import type { PeersReport } from "./figures";
import { readPeersReport, writePeersReport } from "./report";
import { calibrate, generatorCeiling, idleCost, type Ceiling, type IdleCost } from "./calibration";
import { durations, type Context, type Row } from "./plan";
import { runScenarios } from "./scenarios";
import { startPeer, startTier, startTierOff, RENDER_ONLY_VARS, TIER_VARS, type Settings, type System, type SystemName } from "./systems";

const CLEANUP_STEP_TIMEOUT_MS = 12_000;
const ALL_SYSTEMS: SystemName[] = ["nginx", "varnish", "tier", "tier-300s", "tier-location", "tier-off"];

const COMMAND = "npm run bench:peers";
const DEFAULT_CONNECTIONS = 64;

const USAGE = `${COMMAND}: this tier against Nginx proxy_cache and Varnish under the same load, one system after the other in
one run, every throughput and latency figure from wrk (bench/peers/README.md): the tier's saturation rate first (the
calibration: half of it is the offered load of the paced phases), then each system in turn with its scenarios
(scenarios.ts: fixed load, saturation, a cached set, a cold herd, the origin slow and down, a price change; the tier
also /healthz and Redis down). Writes bench/results/peers.md, peers.json, peers-latency.svg and peers-origin.svg.

usage: ${COMMAND} -- [options]
       ${COMMAND} -- --report-from bench/results/peers.json
  --quick               short phases: a smoke run, rough figures
  --connections N       connections of the saturation phases, 2 to 500 (default ${DEFAULT_CONNECTIONS}; the paced phases use twice as many)
  --rate N              offered rate of the paced phases, req/s, 2 or more (default: half the tier's saturation rate,
                        measured first; a rate skips the calibration, and so the idle cost)
  --systems LIST        only these systems, comma-separated (default: all; the order stays ${ALL_SYSTEMS.join(", ")})
  --report-from FILE    runs nothing: writes the report (peers.md, the charts, peers.json) again from a run's peers.json
  -h, --help            this text

Needs nginx and varnishd on the PATH (apt-get update && apt-get install -y nginx varnish) and redis-server, as every
benchmark does; installs wrk when missing.

examples: ${COMMAND} -- --quick
          ${COMMAND} -- --systems nginx,tier --rate 400`;

function readArgs(): { settings: Settings; systems: SystemName[]; reportFrom: string | null } {
  const { values } = parseCommandLine(COMMAND, USAGE, {
    options: {
      quick: { type: "boolean", default: false },
      connections: { type: "string" },
      rate: { type: "string" },
      systems: { type: "string" },
      "report-from": { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  const connections = values.connections === undefined ? DEFAULT_CONNECTIONS : wholeNumber(COMMAND, "--connections", values.connections, 2, 500);
  const rate = values.rate === undefined ? null : wholeNumber(COMMAND, "--rate", values.rate, 2);
  const systems = values.systems ? values.systems.split(",").map((s) => oneOf(COMMAND, "--systems", s.trim(), ALL_SYSTEMS)) : ALL_SYSTEMS;
  const reportFrom = values["report-from"] ?? null;
  if (reportFrom !== null && !existsSync(reportFrom)) usageError(COMMAND, `--report-from: no file ${JSON.stringify(reportFrom)}`);
  return {
    reportFrom,
    systems: ALL_SYSTEMS.filter((s) => systems.includes(s)),
    settings: {
      quick: Boolean(values.quick),
      connections,
      pacedConnections: 2 * connections,
      rate,
      catalogSize: 100_000,
      originLatencyMs: 30,
      originJitterMs: 10,
    },
  };
}

// ---------------------------------------------------------------- cleanup

const { onCleanup, cleanUp, signal, abortLoad, onSignal, interrupted, run } = benchmarkRun("bench:peers", CLEANUP_STEP_TIMEOUT_MS);

// ---------------------------------------------------------------- main

/** Phase lines on stderr, so that stdout holds only the results. */
const say = (text: string) => process.stderr.write(`${text}\n`);

const { settings, systems, reportFrom } = readArgs();

async function main(): Promise<void> {
  if (reportFrom) {
    printReport(writePeersReport(readPeersReport(reportFrom)));
    return;
  }
  const startedAt = new Date();
  const command = ["npm run bench:peers", ...(process.argv.length > 2 ? ["--", ...process.argv.slice(2)] : [])].join(" ");
  const workerLogs: WorkerLogs = { count: 0, distinct: new Map(), scenario: "" };

  // Miniflare registers its own SIGINT/SIGTERM hook with its first instance,
  // which exits at once (its exit hook still kills workerd). Taken off after
  // each system starts, so that a Ctrl-C stops everything in order (Nginx and
  // Varnish gracefully, then the temp folder). Listeners must go beforehand:
  // a signal's listeners are those present when it arrives.
  const keepSignalsOurs = () => {
    for (const name of ["SIGINT", "SIGTERM"] as const) {
      for (const listener of process.listeners(name)) if (listener !== onSignal) process.off(name, listener as (...args: unknown[]) => void);
    }
  };

  ensureWrk();
  const tools: ToolVersions = await checkTools();
  const prices = loadPrices();
  const dir = makeTempDir();
  // Also on a hard exit (Miniflare's own SIGINT hook exits at once): the temp folder goes.
  process.once("exit", () => removeTempDir(dir));
  onCleanup("temp folder", async () => removeTempDir(dir));
  const d = durations(settings.quick);
  const workload = new Workload(dir, settings.catalogSize, d.walkRanks);

  console.log(
    `bench:peers${settings.quick ? " (quick)" : ""}: ${systems.join(", ")} · Zipf(1.0) over ${settings.catalogSize.toLocaleString("en-US")} products · origin ${settings.originLatencyMs} ± ${settings.originJitterMs} ms`,
  );
  console.log(`wrk ${tools.wrk ?? "?"}, nginx ${tools.nginx}, ${tools.varnish}; temp folder ${dir}`);
  console.log(
    `phases: walk ${d.walkRanks} ranks, warm-up ${d.warmUpS} s, fixed load ${d.fixedS} s (paced, ${settings.pacedConnections} connections), saturation ${d.saturationS} s (${settings.connections} connections), cached set ${d.cachedS} s, ` +
      `/healthz ${d.healthzS} s, census ${d.censusS} s, faults ${d.faultS} s each, price change ${d.priceLoadS} s of load (poll capped at ${d.priceCapS} s)`,
  );

  const rows: Row[] = [];
  const census: PeersReport["census"] = {};
  const descriptions: PeersReport["systems"] = [];
  const pending: Promise<void>[] = [];
  let ceiling: Ceiling | null = null;
  let calibration: PeersReport["calibration"] = null;
  let idle: Promise<IdleCost | null> = Promise.resolve(null);
  let idleResult: IdleCost | null = null;
  let rate = settings.rate;
  const ctxBase = { settings, signal: signal, workload, phase: (label: string) => say(`· ${label}`), note: say };
  try {
    say("· build the worker bundle (wrangler deploy --dry-run)");
    await buildBundle();

    // The fixed offered load: half the tier's saturation rate, on a fresh stack of its own.
    if (rate === null) {
      workerLogs.scenario = "calibration";
      say("· calibration: start the tier");
      const tier = await startTier("tier", settings, workerLogs, onCleanup);
      keepSignalsOurs();
      const stop = onCleanup("calibration tier", () => tier.close());
      const c = await calibrate(ctxBase, tier, d);
      // Half the higher of the two closed loops: one 15-s run on this shared machine can come out slow
      // (477 req/s once, where the probe before it made 805 and the tier's own saturation after it 794),
      // and a low rate measures the paced phases at a lighter load than half the tier's capacity.
      rate = Math.max(2, Math.round(Math.max(c.probe.rps, c.saturation.rps) / 2));
      calibration = { ...c, rate };
      say(
        `calibration: probe ${c.probe.rps.toLocaleString("en-US")} req/s, then paced at ${c.provisionalRate.toLocaleString("en-US")}; the tier saturates at ${c.saturation.rps.toLocaleString("en-US")} req/s ` +
          `(p50 ${c.saturation.p50Ms} ms, p99 ${c.saturation.p99Ms} ms): paced phases at half the higher, ${rate.toLocaleString("en-US")} req/s`,
      );
      // Idle, its two isolates up, while the next systems run: the Redis idle cost.
      say(`· calibration tier: idle for ${d.idleS} s in the background (Redis idle cost)`);
      idle = sleep(5000, signal)
        .then(() => idleCost(tier, d.idleS, signal))
        .catch(() => null)
        .finally(() => stop());
    }
    const ctx: Context = { ...ctxBase, rate };

    for (const name of systems) {
      if (signal.aborted) break;
      workerLogs.scenario = name;
      say(`· ${name}: start`);
      const t0 = Date.now();
      let system: System;
      if (name === "tier" || name === "tier-300s" || name === "tier-location") system = await startTier(name, settings, workerLogs, onCleanup);
      else if (name === "tier-off") system = await startTierOff(settings, workerLogs, onCleanup);
      else {
        const peerDir = join(dir, name);
        mkdirSync(peerDir);
        system = await startPeer(name, settings, peerDir, workerLogs, onCleanup);
      }
      keepSignalsOurs();
      const stop = onCleanup(`${name} system`, () => system.close());
      say(`${name}: ${system.description}`);
      say(`  ${system.check}`);
      descriptions.push({ name, description: system.description, check: system.check, config: system.config });
      if (name === "nginx" && !ceiling) {
        ceiling = await generatorCeiling(ctx, system, d);
        say(
          `  generator ceiling (one page nginx has cached): wrk ${ceiling.closed.rps.toLocaleString("en-US")} req/s closed loop, ${ceiling.paced.rps.toLocaleString("en-US")} req/s paced`,
        );
      }
      const run = await runScenarios(ctx, system, (r) => {
        rows.push(r);
        const l = r.load;
        const price = r.staleness
          ? ` · new price ${r.staleness.seconds === null ? (r.staleness.pending ? "pending" : `not within ${r.staleness.capS} s`) : `after ${r.staleness.seconds} s`}`
          : "";
        say(
          `${name} · ${r.scenario}: ${l.requests.toLocaleString("en-US")} req, ${l.rps.toLocaleString("en-US")} req/s${l.askedRate ? ` (asked ${l.askedRate.toLocaleString("en-US")}, late ${l.late})` : ""}, ` +
            `p50 ${l.p50Ms} ms, p99 ${l.p99Ms} ms, ${l.errors} errors · origin ${r.originTotal} (product ${r.origin.product})${price}`,
        );
      });
      if (run.census) census[name] = run.census;
      say(`${name}: done in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
      if (run.pending.length) {
        // Keep it running until its poll ends, then stop it.
        pending.push(Promise.all(run.pending).then(() => stop()));
      } else {
        await stop();
      }
    }
    if (!signal.aborted) {
      say("· waiting for the background price-change poll(s) and the idle window (no load)");
      await Promise.all(pending);
      idleResult = await idle;
    }
  } finally {
    abortLoad(); // ends the idle window and the polls if they still run
    await idle;
    await cleanUp();
  }
  if (interrupted()) return;
  {
    const report: PeersReport = {
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      command,
      settings: { ...settings, rate },
      durations: d,
      machine: describeMachine({ ...toolVersions(), nginx: tools.nginx, varnish: tools.varnish, wrk: tools.wrk ?? "?" }),
      systems: descriptions,
      renderOnlyVars: RENDER_ONLY_VARS,
      tierVars: TIER_VARS,
      calibration,
      ceiling,
      idle: idleResult,
      rows,
      census,
      prices,
      workerLog: [...workerLogs.distinct].map(([line, count]) => ({ count, line })),
    };
    printReport(writePeersReport(report));
  }
}

function printReport(files: { written: string[]; summary: string }): void {
  console.log("");
  console.log(files.summary);
  console.log(`\nresults: ${files.written.join(", ")}`);
}

run(main);
