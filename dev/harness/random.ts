// The one seeded PRNG and Zipf sampler of the project: the demo origin's
// catalog, the benchmarks and the tests draw from here, so that a seed means
// the same sequence everywhere.

/** mulberry32: tiny, fast, and plenty for demo data and picking ids. Values in [0, 1). */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface ZipfOptions {
  /** Number of distinct items (ranks 1..n). */
  n: number;
  /** Exponent: P(rank r) ∝ 1 / r^s. */
  s: number;
  seed: number;
}

/**
 * Draws ranks 1..n with P(r) ∝ 1/r^s. The CDF is computed once (n doubles,
 * 800 KB for 100,000 items) and each draw is a binary search in it.
 */
export class ZipfSampler {
  private readonly cdf: Float64Array;
  private readonly random: () => number;

  constructor(readonly options: ZipfOptions) {
    const { n, s } = options;
    if (!Number.isInteger(n) || n < 1) throw new RangeError("n must be a positive integer");
    this.cdf = new Float64Array(n);
    let sum = 0;
    for (let rank = 1; rank <= n; rank++) {
      sum += 1 / rank ** s;
      this.cdf[rank - 1] = sum;
    }
    for (let i = 0; i < n; i++) this.cdf[i]! /= sum;
    // Rounding can leave the last value a hair under 1: a draw of 0.9999999 must still land.
    this.cdf[n - 1] = 1;
    this.random = mulberry32(options.seed);
  }

  /** A rank from 1 (the most popular) to n. */
  next(): number {
    const u = this.random();
    let lo = 0;
    let hi = this.cdf.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.cdf[mid]! < u) lo = mid + 1;
      else hi = mid;
    }
    return lo + 1;
  }
}

/**
 * A seeded permutation of 1..n (Fisher-Yates): rank r maps to catalog index
 * `map[r - 1]`. Without it the hot products would be p-000001, p-000002...,
 * all neighbours, which would flatter anything that depends on id order.
 */
export function shuffledIndexes(n: number, seed: number): Uint32Array {
  const map = new Uint32Array(n);
  for (let i = 0; i < n; i++) map[i] = i + 1;
  const random = mulberry32(seed);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    const t = map[i]!;
    map[i] = map[j]!;
    map[j] = t;
  }
  return map;
}
