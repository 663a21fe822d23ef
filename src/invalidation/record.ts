// What a purge says, as the purge endpoint accepts it and the log keeps it.
import * as v from "valibot";
import { DEFAULTS, ADMIN_LIMITS } from "../config/defaults";
import { RESOURCE_NAMES, type ResourceName } from "../origin/resources";
import { PRODUCT_ID_PATTERN } from "../origin/types";

/** Tags as the origin writes them (`brand:acme`, `cat:running`): short, no spaces, no quotes. */
const TAG_PATTERN = /^[A-Za-z0-9][A-Za-z0-9:._/-]{0,63}$/;

export const idsSchema = v.pipe(
  v.array(v.pipe(v.string(), v.regex(PRODUCT_ID_PATTERN, "each id must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$"))),
  v.maxLength(ADMIN_LIMITS.ids, `at most ${ADMIN_LIMITS.ids} ids`),
);
const tagsSchema = v.pipe(
  v.array(v.pipe(v.string(), v.regex(TAG_PATTERN, "each tag must be 1-64 letters, digits or :._/-"))),
  v.maxLength(ADMIN_LIMITS.tags, `at most ${ADMIN_LIMITS.tags} tags`),
);
const modeSchema = v.picklist(["hard", "soft"], 'mode must be "hard" or "soft"');

export const purgeRequestSchema = v.pipe(
  v.strictObject({
    ids: v.optional(idsSchema),
    tags: v.optional(tagsSchema),
    all: v.optional(v.boolean()),
    mode: v.optional(modeSchema, "hard"),
    resources: v.optional(
      v.pipe(v.array(v.picklist(RESOURCE_NAMES, `resources must be among ${RESOURCE_NAMES.join(", ")}`)), v.minLength(1), v.maxLength(RESOURCE_NAMES.length)),
    ),
  }),
  v.check(
    (body) => (body.ids?.length ?? 0) > 0 || (body.tags?.length ?? 0) > 0 || body.all === true,
    "say what to purge: non-empty ids, non-empty tags, or all: true",
  ),
);

export type PurgeRequest = v.InferOutput<typeof purgeRequestSchema>;

const wholeNumber = v.pipe(v.number(), v.safeInteger(), v.minValue(0));

/**
 * A purge as read back from the log in Redis, which is untrusted like anything Redis holds (entries too, cache/l2/codec.ts): its ids build
 * keys and its lists are searched on every read, so a record without this shape is never applied. Lenient only where another release may
 * differ: unknown fields are dropped, and so are resource names this release does not know (they name nothing it holds).
 */
const storedRecordText = v.pipe(
  v.string(),
  v.parseJson(),
  v.object({
    /** Position in the purge log, given by Redis. */
    seq: v.pipe(wholeNumber, v.minValue(1)),
    /** When it was recorded (ms): entries fetched before this are what it purges. */
    at: wholeNumber,
    ids: idsSchema,
    tags: tagsSchema,
    all: v.boolean(),
    mode: modeSchema,
    resources: v.pipe(
      v.array(v.string()),
      v.maxLength(64),
      v.transform((names) => names.filter((name): name is ResourceName => (RESOURCE_NAMES as readonly string[]).includes(name))),
    ),
  }),
);

export type PurgeRecord = v.InferOutput<typeof storedRecordText>;

/**
 * The record a log member holds, or null when it is not one. `now`: a purge recorded in the future (beyond the clock skew isolates may
 * have) would purge everything fetched until then, on every read.
 */
export function storedRecord(text: string, now: number): PurgeRecord | null {
  const parsed = v.safeParse(storedRecordText, text);
  if (!parsed.success || parsed.output.at > now + DEFAULTS.l2MaxClockSkewMs) return null;
  return parsed.output;
}

export function recordFrom(request: PurgeRequest, at: number): Omit<PurgeRecord, "seq"> {
  return {
    at,
    ids: [...new Set(request.ids ?? [])],
    tags: [...new Set(request.tags ?? [])],
    all: request.all === true,
    mode: request.mode,
    resources: request.resources ? [...new Set(request.resources)] : [...RESOURCE_NAMES],
  };
}

/** Tag and all purges cannot be applied key by key: isolates judge entries against them. */
export function isWide(record: Pick<PurgeRecord, "tags" | "all">): boolean {
  return record.all || record.tags.length > 0;
}
