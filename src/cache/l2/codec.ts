// How an entry travels to and from Redis:
//
//   <version>|<fetchedAt>|<freshUntil>|<staleUntil>|<j or z>|<payload>
//
// The version and deadlines come first, in clear, so that the Lua scripts can guard writes (never replace a newer version), judge freshness
// and mark an entry stale (soft purge) without decoding. The payload is JSON (`j`) or, above the size threshold, gzip bytes as base64 text
// (`z`): @upstash/redis carries strings, not bytes.
//
// What comes back from Redis is untrusted (docs/architecture.md#keys-and-values-in-redis): a value is an entry only if all of it checks
// out, cheapest first; anything else is reported as invalid, with the reason, and is never used.
//
// gzip goes through node:zlib, not DecompressionStream: workerd's DecompressionStream inflates all of a written chunk before the first
// read, even for a reader that cancels, where gunzipSync's `maxOutputLength` stops at the cap.
import { gunzipSync, gzipSync } from "node:zlib";
import { DEFAULTS } from "../../config/defaults";
import { ORIGIN_MAX_BODY_BYTES } from "../../origin/client";
import type { ResourceName, ResourceTypes } from "../../origin/resources";
import { validateResource } from "../../origin/validate";
import { base64ToBytes, bytesToBase64 } from "../../shared/base64";
import { dataJson, type Entry } from "../entry";

interface Payload {
  d: unknown;
  e: number;
}

/** What a value read from L2 is expected to hold: the resource and id of its key, judged at `now`. */
export interface EntryExpectation<R extends ResourceName> {
  resource: R;
  id: string;
  now: number;
  /** The longest any deadline may lie past the fetch, ms: what today's policy can produce (see l2Entries.ts). */
  maxLifeMs: number;
}

// The largest entry's JSON, in bytes once decompressed, is an origin answer the client reads (ORIGIN_MAX_BODY_BYTES): decompression stops
// there, since a 50 KB gzip bomb would inflate to 50 MB, and a few kill a 128 MB isolate.

/** Why a value is not an entry. */
type InvalidReason =
  /** Longer than DEFAULTS.l2ValueMaxChars: not looked at. */
  | "too-long"
  /** Not `<4 integers>|<j or z>|`, or an integer past 2^53. */
  | "header"
  /** Deadlines out of order, beyond what the policy allows, or fetched in the future. */
  | "deadlines"
  /** Not gzip, or cut short. */
  | "gzip"
  /** gzip that inflates past ORIGIN_MAX_BODY_BYTES (decompression stopped there). */
  | "too-large"
  /** Not `{"d":…,"e":<integer>}`. */
  | "payload"
  /** Data that breaks the origin contract, or belongs to another id. */
  | "schema"
  /** The header's version is not the data's (0 for an absent entry). */
  | "version";

export type Decoded<T> = { entry: Entry<T> } | { invalid: InvalidReason };

const HEADER = /^(\d{1,16})\|(\d{1,16})\|(\d{1,16})\|(\d{1,16})\|([jz])\|/;

type Header = Pick<Entry, "version" | "fetchedAt" | "freshUntil" | "staleUntil">;

/** The version and deadlines in clear, each followed by its bar: what a value starts with, before the payload's kind. */
function headerText({ version, fetchedAt, freshUntil, staleUntil }: Header): string {
  return `${version}|${fetchedAt}|${freshUntil}|${staleUntil}|`;
}

/** The longest header a value can have: four integers at their largest (16 digits, as HEADER reads them), then the payload's kind and its bar. */
const LARGEST = Number.MAX_SAFE_INTEGER;
export const HEADER_MAX_CHARS = `${headerText({ version: LARGEST, fetchedAt: LARGEST, freshUntil: LARGEST, staleUntil: LARGEST })}z|`.length;

/** Integers that Redis's Lua (doubles) and JavaScript read alike. */
function areSafe(...numbers: number[]): boolean {
  return numbers.every((n) => Number.isSafeInteger(n) && n >= 0);
}

/** The order the life cycle gives deadlines (entry.ts; a soft purge only brings freshUntil forward). */
function inOrder({ fetchedAt, freshUntil, staleUntil }: Header, errorUntil: number): boolean {
  return fetchedAt <= freshUntil && freshUntil <= staleUntil && freshUntil <= errorUntil;
}

/**
 * The value to store for `entry`, or undefined when it would not be read back (too large, or numbers that decodeEntry refuses): such an
 * entry is served from L1 and the origin only, never stored to be refused later.
 */
export function encodeEntry(entry: Entry, compressAboveBytes: number): string | undefined {
  if (!areSafe(entry.version, entry.fetchedAt, entry.freshUntil, entry.staleUntil, entry.errorUntil) || !inOrder(entry, entry.errorUntil)) return undefined;
  // An entry read from L1 carries its data's JSON text: the same payload without parsing and stringifying it again.
  const text = dataJson(entry);
  const json = text === undefined ? JSON.stringify({ d: entry.data, e: entry.errorUntil } satisfies Payload) : `{"d":${text},"e":${entry.errorUntil}}`;
  const head = headerText(entry);
  if (json.length <= compressAboveBytes) return `${head}j|${json}`;
  const bytes = new TextEncoder().encode(json);
  if (bytes.length > ORIGIN_MAX_BODY_BYTES) return undefined;
  const value = `${head}z|${bytesToBase64(gzipSync(bytes))}`;
  return value.length <= DEFAULTS.l2ValueMaxChars ? value : undefined;
}

/**
 * What the header of `value` says about its freshness, unchecked beyond its form: enough to tell that a value cannot be what a caller waits
 * for without decoding it. Whatever it promises is checked by decodeEntry.
 */
export function peekFreshness(value: string): Pick<Entry, "fetchedAt" | "freshUntil"> | undefined {
  const match = HEADER.exec(value);
  return match ? { fetchedAt: Number(match[2]), freshUntil: Number(match[3]) } : undefined;
}

/** The entry `value` holds, checked against what its key promises; or why it holds none. */
export function decodeEntry<R extends ResourceName>(value: string, expected: EntryExpectation<R>): Decoded<ResourceTypes[R]> {
  if (value.length > DEFAULTS.l2ValueMaxChars) return { invalid: "too-long" };
  const match = HEADER.exec(value);
  if (!match) return { invalid: "header" };
  const header: Header = { version: Number(match[1]), fetchedAt: Number(match[2]), freshUntil: Number(match[3]), staleUntil: Number(match[4]) };
  if (!areSafe(header.version, header.fetchedAt, header.freshUntil, header.staleUntil)) return { invalid: "header" };
  if (!inOrder(header, header.freshUntil) || header.fetchedAt > expected.now + DEFAULTS.l2MaxClockSkewMs) return { invalid: "deadlines" };

  const body = value.slice(match[0].length);
  const json = match[5] === "j" ? body : gunzipped(body);
  // A `j` body is within the value's cap, smaller than the JSON's; `gunzipped` stops at the JSON's.
  if (typeof json !== "string") return json;

  const payload = parsedPayload(json);
  if (!payload) return { invalid: "payload" };
  const errorUntil = payload.e;
  if (!areSafe(errorUntil) || !inOrder(header, errorUntil) || Math.max(header.staleUntil, errorUntil) - header.fetchedAt > expected.maxLifeMs)
    return { invalid: "deadlines" };

  const data = payload.d === null ? null : validateResource(expected.resource, expected.id, payload.d);
  if (payload.d !== null && data === null) return { invalid: "schema" };
  if ((data?.version ?? 0) !== header.version) return { invalid: "version" };
  return { entry: { data, ...header, errorUntil } };
}

/** The JSON a `z` body holds, or why it holds none; inflates at most the cap (plus one of zlib's chunks). */
function gunzipped(body: string): string | { invalid: InvalidReason } {
  let bytes: Uint8Array;
  try {
    bytes = gunzipSync(base64ToBytes(body), { maxOutputLength: ORIGIN_MAX_BODY_BYTES });
  } catch (error) {
    // Over the cap: Node's ERR_BUFFER_TOO_LARGE and workerd's "Memory limit exceeded" are both RangeErrors.
    return { invalid: error instanceof RangeError ? "too-large" : "gzip" };
  }
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    return { invalid: "payload" };
  }
}

function parsedPayload(json: string): Payload | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    return undefined;
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed) || !("d" in parsed) || !("e" in parsed)) return undefined;
  return typeof parsed.e === "number" ? (parsed as Payload) : undefined;
}
