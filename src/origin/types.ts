// The data the origin serves, as `docs/origin-contract.md` defines it. Everything that reaches the tier from the origin is validated
// into these shapes first (see ./validate.ts); text fields are untrusted and only ever rendered through the escaping template engine.

import type * as v from "valibot";
import type { ResourceTypes } from "./resources";
import type { money, productIdPage } from "./schemaParts";

export { isValidProductId, PRODUCT_ID_PATTERN } from "./schemaParts";
export type { Product } from "./resources";

/** Minor units (cents) and an ISO 4217 code, e.g. "USD". */
export type Money = v.InferOutput<typeof money>;
export type Inventory = ResourceTypes["inventory"];
export type StockStatus = Inventory["status"];
export type ReviewsSummary = ResourceTypes["reviews"];
export type Review = ReviewsSummary["top"][number];
export type Recommendations = ResourceTypes["recommendations"];
export type RecommendationItem = Recommendations["items"][number];
export type ProductIdPage = v.InferOutput<typeof productIdPage>;
