// The Bloom filter alone: sizing, no false negatives, the measured
// false-positive rate, Redis bit order, segments and their ASCII form.
import { describe, expect, it } from "vitest";
import {
  Bloom,
  bloomShape,
  byteLengthFor,
  capacityFor,
  positionsOf,
  redisBitOf,
  SEGMENT_BITS,
  SEGMENT_BYTES,
  segmentCountFor,
  textToBytes,
} from "../../src/knownIds/bloom";
import { mulberry32 } from "../../dev/harness/random";

/** Deterministic pseudo-random ids (mulberry32), so that a failure can be replayed. */
function randomIds(count: number, seed: number, prefix: string): string[] {
  const next = mulberry32(seed);
  return Array.from({ length: count }, () => `${prefix}${Math.floor(next() * 1e12).toString(36)}`);
}

describe("sizing", () => {
  it("follows m = -n ln p / (ln 2)^2 and k = round(m/n ln 2)", () => {
    const { m, k } = bloomShape(100_000, 0.01);
    expect(m).toBe(Math.ceil(Math.ceil((-100_000 * Math.log(0.01)) / Math.LN2 ** 2) / 7) * 7);
    expect(m).toBeGreaterThan(958_000);
    expect(m).toBeLessThan(959_000);
    expect(k).toBe(7);
    expect(m % 7).toBe(0);
  });

  it("knows the most ids a number of bytes holds (the largest filter's capacity)", () => {
    for (const [bytes, p] of [
      [6 * 1024 * 1024, 0.01],
      [6 * 1024 * 1024, 0.0001],
      [8192, 0.3],
    ] as const) {
      const capacity = capacityFor(bytes, p);
      expect(byteLengthFor(bloomShape(capacity, p).m)).toBeLessThanOrEqual(bytes);
      expect(byteLengthFor(bloomShape(Math.ceil(capacity * 1.01), p).m)).toBeGreaterThan(bytes);
    }
  });

  it("refuses nonsense", () => {
    expect(() => bloomShape(0, 0.01)).toThrow(RangeError);
    expect(() => bloomShape(10, 0)).toThrow(RangeError);
    expect(() => bloomShape(10, 1)).toThrow(RangeError);
  });
});

describe("membership", () => {
  const n = 100_000;
  const bloom = Bloom.withCapacity(n, 0.01);
  const members = Array.from({ length: n }, (_, i) => `p-${String(i + 1).padStart(6, "0")}`);
  members.forEach((id) => bloom.add(id));

  it("never forgets a member", () => {
    expect(members.filter((id) => !bloom.has(id))).toEqual([]);
  });

  it("keeps its false-positive rate near p: ≤ 1.5% over 100,000 random non-members at n = 100k, p = 1%", () => {
    const others = randomIds(100_000, 42, "q-");
    const falsePositives = others.filter((id) => bloom.has(id)).length;
    const rate = falsePositives / others.length;
    console.log(`bloom n=100k p=1%: measured false-positive rate ${(rate * 100).toFixed(3)}% (${falsePositives}/100000)`);
    expect(rate).toBeLessThanOrEqual(0.015);
  });

  it("has its false positives among look-alike ids too (sequential non-members)", () => {
    const lookAlikes = Array.from({ length: 100_000 }, (_, i) => `p-${String(n + 1 + i).padStart(6, "0")}`);
    const rate = lookAlikes.filter((id) => bloom.has(id)).length / lookAlikes.length;
    console.log(`bloom n=100k p=1%: false-positive rate on p-100001..p-200000 ${(rate * 100).toFixed(3)}%`);
    expect(rate).toBeLessThanOrEqual(0.015);
  });

  it("answers the same for the same id in every filter of the same shape (deterministic)", () => {
    const again = Bloom.withCapacity(n, 0.01);
    members.slice(0, 1000).forEach((id) => again.add(id));
    expect(Array.from(positionsOf("p-000001", again))).toEqual(Array.from(positionsOf("p-000001", bloom)));
    // Pinned: a change of hash would silently split Workers and the rebuild CLI across versions.
    expect(Array.from(positionsOf("p-000001", { m: 1_000_000, k: 3 }))).toMatchInlineSnapshot(`
      [
        172881,
        56622,
        940364,
      ]
    `);
  });
});

describe("segments and bit order", () => {
  it("cuts the bits into segments of at most 8192 bytes", () => {
    const bloom = Bloom.withCapacity(100_000, 0.01);
    expect(bloom.segments.length).toBe(segmentCountFor(bloom.m));
    expect(bloom.segments.every((segment) => segment.length <= SEGMENT_BYTES)).toBe(true);
    expect(bloom.segments.reduce((sum, segment) => sum + segment.length, 0)).toBe(bloom.m / 7);
    expect(bloom.segments.slice(0, -1).every((segment) => segment.length === SEGMENT_BYTES)).toBe(true);
  });

  it("stores 7 bits per byte, top bit clear, in Redis' bit order (SETBIT offset 8 × ⌊j/7⌋ + 1 + j mod 7)", () => {
    const bloom = new Bloom({ m: 3 * SEGMENT_BITS, k: 1 });
    bloom.setBit(0);
    bloom.setBit(6);
    bloom.setBit(7);
    bloom.setBit(SEGMENT_BITS + 13);
    expect(bloom.segments[0]![0]).toBe(0b0100_0001);
    expect(bloom.segments[0]![1]).toBe(0b0100_0000);
    expect(bloom.segments[1]![1]).toBe(0b0000_0001);
    expect(redisBitOf(0)).toEqual({ segment: 0, offset: 1 });
    expect(redisBitOf(6)).toEqual({ segment: 0, offset: 7 });
    expect(redisBitOf(7)).toEqual({ segment: 0, offset: 9 });
    expect(redisBitOf(SEGMENT_BITS + 13)).toEqual({ segment: 1, offset: 15 });
  });

  it("keeps every byte ASCII, whatever is added", () => {
    const bloom = Bloom.withCapacity(1000, 0.5);
    randomIds(100_000, 3, "x-").forEach((id) => bloom.add(id));
    expect(bloom.segments.every((segment) => segment.every((byte) => byte <= 0x7f))).toBe(true);
    expect(bloom.segments[0]!.some((byte) => byte === 0x7f)).toBe(true);
    const copy = new Bloom(bloom, new Uint8Array(bloom.segments.flatMap((_, i) => [...textToBytes(bloom.segmentText(i))!])));
    expect(copy.segments).toEqual(bloom.segments);
    expect(textToBytes("ok\u00e9")).toBeNull();
  });

  it("refuses bytes of the wrong length, or with a top bit set", () => {
    const shape = { m: 2 * SEGMENT_BITS, k: 3 };
    expect(() => new Bloom(shape, new Uint8Array(SEGMENT_BYTES))).toThrow(RangeError);
    expect(() => new Bloom(shape, new Uint8Array(SEGMENT_BYTES + 10))).toThrow(RangeError);
    expect(() => new Bloom(shape, new Uint8Array(2 * SEGMENT_BYTES).fill(0x80, SEGMENT_BYTES))).toThrow(RangeError);
  });
});
