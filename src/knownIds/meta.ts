// The filter's meta key (`pp:v1:kid:meta`), one JSON object:
//
//   { version, capacity, fpRate, m, k, segmentCount, count, builtAt, changedAt,   ← the current filter
//     next?: { version, startedAt, overflow? },                                    ← a rebuild in progress
//     damaged?: true }                                                             ← a segment vanished
//
// It is the one place that says which version is current: a rebuild writes a
// new version's segments, then replaces this key in one command, so readers
// see the old filter or the new one, never half of one. Lua scripts edit it
// with cjson (changedAt, next), so it stays flat JSON of numbers and strings.
import * as v from "valibot";
import { BITS_PER_BYTE, segmentCountFor } from "./bloom";
import { KNOWN_IDS_LIMITS } from "./limits";
import { VERSION_PATTERN } from "./keys";

const version = v.pipe(v.string(), v.regex(VERSION_PATTERN));
const count = v.pipe(v.number(), v.integer(), v.minValue(0));

const filterFields = v.object({
  version,
  /** Ids the filter was sized for. */
  capacity: v.pipe(count, v.minValue(1)),
  fpRate: v.pipe(v.number(), v.gtValue(0), v.ltValue(1)),
  /** A meta that asks for more than the largest filter is refused: a corrupt or hostile meta must not make isolates allocate GBs. */
  m: v.pipe(
    count,
    v.minValue(BITS_PER_BYTE),
    v.maxValue(KNOWN_IDS_LIMITS.maxBytes * BITS_PER_BYTE),
    v.check((m) => m % BITS_PER_BYTE === 0),
  ),
  k: v.pipe(count, v.minValue(1), v.maxValue(32)),
  segmentCount: count,
  /** Ids listed by the build (and merged from adds during it). */
  count,
  /** When the build finished (ms since the epoch). */
  builtAt: count,
  /** Ids added to this version since; bumped by every add, so isolates notice. */
  changedAt: count,
});
export type FilterMeta = v.InferOutput<typeof filterFields>;

/** `overflow`: more ids were added during the build than its log holds: the build cannot switch. */
const nextFields = v.object({ version, startedAt: count, overflow: v.optional(v.boolean()) });

/** The fields every meta may have; the current filter's are checked only when it names a version. */
const metaText = v.pipe(
  v.string(),
  v.parseJson(),
  v.looseObject({
    version: v.optional(v.unknown()),
    next: v.optional(nextFields),
    damaged: v.optional(v.boolean()),
  }),
);

/** The meta as stored, or null when it is not ours or not sane (the caller then fails open). */
export function parseMeta(text: string) {
  const meta = v.safeParse(metaText, text);
  if (!meta.success) return null;
  let current: FilterMeta | null = null;
  if (meta.output.version !== undefined) {
    const filter = v.safeParse(filterFields, meta.output);
    if (!filter.success || filter.output.segmentCount !== segmentCountFor(filter.output.m)) return null;
    current = filter.output;
  }
  const damaged = meta.output.damaged === true;
  // current null: no usable filter (never built, or damaged).
  return { current: damaged ? null : current, next: meta.output.next ?? null, damaged };
}

export type Meta = NonNullable<ReturnType<typeof parseMeta>>;
