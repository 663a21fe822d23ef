// The heavy hitters of a stream in bounded memory: the space-saving algorithm (Metwally, Agrawal, El Abbadi, "Efficient computation of
// frequent and top-k elements in data streams", 2005). At most `capacity` counters; a key not being counted takes over the smallest counter
// and inherits its count as its possible overestimate (`error`).
//
// Guarantees, for a stream of N offers:
// - a key's estimated `count` is never below its true count, and at most `error` above it (so `count - error` is a guaranteed lower bound);
// - every `error` is at most N / capacity;
// - every key whose true count exceeds N / capacity is being counted.
//
// Offering a counted key is O(1); a new key costs a scan of the counters (O(capacity)): for the page path's top-Ks (100 counters in
// metrics.ts and in warming/hotReport.ts), at most a hundred comparisons.

/**
 * Counters kept per key reported: with only K counters for a top K, a long tail of keys seen once or
 * twice keeps recycling the smallest counter and drowns the middle of the top list; with five per
 * key reported, every key above a fifth of the K-th share of the stream is counted (N / capacity).
 */
export const COUNTERS_PER_KEY = 5;

interface TopKItem<K> {
  key: K;
  /** Estimated count: an upper bound of the true count. */
  count: number;
  /** How much of `count` may be overestimate: the true count is within [count - error, count]. */
  error: number;
}

export function createTopK<K = string>(capacity: number) {
  if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError("top-K capacity must be a positive whole number");
  const counters = new Map<K, { count: number; error: number }>();
  let total = 0;

  return {
    /** Counts one occurrence of `key`. */
    offer(key: K): void {
      total++;
      const counter = counters.get(key);
      if (counter) {
        counter.count++;
        return;
      }
      if (counters.size < capacity) {
        counters.set(key, { count: 1, error: 0 });
        return;
      }
      // Replace the smallest counter; the newcomer may have been seen up to that many times before.
      // forEach, not for-of: no [key, value] pair allocated per counter on the page path.
      let minKey: K | undefined;
      let min = Infinity;
      counters.forEach(({ count }, candidate) => {
        if (count < min) {
          min = count;
          minKey = candidate;
        }
      });
      counters.delete(minKey as K);
      counters.set(key, { count: min + 1, error: min });
    },

    /** The `n` (default: all counted) keys with the highest estimated counts, highest first. */
    top(n = capacity): TopKItem<K>[] {
      return [...counters]
        .map(([key, { count, error }]) => ({ key, count, error }))
        .sort((a, b) => b.count - a.count || a.error - b.error)
        .slice(0, Math.max(0, n));
    },

    /** Offers so far. */
    get total() {
      return total;
    },
    capacity,
    /** Keys being counted (≤ capacity). */
    get size() {
      return counters.size;
    },
    clear() {
      counters.clear();
      total = 0;
    },
  };
}
