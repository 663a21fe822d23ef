// What the templates are given. The cache layer decides what is known; the templates only decide how it looks.
import type { PAGE_SUBJECT, PageResource, ResourceTypes } from "../origin/resources";

/**
 * A section of the page other than the product itself.
 * - `ok`: data to show.
 * - `none`: the origin says there is nothing (404): render nothing or "no reviews yet".
 * - `unavailable`: the service failed and nothing usable was cached: render the default.
 */
export type Section<T> = { state: "ok"; data: T } | { state: "none" } | { state: "unavailable" };

/**
 * A product page's data: one field per resource of the page, read off the registry (src/origin/resources.ts), so that a resource
 * added there is a field here. The subject (the product) is always there, else there is no page; every other resource is a
 * Section, which is `unavailable` when its service failed or its copy is too old to show (stock is then never shown as in stock).
 */
export type ProductPageModel = {
  [R in PageResource]: R extends typeof PAGE_SUBJECT ? ResourceTypes[R] : Section<ResourceTypes[R]>;
} & {
  /** Absolute URL of this page, for canonical/OpenGraph. */
  pageUrl: string;
};

export interface HomePageModel {
  products: { id: string; title: string | null }[];
}

export interface ErrorPageModel {
  /** 400, 404, 405, 413, 429, 500 or 503 (http/errorPage.ts). */
  status: number;
  /** A short, human message; never an exception text. */
  message: string;
  /** Seconds, for 503 and 429 pages. */
  retryAfterSeconds?: number;
  /** The page's heading, when the status's own ("Page not found") says less than it could ("Product not found"). */
  heading?: string;
}
