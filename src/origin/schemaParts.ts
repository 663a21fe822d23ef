// The pieces the resources' schemas (./resources.ts) are built from: bounded
// text, contract ids, counts, money and versions.
import * as v from "valibot";
import { PRODUCT_ID_PATTERN } from "./types";

export const text = (max: number) => v.pipe(v.string(), v.maxLength(max));
export const id = v.pipe(v.string(), v.regex(PRODUCT_ID_PATTERN));
export const count = v.pipe(v.number(), v.integer(), v.minValue(0));
export const money = v.object({
  amount: v.pipe(v.number(), v.integer()),
  currency: v.pipe(v.string(), v.regex(/^[A-Z]{3}$/)),
});
export const version = v.pipe(v.number(), v.integer(), v.minValue(0));

/** A page of `GET /products`: ids, and the cursor of the next page. */
export const productIdPage = v.object({
  ids: v.pipe(v.array(id), v.maxLength(1000)),
  next: v.nullable(v.string()),
});
