// The data the origin serves, as `docs/origin-contract.md` defines it.
// Everything that reaches the tier from the origin is validated into these
// shapes first (see ./validate.ts); text fields are untrusted and only ever
// rendered through the escaping template engine.

export interface Money {
  /** Minor units (cents). */
  amount: number;
  /** ISO 4217 code, e.g. "USD". */
  currency: string;
}

interface ProductImage {
  url: string;
  alt: string;
}

export interface Product {
  id: string;
  title: string;
  description: string;
  brand: string;
  category: string[];
  price: Money;
  compareAtPrice?: Money;
  images: ProductImage[];
  attributes: Record<string, string>;
  tags: string[];
  version: number;
  updatedAt: string;
}

export type StockStatus = "in_stock" | "low_stock" | "out_of_stock";

export interface Inventory {
  id: string;
  available: number;
  status: StockStatus;
  version: number;
  updatedAt: string;
}

export interface Review {
  author: string;
  rating: number;
  title: string;
  body: string;
}

export interface ReviewsSummary {
  id: string;
  rating: number;
  count: number;
  /** At most 3. */
  top: Review[];
  version: number;
}

export interface RecommendationItem {
  id: string;
  title: string;
  price: Money;
  image: string;
}

export interface Recommendations {
  id: string;
  /** At most 8. */
  items: RecommendationItem[];
  version: number;
}

export interface ProductIdPage {
  ids: string[];
  next: string | null;
}

/** The first products of the origin's listing, as the home page shows them. */
interface ProductListing {
  /** Always LISTING_ID. */
  id: string;
  ids: string[];
  /** The contract gives listings no version: every fetch is the latest word (1). */
  version: number;
}

/** The four per-product resources a page is made of, in the order a page reads them (product first: its tags matter to the others). */
export const PAGE_RESOURCES = ["product", "inventory", "reviews", "recommendations"] as const;
export type PageResource = (typeof PAGE_RESOURCES)[number];

/**
 * Every resource the tier caches: a product page's four, and the home page's
 * listing (one entry, under LISTING_ID), which goes through the same read
 * path so that `GET /` is cached, coalesced and served stale when the
 * listing service fails.
 */
export const RESOURCE_NAMES = [...PAGE_RESOURCES, "listing"] as const;
export type ResourceName = (typeof RESOURCE_NAMES)[number];

/** The id under which the home page's listing is cached. */
export const LISTING_ID = "home";
/** How many products the home page lists. */
export const LISTING_SIZE = 24;

export interface ResourceTypes {
  product: Product;
  inventory: Inventory;
  reviews: ReviewsSummary;
  recommendations: Recommendations;
  listing: ProductListing;
}

/** Ids as the contract defines them: also what makes a key safe to build. */
export const PRODUCT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$/;

export function isValidProductId(id: string): boolean {
  return PRODUCT_ID_PATTERN.test(id);
}
