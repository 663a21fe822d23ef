// The known-ids filter: a Bloom filter of every product id, kept in Redis and
// in each isolate, that turns requests for ids that do not exist into 404s
// without touching L2 or the origin. See store.ts for its guarantees.
export { Bloom, bloomShape, SEGMENT_BYTES } from "./bloom";
export { KNOWN_IDS_DEFAULTS, KNOWN_IDS_LIMITS } from "./defaults";
export { knownIdsKeys } from "./keys";
export { KnownIdsRebuildError, listingOf, type ListIds, type RebuildProgress, type RebuildResult } from "./rebuild";
export { createKnownIds, type KnownIds, type KnownIdsOptions, type KnownIdsState, type KnownIdsStatus } from "./store";
