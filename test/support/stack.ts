// The real processes behind the worker in integration tests (the harness's
// stack, dev/harness/stack.ts): a redis-server on a free port, the Upstash
// REST gateway in front of it, and the demo origin. Everything listens on
// loopback and is stopped by `close()`.
import type { Gateway } from "../../dev/gateway";
import { OriginAdmin } from "../../dev/harness/originAdmin";
import type { RedisServer } from "../../dev/harness/redis";
import { startStack as startHarnessStack } from "../../dev/harness/stack";
import type { DemoOrigin, DemoOriginOptions } from "../../dev/origin";
import type { Env } from "../../src/config";

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
  const stack = await startHarnessStack({ token: GATEWAY_TOKEN, origin: { latencyMs: 5, jitterMs: 2, ...origin } });
  const { redis, gateway } = stack.shards[0]!;
  const demo = stack.origin!;
  const admin = new OriginAdmin(demo.url);
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
    admin: (path, init) => admin.request(path, init),
    counters: () => admin.request<{ total: number; services: Record<string, number>; ids: Record<string, number> }>("/__admin/counters"),
    close: stack.close,
  };
}
