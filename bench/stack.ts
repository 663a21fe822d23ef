// What the benchmark runs against: the worker bundle, the stack in a process
// of its own (redis-server + Upstash REST gateway + demo origin,
// dev/harness/stackProcess.ts) and Miniflare instances serving the bundle
// over real HTTP on loopback; and what the benchmarks read from them (Redis's
// own counts, the known-ids filter's build, the workers' logs).
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { promisify } from "node:util";
import { Redis } from "ioredis";
import { buildBundle as buildHarnessBundle, startBundle } from "../dev/harness/bundle";
import { OriginAdmin } from "../dev/harness/originAdmin";
import { forkStack, type GatewayAction, type RedisAction, type ShardEndpoints, type StackProcessOptions } from "../dev/harness/stackProcess";
import { recordBuild } from "./lib/report";

/** The bench's own build of the worker (dev/harness/bundle.ts), not the tests' `.wrangler/test-bundle`. */
export const BUNDLE_DIR = resolve(".wrangler/bench-bundle");

const execFileAsync = promisify(execFile);

const GATEWAY_TOKEN = "bench-gateway-token";
/** The shop's public address the benchmarked workers put in canonical URLs (PUBLIC_URL is required). */
export const BENCH_PUBLIC_URL = "https://shop.example";

/** Bundles the worker exactly as `wrangler deploy` would, and notes it for the report. */
export async function buildBundle(): Promise<void> {
  recordBuild();
  await buildHarnessBundle(BUNDLE_DIR);
}

// ---------------------------------------------------------------- servers

export interface Servers {
  originUrl: string;
  gatewayUrl: string;
  redisPort: number;
  /** The servers process (origin + gateway; redis-server is its child). */
  pid: number;
  /** The worker's bindings pointing at these servers. */
  bindings: Record<string, string>;
  /** The demo origin's counters and faults. */
  origin: OriginAdmin;
  /**
   * Empties L2 but for the known-ids filter (`pp:v1:kid:*`, built once per
   * run by buildKnownIdsFilter), so that a scenario starts from the state it
   * describes, whatever ran before.
   */
  resetL2(): Promise<void>;
  /** Redis command calls since the last reset (INFO commandstats), by command name. */
  redisCalls(): Promise<Record<string, number>>;
  resetRedisStats(): Promise<void>;
  /** How many of `keys` exist in L2 (to check that fills were really written). */
  countKeys(keys: string[]): Promise<number>;
  /** Gateway notes (connection state changes) received so far. */
  readonly logs: string[];
  /**
   * Does this to redis-server (faults): `pause` (SIGSTOP: connections stay
   * open, nothing answers), `resume` (SIGCONT), `kill` (SIGKILL), `restart`
   * (a fresh, empty server on the same port; resolves once this process's
   * own connection to it works again). The harness's calls (redisCalls,
   * resetL2...) must not be made while it is paused or down.
   */
  redisControl(action: RedisAction): Promise<void>;
  /**
   * Does this to the gateway in front of redis-server: `{action: "latency",
   * ms}` holds every Redis call `ms` first from now on (a slow or distant
   * Redis; 0 again for none), `down` makes it unreachable (every connection
   * reset) until `up`.
   */
  gatewayControl(control: GatewayAction): Promise<void>;
  close(): Promise<void>;
}

export type ServersSettings = Pick<StackProcessOptions, "catalogSize" | "latencyMs" | "jitterMs" | "redisLatencyMs">;

export async function startServers(settings: ServersSettings): Promise<Servers> {
  const started = await forkStack({ ...settings, gatewayToken: GATEWAY_TOKEN });
  const { child, ready, logs } = started;
  const redis = await connectStats(ready.redisPort);

  return {
    originUrl: ready.originUrl,
    gatewayUrl: ready.gatewayUrl,
    redisPort: ready.redisPort,
    pid: child.pid!,
    bindings: {
      ORIGIN_URL: ready.originUrl,
      PUBLIC_URL: BENCH_PUBLIC_URL,
      UPSTASH_REDIS_REST_URL: ready.gatewayUrl,
      UPSTASH_REDIS_REST_TOKEN: GATEWAY_TOKEN,
      PURGE_TOKEN: "bench-purge-token",
      // The location tier off unless a benchmark measures it (bench:soak
      // --location, bench:peers' tier-location, each with a location cache of
      // its own: dev/harness/locationServer.ts): its lookups and puts are
      // subrequests, which cost the isolate CPU, and the rows that compare the
      // tier with its earlier runs and with the peers are taken without it.
      LOCATION_CACHE: "off",
    },
    logs,
    origin: new OriginAdmin(ready.originUrl),
    // A throw-away redis of our own: a full SCAN here is the harness resetting, not a code path of the tier.
    resetL2: async () => {
      let cursor = "0";
      do {
        const [next, keys] = await redis.scan(cursor, "COUNT", 1000);
        const doomed = keys.filter((key) => !key.startsWith(KNOWN_IDS_PREFIX));
        if (doomed.length) await redis.unlink(...doomed);
        cursor = next;
      } while (cursor !== "0");
    },
    redisCalls: async () => parseCommandStats(await redis.info("commandstats")),
    resetRedisStats: async () => void (await redis.config("RESETSTAT")),
    countKeys: async (keys) => (keys.length ? redis.exists(...keys) : 0),
    redisControl: async (action) => {
      await started.control(0, action);
      if (action === "restart") await untilPong(redis);
    },
    gatewayControl: (control) => started.gatewayControl(0, control),
    close: async () => {
      redis.disconnect();
      await started.close();
    },
  };
}

/** A demo origin alone in a servers process: each bench:peers system's own, so that its counters and catalog changes are its alone. */
export async function startOrigin(settings: ServersSettings): Promise<{ url: string; pid: number; admin: OriginAdmin; close(): Promise<void> }> {
  const started = await forkStack({ ...settings, gatewayToken: GATEWAY_TOKEN, shards: 0 });
  return { url: started.ready.originUrl, pid: started.child.pid!, admin: new OriginAdmin(started.ready.originUrl), close: () => started.close() };
}

/**
 * Several L2 shards for the `shard-down` scenario: `count` redis-server +
 * gateway pairs in a servers process of their own (no demo origin: the main
 * one serves), to be named in the worker's UPSTASH_REDIS_SHARDS.
 */
export interface ShardSet {
  shards: Array<ShardEndpoints & { name: string }>;
  /** The shards' servers process (its redis-servers are its children). */
  pid: number;
  /** UPSTASH_REDIS_SHARDS (JSON), the ring's members in order. */
  bindings: Record<string, string>;
  /** As Servers.redisControl, for shard `index`. */
  control(index: number, action: RedisAction): Promise<void>;
  /** Redis command calls of shard `index` since its last reset (INFO commandstats). */
  redisCalls(index: number): Promise<Record<string, number>>;
  resetRedisStats(): Promise<void>;
  close(): Promise<void>;
}

export async function startShards(count: number, settings: ServersSettings): Promise<ShardSet> {
  const started = await forkStack({ ...settings, gatewayToken: GATEWAY_TOKEN, shards: count, origin: false });
  const endpoints = (started.ready.shards ?? []).map((shard, i) => ({ ...shard, name: `shard-${i + 1}` }));
  const links: Redis[] = [];
  try {
    for (const shard of endpoints) links.push(await connectStats(shard.redisPort));
  } catch (err) {
    for (const link of links) link.disconnect();
    await started.close();
    throw err;
  }
  return {
    shards: endpoints,
    pid: started.child.pid!,
    bindings: { UPSTASH_REDIS_SHARDS: JSON.stringify(endpoints.map((shard) => ({ name: shard.name, url: shard.gatewayUrl, token: GATEWAY_TOKEN }))) },
    control: async (index, action) => {
      await started.control(index, action);
      if (action === "restart") await untilPong(links[index]!);
    },
    redisCalls: async (index) => parseCommandStats(await links[index]!.info("commandstats")),
    resetRedisStats: async () => void (await Promise.all(links.map((link) => link.config("RESETSTAT")))),
    close: async () => {
      for (const link of links) link.disconnect();
      await started.close();
    },
  };
}

/** The harness's own connection to a redis-server, for its statistics and resets. */
async function connectStats(port: number): Promise<Redis> {
  const redis = new Redis({ port, host: "127.0.0.1", maxRetriesPerRequest: 1, lazyConnect: true });
  redis.on("error", () => undefined); // failures surface through the commands' rejections
  await redis.connect();
  return redis;
}

/** Waits (bounded) until `redis` answers again, after its server was restarted. */
async function untilPong(redis: Redis): Promise<void> {
  const giveUpAt = Date.now() + 10_000;
  for (;;) {
    try {
      await redis.ping();
      return;
    } catch (err) {
      if (Date.now() > giveUpAt) throw err;
      await new Promise((done) => setTimeout(done, 100));
    }
  }
}

/** Where the known-ids filter lives in Redis (src/knownIds/keys.ts). */
const KNOWN_IDS_PREFIX = "pp:v1:kid:";

export interface FilterBuild {
  built: boolean;
  /** The rebuild tool's summary, or why it failed. */
  detail: string;
  seconds: number;
}

/**
 * Builds the known-ids filter in L2 with the project's own tool
 * (dev/filter-rebuild.ts), as an operator would after a deploy, so that the
 * worker checks ids against it as in production. A failure is reported, not
 * fatal: the worker then lets every id through, and the run says so.
 */
export async function buildKnownIdsFilter(servers: Servers): Promise<FilterBuild> {
  const started = performance.now();
  const args = ["--import", "tsx", "dev/filter-rebuild.ts", "--origin", servers.originUrl, "--redis-url", servers.gatewayUrl, "--token", GATEWAY_TOKEN];
  const seconds = () => Math.round((performance.now() - started) / 100) / 10;
  try {
    const { stdout } = await execFileAsync(process.execPath, args, { timeout: 120_000, maxBuffer: 4 * 1024 * 1024 });
    return {
      built: true,
      detail: stdout
        .trim()
        .split("\n")
        .map((line) => line.replace(/\s+/g, " ").trim())
        .join("; "),
      seconds: seconds(),
    };
  } catch (err) {
    const { stderr, message } = err as { stderr?: string; message: string };
    return { built: false, detail: (stderr?.trim().split("\n").pop() ?? message).slice(0, 300), seconds: seconds() };
  }
}

/** The harness's own commands inside a measured window (INFO to read these stats), left out of the figures. */
const HARNESS_COMMANDS = new Set(["info", "config", "config|resetstat"]);

/** `cmdstat_mget:calls=12,usec=...` lines → {mget: 12}. */
function parseCommandStats(info: string): Record<string, number> {
  const calls: Record<string, number> = {};
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (!HARNESS_COMMANDS.has(match[1]!)) calls[match[1]!] = Number(match[2]);
  }
  return calls;
}

// ---------------------------------------------------------------- workers

export interface WorkerInstance {
  /** Base URL, e.g. http://127.0.0.1:41234 */
  url: string;
  /** The worker's V8 inspector (a DevTools websocket URL), when started with `inspectorPort`. */
  inspector?: string;
  close(): Promise<void>;
}

/** What the instances logged: a total, and each distinct line (per scenario) with how often it came. */
export interface WorkerLogs {
  count: number;
  /** `scenario: line` → times seen; at most MAX_DISTINCT_LOG_LINES entries. */
  distinct: Map<string, number>;
  /** The scenario running now, to label the lines. */
  scenario: string;
  /** Called with every line as it comes (the soak counts error lines per window). */
  onLine?: (line: string) => void;
}

const MAX_DISTINCT_LOG_LINES = 50;

/**
 * One Miniflare instance: its own workerd process, so its own isolate and
 * L1, serving HTTP on a loopback port the OS picks. Its console output is
 * kept (bounded) instead of printed, so that it cannot garble the progress
 * line, and so that the report can say whether the worker logged errors.
 */
/**
 * How an instance is reached. `port`: the port to serve on (a restart keeps
 * its instance's), else one the OS picks. Its Cache API is Miniflare's own,
 * in memory, unless the process sends it to a location server
 * (dev/harness/bundle.ts, useLocationServer: bench:soak's `--location`).
 */
export interface WorkerOptions {
  inspectorPort?: number;
  port?: number;
  /** The local fleet recorder's points address (dev/fleet/recorder.ts): where the FLEET binding delivers. */
  fleetPointsUrl?: string;
}

export async function startWorker(bindings: Record<string, string>, logs: WorkerLogs, options: WorkerOptions = {}): Promise<WorkerInstance> {
  const keep = (line: string) => {
    logs.count++;
    logs.onLine?.(line);
    // Timestamps and counters would make every line distinct: without them, repeats collapse into a count.
    const text = line
      .replace(/"(ts|time|at)":"[^"]*",?/g, "")
      .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, "<time>")
      .replace(/":\d+(\.\d+)?/g, '":<n>');
    const key = `${logs.scenario}: ${text.slice(0, 500)}`;
    const seen = logs.distinct.get(key);
    // Errors and warnings keep a room of their own, so routine lines cannot crowd them out.
    const room = /error|warn|uncaught|exception/i.test(text) ? MAX_DISTINCT_LOG_LINES * 2 : MAX_DISTINCT_LOG_LINES;
    if (seen !== undefined) logs.distinct.set(key, seen + 1);
    else if (logs.distinct.size < room) logs.distinct.set(key, 1);
  };
  const { mf, url } = await startBundle({
    bundleDir: BUNDLE_DIR,
    bindings,
    onLine: (line) => line.trim() && keep(line),
    port: options.port ?? 0,
    ...(options.inspectorPort === undefined ? {} : { inspectorPort: options.inspectorPort }),
    ...(options.fleetPointsUrl === undefined ? {} : { fleetPointsUrl: options.fleetPointsUrl }),
    // The benchmark talks to loopback only.
    cf: false,
  });
  const worker: WorkerInstance = { url: url.origin, close: () => mf.dispose() };
  if (options.inspectorPort === undefined) return worker;
  try {
    // workerd lists one target per worker at /json; ours (unnamed) is `core:user:`.
    const base = String(await mf.getInspectorURL())
      .replace(/^ws/, "http")
      .replace(/\/$/, "");
    const targets = (await (await fetch(`${base}/json`)).json()) as { id: string; webSocketDebuggerUrl: string }[];
    worker.inspector = targets.find((target) => target.id === "core:user:")?.webSocketDebuggerUrl;
    return worker;
  } catch (err) {
    await mf.dispose().catch(() => undefined);
    throw err;
  }
}

// ---------------------------------------------------------------- versions

/** Versions of the tools under test, read from their installed package.json. */
export function toolVersions(): Record<string, string> {
  const version = (name: string): string => {
    try {
      return JSON.parse(readFileSync(resolve("node_modules", name, "package.json"), "utf8")).version;
    } catch {
      return "unknown";
    }
  };
  return { workerd: version("workerd"), wrangler: version("wrangler"), miniflare: version("miniflare") };
}

// ---------------------------------------------------------------- a whole stack

type OnCleanup = (name: string, stop: () => Promise<void>) => () => Promise<void>;

/**
 * The set-up of every benchmark but bench:peers: the bundle and the servers
 * at once, then the known-ids filter; the servers handed to `onCleanup` as
 * soon as they run.
 */
export async function startStack(settings: ServersSettings, onCleanup: OnCleanup): Promise<{ servers: Servers; filter: FilterBuild }> {
  const starting = startServers(settings).then((servers) => (onCleanup("servers", () => servers.close()), servers));
  const [built, started] = await Promise.allSettled([buildBundle(), starting]);
  if (started.status === "rejected") throw started.reason;
  if (built.status === "rejected") throw new Error(`wrangler deploy --dry-run failed: ${String(built.reason?.stderr ?? built.reason)}`);
  const servers = started.value;
  return { servers, filter: await buildKnownIdsFilter(servers) };
}

/**
 * `count` workers (with their inspectors when `inspect`), each handed to
 * `onCleanup` as soon as it runs; `stop` stops them all. `ports`: instance i
 * serves on ports[i] (a restart).
 */
export async function startWorkers(
  count: number,
  bindings: Record<string, string>,
  logs: WorkerLogs,
  onCleanup: OnCleanup,
  inspect: boolean,
  where: { ports?: readonly number[]; fleetPointsUrl?: string } = {},
): Promise<{ workers: WorkerInstance[]; stop: () => Promise<void> }> {
  const workers: WorkerInstance[] = [];
  const stops: (() => Promise<void>)[] = [];
  const stop = async () => void (await Promise.all(stops.map((s) => s())));
  try {
    for (let i = 0; i < count; i++) {
      const port = where.ports?.[i];
      const worker = await startWorker(bindings, logs, {
        ...(inspect ? { inspectorPort: 0 } : {}),
        ...(port === undefined ? {} : { port }),
        ...(where.fleetPointsUrl === undefined ? {} : { fleetPointsUrl: where.fleetPointsUrl }),
      });
      stops.push(onCleanup(`worker ${worker.url}`, () => worker.close()));
      workers.push(worker);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { workers, stop };
}
