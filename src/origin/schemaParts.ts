// The pieces the resources' schemas (./resources.ts) are built from: bounded text, contract ids, counts, money and versions.
import * as v from "valibot";

export const text = (max: number) => v.pipe(v.string(), v.maxLength(max));

/**
 * Characters no page shows: C0 and C1 controls but tab and line breaks (the HTML parser reports them as errors, and a NUL vanishes from
 * the text), the noncharacters, and the explicit bidirectional controls (embeddings, overrides, isolates), with which a title could turn
 * the text after it around, the shop's name in <title> included. The marks (LRM, RLM) stay: they affect no text but their own neighbours'.
 */
const UNSHOWABLE = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F\u202A-\u202E\u2066-\u2069\uFDD0-\uFDEF\uFFFE\uFFFF]/;
const ALL_UNSHOWABLE = new RegExp(UNSHOWABLE.source, "g");

/** Text a page shows: bounded, and without the characters above (taken out, so that a copy in L2 holds what a page shows). */
export const shownText = (max: number) =>
  v.pipe(
    text(max),
    v.transform((value) => (UNSHOWABLE.test(value) ? value.replace(ALL_UNSHOWABLE, "") : value)),
  );
/** Ids as the contract defines them: also what makes a key safe to build. */
export const PRODUCT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$/;

export function isValidProductId(id: string): boolean {
  return PRODUCT_ID_PATTERN.test(id);
}

export const id = v.pipe(v.string(), v.regex(PRODUCT_ID_PATTERN));
export const count = v.pipe(v.number(), v.integer(), v.minValue(0));
export const money = v.object({
  // Safe integers only: beyond 2^53 an amount is not exact in JSON's numbers, and no two renderings would agree on its cents.
  amount: v.pipe(v.number(), v.safeInteger()),
  currency: v.pipe(v.string(), v.regex(/^[A-Z]{3}$/)),
});
export const version = v.pipe(v.number(), v.integer(), v.minValue(0));

/** A page of `GET /products`: ids, and the cursor of the next page. */
export const productIdPage = v.object({
  ids: v.pipe(v.array(id), v.maxLength(1000)),
  next: v.nullable(v.string()),
});
