// What the templates are given. The cache layer decides what is known; the
// templates only decide how it looks.
import type { Inventory, Product, Recommendations, ReviewsSummary } from "../origin/types";

/**
 * A section of the page other than the product itself.
 * - `ok`: data to show.
 * - `none`: the origin says there is nothing (404): render nothing or "no reviews yet".
 * - `unavailable`: the service failed and nothing usable was cached: render the default.
 */
export type Section<T> = { state: "ok"; data: T } | { state: "none" } | { state: "unavailable" };

export interface ProductPageModel {
  product: Product;
  /** Not `ok` when availability is unknown (inventory failed or too old to promise stock): never shown as in stock. */
  inventory: Section<Inventory>;
  reviews: Section<ReviewsSummary>;
  recommendations: Section<Recommendations>;
  /** Absolute URL of this page, for canonical/OpenGraph. */
  pageUrl: string;
}

export interface HomePageModel {
  products: { id: string; title: string | null }[];
}

export interface ErrorPageModel {
  /** 400, 404 or 503. */
  status: number;
  /** A short, human message; never an exception text. */
  message: string;
  /** Seconds, for 503 pages. */
  retryAfterSeconds?: number;
}
