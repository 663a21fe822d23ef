// The one launcher of a throw-away redis-server, behind L2 in `npm run dev`,
// the tests and the benchmarks: its own port (never the system's 6379), no
// persistence, every wait bounded, and controls to simulate outages (pause
// with SIGSTOP, kill, restart on the same port). Whatever still runs when
// this process exits is killed (children.ts).
import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { captureTail, isRunning, stopChild, track, waitForExit } from "./children";
import { freePort, isPortFree } from "./ports";

export interface RedisServer {
  port: number;
  /** Graceful stop (SIGTERM, then SIGKILL if it lingers); a paused server is woken first. Idempotent. */
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

export interface RedisOptions {
  /** The binary; default $REDIS_SERVER_BIN, else `redis-server` from PATH. */
  bin?: string;
  /** The port to try first (`npm run dev`'s DEV_REDIS_PORT); a free one the OS picks when it is taken or not given. */
  preferredPort?: number;
  /**
   * A process group of its own (`npm run dev`): a Ctrl-C in the terminal must
   * not kill redis before the gateway is closed; the caller stops it, last.
   */
  ownGroup?: boolean;
  log?: (line: string) => void;
  /** Called if it dies other than by stop(), kill() or restart(). */
  onUnexpectedExit?: (how: string) => void;
}

const READY_TIMEOUT_MS = 10_000;
const STOP_TIMEOUT_MS = 5_000;
const START_ATTEMPTS = 3;

/** The absolute path of `bin` on PATH, or null; like `command -v`. */
export function findOnPath(bin: string): string | null {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, bin);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

/** Starts redis-server and resolves once it answers PING. */
export async function startRedis(options: RedisOptions = {}): Promise<RedisServer> {
  const { preferredPort } = options;
  let lastError: unknown;
  for (let attempt = 0; attempt < START_ATTEMPTS; attempt++) {
    // A free port can be taken between our check and redis binding it: retry with another.
    const preferred = attempt === 0 && preferredPort !== undefined && (await isPortFree(preferredPort));
    const port = preferred ? preferredPort : await freePort();
    if (attempt === 0 && preferredPort !== undefined && !preferred) options.log?.(`port ${preferredPort} is busy: redis-server uses ${port} instead`);
    try {
      return control(port, await launch(port, options), options);
    } catch (err) {
      lastError = err;
    }
  }
  throw lastError;
}

function control(port: number, first: ChildProcess, options: RedisOptions): RedisServer {
  let child = first;
  const kill = async () => {
    expected.add(child);
    if (!isRunning(child)) return;
    child.kill("SIGKILL");
    await waitForExit(child, STOP_TIMEOUT_MS);
  };
  return {
    port,
    stop: async () => {
      expected.add(child);
      if (isRunning(child)) child.kill("SIGCONT"); // a paused server would never handle SIGTERM
      await stopChild(child, STOP_TIMEOUT_MS);
    },
    pause: () => void (isRunning(child) && child.kill("SIGSTOP")),
    resume: () => void (isRunning(child) && child.kill("SIGCONT")),
    kill,
    restart: async () => {
      await kill();
      child = await launch(port, options);
    },
  };
}

/** The children whose exit we asked for: not reported to onUnexpectedExit. */
const expected = new WeakSet<ChildProcess>();

/** Spawns redis-server on `port` and resolves once it answers PING. */
async function launch(port: number, options: RedisOptions): Promise<ChildProcess> {
  const bin = options.bin ?? process.env.REDIS_SERVER_BIN ?? "redis-server";
  const child = spawn(
    bin,
    // --dir: should redis ever write a file, it goes to the temp dir, not the repo.
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tmpdir()],
    { stdio: ["ignore", "pipe", "pipe"], detached: options.ownGroup ?? false },
  );
  track(child, false);
  const output = captureTail(child);
  child.once("exit", (code, signal) => {
    if (!expected.has(child)) options.onUnexpectedExit?.(signal ? `killed by ${signal}` : `exit code ${code}`);
  });
  try {
    await waitForPong(child, port, READY_TIMEOUT_MS);
    return child;
  } catch (err) {
    expected.add(child);
    if (isRunning(child)) child.kill("SIGKILL");
    await waitForExit(child, STOP_TIMEOUT_MS);
    throw new Error(`redis-server on port ${port} did not start: ${(err as Error).message}\n${output()}`);
  }
}

/** Resolves once redis-server on `port` answers PING; rejects if `child` dies or `timeoutMs` passes. */
async function waitForPong(child: ChildProcess, port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let spawnError: Error | undefined;
  child.once("error", (err) => (spawnError = err));
  while (Date.now() < deadline) {
    if (spawnError) throw spawnError;
    if (!isRunning(child)) throw new Error(`it exited (${child.exitCode ?? child.signalCode})`);
    if (await pingOnce(port, 500)) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no PONG within ${timeoutMs} ms`);
}

/** One raw RESP PING; true on +PONG. */
function pingOnce(port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: "127.0.0.1" });
    let reply = "";
    const finish = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => finish(false));
    socket.once("error", () => finish(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.on("data", (chunk) => {
      reply += chunk.toString("latin1");
      if (reply.includes("\r\n")) finish(reply.startsWith("+PONG"));
    });
  });
}
