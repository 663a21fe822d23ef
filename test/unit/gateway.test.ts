/**
 * The Upstash-compatible gateway (dev/gateway) against a real redis-server,
 * driven by the real @upstash/redis client, so that what the client sends and
 * expects (base64 encoding, pipelines, error shapes) is what is tested.
 */
import { Redis } from "@upstash/redis";
import { Redis as IORedis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, type Gateway } from "../../dev/gateway/index";
import { startRedis, type RedisServer } from "../../dev/harness/redis";

const TOKEN = "gateway-test-token";
const COMMAND_TIMEOUT_MS = 1000;

let server: RedisServer;
let gateway: Gateway;
const logs: string[] = [];

beforeAll(async () => {
  server = await startRedis();
  gateway = await startGateway({
    redisPort: server.port,
    token: TOKEN,
    commandTimeoutMs: COMMAND_TIMEOUT_MS,
    log: (line) => logs.push(line),
  });
});

afterAll(async () => {
  await gateway?.close();
  await server?.stop();
});

function client(options: { automaticDeserialization?: boolean; enableAutoPipelining?: boolean } = {}) {
  return new Redis({ url: gateway.url, token: TOKEN, enableTelemetry: false, retry: false, ...options });
}

/** A raw POST, for what the client hides (status codes, exact bodies). */
async function post(path: string, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${gateway.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json", ...headers },
    body,
  });
  return { status: res.status, body: (await res.json()) as unknown };
}

// @upstash/redis 1.39 auto-pipelines by default (commands go to POST /pipeline);
// with it off, each command is its own POST /. Both paths must behave the same.
describe.each([
  { mode: "auto-pipelined (client default)", enableAutoPipelining: true },
  { mode: "one request per command", enableAutoPipelining: false },
])("with the @upstash/redis client, $mode", ({ enableAutoPipelining }) => {
  const prefix = `c${enableAutoPipelining ? "a" : "s"}:`;
  const key = (name: string) => prefix + name;
  const redis = () => client({ enableAutoPipelining });
  const raw = () => client({ enableAutoPipelining, automaticDeserialization: false });

  it.each([
    ["accents", "café é"],
    ["CJK", "日本語"],
    ["emoji", "🚀 ok 👍🏽"],
    ["NUL and U+00FF", "\u0000\u00ff"],
    ["base64 text", Buffer.from([0, 1, 2, 250, 251, 252]).toString("base64")],
    ["the string OK", "OK"],
    ["empty", ""],
  ])("round-trips %s", async (_name, value) => {
    expect(await redis().set(key("str"), value)).toBe("OK");
    expect(await raw().get(key("str"))).toBe(value);
    expect(await redis().get(key("str"))).toBe(value);
  });

  it("returns integers as numbers and missing keys as null", async () => {
    await redis().del(key("n"));
    expect(await redis().incr(key("n"))).toBe(1);
    expect(await redis().incrby(key("n"), 41)).toBe(42);
    expect(await raw().get(key("n"))).toBe("42");
    expect(await redis().get(key("n"))).toBe(42); // the client JSON-parses "42"
    expect(await redis().get(key("missing"))).toBeNull();
    expect(await raw().get(key("missing"))).toBeNull();
  });

  it("deserializes JSON objects (or not, when asked)", async () => {
    const product = { id: "p-1", name: "Crème brûlée", tags: ["brand:acme"], price: 12.5 };
    await redis().set(key("obj"), product);
    expect(await redis().get(key("obj"))).toEqual(product);
    expect(await raw().get(key("obj"))).toBe(JSON.stringify(product));
  });

  it("answers mget with nulls in place of missing keys", async () => {
    await redis().set(key("m1"), "one");
    await redis().set(key("m2"), "日本");
    expect(await redis().mget(key("m1"), key("nope"), key("m2"))).toEqual(["one", null, "日本"]);
  });

  it("passes hgetall through unreshaped", async () => {
    await redis().del(key("h"));
    await redis().hset(key("h"), { f: "v", é: "ü" });
    expect(await redis().hgetall(key("h"))).toEqual({ f: "v", é: "ü" });
  });

  it("runs Lua scripts returning strings, numbers and arrays", async () => {
    expect(await redis().eval("return ARGV[1]", [], ["héllo 🚀"])).toBe("héllo 🚀");
    expect(await redis().eval("return tonumber(ARGV[1]) * 2", [], [21])).toBe(42);
    const array = await raw().eval("return {KEYS[1], ARGV[1], 3, {4, 'nested'}, false}", [key("k")], ["ü"]);
    expect(array).toEqual([key("k"), "ü", 3, [4, "nested"], null]);
  });

  it("sets with NX PX, answering null when the key exists", async () => {
    await redis().del(key("lock"));
    expect(await redis().set(key("lock"), "token-1", { nx: true, px: 1000 })).toBe("OK");
    expect(await redis().set(key("lock"), "token-2", { nx: true, px: 1000 })).toBeNull();
    expect(await redis().get(key("lock"))).toBe("token-1");
    const ttl = await redis().pttl(key("lock"));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(1000);
  });

  it("throws with the Redis message on an error reply", async () => {
    await redis().set(key("text"), "not a number");
    await expect(redis().incr(key("text"))).rejects.toThrow(/ERR value is not an integer/);
  });

  it("runs explicit pipelines, with per-command errors inline", async () => {
    const results = await redis().pipeline().set(key("p"), "1").incr(key("p")).get(key("p")).exec();
    expect(results).toEqual(["OK", 2, 2]);
    const withError = await redis().pipeline().set(key("p"), "x").incr(key("p")).get(key("p")).exec({ keepErrors: true });
    expect(withError.map((r) => r.error)).toEqual([undefined, expect.stringMatching(/not an integer/), undefined]);
    expect(withError[2]?.result).toBe("x");
  });

  it("runs multi() atomically", async () => {
    const results = await redis().multi().set(key("t"), "1").incr(key("t")).get(key("t")).exec();
    expect(results).toEqual(["OK", 2, 2]);
  });

  it("refuses a wrong token", async () => {
    const intruder = new Redis({ url: gateway.url, token: "wrong", enableTelemetry: false, retry: false, enableAutoPipelining });
    await expect(intruder.get(key("x"))).rejects.toThrow(/Unauthorized/);
  });
});

describe("the HTTP protocol", () => {
  it("answers 401 without or with a wrong token", async () => {
    for (const authorization of [undefined, "Bearer nope", `Basic ${TOKEN}`, `Bearer ${TOKEN}x`]) {
      const res = await fetch(gateway.url, {
        method: "POST",
        headers: authorization ? { authorization } : {},
        body: '["PING"]',
      });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: "Unauthorized" });
    }
  });

  it("base64-encodes exact bytes, and leaves OK and integers alone", async () => {
    const direct = new IORedis({ port: server.port, lazyConnect: true });
    try {
      await direct.set("bin", Buffer.from([0xff, 0xfe, 0x00, 0x41]));
      const b64 = { "upstash-encoding": "base64" };
      expect(await post("/", '["GET","bin"]', b64)).toEqual({ status: 200, body: { result: "//4AQQ==" } });
      expect(await post("/", '["SET","s","v"]', b64)).toEqual({ status: 200, body: { result: "OK" } });
      expect(await post("/", '["PING"]', b64)).toEqual({ status: 200, body: { result: "UE9ORw==" } });
      expect(await post("/", '["STRLEN","bin"]', b64)).toEqual({ status: 200, body: { result: 4 } });
      expect(await post("/", '["MGET","s","none"]', b64)).toEqual({ status: 200, body: { result: ["dg==", null] } });
      expect(await post("/", '["GET","s"]')).toEqual({ status: 200, body: { result: "v" } });
    } finally {
      direct.disconnect();
    }
  });

  it("stringifies numbers and booleans in commands", async () => {
    expect((await post("/", '["SET","num",12.5]')).body).toEqual({ result: "OK" });
    expect((await post("/", '["GET","num"]')).body).toEqual({ result: "12.5" });
    expect((await post("/", '["SET","bool",true]')).body).toEqual({ result: "OK" });
    expect((await post("/", '["GET","bool"]')).body).toEqual({ result: "true" });
  });

  it("answers a single command's Redis error with 400, a pipeline's inline with 200", async () => {
    await post("/", '["SET","word","abc"]');
    expect(await post("/", '["INCR","word"]')).toEqual({
      status: 400,
      body: { error: expect.stringMatching(/^ERR value is not an integer/) },
    });
    expect(await post("/pipeline", '[["SET","a","1"],["INCR","word"],["GET","a"]]')).toEqual({
      status: 200,
      body: [{ result: "OK" }, { error: expect.stringMatching(/^ERR/) }, { result: "1" }],
    });
  });

  it("reports runtime errors inside MULTI inline, and aborts on queueing errors", async () => {
    expect(await post("/multi-exec", '[["SET","a","2"],["INCR","word"],["INCR","a"]]')).toEqual({
      status: 200,
      body: [{ result: "OK" }, { error: expect.stringMatching(/^ERR/) }, { result: 3 }],
    });
    const aborted = await post("/multi-exec", '[["SET","a","9"],["NOSUCHCOMMAND"]]');
    expect(aborted.status).toBe(400);
    expect(aborted.body).toEqual({ error: expect.stringMatching(/EXECABORT.*unknown command/) });
    expect((await post("/", '["GET","a"]')).body).toEqual({ result: "3" });
  });

  it("accepts path-style commands", async () => {
    const get = await fetch(`${gateway.url}/set/path%20key/v%C3%A9`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(await get.json()).toEqual({ result: "OK" });
    const withBody = await fetch(`${gateway.url}/set/path%20key`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
      body: "from the body",
    });
    expect(await withBody.json()).toEqual({ result: "OK" });
    expect((await post("/", '["GET","path key"]')).body).toEqual({ result: "from the body" });
  });

  it("rejects malformed, oversized and unsupported requests without falling over", async () => {
    for (const body of ['["GET",', "{}", "[]", "[[]]", '["GET",{"a":1}]', '["GET",null]', "null"]) {
      const res = await post("/", body);
      expect(res.status, body).toBe(400);
      expect(res.body).toEqual({ error: expect.any(String) });
    }
    expect((await post("/pipeline", "[]")).status).toBe(400);
    expect((await post("/pipeline", '["GET","a"]')).status).toBe(400);
    expect((await post("/", "x".repeat(1024 * 1024 + 1))).status).toBe(413);
    expect((await post("/", '["SELECT","1"]')).status).toBe(400);
    expect((await post("/", '["BLPOP","q","0"]')).status).toBe(400);
    expect((await post("/", '["SUBSCRIBE","ch"]')).status).toBe(400);
    expect((await post("/", '["PING"]')).body).toEqual({ result: "PONG" });
  });

  it("closes promptly even with idle keep-alive connections", async () => {
    const other = await startGateway({ redisPort: server.port, token: TOKEN, log: () => {} });
    const res = await fetch(other.url, { method: "POST", headers: { authorization: `Bearer ${TOKEN}` }, body: '["PING"]' });
    expect(await res.json()).toEqual({ result: "PONG" });
    const started = Date.now();
    await other.close();
    expect(Date.now() - started).toBeLessThan(1500);
  });

  it("holds every request for its latency first, when given one (Redis in another region)", async () => {
    const far = await startGateway({ redisPort: server.port, token: TOKEN, log: () => {}, latencyMs: 80 });
    try {
      const ping = async (url: string) => {
        const started = performance.now();
        const res = await fetch(url, { method: "POST", headers: { authorization: `Bearer ${TOKEN}` }, body: '["PING"]' });
        expect(await res.json()).toEqual({ result: "PONG" });
        return performance.now() - started;
      };
      expect(await ping(far.url)).toBeGreaterThanOrEqual(79);
      expect(await ping(gateway.url)).toBeLessThan(79);
    } finally {
      await far.close();
    }
  });
});

describe("when redis fails", () => {
  const redis = () => client({ enableAutoPipelining: false });

  /** Retries `fn` until it resolves or `ms` passes (the gateway reconnects on its own). */
  async function eventually<T>(fn: () => Promise<T>, ms: number): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
      try {
        return await fn();
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  }

  async function timed<T>(work: Promise<T>): Promise<{ ms: number; error: unknown }> {
    const started = Date.now();
    const error = await work.then(
      () => undefined,
      (err: unknown) => err,
    );
    return { ms: Date.now() - started, error };
  }

  it("fails fast while redis is down, and recovers when it is back", async () => {
    expect(await redis().set("before", "1")).toBe("OK");
    await server.kill();

    const down = await timed(redis().get("before"));
    expect(down.error).toBeInstanceOf(Error);
    expect(String(down.error)).toMatch(/redis unavailable/);
    expect(down.ms).toBeLessThan(2000);
    const status = await post("/", '["PING"]');
    expect(status).toEqual({ status: 503, body: { error: expect.stringMatching(/redis unavailable/) } });

    await server.restart();
    expect(await eventually(() => redis().set("after", "2"), 5000)).toBe("OK");
    expect(await redis().get("after")).toBe(2);
    expect(logs.some((line) => /unavailable/.test(line))).toBe(true);
    expect(logs.some((line) => /is back/.test(line))).toBe(true);
  });

  it("times out while redis is frozen, and recovers when it resumes", async () => {
    server.pause();
    try {
      const frozen = await Promise.all([timed(redis().echo("frozen-1")), timed(redis().echo("frozen-2"))]);
      for (const { error, ms } of frozen) {
        expect(String(error)).toMatch(/redis unavailable/);
        expect(ms).toBeLessThan(COMMAND_TIMEOUT_MS + 1500);
      }
    } finally {
      server.resume();
    }
    // The late replies to the timed-out commands must not be handed to later ones.
    expect(await eventually(() => redis().echo("thawed"), 5000)).toBe("thawed");
    expect(await redis().get("after")).toBe(2);
  });
});
