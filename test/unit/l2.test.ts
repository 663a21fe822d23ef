// The L2 client against a real redis-server behind the Upstash REST gateway:
// version-guarded writes, the fill lock, compression, time budget and breaker.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Redis } from "@upstash/redis";
import { startGateway, type Gateway } from "../../dev/gateway";
import { createBreaker } from "../../src/shared/breaker";
import { systemClock } from "../../src/shared/clock";
import { encodeEntry } from "../../src/cache/l2/codec";
import type { Entry } from "../../src/cache/entry";
import { entryKey, lockKey, MAX_KEY_LENGTH, purgeMarkerKey } from "../../src/cache/keys";
import { createL2, lockToken, type ClaimOptions, type FillClaim, type FillWrite, type L2 } from "../../src/cache/l2/l2";
import { startRedis, type RedisServer } from "../../dev/harness/redis";

const TOKEN = "l2-test-token";
let redisServer: RedisServer;
let gateway: Gateway;
let redis: Redis;

beforeAll(async () => {
  redisServer = await startRedis();
  gateway = await startGateway({ redisPort: redisServer.port, token: TOKEN, log: () => {} });
  redis = new Redis({ url: gateway.url, token: TOKEN, automaticDeserialization: false, enableTelemetry: false });
});

afterAll(async () => {
  await gateway?.close();
  await redisServer?.stop();
});

function l2(timeoutMs = 200): L2 {
  return createL2({ url: gateway.url, token: TOKEN, timeoutMs, breaker: createBreaker({ failureThreshold: 3, coolDownMs: 60_000, clock: systemClock }) });
}

/** One write through `writeFills`, the way fills make them, and its answer. */
async function writeOne(client: L2, write: FillWrite): Promise<boolean | undefined> {
  return (await client.writeFills([write]))[0];
}

function fillWrite(key: string, value: string, version: number, lockToken = "", ttlMs = 60_000, fetchedAt = Date.now()) {
  return { key, lock: lockKey("pp:v1", key), purgeMarker: purgeMarkerKey("pp:v1", key), value, version, fetchedAt, ttlMs, lockToken };
}

/** The value the fill would store (these entries always fit). */
function encoded(entry: Entry): string {
  const value = encodeEntry(entry, 1024);
  if (value === undefined) throw new Error("not storable");
  return value;
}

/** One fill's claim, in a call of its own. */
async function claimOne(client: L2, key: string, lock: string, claim: ClaimOptions): Promise<FillClaim | undefined> {
  return (await client.claimFills([{ key, lock, claim }]))[0];
}

/** The version a stored value's header carries (what the write guard compares). */
function versionOf(value: string | null | undefined): number {
  return Number(value?.split("|")[0]);
}

function entry(version: number, data: unknown = { v: version }, now = Date.now()): Entry {
  return { data, version, fetchedAt: now, freshUntil: now + 60_000, staleUntil: now + 90_000, errorUntil: now + 600_000 };
}

/** A command sent as is through the gateway (the Upstash REST protocol: the command as a JSON array). */
async function redisCommand(command: string[]): Promise<unknown> {
  const response = await fetch(gateway.url, { method: "POST", headers: { authorization: `Bearer ${TOKEN}` }, body: JSON.stringify(command) });
  return ((await response.json()) as { result: unknown }).result;
}

/** The calls redis-server ran inside scripts since the last CONFIG RESETSTAT (INFO commandstats), by command: the script runs and the harness's own calls left out. */
async function innerCalls(): Promise<Record<string, number>> {
  const info = String(await redisCommand(["INFO", "commandstats"]));
  const calls: Record<string, number> = {};
  for (const [, command, count] of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (!/^(eval|evalsha|script|info|config)/.test(command!)) calls[command!] = Number(count);
  }
  return calls;
}

describe("keys", () => {
  it("stay within 50 characters for the longest valid id, lock keys included", () => {
    const key = entryKey("pp:v1", "recommendations", "a".repeat(40));
    expect(key.length).toBeLessThanOrEqual(MAX_KEY_LENGTH);
    expect(lockKey("pp:v1", key).length).toBeLessThanOrEqual(MAX_KEY_LENGTH);
    expect(key).toBe(`pp:v1:c:${"a".repeat(40)}`);
  });

  it("are never built from an invalid id", () => {
    expect(() => entryKey("pp:v1", "product", "../x")).toThrow();
    expect(() => entryKey("pp:v1", "product", "a".repeat(41))).toThrow();
  });
});

describe("L2 writes and locks", () => {
  it("reads many keys in one call, null for missing ones", async () => {
    const client = l2();
    await redis.set("t:a", "1|2|3|4|j|{}", { px: 60_000 });
    expect(await client.readMany(["t:a", "t:missing"])).toEqual(["1|2|3|4|j|{}", null]);
  });

  it("never replaces a newer version, and always sets a TTL", async () => {
    const client = l2();
    const key = "pp:v1:p:version-guard";
    expect(await writeOne(client, fillWrite(key, encoded(entry(5)), 5, "", 60_000))).toBe(true);
    expect(await writeOne(client, fillWrite(key, encoded(entry(3)), 3, "", 60_000))).toBe(false);
    expect(versionOf(await redis.get<string>(key))).toBe(5);
    expect(await writeOne(client, fillWrite(key, encoded(entry(6)), 6, "", 60_000))).toBe(true);
    expect(versionOf(await redis.get<string>(key))).toBe(6);
    const ttl = await redis.pttl(key);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
  });

  it("refuses a fill that began before the entry was purged (the cache-aside race)", async () => {
    const client = l2();
    const key = "pp:v1:p:purge-race";
    const purgedAt = Date.now();
    await redis.set(purgeMarkerKey("pp:v1", key), String(purgedAt), { px: 60_000 });
    const stale = entry(7);
    expect(await writeOne(client, fillWrite(key, encoded(stale), 7, "", 60_000, purgedAt - 1))).toBe(false);
    expect(await redis.get(key)).toBeNull();
    expect(await writeOne(client, fillWrite(key, encoded(stale), 7, "", 60_000, purgedAt + 1))).toBe(true);
  });

  it("elects one filler; others lose until it writes; a write that does not land releases only its own lock", async () => {
    const client = l2();
    const key = "pp:v1:p:lock-test";
    const lock = lockKey("pp:v1", key);
    const now = Date.now();
    const [a, b] = [lockToken(now), lockToken(now)];
    expect(await claimOne(client, key, lock, { token: a, lockTtlMs: 3000, freshBeyond: now, notBefore: 0, freshAfter: 0 })).toEqual({ kind: "won" });
    expect(await claimOne(client, key, lock, { token: b, lockTtlMs: 3000, freshBeyond: now, notBefore: 0, freshAfter: 0 })).toEqual({ kind: "lost" });
    const lockTtl = await redis.pttl(lock);
    expect(lockTtl).toBeGreaterThan(0);
    // Writes that do not land (an older version than the one stored) release the lock only for its holder.
    await redis.set(key, encoded(entry(5)), { px: 60_000 });
    expect(await writeOne(client, fillWrite(key, encoded(entry(1)), 1, b, 60_000))).toBe(false);
    expect(await redis.get(lock)).toBe(a);
    expect(await writeOne(client, fillWrite(key, encoded(entry(1)), 1, a, 60_000))).toBe(false);
    expect(await redis.get(lock)).toBeNull();
    // Fresh data there: a claim hands it back instead of locking.
    const claim = await claimOne(client, key, lock, { token: lockToken(Date.now()), lockTtlMs: 3000, freshBeyond: Date.now(), notBefore: 0, freshAfter: 0 });
    expect(claim?.kind).toBe("copy");
    expect(await redis.get(lock)).toBeNull();
  });

  it("leaves a landed write's lock to its TTL, and takes a spent lock over: its value or a newer one stored, or claimed before the last purge the claimer knows of; never one whose fill is under way", async () => {
    const client = l2();
    const key = "pp:v1:p:spent-lock";
    const lock = lockKey("pp:v1", key);
    const claimedAt = Date.now();
    const holder = lockToken(claimedAt);
    const claim = (token: string, freshAfter = 0) => claimOne(client, key, lock, { token, lockTtlMs: 3000, freshBeyond: Date.now(), notBefore: 0, freshAfter });
    expect(await claim(holder)).toEqual({ kind: "won" });
    // Under way: its value is not stored yet, and it began after every purge this claimer knows of.
    expect(await claim(lockToken(Date.now()), claimedAt - 1000)).toMatchObject({ kind: "lost" });
    // Claimed before a purge the claimer knows of: what it fetches is not fresh for that claimer: taken over.
    const afterPurge = lockToken(Date.now());
    expect(await claim(afterPurge, claimedAt + 1)).toMatchObject({ kind: "won" });
    expect(await redis.get(lock)).toBe(afterPurge);
    // The new holder's write lands (fetched after its claim) and leaves the lock.
    const fetchedAt = Number(afterPurge.split(".")[0]) + 1;
    expect(await writeOne(client, fillWrite(key, encoded(entry(3, { v: 3 }, fetchedAt)), 3, afterPurge, 60_000, fetchedAt))).toBe(true);
    expect(await redis.get(lock)).toBe(afterPurge);
    // A claim that wants fresher than what is stored (a purge since, soft): the lock is spent (its value is stored): taken over.
    const next = lockToken(Date.now());
    expect(await claim(next, fetchedAt + 1)).toMatchObject({ kind: "won" });
    expect(await redis.get(lock)).toBe(next);
  });

  it("hands a visitor's claim (staleBeyond) a copy within its stale window, with no lock; not one past it, nor a hard-purged one, nor to a refresh", async () => {
    const client = l2();
    const [key, past, purged] = ["stale", "past", "purged"].map((name) => `pp:v1:p:stale-claim-${name}`) as [string, string, string];
    const now = Date.now();
    // Fresh until 10 s ago, within its stale window until 20 s from now; the other past its window, within stale-if-error.
    const old = { ...entry(5, { v: 5 }, now - 30_000), freshUntil: now - 10_000, staleUntil: now + 20_000 };
    await redis.set(key, encoded(old), { px: 60_000 });
    const pastValue = encoded({ ...old, staleUntil: now - 1_000 });
    await redis.set(past, pastValue, { px: 60_000 });
    await redis.set(purged, encoded(old), { px: 60_000 });
    const options = (token: string, extra: object = {}) => ({ token, lockTtlMs: 3000, freshBeyond: now, notBefore: 0, freshAfter: 0, ...extra });
    expect(await claimOne(client, key, lockKey("pp:v1", key), options("visitor", { staleBeyond: now }))).toEqual({ kind: "copy", value: encoded(old) });
    expect(await redis.get(lockKey("pp:v1", key))).toBeNull();
    // A soft purge since (freshAfter) still hands it over: the caller judges it stale and refreshes it.
    expect((await claimOne(client, key, lockKey("pp:v1", key), options("soft", { staleBeyond: now, freshAfter: now - 1 })))?.kind).toBe("copy");
    expect(await claimOne(client, past, lockKey("pp:v1", past), options("visitor", { staleBeyond: now }))).toEqual({ kind: "won", stale: pastValue });
    expect(await claimOne(client, purged, lockKey("pp:v1", purged), options("visitor", { staleBeyond: now, notBefore: now - 1 }))).toEqual({ kind: "won" });
    // A refresh wants a fresh copy or the lock: it takes the lock, with the stale copy to fall back on.
    expect(await claimOne(client, key, lockKey("pp:v1", key), options("refresh"))).toEqual({ kind: "won", stale: encoded(old) });
    expect(await redis.get(lockKey("pp:v1", key))).toBe("refresh");
  });

  it("claims and writes a page's fills in one call each, every item judged as on its own", async () => {
    const client = l2();
    const [fresh, taken, free, stale] = ["fresh", "taken", "free", "stale"].map((name) => `pp:v1:p:batch-${name}`) as [string, string, string, string];
    const now = Date.now();
    await redis.set(fresh, encoded(entry(4)), { px: 60_000 });
    const othersToken = lockToken(now);
    await redis.set(lockKey("pp:v1", taken), othersToken, { px: 3000 });
    const old = entry(2, { v: 2 }, now - 120_000);
    await redis.set(stale, encoded({ ...old, freshUntil: now - 60_000 }), { px: 60_000 });
    const claim = (key: string, token: string) => ({
      key,
      lock: lockKey("pp:v1", key),
      claim: { token, lockTtlMs: 3000, freshBeyond: now, notBefore: 0, freshAfter: 0 },
    });
    const claims = await client.claimFills([claim(fresh, "a"), claim(taken, "b"), claim(free, "c"), claim(stale, "d")]);
    expect(claims.map((c) => c?.kind)).toEqual(["copy", "lost", "won", "won"]);
    expect(claims[3]).toMatchObject({ kind: "won", stale: expect.stringMatching(/^2\|/) });
    expect(await redis.get(lockKey("pp:v1", free))).toBe("c");

    const written = await client.writeFills([
      fillWrite(free, encoded(entry(7)), 7, "c"),
      fillWrite(fresh, encoded(entry(3)), 3),
      fillWrite(stale, encoded(entry(3)), 3, "d"),
    ]);
    expect(written).toEqual([true, false, true]);
    expect([versionOf(await redis.get(free)), versionOf(await redis.get(fresh)), versionOf(await redis.get(stale))]).toEqual([7, 4, 3]);
    // The landed writes left their locks to their TTL (spent: the next claim takes them over); the lock nobody wrote under is untouched.
    expect([await redis.get(lockKey("pp:v1", free)), await redis.get(lockKey("pp:v1", stale)), await redis.get(lockKey("pp:v1", taken))]).toEqual([
      "c",
      "d",
      othersToken,
    ]);
  });

  it("runs one MGET and a SET per item for a page's claim and its write (Redis's own count of the calls inside the scripts)", async () => {
    const client = l2();
    const keys = ["p", "i", "r", "c"].map((code) => `pp:v1:${code}:calls-1`);
    const claims = keys.map((key, i) => ({
      key,
      lock: lockKey("pp:v1", key),
      claim: { token: `t${i}`, lockTtlMs: 3000, freshBeyond: Date.now(), notBefore: 0, freshAfter: 0 },
    }));
    await redisCommand(["CONFIG", "RESETSTAT"]);
    expect((await client.claimFills(claims)).map((claim) => claim?.kind)).toEqual(["won", "won", "won", "won"]);
    expect(await innerCalls()).toEqual({ mget: 1, set: 4 });

    await redisCommand(["CONFIG", "RESETSTAT"]);
    // A key twice in one run: the second write sees the first (a newer version stored), as separate runs would.
    const written = await client.writeFills([
      ...keys.map((key, i) => fillWrite(key, encoded(entry(5)), 5, `t${i}`)),
      fillWrite(keys[0]!, encoded(entry(4)), 4),
    ]);
    expect(written).toEqual([true, true, true, true, false]);
    // The locks of the writes that landed are left to their TTL: no DEL.
    expect(await innerCalls()).toEqual({ mget: 1, set: 4 });
    expect(await Promise.all(claims.map(({ lock }) => redis.get(lock)))).toEqual(claims.map(({ claim }) => claim.token));
  });

  it("sends the writes a claim call carries in the same command: the writes first, each judged as on its own", async () => {
    const client = l2();
    const [landing, older, claimed] = ["landing", "older", "claimed"].map((name) => `pp:v1:p:carry-${name}`) as [string, string, string];
    await redis.set(older, encoded(entry(9)), { px: 60_000 });
    await redis.set(lockKey("pp:v1", landing), "t-landing", { px: 60_000 });
    const writes = [fillWrite(landing, encoded(entry(5)), 5, "t-landing"), fillWrite(older, encoded(entry(8)), 8)];
    const now = Date.now();
    const claim = (key: string, token: string) => ({
      key,
      lock: lockKey("pp:v1", key),
      claim: { token, lockTtlMs: 3000, freshBeyond: now, notBefore: 0, freshAfter: 0 },
    });
    await redisCommand(["CONFIG", "RESETSTAT"]);
    const claims = await client.claimFills([claim(landing, "t2"), claim(claimed, "t3")], { writes });
    // One script run (one command sent): the writes' MGET and SET, then the claims' MGET and SET.
    const info = String(await redisCommand(["INFO", "commandstats"]));
    const runs = [...info.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)].reduce((sum, m) => sum + Number(m[2]), 0);
    expect(runs).toBe(1);
    expect(await innerCalls()).toEqual({ mget: 2, set: 2 });
    // The write of `landing` landed before its claim ran: the claim finds its value, fresh.
    expect(claims.map((c) => c?.kind)).toEqual(["copy", "won"]);
    expect(versionOf(await redis.get(landing))).toBe(5);
    expect(versionOf(await redis.get(older))).toBe(9); // never over a newer version
    expect(await redis.get(lockKey("pp:v1", claimed))).toBe("t3");
  });

  it("reads keys along in the claim's own script run, after the carried writes and the claims: a string's value, null for a missing key or another type", async () => {
    const client = l2();
    const [counter, missing, hash] = ["counter", "missing", "hash"].map((name) => `pp:v1:along-${name}`) as [string, string, string];
    const claimed = "pp:v1:p:along-claimed";
    const written = "pp:v1:p:along-written";
    await redis.set(counter, "17", { px: 60_000 });
    await redis.hset(hash, { field: "x" });
    const writes = [fillWrite(written, encoded(entry(3)), 3)];
    const seen: (readonly (string | null)[])[] = [];
    const now = Date.now();
    await redisCommand(["CONFIG", "RESETSTAT"]);
    const claims = await client.claimFills(
      [{ key: claimed, lock: lockKey("pp:v1", claimed), claim: { token: "t-along", lockTtlMs: 3000, freshBeyond: now, notBefore: 0, freshAfter: 0 } }],
      { writes, readAlong: { keys: [counter, missing, hash], read: (values) => seen.push(values) } },
    );
    const info = String(await redisCommand(["INFO", "commandstats"]));
    const runs = [...info.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)].reduce((sum, m) => sum + Number(m[2]), 0);
    expect(runs).toBe(1);
    expect(seen).toEqual([["17", null, null]]);
    // The keys read along are not taken for claims: the one claim won its lock, and the carried write landed.
    expect(claims.map((c) => c?.kind)).toEqual(["won"]);
    expect(await redis.get(lockKey("pp:v1", claimed))).toBe("t-along");
    expect(versionOf(await redis.get(written))).toBe(3);
  });

  it("reads nothing along when the claim call fails", async () => {
    const client = createL2({
      url: "http://127.0.0.1:9",
      token: TOKEN,
      timeoutMs: 100,
      breaker: createBreaker({ failureThreshold: 3, coolDownMs: 60_000, clock: systemClock }),
    });
    const seen: unknown[] = [];
    const claims = await client.claimFills(
      [
        {
          key: "pp:v1:p:along-down",
          lock: lockKey("pp:v1", "pp:v1:p:along-down"),
          claim: { token: "t", lockTtlMs: 3000, freshBeyond: 0, notBefore: 0, freshAfter: 0 },
        },
      ],
      { readAlong: { keys: ["pp:v1:along-counter"], read: (values) => seen.push(values) } },
    );
    expect(claims).toEqual([undefined]);
    expect(seen).toEqual([]);
  });

  it("keeps carried writes for the backlog when their claim call fails, and replays them once L2 answers", async () => {
    const client = l2(100);
    const key = "pp:v1:p:carry-failed";
    const carried = [fillWrite(key, encoded(entry(6)), 6, "t-gone")];
    redisServer.pause();
    try {
      const claims = await client.claimFills(
        [
          {
            key: "pp:v1:p:carry-failed-claim",
            lock: lockKey("pp:v1", "pp:v1:p:carry-failed-claim"),
            claim: { token: "t", lockTtlMs: 3000, freshBeyond: Date.now(), notBefore: 0, freshAfter: 0 },
          },
        ],
        { writes: carried },
      );
      expect(claims).toEqual([undefined]);
    } finally {
      redisServer.resume();
    }
    expect(client.backlogSize()).toBe(1);
    await client.flushBacklog();
    expect(client.backlogSize()).toBe(0);
    expect(versionOf(await redis.get(key))).toBe(6);
  });

  it("claims and writes over what no fill wrote, without an error: another type, a marker that is not a time, a lock that never expires", async () => {
    const client = l2();
    const claim = (key: string, token: string) =>
      claimOne(client, key, lockKey("pp:v1", key), { token, lockTtlMs: 3000, freshBeyond: Date.now(), notBefore: 0, freshAfter: 0 });

    // Another type under the entry's key: nothing to use, and the fill's write replaces it.
    const hashed = "pp:v1:p:foreign-type";
    await redis.hset(hashed, { title: "x" });
    expect(await claim(hashed, "a")).toEqual({ kind: "won" });
    expect(await writeOne(client, fillWrite(hashed, encoded(entry(2)), 2, "a"))).toBe(true);
    expect(versionOf(await redis.get<string>(hashed))).toBe(2);
    // Landed: its lock is left to its TTL.
    expect(await redis.get(lockKey("pp:v1", hashed))).toBe("a");

    // A purge marker that is not a time, or not a string: no purge to respect.
    for (const [key, setMarker] of [
      ["pp:v1:p:foreign-marker", (marker: string) => redis.set(marker, "yesterday")],
      ["pp:v1:p:foreign-marker-type", (marker: string) => redis.sadd(marker, "x")],
    ] as const) {
      await setMarker(purgeMarkerKey("pp:v1", key));
      expect(await writeOne(client, fillWrite(key, encoded(entry(2)), 2))).toBe(true);
    }

    // Every fill's lock expires: one that does not was never a fill's, and would hold this key's fills for ever.
    for (const [key, setLock] of [
      ["pp:v1:p:foreign-lock", (lock: string) => redis.set(lock, "mine")],
      ["pp:v1:p:foreign-lock-type", (lock: string) => redis.rpush(lock, "x")],
    ] as const) {
      const lock = lockKey("pp:v1", key);
      await setLock(lock);
      expect(await claim(key, "b")).toEqual({ kind: "won" });
      expect(await redis.pttl(lock)).toBeGreaterThan(0);
      // A write with no value only releases the lock (a fill that stopped): nothing is stored.
      expect(await writeOne(client, fillWrite(key, "", 0, "b"))).toBe(false);
      expect(await redis.get(lock)).toBeNull();
      expect(await redis.get(key)).toBeNull();
    }

    // None of it was an error: nothing counted against L2, nothing kept to be replayed.
    expect(client.stats).toMatchObject({ failures: 0, droppedWrites: 0 });
    expect(client.backlogSize()).toBe(0);
  });

  it("a lock key holding what no fill wrote is not a lock: the claim takes it over at once", async () => {
    const client = l2();
    const now = Date.now();
    const foreign: [string, (lock: string) => Promise<unknown>][] = [
      ["a value that is not a token, for ten minutes", (lock) => redis.set(lock, "someone-else", { px: 600_000 })],
      ["a token's shape with no UUID", (lock) => redis.set(lock, `${now}.abc`, { px: 2000 })],
      ["a token that outlives any lock (ten minutes)", (lock) => redis.set(lock, lockToken(now), { px: 600_000 })],
      ["a token that never expires", (lock) => redis.set(lock, lockToken(now))],
      ["another type", (lock) => redis.hset(lock, { holder: "x" })],
    ];
    for (const [name, write] of foreign) {
      const key = `pp:v1:p:foreign-lock-${name.replace(/\W+/g, "-")}`;
      const lock = lockKey("pp:v1", key);
      await write(lock);
      const token = lockToken(now);
      expect(await claimOne(client, key, lock, { token, lockTtlMs: 3000, freshBeyond: now, notBefore: 0, freshAfter: 0 }), name).toEqual({ kind: "won" });
      expect(await redis.get(lock), name).toBe(token);
      expect(await redis.pttl(lock), name).toBeLessThanOrEqual(3000);
    }
    // A fill's own lock, within its TTL, still holds.
    const key = "pp:v1:p:real-lock";
    const lock = lockKey("pp:v1", key);
    await redis.set(lock, lockToken(now), { px: 3000 });
    expect(await claimOne(client, key, lock, { token: lockToken(now), lockTtlMs: 3000, freshBeyond: now, notBefore: 0, freshAfter: 0 })).toEqual({
      kind: "lost",
    });
    expect(client.stats).toMatchObject({ failures: 0 });
  });

  it("a lock always expires, so a crashed holder blocks nobody for long", async () => {
    const client = l2();
    const key = "pp:v1:p:crashed-holder";
    const lock = lockKey("pp:v1", key);
    expect(await claimOne(client, key, lock, { token: "crashed", lockTtlMs: 150, freshBeyond: Date.now(), notBefore: 0, freshAfter: 0 })).toEqual({
      kind: "won",
    });
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(await claimOne(client, key, lock, { token: "next", lockTtlMs: 150, freshBeyond: Date.now(), notBefore: 0, freshAfter: 0 })).toEqual({ kind: "won" });
  });
});

describe("L2 time budget and breaker", () => {
  it("answers undefined within its budget when Redis hangs, then opens the breaker", async () => {
    const client = l2(100);
    redisServer.pause();
    try {
      for (let i = 0; i < 3; i++) {
        const started = Date.now();
        expect(await client.readMany(["t:a"])).toEqual([undefined]);
        expect(Date.now() - started).toBeLessThan(1000);
      }
      expect(client.breaker.state()).toBe("open");
      const started = Date.now();
      expect(await client.readMany(["t:a"])).toEqual([undefined]);
      expect(Date.now() - started).toBeLessThan(20); // not even attempted
      expect(client.stats.skipped).toBe(1);
      expect(await writeOne(client, fillWrite("t:w", "1|1|1|1|j|{}", 1, "", 1000))).toBeUndefined();
      expect(client.stats.droppedWrites).toBe(1);
      // The write was kept: written once Redis answers and the breaker lets calls through.
      expect(client.backlogSize()).toBe(1);
    } finally {
      redisServer.resume();
    }
  });

  // With confirmTimeouts (the tier's setting), time-outs alone open the
  // breaker only when Redis does not answer a direct probe either.
  function confirmingL2(): L2 {
    return createL2({
      url: gateway.url,
      token: TOKEN,
      timeoutMs: 50,
      writeTimeoutMs: 400,
      breaker: createBreaker({ failureThreshold: 3, coolDownMs: 60_000, confirmTimeouts: true, clock: systemClock }),
    });
  }

  it("does not open on time-outs when Redis answers the probe they ask for (a stall that ends)", async () => {
    const client = confirmingL2();
    redisServer.pause();
    // Redis comes back while the probe waits: the reads timed out, the probe is answered.
    const resume = setTimeout(() => redisServer.resume(), 250);
    try {
      const background: Promise<unknown>[] = [];
      // Three counted time-outs (on a loaded machine, one this process noticed late is its own and not counted: l2Guard.ts).
      for (let i = 0; i < 10 && client.stats.countedTimeouts < 3; i++) {
        expect(await client.readMany(["t:c"], { background: (work) => background.push(work) })).toEqual([undefined]);
      }
      expect(client.stats.countedTimeouts).toBe(3);
      // The probe was handed to the request's waitUntil: the read that asked for it did not wait.
      expect(background).toHaveLength(1);
      expect(client.stats.outagesDismissed).toBe(0);
      await Promise.all(background);
      expect(client.stats.outagesDismissed).toBe(1);
      expect(client.breaker.state()).toBe("closed");
      // The dismissed time-outs are forgotten: one more does not reopen the question.
      expect(await client.readMany(["t:c"])).toEqual([null]);
    } finally {
      clearTimeout(resume);
      redisServer.resume();
    }
  });

  it("opens on time-outs when the probe they ask for times out too (Redis hangs)", async () => {
    const client = confirmingL2();
    redisServer.pause();
    try {
      // No waitUntil given (a caller off the visitor's path): the third counted
      // time-out waits for the probe. On a loaded machine a time-out this process
      // noticed late is its own, not counted (l2Guard.ts): a few more reads then.
      for (let i = 0; i < 10 && client.breaker.state() !== "open"; i++) expect(await client.readMany(["t:c"])).toEqual([undefined]);
      expect(client.breaker.state()).toBe("open");
      expect(client.stats.countedTimeouts).toBeGreaterThanOrEqual(3);
      expect(client.stats.outagesDismissed).toBe(0);
    } finally {
      redisServer.resume();
    }
  });

  it("keeps passive calls (purge-log syncs) off the breaker: their failures never open it", async () => {
    const client = l2(100);
    redisServer.pause();
    try {
      for (let i = 0; i < 4; i++) expect(await client.run((redis) => redis.get("t:p"), { passive: true })).toBeUndefined();
      expect(client.stats.failures).toBe(4);
      expect(client.breaker.state()).toBe("closed");
    } finally {
      redisServer.resume();
    }
  });

  it("replays the backlog once L2 answers again, never over a newer version", async () => {
    const client = createL2({
      url: gateway.url,
      token: TOKEN,
      timeoutMs: 100,
      breaker: createBreaker({ failureThreshold: 3, coolDownMs: 200, clock: systemClock }),
    });
    redisServer.pause();
    try {
      for (let i = 0; i < 3; i++) await client.readMany(["t:open"]);
      expect(client.breaker.state()).toBe("open");
      await writeOne(client, fillWrite("t:old", "3|1|1|1|j|{}", 3));
      await writeOne(client, fillWrite("t:new", "5|1|1|1|j|{}", 5));
    } finally {
      redisServer.resume();
    }
    await redis.set("t:old", "4|1|1|1|j|{}"); // another isolate wrote a newer version meanwhile
    expect(client.backlogSize()).toBe(2);
    await client.flushBacklog(); // still open: nothing tried
    expect(client.backlogSize()).toBe(2);
    await new Promise((resolve) => setTimeout(resolve, 250)); // past the cool-down: the flush is the probe
    await client.flushBacklog();
    expect(client.breaker.state()).toBe("closed");
    expect(client.backlogSize()).toBe(0);
    expect(client.stats.replayedWrites).toBe(2);
    expect(await redis.get("t:new")).toBe("5|1|1|1|j|{}");
    expect(await redis.get("t:old")).toBe("4|1|1|1|j|{}");
  });
});

describe("L2 fill claims", () => {
  it("hand back an older copy with the lock, to fall back on if the origin fails", async () => {
    const client = l2();
    const key = "pp:v1:p:older-copy";
    const lock = lockKey("pp:v1", key);
    const now = Date.now();
    const old = { ...entry(3), fetchedAt: now - 2000, freshUntil: now - 1000, staleUntil: now - 500, errorUntil: now + 60_000 };
    await redis.set(key, encoded(old), { px: 60_000 });
    const claim = await claimOne(client, key, lock, { token: "token", lockTtlMs: 3000, freshBeyond: now, notBefore: 0, freshAfter: 0 });
    expect(claim?.kind).toBe("won");
    expect(claim && "stale" in claim && versionOf(claim.stale)).toBe(3);
    // A copy older than a purge is not handed back.
    await redis.del(lock);
    const afterPurge = await claimOne(client, key, lock, { token: "token", lockTtlMs: 3000, freshBeyond: now, notBefore: now + 1, freshAfter: now + 1 });
    expect(afterPurge).toEqual({ kind: "won" });
  });

  it("never hand back a copy fetched before a soft purge as fresh, but keep it as the older copy", async () => {
    const client = l2();
    const key = "pp:v1:p:soft-purged";
    const lock = lockKey("pp:v1", key);
    const now = Date.now();
    const copy = { ...entry(4), fetchedAt: now - 1000, freshUntil: now + 60_000, staleUntil: now + 120_000, errorUntil: now + 180_000 };
    await redis.set(key, encoded(copy), { px: 60_000 });
    // Without the purge the copy is fresh: the claim returns it.
    expect((await claimOne(client, key, lock, { token: "t", lockTtlMs: 3000, freshBeyond: now, notBefore: 0, freshAfter: 0 }))?.kind).toBe("copy");
    // Soft-purged after it was fetched: the lock goes to this fill, with the copy to fall back on.
    const claim = await claimOne(client, key, lock, { token: "t", lockTtlMs: 3000, freshBeyond: now, notBefore: 0, freshAfter: now - 500 });
    expect(claim?.kind).toBe("won");
    expect(claim && "stale" in claim && versionOf(claim.stale)).toBe(4);
  });
});
