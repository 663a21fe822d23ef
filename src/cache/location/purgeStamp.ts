// Where a copy stands against the purge log: what the location tier stores
// with each copy, and what an isolate must know past it to judge the copy
// (docs/architecture.md#the-location-tier).

/**
 * A position in the purge log: its era (when its counter started) and a
 * sequence number. A copy fetched by an isolate that had read the log up to
 * it reflects every purge up to it (each was recorded before that read, so
 * before the fetch or the L2 read that gave the copy): an isolate that knows
 * every id purge after it can judge the copy as surely as its own L1.
 */
export interface PurgeStamp {
  era: string;
  seq: number;
}
