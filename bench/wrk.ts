// wrk for the benchmarks: installed from Debian's packages when missing, run
// as a child with a Lua script whose done() prints one "<MARKER> {json}"
// line, killed on abort and when this process exits. bench/soak/run.ts has
// its own copy of ensureWrk (written first); bench:peers uses this one.
import { execFileSync, spawn } from "node:child_process";

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

/** "debian/4.1.0-3+b2", or null when wrk is not there. */
export function wrkVersion(): string | null {
  try {
    // wrk -v prints its version and exits with 1.
    execFileSync("wrk", ["-v"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (err) {
    const out = `${(err as { stdout?: string }).stdout ?? ""}`;
    return /^wrk\s+(\S+)/m.exec(out)?.[1] ?? null;
  }
  return null;
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

/** Runs wrk once and returns the JSON of the script's summary line. */
export async function runWrk<T>(run: WrkRun): Promise<T> {
  const args = [`-t${run.threads}`, `-c${run.connections}`, `-d${run.seconds}s`, "--timeout", `${run.timeoutS}s`, "-s", run.script, run.url];
  const child = spawn("wrk", args, { env: { ...process.env, ...run.env }, stdio: ["ignore", "pipe", "pipe"] });
  const kill = () => void child.kill("SIGKILL");
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
  return JSON.parse(line[1]!) as T;
}
