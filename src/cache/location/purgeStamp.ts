// Where a copy stands against the purge log: what the location tier stores with each copy, and what an isolate must know past it to judge
// the copy (docs/architecture.md#the-location-tier).

/** A position in the purge log: its era (when its counter started) and a sequence number; why a copy stamped with it reflects every purge up to it is docs/architecture.md's. */
export interface PurgeStamp {
  era: string;
  seq: number;
}
