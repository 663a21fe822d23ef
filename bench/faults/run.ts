// `npm run bench [-- --quick] [--scenario a,b] [--connections N]`: the fault
// scenarios that no other benchmark runs, as data, each a sequence of wrk
// phases over the same stack (bench/stack.ts: the deployed bundle in workerd,
// Redis behind the gateway, the demo origin). A scenario starts fresh worker
// instances (and, for `shard-down`, its own three L2 shards), warms them with
// Zipf traffic, then runs its phases back to back; a phase may act first (freeze
// Redis, kill a shard), or run a stream beside the load (a hot product's, the
// purges of purge-storm: purgeStorm.ts). Per phase: wrk's req/s, latency and errors, where the
// pages' resources came from and what L2 skipped or failed (each instance's
// /__status.json, before and after), the origin's requests, and when each
// instance's L2 breaker was first seen open (its status polled every 100 ms).
// Writes bench/results/faults.md and .json. Measures; asserts nothing.
//
// Not here, because another benchmark covers it: the cold herd (bench:soak,
// bench:peers), Redis killed and the origin refusing (bench:peers, paced, on
// the tier), the steady Zipf state (bench:soak's windows; each scenario's
// `before` phase here is its baseline), the /healthz floor and an L1 hit
// (bench:profile, bench:peers' `cached`).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseCommandLine, usageError } from "../../dev/cli";
import { benchmarkRun } from "../lib/cleanup";
import { oneOf, wholeNumber } from "../lib/flagValues";
import { cpuBetween, cpuSample, workerdPids } from "../lib/cpu";
import { describeMachine, runLine, writeResults } from "../lib/report";
import { change, snapshots, type Change } from "../lib/probe";
import { startShards, startStack, startWorkers, toolVersions, type Servers, type ShardSet, type WorkerInstance, type WorkerLogs } from "../stack";
import { ensureWrk, wrkPhase, Workload, type Phase } from "../lib/wrk";
import { l2StateOf } from "../../dev/harness/health";
import { RESOURCES } from "../../src/origin/resources";
import { DEFAULTS } from "../../src/config/defaults";
import { purgeStorm, type PurgeStormResult } from "./purgeStorm";

const CATALOG = 100_000;
const ORIGIN = { catalogSize: CATALOG, latencyMs: 30, jitterMs: 10 };
const INSTANCES = 2;
/** The hot product's stream lasts three of inventory's default ttls: about three origin fetches of it expected. */
const INVENTORY_TTL_S = RESOURCES.inventory.defaults.ttl;
/** purge-storm: a backend that purges every product whose stock or price changed, on a busy day. */
const PURGE_RATE = 50;
/** purge-storm: how long to wait at most for the changed price on every instance (the purge bound is PURGE_POLL_MS and the read). */
const PRICE_CAP_MS = 10 * DEFAULTS.purgePollMs;

/** What a phase's action and a scenario's undo get. */
interface Stack {
  servers: Servers;
  shards: ShardSet | null;
  workers: WorkerInstance[];
}

interface PhaseSpec {
  label: string;
  /** Seconds: full run, --quick. */
  seconds: [number, number];
  /** Done right before the phase's load starts. */
  act?: (stack: Stack) => Promise<unknown>;
  /** The scenario's purge stream runs beside this phase's load (purge-storm). */
  storm?: boolean;
}

interface Scenario {
  name: string;
  what: string;
  /** L2 shards of its own (UPSTASH_REDIS_SHARDS) instead of the main redis-server. */
  shards?: number;
  /** A constant-rate stream of one product beside the Zipf load: requests a second in all. */
  hotRate?: number;
  /** Purges a second in the phases marked `storm` (purgeStorm.ts). */
  purgeRate?: number;
  phases: PhaseSpec[];
  /** Run whatever happened: leaves the stack as the next scenario expects it. */
  undo?: (stack: Stack) => Promise<unknown>;
}

const SCENARIOS: Scenario[] = [
  {
    name: "redis-hang",
    what: "redis-server frozen (SIGSTOP: connections stay open, nothing answers), then thawed (SIGCONT)",
    phases: [
      { label: "before", seconds: [5, 2] },
      { label: "frozen", seconds: [8, 3], act: (s) => s.servers.redisControl("pause") },
      { label: "after", seconds: [5, 2], act: (s) => s.servers.redisControl("resume") },
    ],
    undo: (s) => s.servers.redisControl("resume"),
  },
  {
    name: "shard-down",
    what: "three redis-server + gateway pairs as L2 shards (the consistent-hash ring); shard-2 killed (SIGKILL) and left down",
    shards: 3,
    phases: [
      { label: "before", seconds: [5, 2] },
      { label: "shard-2 down", seconds: [10, 4], act: (s) => s.shards!.control(1, "kill") },
    ],
  },
  {
    name: "hot-product",
    what: `one product (Zipf rank 20,000, which the Zipf load almost never draws) at a constant 20 req/s for three inventory ttls (${INVENTORY_TTL_S} s), beside the Zipf load`,
    hotRate: 20,
    phases: [{ label: "hot", seconds: [3 * INVENTORY_TTL_S, 12] }],
  },
  {
    name: "purge-storm",
    what: `the shop's backend purging ${PURGE_RATE} products a second (each one drawn uniformly from the catalog, POST /__purge to the instances in turn) beside the Zipf load, and a second into it the most popular product's price changed at the origin and purged`,
    purgeRate: PURGE_RATE,
    phases: [
      { label: "before", seconds: [5, 2] },
      { label: "storm", seconds: [15, 6], storm: true },
    ],
  },
];

const COMMAND = "npm run bench";
const SCENARIO_NAMES = SCENARIOS.map((s) => s.name);

const USAGE = `${COMMAND}: the fault scenarios that no other benchmark runs: Redis frozen, an L2 shard killed, a hot product
at a constant rate, a purge storm (bench/faults/README.md). Each starts ${INSTANCES} fresh worker instances sharing Redis and
the demo origin, warms them with Zipf traffic, then runs its phases back to back under wrk's Zipf load. Per phase:
req/s, latency and errors, where the pages came from, what L2 skipped or failed, the origin's requests, when each
instance's L2 breaker opened. Writes bench/results/faults.md and .json. Needs redis-server; installs wrk when missing.

usage: ${COMMAND} -- [options]
  --quick               short phases: about 1 minute in all, rough figures (default: about 3 minutes)
  --scenario NAMES      only these scenarios, comma-separated or the flag repeated: ${SCENARIO_NAMES.join(", ")} (default: all)
  --connections N       wrk's connections, 2 or more (default 8, 4 per instance)
  --warm S              seconds of Zipf before each scenario's phases, 1 or more (default 15; 4 with --quick)
  -h, --help            this text

examples: ${COMMAND} -- --quick
          ${COMMAND} -- --scenario redis-hang,purge-storm --connections 16`;

const { values: args } = parseCommandLine(COMMAND, USAGE, {
  options: {
    quick: { type: "boolean", default: false },
    scenario: { type: "string", multiple: true },
    connections: { type: "string", default: "8" },
    warm: { type: "string" },
    help: { type: "boolean", short: "h", default: false },
  },
});
const chosen = (args.scenario ?? []).flatMap((s) => s.split(",")).filter(Boolean);
for (const name of chosen) oneOf(COMMAND, "--scenario", name, SCENARIO_NAMES);
const connections = wholeNumber(COMMAND, "--connections", args.connections, 2);
const warmS = Number(args.warm ?? (args.quick ? 4 : 15));
if (!(warmS >= 1)) usageError(COMMAND, `--warm must be a number of seconds from 1, got ${JSON.stringify(args.warm)}`);
const scenarios = chosen.length ? SCENARIOS.filter((s) => chosen.includes(s.name)) : SCENARIOS;

const { onCleanup, signal, interrupted, run } = benchmarkRun("bench");

interface PhaseResult {
  label: string;
  wrk: Phase;
  /** The hot stream's own wrk figures (hot-product). */
  hot?: Phase;
  /** The purge stream beside the load (purge-storm). */
  storm?: PurgeStormResult;
  /** Per instance: what changed in its /__status.json over the phase. */
  changes: Change[];
  originRequests: number;
  /** Per instance: ms into the phase when its status first showed its L2 breaker not closed; null: never. */
  breakerOpenMs: (number | null)[];
  /** Per instance: ms into the phase when its status first showed the breaker closed again after that; null: not seen. */
  breakerClosedMs: (number | null)[];
  /** Cores used on average over the phase: by workerd (every instance), and by processes that are not this run's (a busy neighbour). */
  cores: { workerd: number; others: number };
}

interface ScenarioResult {
  name: string;
  what: string;
  phases: PhaseResult[];
  /** hot-product: the origin's requests for the hot product, per service. */
  hotFetches?: Record<string, number>;
  /** L2 state of each instance at the end (its status' `l2.state`). */
  health: string[];
}

async function main(): Promise<void> {
  ensureWrk();
  const startedAt = new Date();
  const logs: WorkerLogs = { count: 0, distinct: new Map(), scenario: "" };
  console.log(`bench: ${scenarios.map((s) => s.name).join(", ")}; ${INSTANCES} instances, wrk -t2 -c${connections}, warm-up ${warmS} s of Zipf each`);
  const { servers, filter } = await startStack(ORIGIN, onCleanup);
  console.log(`known-ids filter: ${filter.built ? "built" : "NOT built"} (${filter.detail})`);

  const dir = mkdtempSync(join(tmpdir(), "bench-"));
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  const workload = new Workload(dir, CATALOG, 0);
  const results: ScenarioResult[] = [];
  let seed = 1;

  for (const scenario of scenarios) {
    if (interrupted()) break;
    logs.scenario = scenario.name;
    console.log(`\n${scenario.name}: ${scenario.what}`);
    const shards = scenario.shards ? await startShards(scenario.shards, ORIGIN) : null;
    const stopShards = shards ? onCleanup("shards", () => shards.close()) : null;
    const bindings = shards ? { ...servers.bindings, ...shards.bindings, KNOWN_IDS: "off" } : servers.bindings;
    const { workers, stop: stopWorkers } = await startWorkers(INSTANCES, bindings, logs, onCleanup, false);
    const stack: Stack = { servers, shards, workers };
    const cpuRoots = { workerd: [...workerdPids()], servers: [servers.pid, ...(shards ? [shards.pid] : [])] };
    try {
      const targets = workers.map((w) => w.url);
      const zipf = (seconds: number) => wrkPhase({ targets, connections, seconds, paths: workload.zipfFile, seed: seed++, signal });
      const warm = await zipf(warmS);
      console.log(`  warm-up: ${warm.rps} req/s, ${warm.errors} errors (not counted)`);
      const hotId = workload.idOfRank(20_000);
      const hotPaths = workload.single(`/products/${hotId}`);
      if (scenario.hotRate) await servers.origin.resetCounters();
      const phases: PhaseResult[] = [];
      for (const spec of scenario.phases) {
        if (interrupted()) break;
        await spec.act?.(stack);
        const seconds = spec.seconds[args.quick ? 1 : 0];
        const before = await snapshots(workers);
        const originBefore = (await servers.origin.counters()).total;
        const polling = pollBreakers(workers, bindings.PURGE_TOKEN!);
        const cpuBefore = cpuSample(cpuRoots);
        const [wrk, hot, storm] = await Promise.all([
          zipf(seconds),
          scenario.hotRate ? wrkPhase({ targets, connections: 4, seconds, rate: scenario.hotRate, paths: hotPaths, seed: seed++, signal }) : undefined,
          spec.storm && scenario.purgeRate
            ? purgeStorm({
                targets,
                token: bindings.PURGE_TOKEN!,
                origin: servers.origin,
                rate: scenario.purgeRate,
                ms: seconds * 1000,
                randomId: () => workload.idOfRank(1 + Math.floor(Math.random() * CATALOG)),
                hotId: workload.hotId(),
                capMs: PRICE_CAP_MS,
              })
            : undefined,
        ]);
        const { openMs: breakerOpenMs, closedMs: breakerClosedMs } = polling.stop();
        const used = cpuBetween(cpuBefore, cpuSample(cpuRoots));
        const cores = { workerd: (used.seconds.workerd ?? 0) / used.wallS, others: (used.seconds.others ?? 0) / used.wallS };
        const after = await snapshots(workers);
        const result: PhaseResult = {
          label: spec.label,
          wrk,
          hot,
          storm,
          changes: workers.map((_, k) => change(before[k]!, after[k]!)),
          originRequests: (await servers.origin.counters()).total - originBefore,
          breakerOpenMs,
          breakerClosedMs,
          cores,
        };
        console.log(`  ${phaseLine(result)}`);
        if (storm) console.log(`  ${stormLine(storm)}`);
        phases.push(result);
      }
      const health = await Promise.all(workers.map((w) => l2StateOf(w.url, bindings.PURGE_TOKEN!, 3000)));
      const hotFetches = scenario.hotRate ? await servers.origin.countsOf(hotId) : undefined;
      if (hotFetches) console.log(`  origin requests for ${hotId}: ${JSON.stringify(hotFetches)}`);
      results.push({ name: scenario.name, what: scenario.what, phases, hotFetches, health });
    } finally {
      await scenario.undo?.(stack).catch((err: unknown) => console.error(`${scenario.name}: undo failed: ${String(err)}`));
      await stopWorkers();
      await stopShards?.();
    }
  }

  const machine = describeMachine(toolVersions());
  const markdown = [
    `# npm run bench: fault scenarios, ${INSTANCES} instances, wrk -t2 -c${connections}, Zipf(1.0) over ${CATALOG.toLocaleString("en-US")} products`,
    "",
    runLine("npm run bench", machine, startedAt),
    "",
    `Origin ${ORIGIN.latencyMs} ± ${ORIGIN.jitterMs} ms; known-ids filter ${filter.built ? "built" : "NOT built"}; each scenario: fresh instances, ${warmS} s of Zipf warm-up (not counted), then its phases. Tiers: the resources of the pages, from each instance's /__status.json (summed). L2 skip / fail: calls not made (breaker open) / failed or over budget. Breaker open: ms into the phase when its status first showed each instance's L2 breaker not closed; closed again: when it showed it closed after that (a phase that begins with it open: the recovery). Cores: CPU used on average by workerd, and by processes that are not this run's (the machine is shared: a high figure means a neighbour took the CPU, and the phase's speed is low).`,
    "",
    "| scenario | phase | s | req/s | p50 ms | p99 ms | errors | l1 / l2 / origin | L2 skip / fail | origin req / page | breaker open (ms) | closed again (ms) | cores workerd / others |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | --- | --- | --- |",
    ...results.flatMap((r) =>
      r.phases.map(
        (p) =>
          `| ${r.name} | ${p.label} | ${p.wrk.seconds} | ${p.wrk.rps} | ${tenths(p.wrk.p50Ms)} | ${tenths(p.wrk.p99Ms)} | ${errorsOf(p.wrk)} | ${tiersOf(p)} | ${l2Of(p)} | ${(p.originRequests / Math.max(1, p.wrk.requests)).toFixed(2)} | ${p.breakerOpenMs.map((ms) => ms ?? "–").join(" · ")} | ${p.breakerClosedMs.map((ms) => ms ?? "–").join(" · ")} | ${p.cores.workerd.toFixed(2)} / ${p.cores.others.toFixed(2)} |`,
      ),
    ),
    "",
    ...results.flatMap((r) => [
      `- **${r.name}**: ${r.what}.`,
      ...r.phases
        .filter((p) => p.hot)
        .map(
          (p) =>
            `  The hot stream (${p.hot!.askedRate}/s, paced): ${p.hot!.requests} answers, p50 ${tenths(p.hot!.p50Ms)} ms, p99 ${tenths(p.hot!.p99Ms)} ms, errors ${errorsOf(p.hot!)}, ${p.hot!.late} sent late; origin requests for the product: ${JSON.stringify(r.hotFetches)} (inventory ≈ one per ${INVENTORY_TTL_S} s ttl expected).`,
        ),
      ...r.phases.filter((p) => p.storm).map((p) => `  ${stormLine(p.storm!)}`),
      `  L2 at the end (status \`l2.state\`): ${r.health.map((h) => `\`${h}\``).join(" · ")}`,
    ]),
    "",
    `Worker log lines: ${logs.count}; distinct: ${
      [...logs.distinct]
        .filter(([line]) => /error|warn|uncaught|exception/i.test(line))
        .map(([line, n]) => `\`${line.slice(0, 200)}\` ×${n}`)
        .join("; ") || "no error or warning"
    }.`,
  ].join("\n");
  const files = writeResults("faults", {
    ".md": `${markdown}\n`,
    ".json": JSON.stringify({ startedAt, machine, connections, warmS, quick: args.quick, results }, null, 2),
  });
  console.log(`\n${markdown}\n\nresults: ${files.join(", ")}`);
}

/**
 * Polls each instance's L2 state (its status) every 100 ms until stopped:
 * when its L2 breaker (any shard's) was first seen not closed, and when it
 * was first seen closed again after that (the recovery, for a phase that
 * begins with it open).
 */
function pollBreakers(workers: WorkerInstance[], purgeToken: string): { stop(): { openMs: (number | null)[]; closedMs: (number | null)[] } } {
  const started = Date.now();
  const openMs: (number | null)[] = workers.map(() => null);
  const closedMs: (number | null)[] = workers.map(() => null);
  const timer = setInterval(() => {
    workers.forEach((w, k) => {
      if (closedMs[k] !== null) return;
      void l2StateOf(w.url, purgeToken, 1000).then((state) => {
        const at = Date.now() - started;
        // "partial": some shard's breaker is not closed.
        if (openMs[k] === null && ["open", "half-open", "partial"].includes(state)) openMs[k] = at;
        else if (openMs[k] !== null && closedMs[k] === null && state === "closed") closedMs[k] = at;
      });
    });
  }, 100);
  return { stop: () => (clearInterval(timer), { openMs, closedMs }) };
}

const sum = <K extends string>(changes: Change[], pick: (c: Change) => Record<K, number> | null, keys: K[]): Record<K, number> | null => {
  const parts = changes.map(pick);
  if (parts.some((p) => p === null)) return null;
  return Object.fromEntries(keys.map((k) => [k, parts.reduce((n, p) => n + p![k], 0)])) as Record<K, number>;
};
function tiersOf(p: PhaseResult): string {
  const t = sum(p.changes, (c) => c.tiers, ["l1", "l2", "origin", "failed"]);
  const all = t ? t.l1 + t.l2 + t.origin + t.failed : 0;
  return t && all ? [t.l1, t.l2, t.origin].map((n) => `${Math.round((100 * n) / all)}%`).join(" / ") : "n/a";
}
function l2Of(p: PhaseResult): string {
  const l2 = sum(p.changes, (c) => c.l2, ["skipped", "failures"]);
  return l2 ? `${l2.skipped} / ${l2.failures}` : "n/a";
}
/** Milliseconds to one decimal. */
const tenths = (ms: number) => Math.round(ms * 10) / 10;
const errorsOf = (w: Phase) =>
  w.errors
    ? `${w.errors} (${Object.entries(w.errorKinds)
        .map(([k, n]) => `${k} ${n}`)
        .join(", ")})`
    : "0";
const stormLine = (s: PurgeStormResult) =>
  `The purge stream (${s.rate}/s): ${s.sent} purges, answers ${JSON.stringify(s.statuses)}, p50 ${s.p50Ms} ms, p99 ${s.p99Ms} ms; ${s.price.id}'s price ${s.price.from} → ${s.price.to} at the origin, then purged: ${
    s.price.seenAfterMs === null
      ? `not served by every instance within ${s.price.capMs} ms`
      : `served by every instance ${s.price.seenAfterMs} ms after the change`
  } (PURGE_POLL_MS ${DEFAULTS.purgePollMs}).`;
const phaseLine = (p: PhaseResult) =>
  `${p.label}: ${p.wrk.rps} req/s, p50 ${tenths(p.wrk.p50Ms)} ms, p99 ${tenths(p.wrk.p99Ms)} ms, errors ${errorsOf(p.wrk)}, tiers ${tiersOf(p)}, L2 skip/fail ${l2Of(p)}, origin ${p.originRequests}, breaker open ${p.breakerOpenMs.map((ms) => ms ?? "–").join(" · ")}, closed again ${p.breakerClosedMs.map((ms) => ms ?? "–").join(" · ")}, cores workerd / others ${p.cores.workerd.toFixed(2)} / ${p.cores.others.toFixed(2)}`;

run(main);
