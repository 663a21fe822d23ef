// L2 on three shards placed by the consistent-hash ring, in the Workers
// runtime: each product lives on one shard, one shard down costs only its
// products their L2, and purges reach every shard.
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, type Gateway } from "../../dev/gateway";
import { startDemoOrigin, type DemoOrigin } from "../../dev/origin";
import { createRing } from "../../src/cache/l2/ring";
import { startRedis, type RedisServer } from "../../dev/harness/redis";
import { PURGE_TOKEN } from "../support/stack";
import { startWorker } from "../support/worker";

const TOKEN = "shard-token";
const NAMES = ["s1", "s2", "s3"];
let redises: RedisServer[] = [];
let gateways: Gateway[] = [];
let origin: DemoOrigin;
let bindings: Record<string, string>;
const ring = createRing(NAMES.map((name) => ({ name })));
const ids = Array.from({ length: 30 }, (_, i) => `p-${String(i + 500).padStart(6, "0")}`);

beforeAll(async () => {
  redises = await Promise.all(NAMES.map(() => startRedis()));
  gateways = await Promise.all(redises.map((redis) => startGateway({ redisPort: redis.port, token: TOKEN, log: () => {} })));
  origin = await startDemoOrigin({ latencyMs: 2, jitterMs: 0 });
  bindings = {
    ORIGIN_URL: origin.url,
    PUBLIC_URL: "https://shop.example",
    UPSTASH_REDIS_SHARDS: JSON.stringify(gateways.map((gateway, i) => ({ name: NAMES[i], url: gateway.url, token: TOKEN }))),
    PURGE_TOKEN,
    KNOWN_IDS: "off",
  };
});

afterAll(async () => {
  await origin?.close();
  await Promise.all(gateways.map((gateway) => gateway.close()));
  await Promise.all(redises.map((redis) => redis.stop()));
});

function client(shard: number): Redis {
  return new Redis({ url: gateways[shard]!.url, token: TOKEN, automaticDeserialization: false, enableTelemetry: false });
}

describe("L2 shards", () => {
  it("stores each product's entries on the shard the ring gives its id", async () => {
    const writer = await startWorker(bindings);
    try {
      for (const id of ids) expect((await writer.fetch(`/products/${id}`)).status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 300)); // background L2 writes
      for (const id of ids) {
        const owner = ring.ownerOf(id);
        for (let shard = 0; shard < NAMES.length; shard++) {
          const value = await client(shard).get<string>(`pp:v1:p:${id}`);
          if (shard === owner) expect(value, `${id} on ${NAMES[shard]}`).toMatch(/^1\|/);
          else expect(value, `${id} not on ${NAMES[shard]}`).toBeNull();
        }
      }
      const used = new Set(ids.map((id) => ring.ownerOf(id)));
      expect(used.size).toBe(3);
    } finally {
      await writer.close();
    }
  });

  it("with one shard down, only its products lose L2, and no page fails", async () => {
    const down = 1;
    await redises[down]!.kill();
    const reader = await startWorker(bindings);
    try {
      for (const id of ids) {
        const response = await reader.fetch(`/products/${id}`);
        expect(response.status).toBe(200);
        const status = response.headers.get("cache-status") ?? "";
        if (ring.ownerOf(id) === down) expect(status, id).toMatch(/pp-origin[^,]*detail="product"/);
        else expect(status, id).toMatch(/pp-l2; hit; ttl=\d+; detail="product"/);
      }
      // The operators' view (the authenticated status): L2 as a whole "partial", that shard's breaker open.
      const status = await reader.fetch("/__status.json", { headers: { authorization: `Bearer ${PURGE_TOKEN}` } });
      const { l2 } = (await status.json()) as { l2: { state: string; shards: { name: string; state: string }[] } };
      expect(l2.state).toBe("partial");
      expect(l2.shards.find((shard) => shard.name === "s2")?.state).toBe("open");
      expect(l2.shards.filter((shard) => shard.state === "closed")).toHaveLength(2);
    } finally {
      await reader.close();
      await redises[down]!.restart();
    }
  });

  it("a purge reaches entries on every shard", async () => {
    const worker = await startWorker(bindings);
    try {
      const onEach = NAMES.map((_, shard) => ids.find((id) => ring.ownerOf(id) === shard)!);
      for (const id of onEach) await worker.fetch(`/products/${id}`);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const response = await worker.fetch("/__purge", {
        method: "POST",
        headers: { authorization: `Bearer ${PURGE_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ ids: onEach }),
      });
      expect(response.status).toBe(202);
      for (const [shard, id] of onEach.entries()) {
        expect(await client(shard).get(`pp:v1:p:${id}`)).toBeNull();
        expect(await client(shard).get(`pp:v1:x:p:${id}`)).toMatch(/^\d+$/);
      }
      // The log lives on the home shard only.
      expect(await client(0).get("pp:v1:purge:seq")).toMatch(/^\d+$/);
      expect(await client(1).get("pp:v1:purge:seq")).toBeNull();
    } finally {
      await worker.close();
    }
  });
});
