// The child process of the benchmark: redis-server, the Upstash REST gateway
// and the demo origin. They live here, not in the process that generates the
// load, so that the load generator's event loop can never delay an origin
// answer or a gateway round trip (which would show up as tier latency and,
// past the worker's L2 budget, L2_TIMEOUT_MS's 100 ms, as L2 failures that are not the tier's).
//
// Started by stack.ts with fork(); speaks to it over the IPC channel:
//   → {type: "ready", redisPort, gatewayUrl, originUrl, shards}   once everything listens
//   → {type: "log", line}                                 gateway connection notes
//   → {type: "failed", message}                           could not start
//   ← {type: "redis", id, shard, action}                  pause (SIGSTOP), resume (SIGCONT),
//                                                         kill (SIGKILL), restart (empty, same port)
//   → {type: "redis-done", id, ok, message?}              that action is done
// With `shards: N` it runs N redis-server + gateway pairs (the `shards`
// scenario; `origin: false` leaves the demo origin out, the main servers
// process has one). It stops everything it started on SIGTERM/SIGINT, and
// when the parent goes away (IPC disconnect), so that no redis-server
// outlives a crashed run.
import { setMaxListeners } from "node:events";
import { startGateway, type Gateway } from "../dev/gateway";
import { startDemoOrigin, type DemoOrigin } from "../dev/origin";
import { startRedis, type RedisServer } from "../test/support/redis";

export interface ServersOptions {
  catalogSize: number;
  latencyMs: number;
  jitterMs: number;
  gatewayToken: string;
  /** redis-server + gateway pairs to run (default 1; 0: the demo origin alone, bench:peers' Nginx and Varnish); `ready` names the first as redisPort / gatewayUrl. */
  shards?: number;
  /** Run the demo origin too (default true). */
  origin?: boolean;
}

export interface ShardEndpoints {
  redisPort: number;
  gatewayUrl: string;
}

/** What the parent can do to a redis-server: freeze it, thaw it, crash it, start it again (empty, same port). */
export type RedisAction = "pause" | "resume" | "kill" | "restart";

export type ServersCommand = { type: "redis"; id: number; shard: number; action: RedisAction };

export type ServersMessage =
  | { type: "ready"; redisPort: number; gatewayUrl: string; originUrl: string; shards?: ShardEndpoints[] }
  | { type: "log"; line: string }
  | { type: "failed"; message: string }
  | { type: "redis-done"; id: number; ok: boolean; message?: string };

function send(message: ServersMessage): void {
  if (process.connected) process.send?.(message);
}

const redises: RedisServer[] = [];
const gateways: Gateway[] = [];
let origin: DemoOrigin | undefined;
let stopping: Promise<void> | undefined;

function stop(code: number): Promise<void> {
  stopping ??= (async () => {
    // Each step on its own: one that fails must not leave the next running.
    await origin?.close().catch(() => undefined);
    for (const gateway of gateways) await gateway.close().catch(() => undefined);
    for (const redis of redises) await redis.stop().catch(() => undefined);
    process.exit(code);
  })();
  return stopping;
}

process.once("SIGTERM", () => void stop(0));
process.once("SIGINT", () => void stop(0));
process.once("disconnect", () => void stop(0));

process.on("message", (message: ServersCommand) => {
  if (message?.type !== "redis") return;
  void (async () => {
    const redis = redises[message.shard];
    try {
      if (!redis) throw new Error(`no redis-server #${message.shard}`);
      if (message.action === "pause") redis.pause();
      else if (message.action === "resume") redis.resume();
      else if (message.action === "kill") await redis.kill();
      else if (message.action === "restart") await redis.restart();
      else throw new Error(`unknown action ${String(message.action)}`);
      send({ type: "redis-done", id: message.id, ok: true });
    } catch (err) {
      send({ type: "redis-done", id: message.id, ok: false, message: err instanceof Error ? err.message : String(err) });
    }
  })();
});

async function main(): Promise<void> {
  // The demo origin hangs every pending delay on one AbortSignal (to cut them
  // all at close); past 10 concurrent requests Node then warns of a "possible
  // leak" on stderr, which is only noise here (and garbles the progress line).
  setMaxListeners(0);
  const options = JSON.parse(process.env.BENCH_SERVERS_OPTIONS ?? "{}") as ServersOptions;
  const count = options.shards ?? 1;
  const shards: ShardEndpoints[] = [];
  for (let i = 0; i < count; i++) {
    const redis = await startRedis();
    redises.push(redis);
    const gateway = await startGateway({
      redisPort: redis.port,
      token: options.gatewayToken,
      log: (line) => send({ type: "log", line: count > 1 ? `#${i} ${line}` : line }),
    });
    gateways.push(gateway);
    shards.push({ redisPort: redis.port, gatewayUrl: gateway.url });
  }
  if (options.origin !== false) {
    origin = await startDemoOrigin({
      catalogSize: options.catalogSize,
      latencyMs: options.latencyMs,
      jitterMs: options.jitterMs,
    });
  }
  send({ type: "ready", redisPort: shards[0]?.redisPort ?? 0, gatewayUrl: shards[0]?.gatewayUrl ?? "", originUrl: origin?.url ?? "", shards });
}

main().catch((err: unknown) => {
  send({ type: "failed", message: err instanceof Error ? err.message : String(err) });
  void stop(1);
});
