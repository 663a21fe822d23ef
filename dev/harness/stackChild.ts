// The child process of stackProcess.ts: the stack (stack.ts) with the options
// of STACK_PROCESS_OPTIONS, speaking to its parent over the IPC channel:
//   → {type: "ready", redisPort, gatewayUrl, originUrl, shards}   once everything listens
//   → {type: "log", line}                                 gateway connection notes
//   → {type: "failed", message}                           could not start
//   ← {type: "redis", id, shard, action}                  pause (SIGSTOP), resume (SIGCONT),
//                                                         kill (SIGKILL), restart (empty, same port)
//   ← {type: "gateway", id, shard, action, ms?}           latency (hold every request ms first),
//                                                         down (unreachable), up
//   → {type: "done", id, ok, message?}                    that action is done
// With `shards: N` it runs N redis-server + gateway pairs (`origin: false`
// leaves the demo origin out). It stops everything it started on
// SIGTERM/SIGINT, and when the parent goes away (IPC disconnect), so that no
// redis-server outlives a crashed run.
import { setMaxListeners } from "node:events";
import { startStack, type Stack } from "./stack";
import type { StackCommand, StackMessage, StackProcessOptions } from "./stackProcess";

function send(message: StackMessage): void {
  if (process.connected) process.send?.(message);
}

let stack: Stack | undefined;
let stopping: Promise<void> | undefined;

function stop(code: number): Promise<void> {
  stopping ??= (async () => {
    await stack?.close();
    process.exit(code);
  })();
  return stopping;
}

process.once("SIGTERM", () => void stop(0));
process.once("SIGINT", () => void stop(0));
process.once("disconnect", () => void stop(0));

process.on("message", (message: StackCommand) => {
  if (message?.type !== "redis" && message?.type !== "gateway") return;
  void (async () => {
    try {
      const shard = stack?.shards[message.shard];
      if (!shard) throw new Error(`no shard #${message.shard}`);
      if (message.type === "gateway") {
        if (message.action === "latency") shard.gateway.setLatency(message.ms);
        else if (message.action === "down" || message.action === "up") shard.gateway.setDown(message.action === "down");
        else throw new Error(`unknown gateway action ${String((message as { action: unknown }).action)}`);
      } else if (message.action === "pause") shard.redis.pause();
      else if (message.action === "resume") shard.redis.resume();
      else if (message.action === "kill") await shard.redis.kill();
      else if (message.action === "restart") await shard.redis.restart();
      else throw new Error(`unknown action ${String(message.action)}`);
      send({ type: "done", id: message.id, ok: true });
    } catch (err) {
      send({ type: "done", id: message.id, ok: false, message: err instanceof Error ? err.message : String(err) });
    }
  })();
});

async function main(): Promise<void> {
  // The demo origin hangs every pending delay on one AbortSignal (to cut them
  // all at close); past 10 concurrent requests Node then warns of a "possible
  // leak" on stderr, which is only noise here (and garbles the progress line).
  setMaxListeners(0);
  const options = JSON.parse(process.env.STACK_PROCESS_OPTIONS ?? "{}") as StackProcessOptions;
  const count = options.shards ?? 1;
  stack = await startStack({
    token: options.gatewayToken,
    shards: count,
    gatewayLog: (line, shard) => send({ type: "log", line: count > 1 ? `#${shard} ${line}` : line }),
    gatewayLatencyMs: options.redisLatencyMs,
    origin: options.origin !== false && { catalogSize: options.catalogSize, latencyMs: options.latencyMs, jitterMs: options.jitterMs },
  });
  const shards = stack.shards.map(({ redis, gateway }) => ({ redisPort: redis.port, gatewayUrl: gateway.url }));
  send({ type: "ready", redisPort: shards[0]?.redisPort ?? 0, gatewayUrl: shards[0]?.gatewayUrl ?? "", originUrl: stack.origin?.url ?? "", shards });
}

main().catch((err: unknown) => {
  send({ type: "failed", message: err instanceof Error ? err.message : String(err) });
  void stop(1);
});
