// `npm run bench [-- --quick] [-- --scenario NAME]`: the tier's benchmark.
// Builds the worker, starts the servers (in a child process) and Miniflare
// instances, runs the scenarios, prints the figures and writes them to
// bench/results/. Every process it starts is stopped at the end, on error
// and on Ctrl-C. See bench/README.md.
import { createCleanups, runThenExit } from "./cleanup";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import type { Live } from "./load";
import { describeMachine, keyFigures, Progress, ratios, textCostTable, textPhaseTable, textTable, writeReport, type Report } from "./report";
import { SCENARIOS } from "./scenarios";
import type { Context, ScenarioResult, Settings } from "./scenario";
import { buildBundle, buildKnownIdsFilter, startServers, startWorker, toolVersions, type FilterBuild, type Servers, type WorkerInstance, type WorkerLogs } from "./stack";

const RESULTS_DIR = resolve("bench/results");
const CLEANUP_STEP_TIMEOUT_MS = 10_000;

const USAGE = `usage: npm run bench -- [--quick] [--scenario NAME]... [--connections N] [--var NAME=VALUE]...

  --quick            short phases (about 1½ minutes in all): a smoke run, rough figures
  --scenario NAME    run only this scenario (repeatable, or comma-separated)
  --connections N    connections of the throughput scenarios (default 32)
  --var NAME=VALUE   a worker setting (src/config), e.g. --var L2_TIMEOUT_MS=200;
                     the default is the tier's own defaults

scenarios: ${SCENARIOS.map((s) => s.name).join(", ")}`;

function readArgs(): { settings: Settings; names: string[] } {
  const { values } = parseArgs({
    options: {
      quick: { type: "boolean", default: false },
      scenario: { type: "string", multiple: true },
      connections: { type: "string" },
      var: { type: "string", multiple: true },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const names = (values.scenario ?? []).flatMap((value) => value.split(",")).map((name) => name.trim()).filter(Boolean);
  const unknown = names.filter((name) => !SCENARIOS.some((s) => s.name === name));
  const connections = values.connections === undefined ? 32 : Number(values.connections);
  const vars: Record<string, string> = {};
  const badVars: string[] = [];
  for (const item of values.var ?? []) {
    const match = /^([A-Z][A-Z0-9_]*)=(.*)$/s.exec(item);
    if (match) vars[match[1]!] = match[2]!;
    else badVars.push(item);
  }
  const problem = unknown.length
    ? `unknown scenario: ${unknown.join(", ")}`
    : !Number.isInteger(connections) || connections < 1 || connections > 1000
      ? "--connections must be an integer from 1 to 1000"
      : badVars.length
        ? `--var must be NAME=VALUE: ${badVars.join(", ")}`
        : null;
  if (problem) {
    console.error(problem);
    console.error(USAGE);
    process.exit(2);
  }
  return {
    names,
    settings: {
      quick: Boolean(values.quick),
      connections,
      vars,
      catalogSize: 100_000,
      // The demo origin's defaults: a service request costs 30 ± 10 ms, as across a data centre.
      originLatencyMs: 30,
      originJitterMs: 10,
    },
  };
}

// ---------------------------------------------------------------- cleanup

const { onCleanup, cleanUp } = createCleanups(CLEANUP_STEP_TIMEOUT_MS);

// ---------------------------------------------------------------- main

let interrupted = false;

async function main(): Promise<void> {
  const { settings, names } = readArgs();
  const scenarios = names.length ? SCENARIOS.filter((s) => names.includes(s.name)) : SCENARIOS;
  const abort = new AbortController();
  const live: Live = { requests: 0, errors: 0 };
  const progress = new Progress(live);
  const results: ScenarioResult[] = [];
  const workerLogs: WorkerLogs = { count: 0, distinct: new Map(), scenario: "" };
  let knownIdsFilter: FilterBuild | null = null;
  const startedAt = new Date().toISOString();
  const command = ["npm run bench", ...(process.argv.length > 2 ? ["--", ...process.argv.slice(2)] : [])].join(" ");

  // Ctrl-C: stop sending, stop every process, keep nothing half-written.
  // (While Miniflare instances are up, Miniflare's own SIGINT hook also kills
  // workerd and exits; the servers child stops itself when we go.) A second
  // Ctrl-C exits at once.
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted) process.exit(130);
    interrupted = true;
    abort.abort();
    progress.note(`\n${signal}: stopping…`);
    void cleanUp().finally(() => process.exit(130));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);

  console.log(`edge product pages benchmark${settings.quick ? " (quick)" : ""}: ${scenarios.map((s) => s.name).join(", ")}`);
  console.log(`${settings.connections} connections for throughput scenarios; origin ${settings.originLatencyMs} ± ${settings.originJitterMs} ms, ${settings.catalogSize.toLocaleString("en-US")} products`);
  const varList = Object.entries(settings.vars).map(([name, value]) => `${name}=${value}`);
  console.log(`worker settings: ${varList.length ? varList.join(", ") : "the tier's defaults"}`);
  progress.start();
  try {
    // The bundle builds while the servers start: both take seconds, and neither needs the other.
    progress.set("build the worker bundle (wrangler deploy --dry-run); start redis-server, gateway, demo origin");
    const starting = startServers({
      catalogSize: settings.catalogSize,
      latencyMs: settings.originLatencyMs,
      jitterMs: settings.originJitterMs,
    }).then((servers) => {
      onCleanup("servers", () => servers.close());
      return servers;
    });
    const [built, started] = await Promise.allSettled([buildBundle(), starting]);
    if (started.status === "rejected") throw started.reason;
    if (built.status === "rejected") throw new Error(`wrangler deploy --dry-run failed: ${String(built.reason?.stderr ?? built.reason)}`);
    const servers: Servers = started.value;
    progress.set("build the known-ids filter (dev/filter-rebuild.ts)");
    knownIdsFilter = await buildKnownIdsFilter(servers);
    progress.note(
      knownIdsFilter.built
        ? `known-ids filter built in ${knownIdsFilter.seconds} s`
        : `known-ids filter NOT built (${knownIdsFilter.detail}): the worker lets every id through`,
    );
    const bindings = { ...servers.bindings, ...settings.vars };

    for (const [index, scenario] of scenarios.entries()) {
      if (abort.signal.aborted) break;
      const tag = `[${index + 1}/${scenarios.length}] ${scenario.name}`;
      const workers: Array<() => Promise<void>> = [];
      const context: Context = {
        servers,
        settings,
        signal: abort.signal,
        live,
        phase: (label, ms) => progress.set(`${tag} · ${label}`, ms),
        startWorkers: async (count, extraBindings) => {
          progress.set(`${tag} · start ${count} Miniflare instance${count > 1 ? "s" : ""}`);
          const started = await Promise.allSettled(Array.from({ length: count }, () => startWorker({ ...bindings, ...extraBindings }, workerLogs)));
          const ok = started.filter((s): s is PromiseFulfilledResult<WorkerInstance> => s.status === "fulfilled").map((s) => s.value);
          for (const worker of ok) workers.push(onCleanup(`worker ${worker.url}`, () => worker.close()));
          const failed = started.find((s): s is PromiseRejectedResult => s.status === "rejected");
          if (failed) throw failed.reason;
          return ok;
        },
      };
      const t0 = Date.now();
      const logsBefore = workerLogs.count;
      workerLogs.scenario = scenario.name;
      try {
        const result = await scenario.run(context);
        if (abort.signal.aborted) break;
        result.workerLogLines = workerLogs.count - logsBefore;
        results.push(result);
        const l = result.load;
        progress.note(
          `${tag}: ${l.requests.toLocaleString("en-US")} req, ${l.rps.toLocaleString("en-US")} req/s, ` +
            `p50 ${l.latencyMs.p50} ms, p99 ${l.latencyMs.p99} ms, ${l.errors} errors (${((Date.now() - t0) / 1000).toFixed(0)} s)`,
        );
      } finally {
        // Each scenario's instances go with it: the next one starts from fresh isolates.
        for (const stop of workers.reverse()) await stop().catch(() => undefined);
      }
    }
    if (servers.logs.length) progress.note(`gateway: ${servers.logs.slice(0, 5).join(" | ")}`);
  } finally {
    progress.stop();
    await cleanUp();
  }
  if (interrupted) return;

  const figures = ratios(results);
  const report: Report = {
    startedAt,
    finishedAt: new Date().toISOString(),
    command,
    settings,
    knownIdsFilter,
    machine: describeMachine(toolVersions()),
    scenarios: results,
    ratios: figures,
    workerLogLines: workerLogs.count,
    workerLog: [...workerLogs.distinct].map(([line, count]) => ({ count, line })),
  };
  console.log("");
  console.log(textTable(results));
  console.log("");
  console.log(textCostTable(results));
  console.log("");
  const phaseTable = textPhaseTable(results);
  if (phaseTable) console.log(`${phaseTable}\n`);
  for (const line of keyFigures(results, figures)) console.log(line);
  // Every instance says once that its known-ids filter is ready: only the other lines are news.
  const news = [...workerLogs.distinct].filter(([line]) => !/"event":"known_ids","state":"(ok|ready|loading)"/.test(line));
  for (const [line, count] of news.slice(0, 10)) console.log(`worker log ${count}× ${line.slice(0, 300)}`);
  if (news.length > 10) console.log(`worker log: ${news.length - 10} more distinct line(s) in the Markdown file`);
  const m = report.machine;
  console.log(`\nmachine: ${m.cpu}, ${m.cores} cores, Node ${m.node}, workerd ${m.versions.workerd}, wrangler ${m.versions.wrangler}`);
  const files = writeReport(RESULTS_DIR, report);
  console.log(`results: ${files.map((file) => file.replace(`${resolve(".")}/`, "")).join(", ")}`);
}

runThenExit("bench", main, cleanUp, () => interrupted);
