// dev/harness/: the one harness of `npm run dev` (dev/run.ts), the tests
// (test/support/) and the benchmarks (bench/), each helper once: free ports
// (ports.ts), child processes (children.ts), redis-server (redis.ts), the
// stack behind the worker (this file, and stackProcess.ts for a process of
// its own), the worker's bundle in workerd (bundle.ts), wrangler dev
// (wrangler.ts), waiting for a server (health.ts), the demo origin's admin API
// (originAdmin.ts), what Redis itself counts and the MONITOR census of the
// commands the worker sent (redisProbe.ts). It lives under dev/ because `npm run dev` is its first
// user and dev/ already holds what it starts (the gateway, the demo origin);
// test/ and bench/ import it, and it imports neither of them.
//
// This file: the real processes behind the worker, on loopback: redis-server
// and the Upstash REST gateway in front of it (one pair per L2 shard), and the
// demo origin; and the known-ids filter built from that origin into that L2.
import { startGateway, type Gateway } from "../gateway";
import { startDemoOrigin, type DemoOrigin, type DemoOriginOptions } from "../origin";
import { createL2 } from "../../src/cache/l2/l2";
import { DEFAULT_POLICIES, DEFAULTS } from "../../src/config/defaults";
import { createKnownIds, listingOf } from "../../src/knownIds";
import { createOriginClient } from "../../src/origin/client";
import { createBreaker } from "../../src/shared/breaker";
import { systemClock } from "../../src/shared/clock";
import { startRedis, type RedisOptions, type RedisServer } from "./redis";

export interface StackOptions {
  /** The gateway's bearer token (the worker's UPSTASH_REDIS_REST_TOKEN). */
  token: string;
  /** redis-server + gateway pairs, one per L2 shard (default 1; 0: L2 off). */
  shards?: number;
  /** How each redis-server starts (the first one's preferred port, say). */
  redis?: RedisOptions;
  /** The first gateway's port (default: a free one). */
  gatewayPort?: number;
  /** Where gateway `shard` writes its connection-state lines (default: stderr). */
  gatewayLog?: (line: string, shard: number) => void;
  /** Each gateway holds every request this long first (a database in another region; default 0). */
  gatewayLatencyMs?: number;
  /** The demo origin's options, or false for none. */
  origin: DemoOriginOptions | false;
}

interface L2Shard {
  redis: RedisServer;
  gateway: Gateway;
}

export interface Stack {
  shards: L2Shard[];
  origin: DemoOrigin | undefined;
  /** Stops the origin, then the gateways, then the redis-servers; each on its own, so that one that fails leaves none running. */
  close(): Promise<void>;
}

/** Starts L2 (redis-server, then its gateway, per shard), then the demo origin; stops what started if a step fails. */
export async function startStack(options: StackOptions): Promise<Stack> {
  const stack: Stack = { shards: [], origin: undefined, close: () => closeStack(stack) };
  try {
    for (let i = 0; i < (options.shards ?? 1); i++) {
      // The preferred ports are the first shard's; the others take free ones.
      const redis = await startRedis(i === 0 ? options.redis : { ...options.redis, preferredPort: undefined });
      const { gatewayLog } = options;
      const gateway = await startGateway({
        port: i === 0 ? options.gatewayPort : undefined,
        redisPort: redis.port,
        token: options.token,
        log: gatewayLog && ((line: string) => gatewayLog(line, i)),
        latencyMs: options.gatewayLatencyMs,
      }).catch(async (err: unknown) => {
        await redis.stop();
        throw err;
      });
      stack.shards.push({ redis, gateway });
    }
    if (options.origin) stack.origin = await startDemoOrigin(options.origin);
  } catch (err) {
    await stack.close();
    throw err;
  }
  return stack;
}

async function closeStack(stack: Stack): Promise<void> {
  await stack.origin?.close().catch(() => undefined);
  for (const { gateway } of stack.shards) await gateway.close().catch(() => undefined);
  for (const { redis } of stack.shards) await redis.stop().catch(() => undefined);
}

/**
 * Builds the known-ids filter of every id `originUrl` lists into the L2
 * behind `gatewayUrl`, with the Worker's own code (src/knownIds), as the
 * daily cron and `npm run filter:rebuild` build it.
 */
export async function buildKnownIdsFilter(where: { originUrl: string; gatewayUrl: string; token: string; room?: number }) {
  const coolDownMs = 1000;
  const knownIds = createKnownIds({
    l2: createL2({
      url: where.gatewayUrl,
      token: where.token,
      timeoutMs: 5000,
      breaker: createBreaker({ failureThreshold: 3, coolDownMs, clock: systemClock }),
    }),
    keyPrefix: DEFAULTS.keyPrefix,
    clock: systemClock,
    retryMs: coolDownMs,
    ...(where.room === undefined ? {} : { room: where.room }),
    log: () => {},
  });
  return knownIds.rebuild(listingOf(createOriginClient({ baseUrl: where.originUrl, policies: DEFAULT_POLICIES })));
}
