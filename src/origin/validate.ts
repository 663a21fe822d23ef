// The origin is another team's service: its answers are checked against the
// contract before anything is cached or rendered. Unknown fields are dropped;
// a body that breaks the contract is an origin failure, never cached data.
import * as v from "valibot";
import type { ResourceName, ResourceTypes } from "./types";
import { LISTING_ID, PRODUCT_ID_PATTERN } from "./types";

const text = (max: number) => v.pipe(v.string(), v.maxLength(max));
const id = v.pipe(v.string(), v.regex(PRODUCT_ID_PATTERN));
const count = v.pipe(v.number(), v.integer(), v.minValue(0));
const money = v.object({
  amount: v.pipe(v.number(), v.integer()),
  currency: v.pipe(v.string(), v.regex(/^[A-Z]{3}$/)),
});
const version = v.pipe(v.number(), v.integer(), v.minValue(0));

const product = v.object({
  id,
  title: text(500),
  description: text(20_000),
  brand: text(200),
  category: v.pipe(v.array(text(200)), v.maxLength(10)),
  price: money,
  compareAtPrice: v.optional(v.nullable(money)),
  images: v.optional(v.pipe(v.array(v.object({ url: text(2000), alt: v.optional(text(500), "") })), v.maxLength(20)), []),
  attributes: v.optional(v.record(text(100), text(500)), {}),
  tags: v.optional(v.pipe(v.array(text(100)), v.maxLength(50)), []),
  version,
  updatedAt: text(64),
});

const inventory = v.object({
  id,
  available: count,
  status: v.picklist(["in_stock", "low_stock", "out_of_stock"]),
  version,
  updatedAt: text(64),
});

const reviews = v.object({
  id,
  rating: v.pipe(v.number(), v.minValue(0), v.maxValue(5)),
  count,
  top: v.pipe(
    v.array(v.object({ author: text(200), rating: v.pipe(v.number(), v.minValue(0), v.maxValue(5)), title: text(300), body: text(5000) })),
    v.maxLength(3),
  ),
  version,
});

const recommendations = v.object({
  id,
  items: v.pipe(v.array(v.object({ id, title: text(500), price: money, image: text(2000) })), v.maxLength(8)),
  version,
});

export const productIdPage = v.object({
  ids: v.pipe(v.array(id), v.maxLength(1000)),
  next: v.nullable(v.string()),
});

/**
 * The home page's listing: the first page of ids, with the version the
 * contract does not give it. The only resource whose stored shape is not the
 * origin's, and entries read back from L2 are checked with these same
 * schemas (cache/codec.ts): so it takes both the page the origin sends and
 * the entry the tier made of it (else every isolate would find the listing
 * in L2 invalid, delete it and fetch it again).
 */
const listing = v.union([
  v.pipe(
    productIdPage,
    v.transform(({ ids }) => ({ id: LISTING_ID, ids, version: 1 })),
  ),
  v.strictObject({ id: v.literal(LISTING_ID), ids: productIdPage.entries.ids, version: v.literal(1) }),
]);

const schemas = { product, inventory, reviews, recommendations, listing } as const;

/** The contract-shaped data, or null when the body breaks the contract. */
export function validateResource<R extends ResourceName>(resource: R, requestedId: string, body: unknown): ResourceTypes[R] | null {
  const result = v.safeParse(schemas[resource], body);
  if (!result.success || result.output.id !== requestedId) return null;
  const data = result.output as ResourceTypes[R];
  if (resource === "product") {
    // `null` and absent mean the same thing to the templates.
    const p = data as ResourceTypes["product"];
    if (p.compareAtPrice === null) delete p.compareAtPrice;
  }
  return data;
}
