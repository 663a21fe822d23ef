// The stack (stack.ts: redis-server + gateway pairs and the demo origin) in
// a child process of its own (stackChild.ts), so that the event loop of a
// process that generates load (the benchmarks) can never delay an origin
// answer or a gateway round trip, which would show up as the tier's latency
// and, past the worker's L2 budget, as L2 failures that are not the tier's.
// The parent controls each redis-server and each gateway over the IPC
// channel (outages, a slow or unreachable Redis).
import { fork, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { stopChild } from "./children";

export interface StackProcessOptions {
  catalogSize: number;
  latencyMs: number;
  jitterMs: number;
  gatewayToken: string;
  /** redis-server + gateway pairs to run (default 1; 0: the demo origin alone, bench:peers' Nginx and Varnish); `ready` names the first as redisPort / gatewayUrl. */
  shards?: number;
  /** Run the demo origin too (default true). */
  origin?: boolean;
  /** Each gateway holds every request this long first: Redis in another region (default 0). */
  redisLatencyMs?: number;
}

export interface ShardEndpoints {
  redisPort: number;
  gatewayUrl: string;
}

/** What the parent can do to a redis-server: freeze it, thaw it, crash it, start it again (empty, same port). */
export type RedisAction = "pause" | "resume" | "kill" | "restart";

/** What the parent can do to a gateway: hold every request `ms` first, or make it unreachable (`down`) and reachable again (`up`). */
export type GatewayAction = { action: "latency"; ms: number } | { action: "down" | "up" };

/** Parent → child. */
export type StackCommand = { type: "redis"; id: number; shard: number; action: RedisAction } | ({ type: "gateway"; id: number; shard: number } & GatewayAction);

/** Child → parent. */
export type StackMessage =
  | { type: "ready"; redisPort: number; gatewayUrl: string; originUrl: string; shards?: ShardEndpoints[] }
  | { type: "log"; line: string }
  | { type: "failed"; message: string }
  | { type: "done"; id: number; ok: boolean; message?: string };

export interface StackProcess {
  child: ChildProcess;
  ready: Extract<StackMessage, { type: "ready" }>;
  /** Gateway notes (connection state changes) received so far, the first 200. */
  logs: string[];
  /** Does `action` to redis-server `shard`; resolves once done. */
  control(shard: number, action: RedisAction): Promise<void>;
  /** Does `control` to gateway `shard`; resolves once done. */
  gatewayControl(shard: number, control: GatewayAction): Promise<void>;
  close(): Promise<void>;
}

const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;
const CONTROL_TIMEOUT_MS = 20_000;

/** Forks stackChild.ts with these options and waits for it to listen. */
export async function forkStack(options: StackProcessOptions): Promise<StackProcess> {
  const child = fork(fileURLToPath(new URL("./stackChild.ts", import.meta.url)), [], {
    // Run the TypeScript child with tsx's loader, as the benchmarks run their own files.
    execArgv: ["--import", "tsx"],
    env: { ...process.env, STACK_PROCESS_OPTIONS: JSON.stringify(options) },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  // Killed at exit whatever happens (the child also stops by itself when the IPC channel closes).
  const killAtExit = () => void child.kill("SIGTERM");
  process.once("exit", killAtExit);

  const logs: string[] = [];
  const pending = new Map<number, { done: () => void; fail: (err: Error) => void }>();
  let nextId = 1;
  child.on("message", (message: StackMessage) => {
    if (message.type === "log") logs.length < 200 && logs.push(message.line);
    if (message.type === "done") {
      const waiter = pending.get(message.id);
      pending.delete(message.id);
      if (message.ok) waiter?.done();
      else waiter?.fail(new Error(message.message));
    }
  });
  child.once("exit", (code) => {
    for (const waiter of pending.values()) waiter.fail(new Error(`the servers process exited (code ${code})`));
    pending.clear();
  });
  let ready: Extract<StackMessage, { type: "ready" }>;
  try {
    ready = await new Promise((resolveReady, reject) => {
      const timer = setTimeout(() => reject(new Error("the servers did not start in time")), START_TIMEOUT_MS);
      child.on("message", (message: StackMessage) => {
        if (message.type === "failed") reject(new Error(`the servers did not start: ${message.message}`));
        if (message.type === "ready") {
          clearTimeout(timer);
          resolveReady(message);
        }
      });
      child.once("exit", (code) => reject(new Error(`the servers process exited (code ${code})`)));
    });
  } catch (err) {
    await stopChild(child, STOP_TIMEOUT_MS);
    process.off("exit", killAtExit);
    throw err;
  }
  /** Sends one command and waits for its "done" (CONTROL_TIMEOUT_MS at most). */
  const command = (what: string, send: (id: number) => StackCommand) =>
    new Promise<void>((done, fail) => {
      const id = nextId++;
      const timer = setTimeout(() => {
        pending.delete(id);
        fail(new Error(`${what}: no answer in time`));
      }, CONTROL_TIMEOUT_MS);
      pending.set(id, {
        done: () => (clearTimeout(timer), done()),
        fail: (err) => (clearTimeout(timer), fail(new Error(`${what}: ${err.message}`))),
      });
      child.send(send(id));
    });
  return {
    child,
    ready,
    logs,
    control: (shard, action) => command(`redis-server ${action}`, (id) => ({ type: "redis", id, shard, action })),
    gatewayControl: (shard, control) => command(`gateway ${control.action}`, (id) => ({ type: "gateway", id, shard, ...control })),
    close: async () => {
      await stopChild(child, STOP_TIMEOUT_MS);
      process.off("exit", killAtExit);
    },
  };
}
