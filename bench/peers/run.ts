// `npm run bench:peers [-- --quick]`: this tier against Varnish and Nginx
// proxy_cache, same scenarios, one run, with charts. See bench/peers/README.md.
//
// Builds the worker bundle once (bench/stack.ts), then for each system in turn
// (nginx, varnish, tier) starts it with its own demo origin, runs the
// scenarios (scenarios.ts) and stops it. Nginx has no purge: its price-change
// poll goes on in the background (no load) until its entry expires or the cap,
// while the next systems run. Writes bench/results/peers-<time>.md/.json/.svg
// and peers-latest.md, peers-latency.svg, peers-origin.svg. Every process it
// starts is stopped at the end, on error and on Ctrl-C.
import { createCleanups, runThenExit } from "../cleanup";
import { execFile } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs, promisify } from "node:util";
import { runLoad, type Live } from "../load";
import { describeMachine, Progress } from "../report";
import { buildBundle, toolVersions, type WorkerLogs } from "../stack";
import { checkTools, makeTempDir, removeTempDir, type ToolVersions } from "./procs";
import { writePeersReport, type Calibration, type PeersReport } from "./report";
import { durations, runScenarios, type Row } from "./scenarios";
import { startPeer, startTier, RENDER_ONLY_VARS, type Settings, type System, type SystemName } from "./systems";

const execFileAsync = promisify(execFile);
const RESULTS_DIR = resolve("bench/results");
const CLEANUP_STEP_TIMEOUT_MS = 12_000;
const ALL_SYSTEMS: SystemName[] = ["nginx", "varnish", "tier"];

const USAGE = `usage: npm run bench:peers -- [--quick] [--connections N] [--systems nginx,varnish,tier]

  --quick            short phases (about 2½ minutes in all): a smoke run, rough figures
  --connections N    connections of the Zipf load (default 32)
  --systems LIST     run only these systems (default: nginx,varnish,tier)

Needs nginx, varnishd (and optionally wrk) on the PATH:  apt-get update && apt-get install -y nginx varnish wrk
and redis-server, as npm run bench does.`;

function readArgs(): { settings: Settings; systems: SystemName[] } {
  const { values } = parseArgs({
    options: {
      quick: { type: "boolean", default: false },
      connections: { type: "string" },
      systems: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const connections = values.connections === undefined ? 32 : Number(values.connections);
  const systems = values.systems ? (values.systems.split(",").map((s) => s.trim()) as SystemName[]) : ALL_SYSTEMS;
  const problem =
    !Number.isInteger(connections) || connections < 1 || connections > 500
      ? "--connections must be an integer from 1 to 500"
      : systems.some((s) => !ALL_SYSTEMS.includes(s))
        ? `--systems: choose among ${ALL_SYSTEMS.join(", ")}`
        : null;
  if (problem) {
    console.error(`${problem}\n${USAGE}`);
    process.exit(2);
  }
  return {
    systems: ALL_SYSTEMS.filter((s) => systems.includes(s)),
    settings: { quick: Boolean(values.quick), connections, catalogSize: 100_000, originLatencyMs: 30, originJitterMs: 10 },
  };
}

// ---------------------------------------------------------------- cleanup

const { onCleanup, cleanUp } = createCleanups(CLEANUP_STEP_TIMEOUT_MS);

// ---------------------------------------------------------------- calibration

/**
 * What the load generator can measure at all: one page Nginx has cached,
 * through this process's generator and through wrk (C, 2 threads), same
 * connections. When the peers' figures approach the first number, they are
 * the generator's limit, not the server's.
 */
async function calibrate(system: System, settings: Settings, live: Live, signal: AbortSignal): Promise<Calibration> {
  const path = "/products/p-000002"; // cached by the start-up check (systems.ts samePage)
  const ms = settings.quick ? 2000 : 3000;
  const tally = await runLoad({ targets: system.targets, connections: settings.connections, next: () => path, durationMs: ms, signal, live });
  const node = tally.summary();
  let wrk: Calibration["wrk"] = null;
  try {
    const { stdout } = await execFileAsync("wrk", ["-t2", `-c${settings.connections}`, `-d${ms / 1000}s`, "--latency", `${system.targets[0]}${path}`], { timeout: ms + 15_000 });
    const rps = Number(/Requests\/sec:\s*([\d.]+)/.exec(stdout)?.[1]);
    const pct = (p: string) => {
      const match = new RegExp(`^\\s*${p}%\\s+([\\d.]+)(us|ms|s)`, "m").exec(stdout);
      if (!match) return null;
      const value = Number(match[1]);
      return match[2] === "us" ? value / 1000 : match[2] === "s" ? value * 1000 : value;
    };
    wrk = { rps: Math.round(rps), p50: pct("50"), p99: pct("99") };
  } catch (err) {
    wrk = null;
    void err;
  }
  return { path, seconds: ms / 1000, node: { rps: node.rps, p50: node.latencyMs.p50, p99: node.latencyMs.p99, errors: node.errors }, wrk };
}

// ---------------------------------------------------------------- main

let interrupted = false;

async function main(): Promise<void> {
  const { settings, systems } = readArgs();
  const startedAt = new Date();
  const command = ["npm run bench:peers", ...(process.argv.length > 2 ? ["--", ...process.argv.slice(2)] : [])].join(" ");
  const abort = new AbortController();
  const live: Live = { requests: 0, errors: 0 };
  const progress = new Progress(live);
  const workerLogs: WorkerLogs = { count: 0, distinct: new Map(), scenario: "" };

  let firstSignalAt = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted) {
      // tsx and npm relay the same Ctrl-C again within milliseconds: only a
      // later one is a second Ctrl-C, which exits at once (the exit hooks
      // still kill every child and remove the temp folder).
      if (Date.now() - firstSignalAt > 1500) process.exit(130);
      return;
    }
    interrupted = true;
    firstSignalAt = Date.now();
    abort.abort();
    progress.note(`\n${signal}: stopping…`);
    void cleanUp().finally(() => process.exit(130));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
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

  const tools: ToolVersions = await checkTools();
  const dir = makeTempDir();
  // Also on a hard exit (Miniflare's own SIGINT hook exits at once): the temp folder goes.
  process.once("exit", () => removeTempDir(dir));
  onCleanup("temp folder", async () => removeTempDir(dir));

  const d = durations(settings.quick);
  console.log(`bench:peers${settings.quick ? " (quick)" : ""}: ${systems.join(", ")} · Zipf(1.0) over ${settings.catalogSize.toLocaleString("en-US")} products, ${settings.connections} connections · origin ${settings.originLatencyMs} ± ${settings.originJitterMs} ms`);
  console.log(`nginx ${tools.nginx}, ${tools.varnish}, wrk ${tools.wrk ?? "not installed"}; temp folder ${dir}`);
  console.log(
    `phases (Zipf requests): warm-up ${d.warmUp}, steady ${d.steady}, herd 1,000 at once, origin +500 ms ${d.slow}, origin down ${d.down}, ` +
      `price change ${d.priceLoadMs / 1000} s of load (poll capped at ${d.priceCapMs / 1000} s), Redis down ${d.redisDown}; each load phase capped at ${d.capMs / 1000} s`,
  );

  const rows: Row[] = [];
  const descriptions: PeersReport["systems"] = [];
  const pending: Promise<void>[] = [];
  let calibration: Calibration | null = null;
  progress.start();
  try {
    progress.set("build the worker bundle (wrangler deploy --dry-run)");
    await buildBundle();
    for (const name of systems) {
      if (abort.signal.aborted) break;
      workerLogs.scenario = name;
      progress.set(`${name} · start`);
      const t0 = Date.now();
      let system: System;
      if (name === "tier") system = await startTier(settings, workerLogs, onCleanup);
      else {
        const peerDir = join(dir, name);
        mkdirSync(peerDir);
        system = await startPeer(name, settings, peerDir, workerLogs, onCleanup);
      }
      keepSignalsOurs();
      const stop = onCleanup(`${name} system`, () => system.close());
      progress.note(`${name}: ${system.description}`);
      progress.note(`  ${system.check}`);
      descriptions.push({ name, description: system.description, check: system.check, config: system.config });
      if (name === "nginx" && !calibration) {
        progress.set("nginx · load generator ceiling: one cached page, Node generator then wrk");
        calibration = await calibrate(system, settings, live, abort.signal);
        progress.note(
          `  generator ceiling (one cached page via nginx): Node ${calibration.node.rps.toLocaleString("en-US")} req/s` +
            (calibration.wrk ? `, wrk ${calibration.wrk.rps.toLocaleString("en-US")} req/s` : ", wrk not run"),
        );
      }
      const run = await runScenarios(
        { settings, signal: abort.signal, live, phase: (label, ms) => progress.set(label, ms), note: (text) => progress.note(text) },
        system,
        (r) => {
          rows.push(r);
          const l = r.load;
          const price = r.staleness ? ` · new price ${r.staleness.seconds === null ? (r.staleness.pending ? "pending" : `not within ${r.staleness.capS} s`) : `after ${r.staleness.seconds} s`}` : "";
          progress.note(
            `${name} · ${r.scenario}: ${l.requests.toLocaleString("en-US")} req, ${l.rps.toLocaleString("en-US")} req/s, p50 ${l.latencyMs.p50} ms, p99 ${l.latencyMs.p99} ms, ` +
              `${l.errors} errors · origin ${r.originTotal} (product ${r.origin.product})${price}`,
          );
        },
      );
      progress.note(`${name}: done in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
      if (run.pending.length) {
        // Keep it running until its poll ends, then stop it.
        pending.push(Promise.all(run.pending).then(() => stop()));
      } else {
        await stop();
      }
    }
    if (pending.length && !abort.signal.aborted) {
      progress.set("waiting for the background price-change poll(s) (no load)");
      await Promise.all(pending);
    }
  } finally {
    progress.stop();
    await cleanUp();
  }
  if (interrupted) return;

  const report: PeersReport = {
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    command,
    settings,
    durations: d,
    machine: describeMachine({ ...toolVersions(), nginx: tools.nginx, varnish: tools.varnish, wrk: tools.wrk ?? "not installed" }),
    systems: descriptions,
    renderOnlyVars: RENDER_ONLY_VARS,
    calibration,
    rows,
    workerLog: [...workerLogs.distinct].map(([line, count]) => ({ count, line })),
  };
  const files = writePeersReport(RESULTS_DIR, report);
  console.log("");
  console.log(files.table);
  console.log(`\nresults: ${files.written.map((f) => f.replace(`${resolve(".")}/`, "")).join(", ")}`);
}

runThenExit("bench:peers", main, cleanUp, () => interrupted);
