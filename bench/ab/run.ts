// `npm run bench:ab -- [--base REF] [--load cached|zipf|healthz] [--rounds N] [--seconds N]`:
// the worker's CPU per request before and after a change, in one run.
//
// The machine is shared, and its speed moves from run to run by more than
// most changes are worth (bench/ab/README.md): so the tree of `--base` (default
// HEAD) and the working tree are bundled as `wrangler deploy` would, one
// isolate of each serves against the same stack (demo origin 20 ± 2 ms,
// Redis behind the gateway), and wrk loads them in turn, `--rounds` times,
// A B B A … so that a drift of the machine falls on both alike. Each round
// reads workerd's CPU from /proc for the isolate under load; the report
// gives CPU-ms per request for each side per round, and the ratio of their
// medians. Writes bench/results/ab-<load>.md. Measures and writes; asserts nothing.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseCommandLine, usageError } from "../../dev/cli";
import { buildBundle, startBundle, useLocationServer } from "../../dev/harness/bundle";
import { benchmarkRun } from "../lib/cleanup";
import { oneOf, wholeNumber } from "../lib/flagValues";
import { cpuBetween, cpuSample, workerdPids } from "../lib/cpu";
import { describeMachine, runLine, writeResults } from "../lib/report";
import { ensureWrk, runZipfWrk, Workload } from "../lib/wrk";
import { startServers, toolVersions, buildKnownIdsFilter } from "../stack";
import { forkLocationServer } from "../../dev/harness/locationServer";

const CATALOG = 100_000;
/** As bench:profile's cached row: few enough that every page stays rendered. */
const HOT_RANKS = 300;

const COMMAND = "npm run bench:ab";
const LOADS = ["cached", "zipf", "healthz"] as const;

const USAGE = `${COMMAND}: the worker's CPU per request before and after a change, in one run (bench/ab/README.md):
the tree of --base (A) and the working tree (B) bundled as wrangler deploy would, one isolate of each on
the same stack (demo origin 20 ± 2 ms, Redis behind the gateway), loaded by wrk in turn, A B, B A…, so that a drift
of the machine falls on both alike; CPU from /proc. Writes bench/results/ab-<load>.md (ab-<load>-location.md with
--location). Needs redis-server; installs wrk when missing.

usage: ${COMMAND} -- [options]
  --base REF            the commit measured as A, checked out in a worktree (default HEAD)
  --load cached|zipf|healthz
                        what wrk asks for: Zipf over the ${HOT_RANKS} hottest products (every page in L1), Zipf over the
                        catalog, or /healthz (default cached)
  --rounds N            rounds, each a turn of both sides, 1 or more (default 6)
  --seconds N           seconds of each turn, 1 or more (default 8)
  --connections N       wrk's connections, 1 or more (default 32)
  --location            the location tier on, each side with a location cache of its own
  -h, --help            this text

example: ${COMMAND} -- --base HEAD~1 --load zipf --rounds 8`;

const { values: args } = parseCommandLine(COMMAND, USAGE, {
  options: {
    base: { type: "string", default: "HEAD" },
    load: { type: "string", default: "cached" },
    rounds: { type: "string", default: "6" },
    seconds: { type: "string", default: "8" },
    connections: { type: "string", default: "32" },
    // The location tier on, each side with a location cache of its own (dev/harness/locationServer.ts).
    location: { type: "boolean", default: false },
    help: { type: "boolean", short: "h", default: false },
  },
});
oneOf(COMMAND, "--load", args.load, LOADS);
const rounds = wholeNumber(COMMAND, "--rounds", args.rounds, 1);
const seconds = wholeNumber(COMMAND, "--seconds", args.seconds, 1);
const connections = wholeNumber(COMMAND, "--connections", args.connections, 1);
try {
  execFileSync("git", ["rev-parse", "--verify", "--quiet", "--end-of-options", `${args.base}^{commit}`], { stdio: "ignore" });
} catch {
  usageError(COMMAND, `--base must name a commit of this checkout, got ${JSON.stringify(args.base)}`);
}

const { onCleanup, run } = benchmarkRun("ab");

/** The base ref's tree in a worktree of its own, bundled there (node_modules borrowed from this checkout). */
function bundleBase(ref: string, dir: string): string {
  const tree = join(dir, "base");
  execFileSync("git", ["worktree", "add", "--detach", tree, ref], { stdio: "ignore" });
  onCleanup("worktree", async () => void execFileSync("git", ["worktree", "remove", "--force", tree], { stdio: "ignore" }));
  symlinkSync(resolve("node_modules"), join(tree, "node_modules"));
  // Inside the checkout: workerd will not load modules from outside its starting directory.
  const out = resolve(".wrangler/ab/base-bundle");
  execFileSync("npx", ["wrangler", "deploy", "--dry-run", "--outdir", out], {
    cwd: tree,
    stdio: "ignore",
    env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
  });
  return out;
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

async function main(): Promise<void> {
  ensureWrk();
  const startedAt = new Date();
  const base = execFileSync("git", ["rev-parse", "--short", args.base], { encoding: "utf8" }).trim();
  const dirty = execFileSync("git", ["status", "--porcelain", "src", "templates"], { encoding: "utf8" }).trim().split("\n").filter(Boolean).length;
  const dir = mkdtempSync(join(tmpdir(), "ab-"));
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  console.log(`ab: ${base} (A) against the working tree (B, ${dirty} files changed in src/, templates/), ${args.load}, ${rounds} rounds of ${seconds} s`);

  const servers = await startServers({ catalogSize: CATALOG, latencyMs: 20, jitterMs: 2 });
  onCleanup("servers", () => servers.close());
  const bundles = { A: bundleBase(args.base, dir), B: resolve(".wrangler/ab/tree-bundle") };
  await buildBundle(bundles.B);
  if (!existsSync(join(bundles.A, "index.js"))) throw new Error(`no bundle for ${args.base}`);
  await buildKnownIdsFilter(servers);

  const sides = {} as Record<"A" | "B", { url: string; pid: number }>;
  for (const side of ["A", "B"] as const) {
    const before = workerdPids();
    const location = args.location ? await forkLocationServer() : null;
    if (location) onCleanup(`location cache ${side}`, () => location.close());
    useLocationServer(location?.address);
    const { mf, url } = await startBundle({
      bundleDir: bundles[side],
      bindings: { ...servers.bindings, ...(location ? { LOCATION_CACHE: "on" } : {}) },
      onLine: (line) => void (/error|fail/i.test(line) && console.error(`  ${side}: ${line}`)),
      port: 0,
      cf: false,
    }).finally(() => useLocationServer(undefined));
    onCleanup(`worker ${side}`, () => mf.dispose());
    const pid = [...workerdPids()].find((p) => !before.has(p));
    if (pid === undefined) throw new Error(`no workerd process found for ${side}`);
    sides[side] = { url: url.origin, pid };
  }

  const workload = new Workload(dir, CATALOG, HOT_RANKS);
  const paths = args.load === "cached" ? workload.cachedFile : args.load === "zipf" ? workload.zipfFile : workload.single("/healthz");
  let seed = 1;
  const load = (side: "A" | "B", s: number) => runZipfWrk({ targets: [sides[side].url], seconds: s, connections, seed: seed++, pathsFile: paths });

  console.log("warm-up: 10 s each");
  await load("A", 10);
  await load("B", 10);

  const perRequest: Record<"A" | "B", number[]> = { A: [], B: [] };
  const rps: Record<"A" | "B", number[]> = { A: [], B: [] };
  /** Redis per request in a turn (INFO commandstats): scripts sent (EVAL*), and every call run, a script's own included. */
  const scripts: Record<"A" | "B", number[]> = { A: [], B: [] };
  const calls: Record<"A" | "B", number[]> = { A: [], B: [] };
  // A B, B A, A B...: each side goes first as often as the other.
  for (let round = 0; round < rounds; round++) {
    for (const side of round % 2 === 0 ? (["A", "B"] as const) : (["B", "A"] as const)) {
      await servers.resetRedisStats();
      const before = cpuSample({ [side]: [sides[side].pid] });
      const figures = await load(side, seconds);
      const after = cpuSample({ [side]: [sides[side].pid] });
      const redis = Object.entries(await servers.redisCalls());
      const requests = Math.max(1, figures.requests);
      scripts[side].push(redis.filter(([name]) => name.startsWith("eval")).reduce((n, [, c]) => n + c, 0) / requests);
      calls[side].push(redis.reduce((n, [, c]) => n + c, 0) / requests);
      const cpuS = cpuBetween(before, after).seconds[side] ?? 0;
      const nonOk = figures.requests - (figures.statuses["2xx"] ?? 0);
      if (nonOk > 0) console.log(`  round ${round + 1} ${side}: ${nonOk} answers not 2xx`);
      perRequest[side].push((1000 * cpuS) / Math.max(1, figures.requests));
      rps[side].push(figures.requests / (figures.durationUs / 1e6));
      console.log(
        `  round ${round + 1} ${side}: ${perRequest[side].at(-1)!.toFixed(3)} CPU-ms/request, ${Math.round(rps[side].at(-1)!)} req/s, Redis scripts ${scripts[side].at(-1)!.toFixed(3)} / calls ${calls[side].at(-1)!.toFixed(3)} per request`,
      );
    }
  }

  const ratio = median(perRequest.B) / median(perRequest.A);
  const rows = perRequest.A.map(
    (a, i) =>
      `| ${i + 1} | ${a.toFixed(3)} | ${perRequest.B[i]!.toFixed(3)} | ${(perRequest.B[i]! / a).toFixed(2)}× | ${Math.round(rps.A[i]!)} | ${Math.round(rps.B[i]!)} |`,
  );
  const markdown = [
    `# A/B: ${base} against the working tree, ${args.load}${args.location ? ", the location tier on" : ""}`,
    "",
    runLine("npm run bench:ab", describeMachine(toolVersions()), startedAt),
    "",
    `One workerd isolate each, the same stack (demo origin 20 ± 2 ms, ${CATALOG.toLocaleString("en-US")} products, Redis behind the gateway${args.location ? "; the location tier on, each side with a location cache of its own" : ""}); wrk -t2 -c${connections}, ${seconds} s per turn after 10 s of warm-up each; ${args.load === "cached" ? `Zipf over the ${HOT_RANKS} hottest products (every page in L1 and rendered)` : args.load === "zipf" ? "Zipf(1.0) over the catalog" : "/healthz"}. CPU: the isolate's workerd process, from /proc.`,
    "",
    "| round | A CPU-ms / request | B CPU-ms / request | B ÷ A | A req/s | B req/s |",
    "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ...rows,
    "",
    `**Medians: A ${median(perRequest.A).toFixed(3)}, B ${median(perRequest.B).toFixed(3)} CPU-ms per request: B = ${ratio.toFixed(2)}× A.**`,
    "",
    `Redis per request (INFO commandstats over each turn; the idle side's background calls included), medians: scripts sent (EVAL, EVALSHA) A ${median(scripts.A).toFixed(3)}, B ${median(scripts.B).toFixed(3)}; every call run, a script's own included, A ${median(calls.A).toFixed(3)}, B ${median(calls.B).toFixed(3)}.`,
  ].join("\n");
  const files = writeResults(`ab-${args.load}${args.location ? "-location" : ""}`, { ".md": markdown });
  console.log(`\n${markdown}\n\nresults: ${files.join(", ")}`);
}

run(main);
