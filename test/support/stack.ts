// The real processes behind the worker in integration tests: a redis-server
// on a free port, the Upstash REST gateway in front of it, and the demo
// origin. Everything listens on loopback and is stopped by `close()`.
import { startGateway, type Gateway } from "../../dev/gateway";
import { startDemoOrigin, type DemoOrigin, type DemoOriginOptions } from "../../dev/origin";
import type { Env } from "../../src/config";
import { startRedis, type RedisServer } from "./redis";

export const GATEWAY_TOKEN = "test-gateway-token";
export const PURGE_TOKEN = "test-purge-token";
/** The shop's public address in tests (PUBLIC_URL): what every canonical URL must start with, whatever the request says. */
export const PUBLIC_URL = "https://shop.example";

export interface Stack {
  redis: RedisServer;
  gateway: Gateway;
  origin: DemoOrigin;
  /** Worker bindings pointing at this stack. */
  bindings: Env;
  /** Origin admin calls. */
  admin(path: string, init?: { method?: string; body?: unknown }): Promise<any>;
  /** Requests each origin service received, per service and per `service:id`. */
  counters(): Promise<{ total: number; services: Record<string, number>; ids: Record<string, number> }>;
  close(): Promise<void>;
}

export async function startStack(origin: DemoOriginOptions = {}): Promise<Stack> {
  const redis = await startRedis();
  const gateway = await startGateway({ redisPort: redis.port, token: GATEWAY_TOKEN });
  const demo = await startDemoOrigin({ latencyMs: 5, jitterMs: 2, ...origin });
  async function admin(path: string, init: { method?: string; body?: unknown } = {}) {
    const response = await fetch(demo.url + path, {
      method: init.method ?? (init.body === undefined ? "GET" : "POST"),
      headers: { "content-type": "application/json" },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
    return (await response.json()) as any;
  }
  return {
    redis,
    gateway,
    origin: demo,
    bindings: {
      ORIGIN_URL: demo.url,
      PUBLIC_URL,
      UPSTASH_REDIS_REST_URL: gateway.url,
      UPSTASH_REDIS_REST_TOKEN: GATEWAY_TOKEN,
      PURGE_TOKEN,
      // The gateway runs in the test process, whose event loop also drives
      // hundreds of test requests on a shared 2-core machine: a generous L2
      // budget keeps tests about behaviour from failing on load. The budget
      // itself is tested where it is the subject (faults.test.ts, l2.test.ts).
      L2_TIMEOUT_MS: "1000",
    },
    admin,
    counters: () => admin("/__admin/counters"),
    async close() {
      await demo.close();
      await gateway.close();
      await redis.stop();
    },
  };
}
