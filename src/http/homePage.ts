// GET / — a short list of products, from the origin's id listing. The listing
// is asked at most once a minute per isolate; titles are read through the
// cache tiers like any page's product (so, after the first view, from L1).
import type { Context } from "hono";
import { renderHomePage } from "../render";
import type { Tier } from "../tier";
import { errorPage } from "./errorPage";

const HOME_PRODUCTS = 24;
const LISTING_TTL_MS = 60_000;

const listings = new WeakMap<Tier, { ids: string[]; fetchedAt: number }>();

export async function homePage(c: Context, tier: Tier): Promise<Response> {
  let listing = listings.get(tier);
  if (!listing || tier.clock.now() - listing.fetchedAt > LISTING_TTL_MS) {
    try {
      const page = await tier.origin.listProductIds(null, HOME_PRODUCTS);
      listing = { ids: page.ids, fetchedAt: tier.clock.now() };
      listings.set(tier, listing);
    } catch {
      if (!listing) return errorPage(c, 503, "The product list is not available right now.", "no-store", 10);
    }
  }
  const background = (work: Promise<unknown>) => c.executionCtx.waitUntil(work);
  const products = await Promise.all(
    listing.ids.map(async (id) => {
      const { data } = await tier.cache.read(id, ["product"], background);
      return { id, title: data.product?.outcome === "found" ? data.product.data!.title : null };
    }),
  );
  c.header("Cache-Control", "public, max-age=60");
  return c.html(renderHomePage({ products }));
}
