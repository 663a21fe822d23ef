// Moving a filter's segments and logs between Redis and memory. Every call goes through the L2 client's
// `run` (time budget, breaker): `undefined` means "L2 unavailable", and the callers fail open.
import type { Redis } from "@upstash/redis/cloudflare";
import { CALL_MAX_BYTES, type L2 } from "../cache/l2/l2";
import { Bloom, byteLengthFor, SEGMENT_BYTES, segmentLengthFor, textToBytes } from "./bloom";
import { KNOWN_IDS_LIMITS } from "./limits";
import type { KnownIdsKeys } from "./keys";
import type { FilterMeta } from "./meta";
import { scriptsFor } from "./scripts";

export type LoadResult = { kind: "loaded"; bloom: Bloom } | { kind: "unavailable" } | { kind: "damaged"; reason: string };

/** The meta's text; null when there is none. */
export function readMeta(l2: L2, keys: KnownIdsKeys): Promise<string | null | undefined> {
  return l2.run((redis) => redis.get<string>(keys.meta));
}

/** = CALL_MAX_BYTES of segments: the bytes one Redis call of the tier carries, so that it stays well inside its budget (32 segments of 8 KB). */
const SEGMENTS_PER_CALL = CALL_MAX_BYTES / SEGMENT_BYTES;

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let start = 0; start < items.length; start += size) out.push(items.slice(start, start + size));
  return out;
}

const range = (count: number) => Array.from({ length: count }, (_, i) => i);

/**
 * Reads every segment of `filter` into a new Bloom (MGET, a few segments per call). A missing, short or non-ASCII segment means the
 * filter is damaged (evicted, recreated by a SETBIT, overwritten): using it would refuse real products, so the caller fails open.
 */
export async function loadFilter(l2: L2, keys: KnownIdsKeys, filter: FilterMeta): Promise<LoadResult> {
  const bytes = new Uint8Array(byteLengthFor(filter.m));
  // One call at a time: the load runs in the background of a visitor's request and takes one of its connections.
  for (const indexes of chunks(range(filter.segmentCount), SEGMENTS_PER_CALL)) {
    const texts = await l2.run((redis) => redis.mget<(string | null)[]>(...indexes.map((i) => keys.segment(filter.version, i))));
    if (texts === undefined) return { kind: "unavailable" };
    for (const [j, segment] of indexes.entries()) {
      const text = texts[j];
      if (typeof text !== "string") return { kind: "damaged", reason: `segment ${segment} is missing` };
      const segmentBytes = textToBytes(text);
      if (!segmentBytes) return { kind: "damaged", reason: `segment ${segment} is not ASCII` };
      if (segmentBytes.length !== segmentLengthFor(filter.m, segment))
        return { kind: "damaged", reason: `segment ${segment} has ${segmentBytes.length} bytes` };
      bytes.set(segmentBytes, segment * SEGMENT_BYTES);
    }
  }
  return { kind: "loaded", bloom: new Bloom(filter, bytes) };
}

/** One pipeline of `add` over `items`, as a write; undefined when L2 did not answer. */
function pipelined<T>(l2: L2, items: readonly T[], add: (pipe: ReturnType<Redis["pipeline"]>, item: T) => unknown) {
  return l2.run(
    (redis) => {
      const pipe = redis.pipeline();
      for (const item of items) add(pipe, item);
      return pipe.exec();
    },
    { isWrite: true },
  );
}

/** Writes the given segments of `bloom` as `version`, each with a fresh TTL. */
export async function writeFilter(l2: L2, keys: KnownIdsKeys, version: string, bloom: Bloom, indexes: number[], ttlMs: number): Promise<true | undefined> {
  for (const batch of chunks(indexes, SEGMENTS_PER_CALL)) {
    const written = await pipelined(l2, batch, (pipe, i) => pipe.set(keys.segment(version, i), bloom.segmentText(i), { px: ttlMs }));
    if (written === undefined) return undefined;
  }
  return true;
}

/**
 * The ids added to the current `version` since add number `from`, with the count they bring it to: "behind" when its log
 * no longer reaches back that far, "replaced" when `version` is no longer current; undefined when L2 is unavailable.
 */
export async function readTail(
  l2: L2,
  keys: KnownIdsKeys,
  version: string,
  from: number,
): Promise<{ changedAt: number; ids: string[] } | "behind" | "replaced" | undefined> {
  const reply = await l2.run((redis) => scriptsFor(redis).readTail(keys.meta, keys.log(version), version, from));
  if (reply === undefined) return undefined;
  if (reply[0] === 0) return "replaced";
  if (reply[0] === 1) return "behind";
  return { changedAt: reply[1], ids: reply[2] };
}

/** Ids logged for the build of `version` from position `from` (at most `logCap` of them). */
export function readLog(l2: L2, keys: KnownIdsKeys, version: string, from: number): Promise<string[] | undefined> {
  return l2.run((redis) => redis.lrange<string>(keys.log(version), from, KNOWN_IDS_LIMITS.logCap - 1));
}

/**
 * Shortens the life of a version's keys (segments and log) to `ms`: a replaced version gets a grace for
 * isolates still loading it; a build that never switched, 0 (PEXPIRE with a non-positive time deletes the key).
 */
export async function expireVersion(l2: L2, keys: KnownIdsKeys, version: string, segmentCount: number, ms: number): Promise<void> {
  const all = [...range(segmentCount).map((i) => keys.segment(version, i)), keys.log(version)];
  // One pipeline: a few bytes a key, and at most maxBytes / SEGMENT_BYTES keys (768).
  await pipelined(l2, all, (pipe, key) => pipe.pexpire(key, ms));
}
