// The known-ids filter's numbers, each with its reason. The first four are
// meant to become settings (KNOWN_IDS_CAPACITY, KNOWN_IDS_FP_RATE, ...); the
// rest are engineering limits.

export const KNOWN_IDS_DEFAULTS = {
  /**
   * Ids the filter is sized for. The demo catalog has 10,000 products (up to
   * 1,000,000 when asked); 200,000 leaves room for growth and costs ~270 KB
   * per isolate at 1%. A rebuild sizes up by itself (count × 1.25) when the
   * catalog outgrows this, up to `maxCapacity`.
   */
  capacity: 200_000,
  /**
   * 1 in 100 ids that do not exist still goes on to negative caching and the
   * origin: it makes a crawler of random ids cost the origin 1% of its
   * requests, for 9.6 bits per id. Halving it costs ~1.4 bits per id more.
   */
  fpRate: 0.01,
  /**
   * How often an isolate re-reads the filter's meta (one small GET): new
   * products added by other isolates, and new versions, become visible here
   * within this delay (plus a load).
   */
  refreshMs: 60_000,
  /**
   * A filter built longer ago than this is not trusted (every id is let
   * through): products created while notifications were lost would
   * otherwise be refused until the next rebuild. Two days = a daily rebuild
   * plus one missed run.
   */
  maxAgeMs: 2 * 86_400_000,
} as const;

export const KNOWN_IDS_LIMITS = {
  /** Caps each isolate's copy: 2,000,000 ids at 1% ≈ 2.7 MB (7 bits per byte, see bloom.ts) of a Worker's 128 MB. */
  maxCapacity: 2_000_000,
  /** 0.01% is 19.2 bits per id: at maxCapacity ≈ 5.5 MB, still bounded. */
  minFpRate: 0.0001,
  /** Above this the filter stops anything worth its memory. */
  maxFpRate: 0.5,
  /** A meta that asks for more bits than this is refused (a corrupt or hostile meta must not make isolates allocate GBs). */
  maxFilterBytes: 6 * 1024 * 1024,
  /** Every key of the filter lives this long; each rebuild writes a new version with a fresh TTL. */
  keyTtlMs: 7 * 86_400_000,
  /** After a switch, the previous version's keys live this much longer: isolates that were loading it can finish. */
  previousVersionGraceMs: 10 * 60_000,
  /**
   * Ids added to one version are also kept in a list (for other isolates to
   * catch up without reloading every segment), up to this many; past it,
   * isolates reload the segments instead. Ids added during a rebuild beyond
   * it make that rebuild fail (it cannot prove it holds them).
   */
  logCap: 10_000,
  /** Segments per Redis call: 4 × 8 KB (≈ 44 KB on the wire, base64 in JSON) keeps each call well inside the L2 time budget. */
  segmentsPerCall: 4,
  /** Segment calls in flight at once while loading: a Worker request may hold 6 connections. */
  loadConcurrency: 2,
  /** After a failed check (Redis out), try again this soon rather than a whole refresh interval later. */
  retryAfterFailureMs: 5_000,
  /** Ids per add() call: the known-ids endpoint's bound, and one bounded Lua call. */
  maxIdsPerAdd: 1000,
  /** Ids whose add() could not be recorded, kept to retry at the next check. */
  maxPendingAdds: 10_000,
  /** The origin's largest listing page (docs/origin-contract.md#listing). */
  listPageLimit: 1000,
  /** A listing that yields more than this many ids has lost its way (cursor loop). */
  maxListedIds: 4_000_000,
  /** Rounds of "new ids arrived during the switch, merge them and retry". */
  switchAttempts: 5,
  /** Growth room when the catalog outgrew the capacity. */
  growthFactor: 1.25,
} as const;
