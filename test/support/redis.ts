/**
 * A throw-away redis-server for tests: its own free port, no persistence, and
 * controls to simulate outages (kill, pause with SIGSTOP, restart on the same
 * port). Every wait is bounded, and any server still running when the test
 * process exits is killed.
 *
 * The binary is `redis-server` from PATH, or $REDIS_SERVER_BIN.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { tmpdir } from "node:os";
import { captureTail, isRunning, waitForExit } from "../../dev/run/children";
import { waitForPong } from "../../dev/run/redis";
import { freePort } from "./ports";

export interface RedisServer {
  port: number;
  /** Graceful stop (SIGTERM, then SIGKILL if it lingers). Idempotent. */
  stop(): Promise<void>;
  /** Freeze the process (SIGSTOP): connections stay open, nothing answers. */
  pause(): void;
  /** Undo pause() (SIGCONT). */
  resume(): void;
  /** Crash it (SIGKILL) and wait until it is gone. Idempotent. */
  kill(): Promise<void>;
  /** Kill it if running, then start a fresh, empty server on the same port. */
  restart(): Promise<void>;
}

const READY_TIMEOUT_MS = 10_000;
const EXIT_TIMEOUT_MS = 5_000;
const START_ATTEMPTS = 3;

/** Children still alive, killed on exit so a failing test run leaves none behind. */
const live = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

export async function startRedis(): Promise<RedisServer> {
  let lastError: unknown;
  // The free port may be taken between freePort() and redis binding it: retry.
  for (let attempt = 0; attempt < START_ATTEMPTS; attempt++) {
    const port = await freePort();
    try {
      return await control(port, await launch(port));
    } catch (err) {
      lastError = err;
    }
  }
  throw lastError;
}

async function control(port: number, first: ChildProcess): Promise<RedisServer> {
  let child = first;
  const kill = async () => {
    if (!isRunning(child)) return;
    child.kill("SIGKILL");
    await waitForExit(child, EXIT_TIMEOUT_MS);
  };
  return {
    port,
    stop: async () => {
      if (!isRunning(child)) return;
      child.kill("SIGCONT"); // a paused server would never handle SIGTERM
      child.kill("SIGTERM");
      if (!(await waitForExit(child, EXIT_TIMEOUT_MS))) await kill();
    },
    pause: () => void (isRunning(child) && child.kill("SIGSTOP")),
    resume: () => void (isRunning(child) && child.kill("SIGCONT")),
    kill,
    restart: async () => {
      await kill();
      child = await launch(port);
    },
  };
}

/** Spawns redis-server on `port` and resolves once it answers PING. */
async function launch(port: number): Promise<ChildProcess> {
  const bin = process.env.REDIS_SERVER_BIN ?? "redis-server";
  const child = spawn(bin, ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tmpdir()], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  live.add(child);
  child.once("exit", () => live.delete(child));
  const output = captureTail(child);
  try {
    await waitForPong(child, port, READY_TIMEOUT_MS);
    return child;
  } catch (err) {
    child.kill("SIGKILL");
    await waitForExit(child, EXIT_TIMEOUT_MS);
    throw new Error(`redis-server on port ${port} did not start: ${(err as Error).message}\n${output()}`);
  }
}
