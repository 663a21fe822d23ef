// The child processes of `npm run dev`, the tests and the benchmarks
// (redis-server, wrangler, Nginx, Varnish, the benchmarks' servers process):
// waiting for exit with a bound, killing a whole process group, relaying
// output line by line, and killing whatever is still running when this
// process exits.
import type { ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import type { Readable } from "node:stream";

export function isRunning(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

/** Resolves true once the child has exited, false if it is still running after `ms`. */
export function waitForExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (!isRunning(child)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/**
 * SIGTERM, then SIGKILL (to its whole group with `group`: a child spawned
 * with `detached: true`) if it is still running after `ms`; resolves once it
 * has exited (or `ms` more have passed), and stops tracking it.
 */
export async function stopChild(child: ChildProcess, ms: number, group = false): Promise<void> {
  if (isRunning(child)) {
    child.kill("SIGTERM");
    if (!(await waitForExit(child, ms))) {
      if (group && child.pid !== undefined) signalGroup(child.pid, "SIGKILL");
      else child.kill("SIGKILL");
      await waitForExit(child, ms);
    }
  }
  forget(child);
}

/**
 * Sends `signal` to the process group led by `pid` (a child spawned with
 * `detached: true`). False when the group is gone. The group, not the pid,
 * because wrangler leaves workerd processes behind if only it is killed.
 */
export function signalGroup(pid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    return false; // ESRCH: nobody left in the group
  }
}

/** Resolves true once no process is left in the group, false after `ms`. */
export async function waitForGroupGone(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (signalGroup(pid, 0)) {
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return true;
}

/** Calls `onLine` for each line of `stream` (no trailing newline). */
export function forEachLine(stream: Readable | null, onLine: (line: string) => void): void {
  if (!stream) return;
  createInterface({ input: stream, crlfDelay: Infinity }).on("line", onLine);
}

/** Keeps the last few KB a child printed, for error messages, and drains its pipes. */
export function captureTail(child: ChildProcess, maxChars = 4000): () => string {
  let text = "";
  const keep = (chunk: Buffer) => {
    text = (text + chunk.toString("utf8")).slice(-maxChars);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  return () => text.trim();
}

/** Every child we spawned that may still run, with how to kill it (and its group) for good. */
const live = new Map<ChildProcess, () => void>();
let killedAtExit = false;

/**
 * Registers `child` for killEverything() from the moment it is spawned, so that
 * even a Ctrl-C in the middle of start-up leaves nothing behind. `group`: the
 * child leads its own process group (spawned detached) whose members die too.
 */
export function track(child: ChildProcess, group: boolean): void {
  const pid = child.pid;
  if (pid === undefined) return;
  if (!killedAtExit) {
    // Whatever way this process exits (a crash, a failed test file), no child outlives it.
    process.once("exit", killEverything);
    killedAtExit = true;
  }
  const kill = () => {
    if (group) signalGroup(pid, "SIGKILL");
    else if (isRunning(child)) child.kill("SIGKILL");
  };
  live.set(child, kill);
  // Once a lone child has exited, its pid may be reused: forget it. A group may
  // outlive its leader (wrangler's workerd), so it stays until the end.
  if (!group) child.once("exit", () => live.delete(child));
}

/** Stops tracking `child`: it (and its group) is known to be gone. */
export function forget(child: ChildProcess): void {
  live.delete(child);
}

/** SIGKILL to everything still tracked: the last resort on a forced or crashing exit. */
export function killEverything(): void {
  for (const kill of live.values()) kill();
  live.clear();
}
