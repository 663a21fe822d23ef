// wrk, the load generator of every throughput and latency figure (C, far
// faster than anything it measures here): installed from Debian's packages
// when missing, run as a child with a Lua script whose done() prints one
// "<MARKER> {json}" line, killed on abort and when this process exits.
// runZipfWrk is the soak's and the profile's Zipf load; bench:peers drives
// the same script (bench/zipf.lua) through runWrk, with its constant rate.
import { execFileSync, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { resolve } from "node:path";

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

export interface WrkRun {
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
export async function runWrk<T>(run: WrkRun): Promise<{ summary: T; cpuSeconds: number | null }> {
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

/** The wrk script of every Zipf load (bench:soak, bench:profile, bench:peers). */
export const ZIPF_LUA = resolve("bench/zipf.lua");

/** zipf.lua's inputs every run gives: the paths file, the targets (thread i → target i mod n), the seed. */
export function zipfEnv(pathsFile: string, targets: readonly string[], seed: number): Record<string, string> {
  return { ZIPF_PATHS: pathsFile, ZIPF_TARGETS: targets.map((t) => new URL(t).host).join(","), ZIPF_SEED: String(seed) };
}

export interface WrkFigures {
  requests: number;
  durationUs: number;
  p50Us: number;
  p99Us: number;
  maxUs: number;
  statuses: Record<string, number>;
  errors: { connect: number; read: number; write: number; status: number; timeout: number };
}

/** Writes the "rank path" lines zipf.lua reads, hottest first. */
export function writePathsFile(file: string, paths: readonly { rank: number; path: string }[]): void {
  writeFileSync(file, paths.map(({ rank, path }) => `${rank} ${path}\n`).join(""));
}

export interface ZipfRun {
  /** Base URLs: wrk thread i sends to targets[i mod n]. */
  targets: string[];
  seconds: number;
  connections: number;
  /** Varies per run, so that runs do not replay one sequence. */
  seed: number;
  pathsFile: string;
  signal?: AbortSignal;
}

/** One wrk run of `seconds` of Zipf traffic (2 threads, 2 s timeout): zipf.lua's figures. */
export async function runZipfWrk(run: ZipfRun): Promise<WrkFigures> {
  const { summary } = await runWrk<WrkFigures>({
    script: ZIPF_LUA,
    url: `${run.targets[0]}/`,
    threads: 2,
    connections: run.connections,
    seconds: run.seconds,
    timeoutS: 2,
    env: { ...zipfEnv(run.pathsFile, run.targets, run.seed), ZIPF_STATUSES: "1" },
    marker: "ZIPF",
    signal: run.signal,
  });
  return summary;
}
