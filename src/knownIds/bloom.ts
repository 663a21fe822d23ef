// A plain Bloom filter over product ids: no Node or Workers APIs beyond
// btoa/atob, so that the same code builds the filter in Node (the rebuild
// CLI) and reads it in a Worker, bit for bit.
//
// Bit order is Redis' (SETBIT/GETBIT): bit i is byte i >> 3, and bit 0 of a
// byte is its most significant bit. The bit array is cut into segments of at
// most SEGMENT_BYTES, one Redis key each, so a segment read back with GET is
// byte for byte the segment held here, and SETBIT on a segment key at
// `bit mod SEGMENT_BITS` sets exactly the bit that `add` sets.

/** 8 KB per segment: small Redis values (no big keys), a few per REST round trip. */
export const SEGMENT_BYTES = 8192;
/** 2^16: `bit >>> 16` is the segment, `bit & 0xffff` the offset inside it. */
export const SEGMENT_BITS = SEGMENT_BYTES * 8;

export interface BloomShape {
  /** Bits in the filter, a multiple of 8. */
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
  const m = Math.ceil(bits / 8) * 8;
  const k = Math.max(1, Math.round((m / capacity) * Math.LN2));
  return { m, k };
}

export function segmentCountFor(m: number): number {
  return Math.ceil(m / 8 / SEGMENT_BYTES);
}

/** Bytes of segment `index` of a filter of `m` bits: SEGMENT_BYTES except maybe the last. */
export function segmentLengthFor(m: number, index: number): number {
  return Math.min(SEGMENT_BYTES, m / 8 - index * SEGMENT_BYTES);
}

/** Scratch space for one id's hashes: JS runs one call at a time, so one buffer serves all filters. */
const hashes = new Uint32Array(2);

/**
 * Two 32-bit hashes of one string in one pass (cyrb53's mixing: two
 * multiply-xor lanes, cross-mixed at the end). Math.imul keeps it exact
 * 32-bit integer arithmetic, identical in every JS engine.
 */
function hashPair(text: string): void {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507);
  h1 ^= Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507);
  h2 ^= Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  hashes[0] = h1 >>> 0;
  hashes[1] = h2 >>> 0;
}

/**
 * Writes the k bit positions of `id` in a filter of shape {m, k} into `out`
 * (enhanced double hashing, Dillinger & Manolios: the stride changes at each
 * step, so that a stride sharing a factor with m cannot cycle over a few
 * positions). Needs only the shape, not the bits: `add` in Redis computes
 * the positions without holding the filter.
 */
export function positionsOf(id: string, { m, k }: BloomShape, out: Uint32Array = new Uint32Array(k)): Uint32Array {
  hashPair(id);
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
  readonly segments: Uint8Array[];
  /** Scratch space for one id's bit positions: no allocation per lookup. */
  private readonly bits: Uint32Array;

  constructor({ m, k }: BloomShape, segments?: Uint8Array[]) {
    if (!Number.isInteger(m) || m < 8 || m % 8 !== 0) throw new RangeError("m must be a positive multiple of 8");
    if (!Number.isInteger(k) || k < 1 || k > 64) throw new RangeError("k must be from 1 to 64");
    this.m = m;
    this.k = k;
    this.bits = new Uint32Array(k);
    const count = segmentCountFor(m);
    if (segments) {
      if (segments.length !== count) throw new RangeError(`expected ${count} segments, got ${segments.length}`);
      segments.forEach((segment, index) => {
        if (segment.length !== segmentLengthFor(m, index)) throw new RangeError(`segment ${index} has the wrong length`);
      });
      this.segments = segments;
    } else {
      this.segments = Array.from({ length: count }, (_, index) => new Uint8Array(segmentLengthFor(m, index)));
    }
  }

  static withCapacity(capacity: number, fpRate: number): Bloom {
    return new Bloom(bloomShape(capacity, fpRate));
  }

  /** Rebuilds a filter from exported segments. */
  static fromBase64({ m, k }: BloomShape, segments: string[]): Bloom {
    return new Bloom({ m, k }, segments.map(base64ToBytes));
  }

  add(id: string): void {
    const bits = positionsOf(id, this, this.bits);
    for (let i = 0; i < bits.length; i++) this.setBit(bits[i]!);
  }

  has(id: string): boolean {
    const bits = positionsOf(id, this, this.bits);
    for (let i = 0; i < bits.length; i++) {
      const bit = bits[i]!;
      const segment = this.segments[bit >>> 16]!;
      if ((segment[(bit & 0xffff) >>> 3]! & (0x80 >>> (bit & 7))) === 0) return false;
    }
    return true;
  }

  /** Sets bit `bit` (0..m-1) in Redis' bit order. */
  setBit(bit: number): void {
    const segment = this.segments[bit >>> 16]!;
    segment[(bit & 0xffff) >>> 3]! |= 0x80 >>> (bit & 7);
  }

  get bytes(): number {
    return this.m / 8;
  }

  /** Segment `index` as base64 text: what travels through Upstash's JSON API. */
  segmentBase64(index: number): string {
    return bytesToBase64(this.segments[index]!);
  }
}

/** Which segment holds bit `bit`, and at which bit offset inside it (SETBIT's offset). */
export function segmentOf(bit: number): { segment: number; offset: number } {
  return { segment: Math.floor(bit / SEGMENT_BITS), offset: bit % SEGMENT_BITS };
}

export function bytesToBase64(bytes: Uint8Array): string {
  let binary = "";
  // Chunks keep String.fromCharCode's argument list small.
  for (let i = 0; i < bytes.length; i += 4096) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 4096));
  }
  return btoa(binary);
}

export function base64ToBytes(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}
