// The resources the tier caches, each declared once: its origin path, the schema its answers must meet, its key code, its
// policy defaults (with the reason for each) and what a page does without it. Everything else reads this table: the origin
// client and validation, L2 keys, configuration parsing, purge validation, the product page's required/optional judgement,
// metrics and the status page, the demo origin and the tests' fakes. Adding a resource (a delivery estimate, say) is an
// entry here (its data type is its schema's), its section's view in render/ and its partial in templates/, then what tsc and
// the tests ask for: README, "Contributing", whose list test/unit/addingAResource.test.ts follows on a copy of the project.
import * as v from "valibot";
import { count, id, money, productIdPage, shownText, text, version } from "./schemaParts";

/** How long an entry of one resource may be used, in seconds. */
export interface ResourcePolicy {
  /** Fresh for this long: served without asking anybody. */
  ttl: number;
  /** Then stale for this long: served at once while one background refresh runs. */
  swr: number;
  /** Counted from the end of `ttl`: still served when the origin fails or is too slow. */
  staleIfError: number;
  /** How long "the origin says this does not exist" is remembered. */
  negativeTtl: number;
  /** Core data makes the page: without it the page is a 503. Non-core data gets its section's default. */
  core: boolean;
  /** Per-service origin timeout, ms: a slow service costs a visitor at most this. */
  originTimeoutMs: number;
}

interface ResourceSpec {
  /** One letter in Redis keys, which keeps the longest key within 50 characters (cache/keys.ts). */
  code: string;
  /** The origin's path for this resource of one product (the id comes URL-encoded). */
  path(id: string): string;
  /** What an answer must look like (unknown fields are dropped); entries read back from L2 meet it too. */
  schema: v.GenericSchema;
  /** Part of a product page (read for `/products/:id`, in this table's order), or a resource of its own. */
  onProductPage: boolean;
  /**
   * Whether a copy kept only for the origin's failures (stale-if-error) may
   * still be shown. When not, the page shows the section's default instead.
   */
  showStaleIfError: boolean;
  defaults: ResourcePolicy;
}

/** The home page's listing is cached under this id. */
export const LISTING_ID = "home";
/**
 * How many products the home page lists, the first of the origin's listing: a page read at a glance, whose titles
 * come from L1 and one MGET; a longer list costs every view a longer MGET and render, and its cold titles more views.
 */
const LISTING_SIZE = 24;

export const RESOURCES = {
  product: {
    code: "p",
    path: (id) => `/products/${id}`,
    schema: v.pipe(
      v.object({
        id,
        title: shownText(500),
        description: shownText(20_000),
        brand: shownText(200),
        category: v.pipe(v.array(shownText(200)), v.maxLength(10)),
        price: money,
        compareAtPrice: v.optional(v.nullable(money)),
        images: v.optional(v.pipe(v.array(v.object({ url: text(2000), alt: v.optional(shownText(500), "") })), v.maxLength(20)), []),
        attributes: v.optional(v.record(shownText(100), shownText(500)), {}),
        tags: v.optional(v.pipe(v.array(text(100)), v.maxLength(50)), []),
        version,
        updatedAt: text(64),
      }),
      // `null` and absent mean the same thing to the templates: kept absent.
      v.transform(({ compareAtPrice, ...rest }) => (compareAtPrice == null ? rest : { ...rest, compareAtPrice })),
    ),
    onProductPage: true,
    showStaleIfError: true,
    // Titles and descriptions change a few times a day and purges announce
    // price changes, so minutes of freshness cost nothing in correctness.
    defaults: { ttl: 300, swr: 3600, staleIfError: 86_400, negativeTtl: 60, core: true, originTimeoutMs: 1500 },
  },
  inventory: {
    code: "i",
    path: (id) => `/inventory/${id}`,
    schema: v.object({
      id,
      available: count,
      status: v.picklist(["in_stock", "low_stock", "out_of_stock"]),
      version,
      updatedAt: text(64),
    }),
    onProductPage: true,
    // Stock that old is not promised: the page says "availability unknown".
    showStaleIfError: false,
    // Stock moves in seconds: short freshness, short grace, and a stale-if-error
    // window after which the page says "availability unknown" rather than promise stock.
    defaults: { ttl: 10, swr: 30, staleIfError: 600, negativeTtl: 30, core: true, originTimeoutMs: 1000 },
  },
  reviews: {
    code: "r",
    path: (id) => `/reviews/${id}/summary`,
    schema: v.object({
      id,
      rating: v.pipe(v.number(), v.minValue(0), v.maxValue(5)),
      count,
      top: v.pipe(
        v.array(v.object({ author: shownText(200), rating: v.pipe(v.number(), v.minValue(0), v.maxValue(5)), title: shownText(300), body: shownText(5000) })),
        v.maxLength(3),
      ),
      version,
    }),
    onProductPage: true,
    showStaleIfError: true,
    // Decoration: long windows, and a default when nothing is usable. Its
    // timeout delays no first byte (a page streams past a non-core part: http/streamedPage.ts), only this section.
    defaults: { ttl: 600, swr: 3600, staleIfError: 86_400, negativeTtl: 300, core: false, originTimeoutMs: 2000 },
  },
  recommendations: {
    code: "c",
    path: (id) => `/recommendations/${id}`,
    schema: v.object({
      id,
      items: v.pipe(v.array(v.object({ id, title: shownText(500), price: money, image: text(2000) })), v.maxLength(8)),
      version,
    }),
    onProductPage: true,
    showStaleIfError: true,
    defaults: { ttl: 900, swr: 3600, staleIfError: 86_400, negativeTtl: 300, core: false, originTimeoutMs: 2000 },
  },
  // The first products of the origin's listing, as the home page shows them (one entry, under LISTING_ID): through
  // the same read path, so that `GET /` is cached, coalesced and served stale when the listing service fails.
  listing: {
    code: "h",
    path: () => `/products?limit=${LISTING_SIZE}`,
    // The only resource whose stored shape is not the origin's: the first page of ids, with the version the contract
    // does not give it (every fetch is the latest word). It takes both the page the origin sends and the entry the
    // tier made of it, else every isolate would find the listing in L2 invalid, delete it and fetch it again.
    schema: v.union([
      v.pipe(
        productIdPage,
        v.transform(({ ids }) => ({ id: LISTING_ID, ids, version: 1 })),
      ),
      v.strictObject({ id: v.literal(LISTING_ID), ids: productIdPage.entries.ids, version: v.literal(1) }),
    ]),
    onProductPage: false,
    showStaleIfError: true,
    // New products may take a minute to show on the home page; a failing listing service keeps the last list for a day.
    defaults: { ttl: 60, swr: 600, staleIfError: 86_400, negativeTtl: 60, core: true, originTimeoutMs: 1500 },
  },
} as const satisfies Record<string, ResourceSpec>;

export type ResourceName = keyof typeof RESOURCES;
export const RESOURCE_NAMES = Object.keys(RESOURCES) as ResourceName[];

/** The resources a product page is made of, in the order a page reads them. */
export type PageResource = { [R in ResourceName]: (typeof RESOURCES)[R]["onProductPage"] extends true ? R : never }[ResourceName];
export const PAGE_RESOURCES = RESOURCE_NAMES.filter((name): name is PageResource => RESOURCES[name].onProductPage);

/**
 * What a product page is about (the first of PAGE_RESOURCES): filled first when it must be filled, its absence is the page's
 * 404 (the others are then not fetched), and its tags are the ones tag purges match for every resource of the product.
 */
export const PAGE_SUBJECT = "product" satisfies PageResource;
/** The home page's resource. */
export const LISTING = "listing" satisfies ResourceName;

/**
 * The data of each resource, as validated (./validate.ts): what its schema lets through, each shape declared once,
 * above. The product's is written out: its schema drops a null `compareAtPrice`, which inference cannot follow.
 */
export type ResourceTypes = { [R in Exclude<ResourceName, "product">]: v.InferOutput<(typeof RESOURCES)[R]["schema"]> } & { product: Product };

export interface Product {
  id: string;
  title: string;
  description: string;
  brand: string;
  category: string[];
  price: v.InferOutput<typeof money>;
  compareAtPrice?: v.InferOutput<typeof money>;
  images: { url: string; alt: string }[];
  attributes: Record<string, string>;
  tags: string[];
  version: number;
  updatedAt: string;
}
