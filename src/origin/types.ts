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

/** Ids as the contract defines them: also what makes a key safe to build. */
export const PRODUCT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$/;

export function isValidProductId(id: string): boolean {
  return PRODUCT_ID_PATTERN.test(id);
}
