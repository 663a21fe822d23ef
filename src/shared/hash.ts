// Two 32-bit hashes of a string in one pass (cyrb53's mixing: two
// multiply-xor lanes, cross-mixed at the end). Math.imul keeps it exact
// 32-bit integer arithmetic, identical in every JS engine, so that Workers
// and Node tools agree on Bloom filter bits and ring positions.

/** Scratch space: JS runs one call at a time, so one buffer serves every caller. */
const pair = new Uint32Array(2);

/** Hashes `text` into a shared two-element array (read it before the next call). */
export function hashPair(text: string): Uint32Array {
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
  pair[0] = h1 >>> 0;
  pair[1] = h2 >>> 0;
  return pair;
}

/** One 32-bit hash of `text`. */
export function hash32(text: string): number {
  return hashPair(text)[0]!;
}

/** The SHA-256 of `bytes`, in hex: what the location tier's shared copies are checked by (Web Crypto, as in Workers). */
export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(digest, (byte) => byte.toString(16).padStart(2, "0")).join("");
}
