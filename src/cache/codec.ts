// How an entry travels to and from Redis:
//
//   <version>|<fetchedAt>|<freshUntil>|<staleUntil>|<j or z>|<payload>
//
// The version and deadlines come first, in clear, so that the Lua scripts can
// guard writes (never replace a newer version), judge freshness and mark an
// entry stale (soft purge) without decoding. The payload is JSON (`j`) or, above the size threshold, gzip
// bytes as base64 text (`z`): @upstash/redis carries strings, not bytes.
import { base64ToBytes, bytesToBase64 } from "../shared/base64";
import type { Entry } from "./entry";

interface Payload {
  d: unknown;
  e: number;
}

/** Bytes L1 charges for an entry: its JSON (UTF-16 in memory, so twice) plus object overhead. */
export function sizeOfJson(jsonLength: number): number {
  return jsonLength * 2 + 256;
}

export async function encodeEntry(entry: Entry, compressAboveBytes: number): Promise<string> {
  const payload: Payload = { d: entry.data, e: entry.errorUntil };
  const json = JSON.stringify(payload);
  const head = `${entry.version}|${entry.fetchedAt}|${entry.freshUntil}|${entry.staleUntil}|`;
  if (json.length <= compressAboveBytes) return `${head}j|${json}`;
  return `${head}z|${bytesToBase64(await gzip(new TextEncoder().encode(json)))}`;
}

/** The entry, or undefined when the value is not one of ours (treated as a miss, never deleted). */
export async function decodeEntry<T>(value: string): Promise<Entry<T> | undefined> {
  const match = /^(\d+)\|(\d+)\|(\d+)\|(\d+)\|([jz])\|/.exec(value);
  if (!match) return undefined;
  const body = value.slice(match[0].length);
  try {
    const json = match[5] === "j" ? body : new TextDecoder().decode(await gunzip(base64ToBytes(body)));
    const payload = JSON.parse(json) as Payload;
    if (typeof payload.e !== "number") return undefined;
    return {
      data: payload.d as T | null,
      version: Number(match[1]),
      fetchedAt: Number(match[2]),
      freshUntil: Number(match[3]),
      staleUntil: Number(match[4]),
      errorUntil: payload.e,
      size: sizeOfJson(json.length),
    };
  } catch {
    return undefined;
  }
}

async function gzip(bytes: Uint8Array): Promise<Uint8Array> {
  return pipeThrough(bytes, new CompressionStream("gzip"));
}

async function gunzip(bytes: Uint8Array): Promise<Uint8Array> {
  return pipeThrough(bytes, new DecompressionStream("gzip"));
}

async function pipeThrough(bytes: Uint8Array, transform: { readable: ReadableStream<Uint8Array>; writable: WritableStream<Uint8Array> }): Promise<Uint8Array> {
  const output = new Response(new Blob([bytes]).stream().pipeThrough(transform));
  return new Uint8Array(await output.arrayBuffer());
}
