// Values written straight into the real redis-server under the keys the tier
// uses, as no fill would write them (issue 12, item 2): the builders shared
// by the tests that check that whatever Redis holds is untrusted
// (l2-values.test.ts, hostile.test.ts), and a look at what a key holds
// afterwards through the tier's own decoder.
import { gzipSync } from "node:zlib";
import { Redis as IORedis } from "ioredis";
import { decodeEntry } from "../../src/cache/l2/codec";
import { entryKey, lockKey } from "../../src/cache/keys";
import { longestLifeMs } from "../../src/cache/l2/l2Entries";
import { DEFAULTS, DEFAULT_POLICIES } from "../../src/config/defaults";
import type { ResourceName } from "../../src/origin/resources";
import type { Stack } from "./stack";

/** Higher than any version the demo origin gives: the write guard keeps such a value unless the tier deletes it. */
export const HIGH_VERSION = 9_000_000_000;
export const HOUR = 3_600_000;

/** A plain Redis connection to the stack's redis-server, past the gateway and the tier. */
export function directRedis(stack: Stack): IORedis {
  return new IORedis({ port: stack.redis.port, protocol: 2, lazyConnect: true, maxRetriesPerRequest: 1 });
}

/** The key of one resource of one id, as the tier names it. */
export function l2KeyOf(resource: ResourceName, id: string): string {
  return entryKey(DEFAULTS.keyPrefix, resource, id);
}

/** `<version>|<fetchedAt>|<freshUntil>|<staleUntil>|` as a fill writes it, fresh for an hour from now, with a version the origin's answer cannot overwrite. */
export function entryHeader(version = HIGH_VERSION, now = Date.now()): string {
  return `${version}|${now}|${now + HOUR}|${now + 2 * HOUR}|`;
}

/** `{"d":…,"e":…}` usable on error for a day. */
function entryPayload(data: unknown, now = Date.now()): string {
  return JSON.stringify({ d: data, e: now + 24 * HOUR });
}

/** A JSON value (`j|`) of `data` under a good header: valid or not depending on `data` alone. */
export function jsonValue(data: unknown): string {
  return `${entryHeader()}j|${entryPayload(data)}`;
}

/** A value over the stored-value cap (DEFAULTS.l2ValueMaxChars), otherwise well formed. */
export function oversizedValue(): string {
  return jsonValue({ pad: "x".repeat(DEFAULTS.l2ValueMaxChars) });
}

/**
 * A compressed value (`z|`) that inflates to `inflatedBytes` of zeros: about
 * a thousandth of that as gzip, a third more as base64; 200 MB stays well
 * within the stored-value cap, and inflated in full would kill an isolate.
 */
export function gzipBombValue(inflatedBytes = 200 * 1024 * 1024): string {
  return `${entryHeader()}z|${gzipSync(new Uint8Array(inflatedBytes)).toString("base64")}`;
}

/** What `key` of that resource and id holds now: nothing, an entry of it that a fill wrote (the tier's own decoder), or anything else. */
export async function heldEntry(redis: IORedis, resource: ResourceName, id: string): Promise<"none" | "filled" | "other"> {
  const key = l2KeyOf(resource, id);
  const type = await redis.type(key);
  if (type !== "string") return type === "none" ? "none" : "other";
  const value = await redis.get(key);
  if (value === null) return "none";
  const decoded = decodeEntry(value, { resource, id, now: Date.now(), maxLifeMs: longestLifeMs(DEFAULT_POLICIES[resource]) });
  return "entry" in decoded && decoded.entry.version < HIGH_VERSION ? "filled" : "other";
}

/**
 * Whether the fill lock of that resource and id no longer holds anybody up:
 * gone, or spent (cache/l2/l2.ts, CLAIM_FILLS): it expires, and the entry
 * stored was fetched at or after it was claimed (its token's time).
 */
export async function lockSpent(redis: IORedis, resource: ResourceName, id: string): Promise<boolean> {
  const lock = lockKey(DEFAULTS.keyPrefix, l2KeyOf(resource, id));
  if ((await redis.exists(lock)) === 0) return true;
  const claimedAt = Number(/^(\d+)\./.exec((await redis.get(lock)) ?? "")?.[1]);
  const fetchedAt = Number(((await redis.get(l2KeyOf(resource, id))) ?? "").split("|")[1]);
  return (await redis.pttl(lock)) > 0 && claimedAt <= fetchedAt;
}

/** Whether `key` of that resource and id is now empty or holds an entry of it that a fill wrote. */
export async function goneOrGood(redis: IORedis, resource: ResourceName, id: string): Promise<boolean> {
  return (await heldEntry(redis, resource, id)) !== "other";
}
