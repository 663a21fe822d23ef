// The child process of the benchmark: redis-server, the Upstash REST gateway
// and the demo origin. They live here, not in the process that generates the
// load, so that the load generator's event loop can never delay an origin
// answer or a gateway round trip (which would show up as tier latency and,
// past the worker's 50 ms L2 budget, as L2 failures that are not the tier's).
//
// Started by stack.ts with fork(); speaks to it over the IPC channel:
//   → {type: "ready", redisPort, gatewayUrl, originUrl}   once everything listens
//   → {type: "log", line}                                 gateway connection notes
//   → {type: "failed", message}                           could not start
// It stops everything it started on SIGTERM/SIGINT, and when the parent goes
// away (IPC disconnect), so that no redis-server outlives a crashed run.
import { setMaxListeners } from "node:events";
import { startGateway, type Gateway } from "../dev/gateway";
import { startDemoOrigin, type DemoOrigin } from "../dev/origin";
import { startRedis, type RedisServer } from "../test/support/redis";

export interface ServersOptions {
  catalogSize: number;
  latencyMs: number;
  jitterMs: number;
  gatewayToken: string;
}

export type ServersMessage =
  | { type: "ready"; redisPort: number; gatewayUrl: string; originUrl: string }
  | { type: "log"; line: string }
  | { type: "failed"; message: string };

function send(message: ServersMessage): void {
  if (process.connected) process.send?.(message);
}

let redis: RedisServer | undefined;
let gateway: Gateway | undefined;
let origin: DemoOrigin | undefined;
let stopping: Promise<void> | undefined;

function stop(code: number): Promise<void> {
  stopping ??= (async () => {
    // Each step on its own: one that fails must not leave the next running.
    await origin?.close().catch(() => undefined);
    await gateway?.close().catch(() => undefined);
    await redis?.stop().catch(() => undefined);
    process.exit(code);
  })();
  return stopping;
}

process.once("SIGTERM", () => void stop(0));
process.once("SIGINT", () => void stop(0));
process.once("disconnect", () => void stop(0));

async function main(): Promise<void> {
  // The demo origin hangs every pending delay on one AbortSignal (to cut them
  // all at close); past 10 concurrent requests Node then warns of a "possible
  // leak" on stderr, which is only noise here (and garbles the progress line).
  setMaxListeners(0);
  const options = JSON.parse(process.env.BENCH_SERVERS_OPTIONS ?? "{}") as ServersOptions;
  redis = await startRedis();
  gateway = await startGateway({
    redisPort: redis.port,
    token: options.gatewayToken,
    log: (line) => send({ type: "log", line }),
  });
  origin = await startDemoOrigin({
    catalogSize: options.catalogSize,
    latencyMs: options.latencyMs,
    jitterMs: options.jitterMs,
  });
  send({ type: "ready", redisPort: redis.port, gatewayUrl: gateway.url, originUrl: origin.url });
}

main().catch((err: unknown) => {
  send({ type: "failed", message: err instanceof Error ? err.message : String(err) });
  void stop(1);
});
