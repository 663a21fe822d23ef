// wrk, the load generator of every throughput and latency figure (C, far
// faster than anything it measures here), with the Zipf script the benchmarks
// share (bench/soak/zipf.lua). Installed from Debian's packages when missing,
// as .ci/run does for redis-server.
import { execFileSync, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { resolve } from "node:path";

const ZIPF_LUA = resolve("bench/soak/zipf.lua");

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
  /** Called with a stop function while wrk runs (for Ctrl-C clean-up). */
  onStart?: (stop: () => void) => void;
}

/** One wrk run of `seconds` of Zipf traffic (2 threads); its figures from zipf.lua's done(). */
export async function runZipfWrk(run: ZipfRun): Promise<WrkFigures> {
  const env = { ...process.env, SOAK_PATHS: run.pathsFile, SOAK_TARGETS: run.targets.map((t) => new URL(t).host).join(","), SOAK_SEED: String(run.seed) };
  const wrk = spawn("wrk", ["-t2", `-c${run.connections}`, `-d${run.seconds}s`, "--timeout", "2s", "-s", ZIPF_LUA, `${run.targets[0]}/`], { env });
  run.onStart?.(() => void wrk.kill("SIGKILL"));
  let output = "";
  wrk.stdout.on("data", (chunk: Buffer) => (output += chunk));
  wrk.stderr.on("data", (chunk: Buffer) => (output += chunk));
  const code = await new Promise((done) => wrk.on("close", done));
  const line = /^SOAK (\{.*\})$/m.exec(output);
  if (!line) throw new Error(`wrk gave no figures (exit ${code}): ${output.slice(-600)}`);
  return JSON.parse(line[1]!) as WrkFigures;
}
