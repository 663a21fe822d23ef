// The throw-away redis-server behind L2 in `npm run dev`: its own port (never
// the system's 6379), no persistence, stopped with the rest of the stack.
import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { captureTail, isRunning, stopChild, track, waitForExit } from "./children";
import { freePort, isPortFree } from "./ports";

export interface DevRedis {
  port: number;
  /** SIGTERM, then SIGKILL if it lingers. Idempotent. */
  stop(): Promise<void>;
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

/**
 * Starts redis-server on `preferredPort`, or on a free port when that one is
 * taken (a second `npm run dev`, another project). Resolves once it answers PING.
 * `onUnexpectedExit` is called if it dies before stop().
 */
export async function startDevRedis(
  bin: string,
  preferredPort: number,
  log: (line: string) => void,
  onUnexpectedExit: (how: string) => void,
): Promise<DevRedis> {
  let lastError: unknown;
  for (let attempt = 0; attempt < START_ATTEMPTS; attempt++) {
    // A free port can be taken between our check and redis binding it: retry with another.
    const port = attempt === 0 && (await isPortFree(preferredPort)) ? preferredPort : await freePort();
    if (port !== preferredPort && attempt === 0) log(`port ${preferredPort} is busy: redis-server uses ${port} instead`);
    try {
      return await launch(bin, port, onUnexpectedExit);
    } catch (err) {
      lastError = err;
    }
  }
  throw lastError;
}

async function launch(bin: string, port: number, onUnexpectedExit: (how: string) => void): Promise<DevRedis> {
  const child = spawn(
    bin,
    // --dir: should redis ever write a file, it goes to the temp dir, not the repo.
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tmpdir()],
    // Own process group: a Ctrl-C in the terminal must not kill redis before the
    // gateway is closed; we stop it ourselves, last.
    { stdio: ["ignore", "pipe", "pipe"], detached: true },
  );
  track(child, false);
  const output = captureTail(child);
  let stopping = false;
  child.once("exit", (code, signal) => {
    if (!stopping) onUnexpectedExit(signal ? `killed by ${signal}` : `exit code ${code}`);
  });
  const kill = () => {
    stopping = true;
    if (isRunning(child)) child.kill("SIGKILL");
  };

  try {
    await waitForPong(child, port, READY_TIMEOUT_MS);
  } catch (err) {
    kill();
    await waitForExit(child, STOP_TIMEOUT_MS);
    throw new Error(`redis-server on port ${port} did not start: ${(err as Error).message}\n${output()}`);
  }

  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      stopping = true;
      await stopChild(child, STOP_TIMEOUT_MS);
    })());
  return { port, stop };
}

/** Resolves once redis-server on `port` answers PING; rejects if `child` dies or `timeoutMs` passes. Shared with the tests. */
export async function waitForPong(child: ChildProcess, port: number, timeoutMs: number): Promise<void> {
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
