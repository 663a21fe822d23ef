// A plain Bloom filter over product ids: no Node or Workers APIs, so that the same code builds the filter in Node (the
// rebuild CLI) and reads it in a Worker, bit for bit.
//
// Layout: the filter's m bits are stored 7 per byte, in the low 7 bits; the top bit of every byte stays 0. Why: segments live
// in Redis as strings that travel through Upstash's JSON API, and @upstash/redis decodes every reply as UTF-8, which mangles
// binary bytes (≥ 0x80) beyond repair. Bytes below 0x80 are ASCII, which survives JSON and UTF-8 both ways, so plain GET/MGET
// and SET move segments at Redis' own speed (no codec in Lua spending Redis's CPU on every segment), for 8/7 of the memory.
//
// Bit order is Redis' (SETBIT/GETBIT: bit 0 is the most significant bit of byte 0): filter bit j of a segment is
// Redis bit 8 × ⌊j/7⌋ + 1 + j mod 7 of its key, so SETBIT sets exactly the bit `add` sets, and a segment read back with
// GET is byte for byte the segment held here. Segments are the filter's bytes cut every SEGMENT_BYTES, one Redis key
// each: a segment holds SEGMENT_BYTES × 7 bits, so filter bit j is in byte ⌊j/7⌋ of the whole.

import { bytesToBinary } from "../shared/base64";
import { hashPair } from "../shared/hash";

/** 8 KB per segment: small Redis values (no big keys), a few per REST round trip. */
export const SEGMENT_BYTES = 8192;
/** Filter bits per stored byte: the top bit stays 0 (see above). */
export const BITS_PER_BYTE = 7;
export const SEGMENT_BITS = SEGMENT_BYTES * BITS_PER_BYTE;

export interface BloomShape {
  /** Bits in the filter, a multiple of 7 (whole bytes). */
  m: number;
  /** Bit positions per id. */
  k: number;
}

/** Optimal size for `capacity` ids at false-positive rate `fpRate`: m = -n ln p / (ln 2)^2, k = round(m/n ln 2). */
export function bloomShape(capacity: number, fpRate: number): BloomShape {
  if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError("capacity must be a positive integer");
  if (!(fpRate > 0 && fpRate < 1)) throw new RangeError("fpRate must be between 0 and 1");
  const bits = Math.ceil((-capacity * Math.log(fpRate)) / (Math.LN2 * Math.LN2));
  // Whole bytes, so that segments and Redis strings have no partial byte.
  const m = Math.ceil(bits / BITS_PER_BYTE) * BITS_PER_BYTE;
  const k = Math.max(1, Math.round((m / capacity) * Math.LN2));
  return { m, k };
}

/** The most ids a filter of at most `bytes` bytes holds at `fpRate`: bloomShape's inverse. */
export function capacityFor(bytes: number, fpRate: number): number {
  let capacity = Math.floor((bytes * BITS_PER_BYTE * Math.LN2 * Math.LN2) / -Math.log(fpRate));
  // Rounding may leave it one id over: step back until bloomShape agrees.
  while (capacity > 1 && byteLengthFor(bloomShape(capacity, fpRate).m) > bytes) capacity--;
  return capacity;
}

export function byteLengthFor(m: number): number {
  return m / BITS_PER_BYTE;
}

export function segmentCountFor(m: number): number {
  return Math.ceil(byteLengthFor(m) / SEGMENT_BYTES);
}

/** Bytes of segment `index` of a filter of `m` bits: SEGMENT_BYTES except maybe the last. */
export function segmentLengthFor(m: number, index: number): number {
  return Math.min(SEGMENT_BYTES, byteLengthFor(m) - index * SEGMENT_BYTES);
}

/** Where filter bit `bit` lives in Redis: its segment, and SETBIT's offset in that segment's key. */
export function redisBitOf(bit: number): { segment: number; offset: number } {
  const segment = Math.floor(bit / SEGMENT_BITS);
  const within = bit - segment * SEGMENT_BITS;
  return { segment, offset: Math.floor(within / BITS_PER_BYTE) * 8 + 1 + (within % BITS_PER_BYTE) };
}

/**
 * Writes the k bit positions of `id` in a filter of shape {m, k} into `out` (enhanced double hashing,
 * Dillinger & Manolios: the stride changes at each step, so that a stride sharing a factor with m cannot cycle over
 * a few positions). Needs only the shape, not the bits: `add` in Redis computes the positions without holding the filter.
 */
export function positionsOf(id: string, { m, k }: BloomShape, out: Uint32Array = new Uint32Array(k)): Uint32Array {
  const hashes = hashPair(id);
  let x = hashes[0]! % m;
  let y = hashes[1]! % m;
  out[0] = x;
  for (let i = 1; i < k; i++) {
    x = (x + y) % m;
    y = (y + i) % m;
    out[i] = x;
  }
  return out;
}

export class Bloom {
  readonly m: number;
  readonly k: number;
  /** The filter's m / 7 bytes: filter bit j is bit j mod 7 (from 0x40 down) of byte ⌊j/7⌋. */
  readonly bytes: Uint8Array;
  /** The bytes' SEGMENT_BYTES slices (views, not copies), one Redis key each. */
  readonly segments: Uint8Array[];
  /** Scratch space for one id's bit positions: no allocation per lookup. */
  private readonly bits: Uint32Array;

  constructor({ m, k }: BloomShape, bytes?: Uint8Array) {
    if (!Number.isInteger(m) || m < BITS_PER_BYTE || m % BITS_PER_BYTE !== 0) throw new RangeError("m must be a positive multiple of 7");
    if (!Number.isInteger(k) || k < 1 || k > 64) throw new RangeError("k must be from 1 to 64");
    this.m = m;
    this.k = k;
    this.bits = new Uint32Array(k);
    if (bytes && bytes.length !== byteLengthFor(m)) throw new RangeError(`expected ${byteLengthFor(m)} bytes, got ${bytes.length}`);
    if (bytes?.some((byte) => byte > 0x7f)) throw new RangeError("a byte has its top bit set");
    this.bytes = bytes ?? new Uint8Array(byteLengthFor(m));
    this.segments = Array.from({ length: segmentCountFor(m) }, (_, i) => this.bytes.subarray(i * SEGMENT_BYTES, (i + 1) * SEGMENT_BYTES));
  }

  static withCapacity(capacity: number, fpRate: number): Bloom {
    return new Bloom(bloomShape(capacity, fpRate));
  }

  add(id: string): void {
    const bits = positionsOf(id, this, this.bits);
    for (let i = 0; i < bits.length; i++) this.setBit(bits[i]!);
  }

  has(id: string): boolean {
    const bits = positionsOf(id, this, this.bits);
    for (let i = 0; i < bits.length; i++) {
      const byte = (bits[i]! / BITS_PER_BYTE) | 0;
      if ((this.bytes[byte]! & (0x40 >>> (bits[i]! - byte * BITS_PER_BYTE))) === 0) return false;
    }
    return true;
  }

  /** Sets filter bit `bit` (0..m-1). */
  setBit(bit: number): void {
    const byte = (bit / BITS_PER_BYTE) | 0;
    this.bytes[byte]! |= 0x40 >>> (bit - byte * BITS_PER_BYTE);
  }

  /** Segment `index` as the ASCII string Redis holds (SET it as is). */
  segmentText(index: number): string {
    return bytesToBinary(this.segments[index]!);
  }
}

/** A segment as read from Redis; null when it cannot be ours (a character beyond ASCII). */
export function textToBytes(text: string): Uint8Array | null {
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code > 0x7f) return null;
    bytes[i] = code;
  }
  return bytes;
}
