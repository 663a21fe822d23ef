// The known-ids filter: a Bloom filter of every product id, kept in Redis and in each isolate, that turns requests
// for ids that do not exist into 404s without touching L2 or the origin. See store.ts for its guarantees.
export { listingOf } from "./rebuild";
export { createFilterShelf } from "./locationShelf";
export { createKnownIds, type KnownIds, type KnownIdsStatus } from "./store";
