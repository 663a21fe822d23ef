// The demo origin's data. Every catalog resource is a pure function of the
// product's index, so a catalog of a million products costs no memory until
// something is changed through the admin endpoints; only changed and created
// products are stored (CatalogStore, bounded).
//
// Some text is hostile or non-ASCII on purpose, so that pages rendered from
// it prove their escaping:
// - index % 10 === 3: the title holds `<script>alert(1)</script>`, quotes and `&`;
// - index % 10 === 7: the description holds `</script><img src=x onerror=alert(1)>`
//   and non-ASCII text (é, ü, 日本語, emoji);
// - some brands, review authors, titles and bodies hold `<b>`, quotes, `&`
//   and non-ASCII text.
import type {
  Inventory,
  Money,
  Product,
  ProductIdPage,
  RecommendationItem,
  Recommendations,
  Review,
  ReviewsSummary,
  StockStatus,
} from "../../src/origin/types";
import { mulberry32 } from "../harness/random";

export const MAX_CATALOG_SIZE = 1_000_000;
/** Changed plus created products kept in memory, at most. */
const MAX_OVERRIDES = 100_000;
export const MAX_LIST_LIMIT = 1000;
export const HOSTILE_TITLE_MARKUP = "<script>alert(1)</script>";
export const HOSTILE_DESCRIPTION_MARKUP = "</script><img src=x onerror=alert(1)>";

const CURRENCY = "USD";
const MAX_RECOMMENDATIONS = 8;
const MAX_TOP_REVIEWS = 3;
// Catalog products were all last changed at a fixed time derived from their index.
const EPOCH_MS = Date.UTC(2025, 0, 1);
const UPDATED_AT_STEP_MS = 31_000; // a million products stay within 2025

// ---------------------------------------------------------------- ids

/** `p-` and the index, zero-padded to 6 digits: p-000001 ... p-1000000. */
export function productId(index: number): string {
  return `p-${String(index).padStart(6, "0")}`;
}

/** The index of a catalog id, or null when `id` is not one (wrong shape or out of range). */
export function indexOf(id: string, catalogSize: number = MAX_CATALOG_SIZE): number | null {
  const match = /^p-(\d{6,7})$/.exec(id);
  if (!match) return null;
  const index = Number(match[1]);
  // productId() is the only spelling: p-0000001 is not p-000001.
  if (productId(index) !== id || index < 1 || index > catalogSize) return null;
  return index;
}

/** Where the demo origin serves a placeholder for image `n` of a product. */
function imageUrl(originUrl: string, id: string, n: number): string {
  return `${originUrl}/images/${id}/${n}.svg`;
}

// ---------------------------------------------------------------- randomness

type Random = () => number;

// Each resource draws from its own stream, so that adding a draw to one
// resource does not change the others.
const STREAM = { product: 0x50524f44, inventory: 0x494e5654, reviews: 0x52455657, recommendations: 0x5245434f };

function randomFor(index: number, stream: number): Random {
  return mulberry32(Math.imul(index, 0x9e3779b1) ^ stream);
}

function intBetween(random: Random, min: number, max: number): number {
  return min + Math.floor(random() * (max - min + 1));
}

function pick<T>(random: Random, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)] as T;
}

// ---------------------------------------------------------------- word lists

const BRANDS = [
  { name: "Acme", slug: "acme" },
  { name: "Globex", slug: "globex" },
  { name: "Initech", slug: "initech" },
  { name: "Umbrella", slug: "umbrella" },
  { name: "Hooli", slug: "hooli" },
  { name: "Vandelay", slug: "vandelay" },
  { name: "Müller & Söhne", slug: "muller-sohne" },
  { name: "Café Élan", slug: "cafe-elan" },
  { name: "日本工房", slug: "nihon-kobo" },
  { name: "Nordlys", slug: "nordlys" },
] as const;

interface Category {
  path: string[];
  slug: string;
  nouns: string[];
  sizes?: string[];
}

const SHOE_SIZES = ["39", "40", "41", "42", "43", "44", "45"];
const CLOTHING_SIZES = ["XS", "S", "M", "L", "XL"];

const CATEGORIES: readonly Category[] = [
  { path: ["Shoes", "Running"], slug: "running", nouns: ["Runner", "Racer", "Trainer"], sizes: SHOE_SIZES },
  { path: ["Shoes", "Trail", "Waterproof"], slug: "trail", nouns: ["Trail Runner", "Hiker"], sizes: SHOE_SIZES },
  { path: ["Shoes", "Casual"], slug: "casual-shoes", nouns: ["Sneaker", "Loafer"], sizes: SHOE_SIZES },
  { path: ["Apparel", "Jackets", "Rain"], slug: "rain-jackets", nouns: ["Shell", "Parka"], sizes: CLOTHING_SIZES },
  { path: ["Apparel", "Tops"], slug: "tops", nouns: ["Tee", "Hoodie", "Polo"], sizes: CLOTHING_SIZES },
  { path: ["Outdoor", "Camping", "Tents"], slug: "tents", nouns: ["Tent", "Shelter"] },
  { path: ["Outdoor", "Bags"], slug: "bags", nouns: ["Backpack", "Daypack", "Duffel"] },
  { path: ["Home", "Kitchen", "Cookware"], slug: "cookware", nouns: ["Skillet", "Saucepan", "Dutch Oven"] },
  { path: ["Electronics", "Audio"], slug: "audio", nouns: ["Headphones", "Speaker", "Earbuds"] },
  { path: ["Electronics", "Wearables", "Watches"], slug: "watches", nouns: ["Watch", "Tracker"] },
];

const ADJECTIVES = ["Swift", "Urban", "Classic", "Alpine", "Coastal", "Midnight", "Feather", "Rugged", "Nordic", "Solar"];
const COLORS = ["Red", "Blue", "Black", "White", "Olive", "Sand", "Crimson", "Teal"];
const MATERIALS = ["Cotton", "Recycled polyester", "Leather", "Aluminium", "Cast iron", "Merino wool"];
const VIEWS = ["front view", "side view", "back view", "detail"];
const SELLING_POINTS = [
  "Built to last, season after season.",
  "Light enough to forget you carry it.",
  "Tested by people who use it every day.",
  "Made with 30% recycled materials.",
  "Backed by a two-year warranty.",
];
const HOSTILE_DESCRIPTION = `Note: ${HOSTILE_DESCRIPTION_MARKUP} — crème brûlée édition, Größe über alles, 日本語の説明もあります, naïve café 🏃‍♀️🔥.`;

const REVIEW_AUTHORS = ["Alex", "Zoë Müller", "<b>Bold</b> Buyer", 'José "Pepe" García', "山田 太郎", "O'Connor & Sons", "Anonymous"];
const REVIEW_TITLES = ["Great value", "Runs small", "<i>Meh</i>", "Love it! ❤️", 'Not "as advertised"', "Très bien"];
const REVIEW_BODIES = [
  "Does what it says. Would buy again.",
  "Arrived fast & well packed. <b>Five stars</b>, really.",
  'The colour is a bit off compared to the photos "in real life".',
  "Übergroß, aber bequem. 日本でも人気です。",
  "</textarea><script>alert('review')</script> just kidding, it's fine.",
];

// ---------------------------------------------------------------- catalog resources

function updatedAtFor(index: number): string {
  return rfc3339(EPOCH_MS + index * UPDATED_AT_STEP_MS);
}

/** RFC 3339 in UTC, without milliseconds. */
function rfc3339(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

function usd(amount: number): Money {
  return { amount, currency: CURRENCY };
}

/** Base product `index` of the catalog; image urls point at `originUrl`. */
export function productFor(index: number, originUrl: string): Product {
  const random = randomFor(index, STREAM.product);
  const id = productId(index);
  const brand = pick(random, BRANDS);
  const category = pick(random, CATEGORIES);
  const name = `${pick(random, ADJECTIVES)} ${pick(random, category.nouns)}`;
  const title = index % 10 === 3 ? `${name} "Pro" & O'Brien's ${HOSTILE_TITLE_MARKUP}` : `${name} ${intBetween(random, 1, 9)}`;
  // Prices end in .99, from 4.99 to 499.99.
  const price = intBetween(random, 4, 499) * 100 + 99;
  const compareAtPrice = random() < 0.5 ? Math.round((price * intBetween(random, 110, 150)) / 10_000) * 100 + 99 : null;
  const description = [
    `${title} by ${brand.name}.`,
    pick(random, SELLING_POINTS),
    pick(random, SELLING_POINTS),
    ...(index % 10 === 7 ? [HOSTILE_DESCRIPTION] : []),
  ].join(" ");
  const imageCount = intBetween(random, 1, VIEWS.length);
  const attributes: Record<string, string> = { color: pick(random, COLORS), material: pick(random, MATERIALS) };
  if (category.sizes) attributes.size = pick(random, category.sizes);

  return {
    id,
    title,
    description,
    brand: brand.name,
    category: [...category.path],
    price: usd(price),
    ...(compareAtPrice === null ? {} : { compareAtPrice: usd(compareAtPrice) }),
    images: VIEWS.slice(0, imageCount).map((view, i) => ({
      url: imageUrl(originUrl, id, i + 1),
      alt: `${title}, ${view}`,
    })),
    attributes,
    tags: [`brand:${brand.slug}`, `cat:${category.slug}`, ...(compareAtPrice === null ? [] : ["sale"])],
    version: 1,
    updatedAt: updatedAtFor(index),
  };
}

function stockStatus(available: number): StockStatus {
  if (available === 0) return "out_of_stock";
  return available < 5 ? "low_stock" : "in_stock";
}

export function inventoryFor(index: number): Inventory {
  const available = intBetween(randomFor(index, STREAM.inventory), 0, 50);
  const updatedAt = updatedAtFor(index);
  return { id: productId(index), available, status: stockStatus(available), version: 1, updatedAt };
}

/** Reviews of product `index`; null (404) for every index % 5 === 0. */
export function reviewsFor(index: number): ReviewsSummary | null {
  if (index % 5 === 0) return null;
  const random = randomFor(index, STREAM.reviews);
  const count = intBetween(random, 1, 500);
  const rating = intBetween(random, 30, 50) / 10;
  const top: Review[] = Array.from({ length: Math.min(count, intBetween(random, 1, MAX_TOP_REVIEWS)) }, () => ({
    author: pick(random, REVIEW_AUTHORS),
    rating: intBetween(random, 1, 5),
    title: pick(random, REVIEW_TITLES),
    body: pick(random, REVIEW_BODIES),
  }));
  return { id: productId(index), rating, count, top, version: 1 };
}

/**
 * Recommendations for product `index`: other catalog products, at most 8;
 * null (404) for every index % 7 === 0. Items show the base catalog data of
 * the recommended products (changes made through the admin endpoints do not
 * reach them, so this resource's version never has to change).
 */
export function recommendationsFor(index: number, catalogSize: number, originUrl: string): Recommendations | null {
  if (index % 7 === 0 || catalogSize < 2) return null;
  const random = randomFor(index, STREAM.recommendations);
  const wanted = Math.min(intBetween(random, 1, MAX_RECOMMENDATIONS), catalogSize - 1);
  const chosen = new Set<number>();
  while (chosen.size < wanted) {
    const other = intBetween(random, 1, catalogSize);
    if (other !== index) chosen.add(other);
  }
  const items = [...chosen].map((other): RecommendationItem => {
    const product = productFor(other, originUrl);
    return { id: product.id, title: product.title, price: product.price, image: imageUrl(originUrl, product.id, 1) };
  });
  return { id: productId(index), items, version: 1 };
}

// ---------------------------------------------------------------- the live catalog

export interface ProductChange {
  price?: number;
  title?: string;
  available?: number;
}

export interface NewProduct {
  id: string;
  title: string;
  price: number;
  available?: number;
}

export type ChangeResult = { ok: true; product: Product; inventory: Inventory } | { ok: false; error: "not_found" | "conflict" | "too_many_overrides" };

interface Stored {
  product: Product;
  inventory: Inventory;
}

const NEW_PRODUCT_STOCK = 20;

/**
 * The catalog as the origin serves it: the generated base data, plus the
 * products changed or created through the admin endpoints, kept in one
 * bounded map.
 */
export class CatalogStore {
  private readonly overrides = new Map<string, Stored>();
  /** Created ids in creation order, listed after the catalog's own. */
  private created: string[] = [];

  constructor(
    readonly size: number,
    private readonly originUrl: string,
  ) {}

  product(id: string): Product | null {
    const stored = this.overrides.get(id);
    if (stored) return stored.product;
    const index = indexOf(id, this.size);
    return index === null ? null : productFor(index, this.originUrl);
  }

  inventory(id: string): Inventory | null {
    const stored = this.overrides.get(id);
    if (stored) return stored.inventory;
    const index = indexOf(id, this.size);
    return index === null ? null : inventoryFor(index);
  }

  /** Created products have no reviews. */
  reviews(id: string): ReviewsSummary | null {
    const index = indexOf(id, this.size);
    return index === null ? null : reviewsFor(index);
  }

  /** Created products have no recommendations. */
  recommendations(id: string): Recommendations | null {
    const index = indexOf(id, this.size);
    return index === null ? null : recommendationsFor(index, this.size, this.originUrl);
  }

  /**
   * One page of ids: the catalog's, then the created ones. The cursor is the
   * 1-based position of the page's first id, base64url-encoded so that
   * clients treat it as opaque. Returns null for a cursor we did not make.
   */
  listIds(cursor: string | null, limit: number): ProductIdPage | null {
    const start = cursor === null ? 1 : decodeCursor(cursor);
    if (start === null) return null;
    const total = this.size + this.created.length;
    const end = Math.min(total, start + limit - 1);
    const ids: string[] = [];
    for (let position = start; position <= end; position++) {
      ids.push(position <= this.size ? productId(position) : (this.created[position - this.size - 1] as string));
    }
    return { ids, next: end < total ? encodeCursor(end + 1) : null };
  }

  /** Applies a change, bumping the version and updatedAt of each resource it touches. */
  change(id: string, change: ProductChange, nowMs: number): ChangeResult {
    const product = this.product(id);
    const inventory = this.inventory(id);
    if (!product || !inventory) return { ok: false, error: "not_found" };
    if (!this.overrides.has(id) && this.overrides.size >= MAX_OVERRIDES) {
      return { ok: false, error: "too_many_overrides" };
    }

    const updatedAt = new Date(nowMs).toISOString();
    const next: Stored = { product, inventory };
    if (change.price !== undefined || change.title !== undefined) {
      next.product = {
        ...product,
        ...(change.title === undefined ? {} : { title: change.title }),
        ...(change.price === undefined ? {} : { price: usd(change.price) }),
        version: product.version + 1,
        updatedAt,
      };
    }
    if (change.available !== undefined) {
      const available = change.available;
      const status = stockStatus(available);
      next.inventory = { ...inventory, available, status, version: inventory.version + 1, updatedAt };
    }
    this.overrides.set(id, next);
    return { ok: true, ...next };
  }

  create(fields: NewProduct, nowMs: number): ChangeResult {
    if (this.product(fields.id)) return { ok: false, error: "conflict" };
    if (this.overrides.size >= MAX_OVERRIDES) return { ok: false, error: "too_many_overrides" };

    const updatedAt = new Date(nowMs).toISOString();
    const available = fields.available ?? NEW_PRODUCT_STOCK;
    const stored: Stored = {
      product: {
        id: fields.id,
        title: fields.title,
        description: "",
        brand: "Demo",
        category: ["New"],
        price: usd(fields.price),
        images: [{ url: imageUrl(this.originUrl, fields.id, 1), alt: fields.title }],
        attributes: {},
        tags: ["brand:demo", "new"],
        version: 1,
        updatedAt,
      },
      inventory: { id: fields.id, available, status: stockStatus(available), version: 1, updatedAt },
    };
    this.overrides.set(fields.id, stored);
    this.created.push(fields.id);
    return { ok: true, ...stored };
  }

  /** Back to the generated catalog. */
  reset(): void {
    this.overrides.clear();
    this.created = [];
  }
}

function encodeCursor(position: number): string {
  return Buffer.from(`p:${position}`).toString("base64url");
}

function decodeCursor(cursor: string): number | null {
  const match = /^p:([1-9]\d{0,8})$/.exec(Buffer.from(cursor, "base64url").toString("utf8"));
  return match ? Number(match[1]) : null;
}
