/**
 * `npm run dev`: the whole tier on this machine with one command.
 *
 *   redis-server (own port, no persistence)  ← Upstash REST gateway :8789  ← L2
 *   demo origin :8788 (catalog + /__admin)    ← the worker's ORIGIN_URL
 *   wrangler dev :8787 (the worker itself, PUBLIC_URL http://localhost:8787)
 *
 * Without redis-server on PATH (or with DEV_NO_REDIS=1) the worker runs with
 * L2 off. Ctrl-C stops everything in reverse order and leaves no process
 * behind, then says "stopped" and exits 0, with one isolate or several; a
 * second Ctrl-C kills what is left at once. So does a SIGTERM to this process
 * or to npm above it (a supervisor, an IDE), a SIGHUP to this process (a
 * closed terminal sends it to both), and npm's death (see "the launcher").
 * Not covered: a SIGHUP to npm alone, which npm does not relay.
 *
 * With DEV_ISOLATES=N (2 – 8) the worker runs instead as the deployed bundle
 * in N isolates (workerd through Miniflare, as the tests and benchmarks run
 * it; no reload on edits), the first on DEV_PORT and isolate k on
 * DEV_PORT + 100·(k−1), sharing Redis and the origin as a fleet does; their
 * FLEET binding delivers to a local recorder on FLEET_PORT (8790), which `npm
 * run fleet -- --local` asks (dev/fleet/), every page written
 * (FLEET_PAGE_SAMPLE=1: the fleet's figures then add up to the status pages'
 * exactly). Under `wrangler dev` that binding drops its writes, as
 * Miniflare's does.
 *
 * Environment: DEV_PORT (8787), ORIGIN_PORT (8788), GATEWAY_PORT (8789),
 * DEV_REDIS_PORT (6390), CATALOG_SIZE (10000), ORIGIN_LATENCY_MS (30),
 * DEV_ISOLATES (1), FLEET_PORT (8790), PURGE_TOKEN, UPSTASH_REDIS_REST_TOKEN, DEV_NO_REDIS.
 */
import { fileURLToPath } from "node:url";
import { DEFAULT_CATALOG_SIZE } from "./origin";
import { MAX_CATALOG_SIZE } from "./origin/catalog";
import { MAX_LATENCY_MS } from "./origin/state";
import { parseCommandLine } from "./cli";
import { killEverything } from "./harness/children";
import { l2StateOf, waitForHealthz } from "./harness/health";
import { portFromEnv, requireFreePorts } from "./harness/ports";
import { findOnPath } from "./harness/redis";
import { buildKnownIdsFilter, startStack } from "./harness/stack";
import { startWrangler } from "./harness/wrangler";
import { buildBundle, startBundle } from "./harness/bundle";
import { LOCAL_RECORDER_PORT, LOCAL_RECORDER_TOKEN } from "./fleet/local";
import { startRecorder } from "./fleet/recorder";
import { join } from "node:path";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const HEALTH_TIMEOUT_MS = 60_000;
/**
 * Bound on each step of the shutdown. Past it we move on: in-process servers
 * die with process.exit, children get SIGKILL from killEverything on exit.
 */
const CLOSE_TIMEOUT_MS = 10_000;
/**
 * Under `npm run dev` one Ctrl-C can reach us twice: from the terminal, and
 * relayed by npm. A repeat this soon is that same keypress, not a request to
 * force.
 */
const SAME_KEYPRESS_MS = 500;
/** How often we check that the process that launched us (npm) is still there. */
const LAUNCHER_POLL_MS = 250;
/** Isolates DEV_ISOLATES may ask for: each is a workerd process. */
const MAX_ISOLATES = 8;
/** Isolate k (from 0) of DEV_ISOLATES listens on DEV_PORT + ISOLATE_PORT_STEP·k. */
const ISOLATE_PORT_STEP = 100;
/** Where the isolates' bundle is built (`wrangler deploy --dry-run`), apart from the tests' and the benchmarks'. */
const ISOLATES_BUNDLE = join(ROOT, ".wrangler", "dev-bundle");
/** The settings' defaults (README, "Set-up"). */
const DEFAULT_PORTS = { DEV_PORT: 8787, ORIGIN_PORT: 8788, GATEWAY_PORT: 8789, DEV_REDIS_PORT: 6390, FLEET_PORT: LOCAL_RECORDER_PORT };
const DEFAULT_ORIGIN_LATENCY_MS = 30;
const DEFAULT_PURGE_TOKEN = "dev-purge-token";
const DEFAULT_GATEWAY_TOKEN = "dev-gateway-token";

const COMMAND = "npm run dev";

const USAGE = `${COMMAND}: the whole tier on this machine: redis-server (no persistence) behind the Upstash REST
gateway, the demo origin, the known-ids filter built from it, then the worker under wrangler dev
(with DEV_ISOLATES, the deployed bundle in that many isolates instead). Ctrl-C stops everything.

usage: [NAME=value …] ${COMMAND}
  -h, --help   this text
Its settings are environment variables:
${table([
  ["name", "default", "what it sets"],
  ["DEV_PORT", DEFAULT_PORTS.DEV_PORT, "the worker's port; its PUBLIC_URL is http://localhost:<port>"],
  ["ORIGIN_PORT", DEFAULT_PORTS.ORIGIN_PORT, "the demo origin's port"],
  ["GATEWAY_PORT", DEFAULT_PORTS.GATEWAY_PORT, "the Upstash REST gateway's port"],
  ["DEV_REDIS_PORT", DEFAULT_PORTS.DEV_REDIS_PORT, "redis-server's port (a free one instead when it is busy)"],
  ["CATALOG_SIZE", DEFAULT_CATALOG_SIZE, `products in the demo catalog (1 to ${MAX_CATALOG_SIZE.toLocaleString("en-US")})`],
  ["ORIGIN_LATENCY_MS", DEFAULT_ORIGIN_LATENCY_MS, "base latency of every origin call (± 10 ms of jitter)"],
  ["DEV_ISOLATES", 1, `2 to ${MAX_ISOLATES}: the bundle in that many isolates, on DEV_PORT, DEV_PORT + ${ISOLATE_PORT_STEP}…`],
  ["FLEET_PORT", DEFAULT_PORTS.FLEET_PORT, "their fleet recorder's port (npm run fleet -- --local)"],
  ["DEV_NO_REDIS", "unset", "1: no redis-server or gateway; the worker runs with L2 off"],
  ["PURGE_TOKEN", DEFAULT_PURGE_TOKEN, "bearer token of /__purge, /__known-ids and /__status"],
  ["UPSTASH_REDIS_REST_TOKEN", DEFAULT_GATEWAY_TOKEN, "the gateway's token"],
])}
The worker's own settings (README, "Configuration") go in .dev.vars, which wrangler dev reads.

example: CATALOG_SIZE=1000 DEV_ISOLATES=2 ${COMMAND}`;

/** Rows as columns, two spaces apart, indented by two. */
function table(rows: (string | number)[][]): string {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => String(row[column]).length)));
  return rows.map((row) => `  ${row.map((cell, column) => String(cell).padEnd(widths[column]!)).join("  ")}`.trimEnd()).join("\n");
}

interface Settings {
  devPort: number;
  /** 1: wrangler dev; more: the bundle in that many isolates, with the fleet recorder on fleetPort. */
  isolates: number;
  fleetPort: number;
  originPort: number;
  gatewayPort: number;
  redisPort: number;
  catalogSize: number;
  originLatencyMs: number;
  purgeToken: string;
  gatewayToken: string;
  /** The redis-server binary, or why L2 is off. */
  redis: { bin: string } | { off: string };
}

/**
 * The settings from the environment; every bad one named at once, in the
 * worker's words for its own (`Configuration error: 2 settings are wrong:
 * …; …`), so that they are mended in one round.
 */
function readSettings(): Settings {
  const env = process.env;
  const problems: string[] = [];
  const read = <T>(reader: () => T, fallback: T): T => {
    try {
      return reader();
    } catch (error) {
      problems.push(error instanceof Error ? error.message : String(error));
      return fallback;
    }
  };
  const port = (name: keyof typeof DEFAULT_PORTS) => read(() => portFromEnv(name, DEFAULT_PORTS[name]), DEFAULT_PORTS[name]);
  const settings: Settings = {
    devPort: port("DEV_PORT"),
    isolates: read(isolatesFromEnv, 1),
    fleetPort: port("FLEET_PORT"),
    originPort: port("ORIGIN_PORT"),
    gatewayPort: port("GATEWAY_PORT"),
    redisPort: port("DEV_REDIS_PORT"),
    catalogSize: read(() => wholeNumberFromEnv("CATALOG_SIZE", DEFAULT_CATALOG_SIZE, 1, MAX_CATALOG_SIZE), DEFAULT_CATALOG_SIZE),
    originLatencyMs: read(() => numberFromEnv("ORIGIN_LATENCY_MS", DEFAULT_ORIGIN_LATENCY_MS, 0, MAX_LATENCY_MS), DEFAULT_ORIGIN_LATENCY_MS),
    purgeToken: env.PURGE_TOKEN || DEFAULT_PURGE_TOKEN,
    gatewayToken: env.UPSTASH_REDIS_REST_TOKEN || DEFAULT_GATEWAY_TOKEN,
    redis: whichRedis(),
  };
  const [first, ...others] = problems;
  if (first === undefined) return settings;
  throw new SettingsError(`Configuration error: ${others.length === 0 ? first : `${problems.length} settings are wrong: ${problems.join("; ")}`}`);
}

/** Bad settings: said as they are, without "cannot run the dev stack" or a stack trace. */
class SettingsError extends Error {}

function numberFromEnv(name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === "") return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value)) throw new Error(`${name} must be a number, got ${JSON.stringify(raw)}`);
  if (value < min || value > max) throw new Error(`${name} must be from ${min} to ${max}, got ${raw}`);
  return value;
}

function wholeNumberFromEnv(name: string, fallback: number, min: number, max: number): number {
  const value = numberFromEnv(name, fallback, min, max);
  if (!Number.isInteger(value)) throw new Error(`${name} must be a whole number, got ${process.env[name]}`);
  return value;
}

function isolatesFromEnv(): number {
  const raw = process.env.DEV_ISOLATES;
  const isolates = raw === undefined || raw.trim() === "" ? 1 : Number(raw);
  if (!Number.isInteger(isolates) || isolates < 1 || isolates > MAX_ISOLATES) {
    throw new Error(`DEV_ISOLATES must be a whole number from 1 to ${MAX_ISOLATES}, got ${JSON.stringify(raw)}`);
  }
  return isolates;
}

function whichRedis(): Settings["redis"] {
  if (process.env.DEV_NO_REDIS === "1") return { off: "DEV_NO_REDIS=1" };
  const bin = findOnPath("redis-server");
  return bin ? { bin } : { off: "redis-server not found on PATH" };
}

// ---------------------------------------------------------------- output

const log = (line: string) => console.log(`[dev] ${line}`);
const warn = (line: string) => console.error(`[dev] ${line}`);

// ---------------------------------------------------------------- teardown

interface Step {
  name: string;
  /** Graceful stop. */
  stop: () => Promise<void>;
}

/** What to undo on the way out; registered as things start, undone newest first. */
const steps: Step[] = [];
let stopping = false;

/** Stops everything that started, in reverse order, then exits with `code`. Runs once. */
async function shutdown(code: number): Promise<never> {
  if (!stopping) {
    stopping = true;
    for (const step of [...steps].reverse()) {
      try {
        await withTimeout(step.stop(), CLOSE_TIMEOUT_MS, `${step.name} did not stop`);
      } catch (err) {
        warn(`${step.name}: ${(err as Error).message}`);
      }
    }
    if (steps.length > 0) log(code === 0 ? "stopped" : "stopped after an error");
    process.exit(code);
  }
  return new Promise<never>(() => {}); // the first call exits
}

function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${message} within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function handleSignals(): void {
  let firstAt = 0;
  const stopFor = (reason: string) => {
    firstAt = Date.now();
    log(`${reason}: stopping (press Ctrl-C again to force)`);
    void shutdown(0);
  };
  const onSignal = (signal: NodeJS.Signals) => {
    if (!stopping) {
      console.log(""); // the terminal echoed ^C without a newline
      stopFor(signal);
      return;
    }
    if (Date.now() - firstAt < SAME_KEYPRESS_MS) return;
    warn(`${signal} again: killing what is left`);
    killEverything();
    process.exit(130);
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  process.on("SIGHUP", onSignal); // terminal closed
  // A launcher killed outright relays nothing (below): its death is our SIGTERM.
  watchLauncher((gone) => {
    if (!stopping) stopFor(`${gone} is gone`);
  });
  // A closed terminal (EIO) or a pipe nobody reads any more (EPIPE) fails our
  // writes: that must not crash the orderly stop half way.
  for (const stream of [process.stdout, process.stderr]) stream.on("error", () => {});
  // Whatever way we exit (a crash included), no child outlives us: the harness
  // kills every child it tracks at exit (dev/harness/children.ts).
}

// ---------------------------------------------------------------- the launcher

/**
 * `npm run dev` is npm → node (this file, TypeScript through tsx's loader:
 * `exec node --import tsx`, so that no shell sits between them that would die
 * of a SIGTERM without relaying it). Not the tsx command: it stands between
 * npm and node and relays each signal, and SIGKILLs node when node has not
 * told it of the signal within 30 ms, twice; on a busy machine that cut a
 * Ctrl-C's orderly stop short (exit code 130, no "stopped", redis-server
 * and wrangler, each in a group of its own, left running with their ports).
 * npm relays SIGINT and SIGTERM to us. A launcher that is killed outright
 * (SIGKILL, a crash) relays nothing: we are then re-parented, and take that
 * for a SIGTERM, so that no orphaned tier keeps its ports.
 */
function watchLauncher(onGone: (gone: string) => void): void {
  const launcher = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === launcher) return;
    clearInterval(timer);
    onGone(`the process that started this one (pid ${launcher})`);
  }, LAUNCHER_POLL_MS);
  timer.unref();
}

// ---------------------------------------------------------------- the stack

/**
 * redis-server and the gateway in front of it (unless L2 is off), then the
 * demo origin; `l2` null when L2 is off.
 */
async function startServers(settings: Settings): Promise<{ originUrl: string; l2: { redisPort: number; url: string } | null }> {
  if ("off" in settings.redis) {
    warn(
      settings.redis.off === "DEV_NO_REDIS=1"
        ? "DEV_NO_REDIS=1: L2 is OFF, pages come from L1 and the origin only"
        : "redis-server not found on PATH: L2 is OFF, pages come from L1 and the origin only (install redis-server to enable L2)",
    );
  }
  const tier = `http://127.0.0.1:${settings.devPort}`;
  const stack = await startStack({
    token: settings.gatewayToken,
    shards: "bin" in settings.redis ? 1 : 0,
    redis: {
      ...("bin" in settings.redis ? { bin: settings.redis.bin } : {}),
      preferredPort: settings.redisPort,
      ownGroup: true,
      log,
      onUnexpectedExit: (how) => {
        if (!stopping) warn(`redis-server died (${how}): L2 is unavailable, the worker falls back to the origin`);
      },
    },
    gatewayPort: settings.gatewayPort,
    gatewayLog: (line) => console.error(`[gateway] ${line.replace(/^gateway: /, "")}`),
    origin: {
      port: settings.originPort,
      catalogSize: settings.catalogSize,
      latencyMs: settings.originLatencyMs,
      // After an admin change the origin tells the tier, as a real shop would.
      purgeUrl: `${tier}/__purge`,
      purgeToken: settings.purgeToken,
      knownIdsUrl: `${tier}/__known-ids`,
    },
  });
  steps.push({ name: "demo origin, gateway and redis-server", stop: stack.close });
  const shard = stack.shards[0];
  if (shard) {
    log(`redis-server on 127.0.0.1:${shard.redis.port}`);
    log(`Upstash REST gateway on ${shard.gateway.url}`);
  }
  const originUrl = stack.origin!.url;
  log(`demo origin on ${originUrl} (${settings.catalogSize} products, ~${settings.originLatencyMs} ms per call)`);
  return { originUrl, l2: shard ? { redisPort: shard.redis.port, url: shard.gateway.url } : null };
}

/** The known-ids filter from the demo catalog, as `npm run filter:rebuild` (and the daily cron) builds it. */
async function buildFilter(settings: Settings, originUrl: string, l2: { url: string }): Promise<void> {
  try {
    const result = await buildKnownIdsFilter({ originUrl, gatewayUrl: l2.url, token: settings.gatewayToken });
    log(`known-ids filter built: ${result.count} ids, ${result.segments} segments`);
  } catch (error) {
    warn(`known-ids filter not built (requests fail open to negative caching): ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** The worker's settings in the dev stack, whichever way it runs. */
function workerVars(settings: Settings, originUrl: string, l2: { url: string } | null): Record<string, string> {
  return {
    ORIGIN_URL: originUrl,
    // Canonical and OpenGraph URLs: required, and never taken from the request.
    PUBLIC_URL: `http://localhost:${settings.devPort}`,
    // "" is "unset" for the worker's config: L2 off. It must be given, or
    // wrangler.toml's default URL would switch L2 on against nothing.
    UPSTASH_REDIS_REST_URL: l2 ? l2.url : "",
    UPSTASH_REDIS_REST_TOKEN: l2 ? settings.gatewayToken : "",
    PURGE_TOKEN: settings.purgeToken,
  };
}

const isolatePort = (settings: Settings, k: number) => settings.devPort + ISOLATE_PORT_STEP * k;

/** DEV_ISOLATES: the bundle in that many workerd isolates, their FLEET binding delivering to the local recorder. */
async function startIsolates(settings: Settings, originUrl: string, l2: { url: string } | null): Promise<void> {
  const recorder = await startRecorder({ port: settings.fleetPort, token: LOCAL_RECORDER_TOKEN });
  steps.push({ name: "fleet recorder", stop: recorder.close });
  log(`fleet recorder on ${recorder.url} (npm run fleet -- --local${settings.fleetPort === LOCAL_RECORDER_PORT ? "" : ` ${recorder.url}`})`);
  log("building the bundle as wrangler deploy does…");
  await buildBundle(ISOLATES_BUNDLE);
  for (let k = 0; k < settings.isolates && !stopping; k++) {
    const { mf } = await startBundle({
      bundleDir: ISOLATES_BUNDLE,
      bindings: { ...workerVars(settings, originUrl, l2), FLEET_PAGE_SAMPLE: "1" },
      onLine: (line) => line.trim() && console.log(`[isolate ${k + 1}] ${line}`),
      port: isolatePort(settings, k),
      fleetPointsUrl: recorder.pointsUrl,
      cf: false,
      // Ctrl-C is ours, as with wrangler dev: every child stopped in order, then "stopped".
      callerHandlesSignals: true,
    });
    steps.push({ name: `isolate ${k + 1}`, stop: () => mf.dispose() });
    log(`isolate ${k + 1} on http://127.0.0.1:${isolatePort(settings, k)}`);
  }
}

function startWorker(settings: Settings, originUrl: string, l2: { url: string } | null) {
  const wrangler = startWrangler({
    root: ROOT,
    port: settings.devPort,
    vars: workerVars(settings, originUrl, l2),
    print: (line) => console.log(line),
  });
  steps.push({ name: "wrangler", stop: wrangler.stop });
  log(`wrangler dev starting on http://127.0.0.1:${settings.devPort} (pid ${wrangler.pid})`);
  return wrangler;
}

function printBanner(settings: Settings, originUrl: string, l2: { redisPort: number; url: string } | null, health: string) {
  const site = `http://localhost:${settings.devPort}`;
  const l2Line = l2 ? `ON: redis-server :${l2.redisPort} via gateway ${l2.url} (worker: ${health})` : "OFF: pages come from L1 and the origin only";
  console.log(
    [
      "",
      "──────────────────────────────────────────────────────────────────────",
      " The product-page tier is up",
      `   shop home         ${site}/`,
      `   a product         ${site}/products/p-000001`,
      `   hostile title     ${site}/products/p-000003   (markup in the title, must show as text)`,
      `   origin counters   ${originUrl}/__admin/counters`,
      `   L2                ${l2Line}`,
      ...(settings.isolates > 1
        ? [
            `   isolates          ${Array.from({ length: settings.isolates }, (_, k) => `:${isolatePort(settings, k)}`).join(" ")} (each its own L1)`,
            `   the fleet         npm run fleet -- --local${settings.fleetPort === LOCAL_RECORDER_PORT ? "" : ` http://127.0.0.1:${settings.fleetPort}`} --since 15m`,
          ]
        : []),
      "",
      " Change a price at the origin (it then asks the tier to purge the page):",
      `   curl -X POST ${originUrl}/__admin/products/p-000001 -H 'content-type: application/json' -d '{"price": 999}'`,
      "",
      " Ctrl-C stops everything.",
      "──────────────────────────────────────────────────────────────────────",
      "",
    ].join("\n"),
  );
}

async function main(): Promise<void> {
  parseCommandLine(COMMAND, USAGE, { options: { help: { type: "boolean", short: "h" } } });
  handleSignals();
  const settings = readSettings();
  await requireFreePorts([
    { port: settings.devPort, what: settings.isolates > 1 ? "the first isolate" : "the worker, wrangler dev", env: "DEV_PORT" },
    ...Array.from({ length: settings.isolates - 1 }, (_, k) => ({ port: isolatePort(settings, k + 1), what: `isolate ${k + 2}`, env: "DEV_PORT" })),
    ...(settings.isolates > 1 ? [{ port: settings.fleetPort, what: "the fleet recorder", env: "FLEET_PORT" }] : []),
    { port: settings.originPort, what: "the demo origin", env: "ORIGIN_PORT" },
    ...("bin" in settings.redis ? [{ port: settings.gatewayPort, what: "the Upstash REST gateway", env: "GATEWAY_PORT" }] : []),
  ]);

  // A Ctrl-C during start-up is already stopping what started: start nothing more.
  const { originUrl, l2 } = await startServers(settings);
  if (stopping) return;
  if (l2) await buildFilter(settings, originUrl, l2);
  if (stopping) return;
  if (settings.isolates > 1) {
    await startIsolates(settings, originUrl, l2);
    if (stopping) return;
    // Miniflare answers once workerd is up: one look at each isolate's /healthz says whether it is configured.
    for (let k = 0; k < settings.isolates; k++) {
      const health = await fetch(`http://127.0.0.1:${isolatePort(settings, k)}/healthz`);
      if (!health.ok) throw new UnhealthyWorker(`isolate ${k + 1}`, await health.text());
    }
    printBanner(settings, originUrl, l2, `breaker ${await l2StateOf(`http://127.0.0.1:${settings.devPort}`, settings.purgeToken)}`);
    return;
  }
  const wrangler = startWorker(settings, originUrl, l2);

  // Wrangler dying on its own takes the whole stack down: a tier without its worker is no use.
  void wrangler.exited.then((how) => {
    if (stopping) return;
    warn(`wrangler dev stopped by itself (${how}): shutting everything down`);
    void shutdown(1);
  });

  const health = await waitForHealthz(`http://127.0.0.1:${settings.devPort}/healthz`, HEALTH_TIMEOUT_MS, wrangler.exited);
  if (!health.ok) throw new UnhealthyWorker("the worker", health.body, ".dev.vars");
  printBanner(settings, originUrl, l2, `breaker ${await l2StateOf(`http://127.0.0.1:${settings.devPort}`, settings.purgeToken)}`);
}

/**
 * The worker answered /healthz with an error: its configuration (README,
 * "Configuration"), every bad setting named in the worker's own words.
 */
class UnhealthyWorker extends Error {
  /** `settingsFrom`: where the worker's settings come from, when the operator sets them. */
  constructor(who: string, body: string, settingsFrom?: string) {
    let error: unknown;
    try {
      error = (JSON.parse(body) as { error?: unknown }).error;
    } catch {
      // not the JSON /healthz answers: say what came
    }
    super(
      typeof error === "string" && error.startsWith("Configuration error")
        ? `${who} cannot run: ${error.replace(/\.? See the README's configuration reference\.$/, "")}${settingsFrom ? ` (set in ${settingsFrom}: README, "Configuration")` : ""}`
        : `${who} is up but unhealthy: ${body}`,
    );
  }
}

main().catch((err: unknown) => {
  if (stopping) return; // a signal or wrangler's exit is already taking us down
  if (err instanceof SettingsError) {
    // Nothing started yet: the settings, and how to see them all.
    warn(`${err.message} (${COMMAND} -- --help lists its settings)`);
    process.exit(1);
  }
  warn(err instanceof UnhealthyWorker ? err.message : `cannot run the dev stack: ${err instanceof Error ? err.message : String(err)}`);
  void shutdown(1);
});
