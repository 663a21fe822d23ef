// wrk, the load generator of every throughput and latency figure (C, far
// faster than anything it measures here): installed from Debian's packages
// when missing, run as a child with a Lua script whose done() prints one
// "<MARKER> {json}" line, killed on abort and when this process exits.
// runZipfWrk is the soak's and the profile's Zipf load (and, uniform, the
// soak's crawler flood); wrkPhase the closed
// loop or constant rate (zipf.lua's delay()) of `npm run bench` and bench:peers.
import { execFileSync, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { productId } from "../../dev/origin/catalog";
import { shuffledIndexes } from "../../dev/harness/random";

/** The seed of the rank → id shuffle: every benchmark's hot products are the same. */
const SHUFFLE_SEED = 42;

/** wrk from Debian's packages when it is missing (as .ci/run does for redis-server). */
export function ensureWrk(): void {
  try {
    execFileSync("sh", ["-c", "command -v wrk"], { stdio: "ignore" });
    return;
  } catch {
    console.log("wrk is missing: installing it (apt-get install -y wrk)");
  }
  const apt = (...a: string[]) => execFileSync("apt-get", a, { stdio: "inherit", env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
  try {
    apt("install", "-y", "-qq", "wrk");
  } catch {
    apt("update", "-qq");
    apt("install", "-y", "-qq", "wrk");
  }
}

interface WrkRun {
  /** The Lua script (-s). */
  script: string;
  /** wrk's URL argument: the script may send elsewhere (thread.addr). */
  url: string;
  threads: number;
  connections: number;
  seconds: number;
  /** A request unanswered this long counts as a timeout (--timeout). */
  timeoutS: number;
  /** The script's inputs. */
  env: Record<string, string>;
  /** The prefix of the script's summary line: "PEERS" reads `PEERS {json}`. */
  marker: string;
  signal?: AbortSignal;
}

/**
 * Runs wrk once: the JSON of the script's summary line, and the CPU wrk used
 * (user + system seconds, from bash's `times`: wrk has exited by the time a
 * caller could read /proc, so its CPU is taken from the shell that waited for it).
 */
async function runWrk<T>(run: WrkRun): Promise<{ summary: T; cpuSeconds: number | null }> {
  const args = [`-t${run.threads}`, `-c${run.connections}`, `-d${run.seconds}s`, "--timeout", `${run.timeoutS}s`, "-s", run.script, run.url];
  // In a process group of its own, so that a kill reaches wrk and not only the shell.
  const child = spawn("bash", ["-c", 'wrk "$@"; code=$?; times >&2; exit $code', "wrk", ...args], {
    env: { ...process.env, ...run.env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const kill = () => {
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {
      // gone already
    }
  };
  process.once("exit", kill);
  run.signal?.addEventListener("abort", kill, { once: true });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk));
  const code = await new Promise<number | null>((done) => child.on("close", done));
  process.off("exit", kill);
  run.signal?.removeEventListener("abort", kill);
  const line = new RegExp(`^${run.marker} (\\{.*\\})$`, "m").exec(output);
  if (!line) throw new Error(`wrk gave no figures (exit ${code}; wrk ${args.join(" ")}): ${output.slice(-600)}`);
  // `times`: the shell's own user/system time, then its children's (wrk): "0m1.520s 0m0.410s".
  const times = [...output.matchAll(/^(\d+)m([\d.]+)s (\d+)m([\d.]+)s$/gm)].at(-1);
  const cpuSeconds = times ? Number(times[1]) * 60 + Number(times[2]) + Number(times[3]) * 60 + Number(times[4]) : null;
  return { summary: JSON.parse(line[1]!) as T, cpuSeconds };
}

/** zipf.lua's ZIPF_CLIENTS for a shop's traffic: each request from an address of its own in 10.5.0.0/16. */
const MANY_VISITORS = "10.5.*";

/** The wrk script of every Zipf load (bench:soak, bench:profile, bench:peers). */
const ZIPF_LUA = resolve("bench/lib/zipf.lua");

/** zipf.lua's inputs every run gives: the paths file, the targets (thread i → target i mod n), the seed. */
function zipfEnv(pathsFile: string, targets: readonly string[], seed: number): Record<string, string> {
  return { ZIPF_PATHS: pathsFile, ZIPF_TARGETS: targets.map((t) => new URL(t).host).join(","), ZIPF_SEED: String(seed) };
}

export interface WrkFigures {
  requests: number;
  durationUs: number;
  p50Us: number;
  p99Us: number;
  maxUs: number;
  /** Answers by status class ("2xx": n), or by code ("503": n) with `byCode`. */
  statuses: Record<string, number>;
  /** The same per wrk thread, in thread order: per client with `clients: "A.B.C."` (thread i is A.B.C.i). */
  threads: Record<string, number>[];
  errors: { connect: number; read: number; write: number; status: number; timeout: number };
  /** With `byCode`: 429 and 503 answers without a Retry-After header. */
  noRetryAfter: number;
  /** Paced: sends that left more than 1 ms after their time (no connection free), and the largest delay. */
  late: number;
  lateMaxMs: number;
}

export interface ZipfRun {
  /** Base URLs: wrk thread i sends to targets[i mod n]. */
  targets: string[];
  seconds: number;
  connections: number;
  /** Varies per run, so that runs do not replay one sequence. */
  seed: number;
  pathsFile: string;
  /** The draws' exponent: 1 (default) Zipf(1.0); 0 uniform over the paths file (the soak's crawler). */
  s?: number;
  /** A request unanswered this long is a timeout (default 2 s). */
  timeoutS?: number;
  /** Count answers by status code rather than by class, and the 503s without Retry-After. */
  byCode?: boolean;
  /**
   * Requests a second in all, on zipf.lua's schedule, for `seconds` (wrk
   * runs WRK.pacedStartMs before and WRK.pacedExtraS after it); undefined:
   * the closed loop. Paced, the figures' rate is `requests / seconds`.
   */
  rate?: number;
  /** wrk's threads (default 2): thread i sends to targets[i mod n], so a load over more targets needs as many. */
  threads?: number;
  /**
   * Who the load is (`CF-Connecting-IP`, the header the worker names a client
   * by): "A.B.C." each thread a client of its own (thread i, from 1, is
   * A.B.C.i); "A.B.C.D" every thread that one client; "A.B.*" each request
   * from an address of its own. Undefined: many visitors (MANY_VISITORS).
   */
  clients?: string;
  signal?: AbortSignal;
}

/** One wrk run of `seconds` of Zipf traffic (2 threads, 2 s timeout unless told): zipf.lua's figures. */
export async function runZipfWrk(run: ZipfRun): Promise<WrkFigures> {
  const { summary } = await runWrk<WrkFigures>({
    script: ZIPF_LUA,
    url: `${run.targets[0]}/`,
    threads: run.threads ?? WRK.threads,
    connections: run.connections,
    seconds: run.rate ? run.seconds + WRK.pacedExtraS : run.seconds,
    timeoutS: run.timeoutS ?? 2,
    env: {
      ...zipfEnv(run.pathsFile, run.targets, run.seed),
      ZIPF_STATUSES: run.byCode ? "codes" : "1",
      ZIPF_S: String(run.s ?? 1),
      // Unless told otherwise, many visitors: each request from an address of its own (src/http/client.ts names a client by its address, and overload shares cold work among them).
      ZIPF_CLIENTS: run.clients ?? MANY_VISITORS,
      ...(run.rate ? pacedEnv(run.rate, run.seconds, run.threads) : {}),
    },
    marker: "ZIPF",
    signal: run.signal,
  });
  return summary;
}

// ---------------------------------------------------------------- phases (closed loop or paced)

/**
 * How wrk runs: its threads; how long a request may go unanswered before it
 * is a timeout (an error); and, paced, how long after wrk starts the
 * schedule begins (both threads loaded) and how much longer than the
 * schedule wrk runs (the last answers).
 */
const WRK = { threads: 2, timeoutS: 5, pacedStartMs: 1200, pacedExtraS: 3 } as const;

/** What zipf.lua's done() prints, paced. */
interface PacedFigures {
  requests: number;
  durationUs: number;
  bytes: number;
  p50Us: number;
  p99Us: number;
  maxUs: number;
  meanUs: number;
  errors: { connect: number; read: number; write: number; status: number; timeout: number };
  late: number;
  lateMaxMs: number;
  sent: number;
}

/** One wrk run's figures. */
export interface Phase {
  seconds: number;
  connections: number;
  /** The offered rate (paced), or null (closed loop). */
  askedRate: number | null;
  requests: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Answers ≥ 400 plus socket errors and timeouts. */
  errors: number;
  errorKinds: Record<string, number>;
  /** Paced: sends that left more than 1 ms after their time (no connection free), and the largest delay. */
  late: number;
  lateMaxMs: number;
  /** Paced: requests sent but neither answered nor failed when wrk stopped (WRK.pacedExtraS after the schedule's end). */
  unanswered: number;
  bytes: number;
  /** CPU seconds wrk used (null: not known, or not wrk). */
  wrkCpuS: number | null;
}

/**
 * The request sequences: a file of "rank path" lines for the catalog's Zipf
 * ranks (the rank → id mapping shuffled with SHUFFLE_SEED), minus the
 * coldest ranks (1 by default), left cold for a herd or cold products; and
 * one-line files for single paths.
 */
export class Workload {
  readonly indexes: Uint32Array;
  readonly zipfFile: string;
  /** The same draws restricted to the walked ranks: every page cached. */
  readonly cachedFile: string;

  constructor(
    private readonly dir: string,
    readonly catalogSize: number,
    readonly walkRanks = 0,
    /** The coldest ranks left out of every draw (still cold when the herd or the cold products ask for them). */
    coldRanks = 1,
  ) {
    this.indexes = shuffledIndexes(catalogSize, SHUFFLE_SEED);
    this.zipfFile = join(dir, "zipf-paths.txt");
    this.cachedFile = join(dir, "zipf-cached-paths.txt");
    const lines: string[] = [];
    for (let rank = 1; rank <= catalogSize - coldRanks; rank++) lines.push(`${rank} /products/${productId(this.indexes[rank - 1]!)}\n`);
    writeFileSync(this.zipfFile, lines.join(""));
    writeFileSync(this.cachedFile, lines.slice(0, walkRanks).join(""));
  }

  /** The product pages of the walked ranks, hottest first. */
  walkPaths(): string[] {
    return Array.from({ length: Math.min(this.walkRanks, this.catalogSize - 1) }, (_, i) => `/products/${productId(this.indexes[i]!)}`);
  }

  /** The product of Zipf rank `rank` (1: the most popular). */
  idOfRank(rank: number): string {
    return productId(this.indexes[rank - 1]!);
  }

  /** The most popular product (rank 1). */
  hotId(): string {
    return productId(this.indexes[0]!);
  }

  /** The coldest rank's product: never drawn, so cold when the herd asks for it. */
  coldId(): string {
    return productId(this.indexes[this.catalogSize - 1]!);
  }

  /** A paths file that always sends `path`. */
  single(path: string): string {
    const file = join(this.dir, `single-${path.replace(/[^a-z0-9]+/gi, "_")}.txt`);
    writeFileSync(file, `1 ${path}\n`);
    return file;
  }
}

export interface PhaseSpec {
  targets: string[];
  connections: number;
  seconds: number;
  /** Requests a second in all (paced), or undefined for the closed loop. */
  rate?: number;
  paths: string;
  /** Each phase has its own seed: every system gets the same draws in the same phase. */
  seed: number;
  signal?: AbortSignal;
}

/** CLOCK_MONOTONIC in ms, the clock of zipf.lua's schedule (libuv's hrtime is CLOCK_MONOTONIC on Linux). */
const monotonicMs = () => Number(process.hrtime.bigint() / 1_000_000n);

/** zipf.lua's schedule: `rate` requests a second in all for `seconds`, from a start both threads share. */
function pacedEnv(rate: number, seconds: number, threads: number = WRK.threads): Record<string, string> {
  return {
    ZIPF_RATE: String(rate),
    ZIPF_THREADS: String(threads),
    ZIPF_T0: String(monotonicMs() + WRK.pacedStartMs),
    ZIPF_SPAN_MS: String(seconds * 1000),
  };
}

export async function wrkPhase(spec: PhaseSpec): Promise<Phase> {
  const rate = spec.rate ?? 0;
  const { summary: f, cpuSeconds } = await runWrk<PacedFigures>({
    script: ZIPF_LUA,
    url: `${spec.targets[0]}/`,
    threads: WRK.threads,
    connections: spec.connections,
    seconds: rate ? spec.seconds + WRK.pacedExtraS : spec.seconds,
    timeoutS: WRK.timeoutS,
    env: { ...zipfEnv(spec.paths, spec.targets, spec.seed), ...pacedEnv(rate, spec.seconds) },
    marker: "ZIPF",
    signal: spec.signal,
  });
  // Paced: the schedule's span (wrk's own duration holds the start and the tail).
  const seconds = rate ? spec.seconds : f.durationUs / 1e6;
  const e = f.errors;
  const errors = e.status + e.connect + e.read + e.write + e.timeout;
  const errorKinds = Object.fromEntries(
    Object.entries({ "HTTP ≥ 400": e.status, connect: e.connect, read: e.read, write: e.write, [`timeout (${WRK.timeoutS} s)`]: e.timeout }).filter(
      ([, n]) => n > 0,
    ),
  );
  return {
    seconds: Math.round(seconds * 100) / 100,
    connections: spec.connections,
    askedRate: spec.rate ?? null,
    requests: f.requests,
    rps: Math.round(f.requests / seconds),
    p50Ms: f.p50Us / 1000,
    p99Ms: f.p99Us / 1000,
    maxMs: f.maxUs / 1000,
    errors,
    errorKinds,
    late: f.late,
    lateMaxMs: Math.round(f.lateMaxMs),
    // wrk counts an answer ≥ 400 both as a request and as an error.
    unanswered: rate ? Math.max(0, f.sent - f.requests - (errors - e.status)) : 0,
    bytes: f.bytes,
    wrkCpuS: cpuSeconds,
  };
}
