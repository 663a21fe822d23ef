// Where a copy stands against the purge log: what the location tier stores
// with each copy, and what an isolate must know past it to judge the copy
// (docs/architecture.md#the-location-tier).

/**
 * A position in the purge log: its era (when its counter started) and a
 * sequence number. A copy put by an isolate that had read the log up to it
 * reflects every purge up to it: that isolate judged each part against every
 * purge it knew when it put the copy, and each part was fetched or read from
 * L2 after the purges before its start were recorded, or came from a copy it
 * vouched for (docs/architecture.md#the-location-tier). An isolate that knows
 * every id purge after it can judge the copy as surely as its own L1.
 */
export interface PurgeStamp {
  era: string;
  seq: number;
}
