// GET / — the first products of the origin's listing, with their titles. The listing is a cached resource like any
// product's (origin/resources.ts, "listing"). Titles come only from what the caches hold (L1, then one L2 round trip for
// all of them), plus a few of the products not cached, filled for this view (one that fails shows its id): the page's cost
// in subrequests stays bounded (docs/architecture.md, "Sharing work across requests in one isolate") and later views show
// more titles. Its answer says what happened as a product page's does (Cache-Status, Server-Timing, an ETag from app.ts).
import type { Context } from "hono";
import { LISTING, LISTING_ID, PAGE_SUBJECT } from "../origin/resources";
import { renderHomePage } from "../render";
import type { TierServices } from "../tier";
import { errorPage, pageRetryAfterSeconds } from "./errorPage";
import { requestColo, sayWhatHappened, VARY_ON_ENCODING } from "./headers";
import { FILLS_AT_ONCE } from "../shared/subrequests";

export async function homePage(c: Context, tier: TierServices): Promise<Response> {
  const background = (work: Promise<unknown>) => c.executionCtx.waitUntil(work);
  const arrivedAt = tier.clock.now();
  // As on a product page (productPage.ts): the listing is purged as the id "home".
  await tier.purges.sync(background);
  const { data, timings } = await tier.cache.read(LISTING_ID, [LISTING], background);
  const listing = data[LISTING];
  const served = listing ? [listing] : [];
  const now = tier.clock.now();
  sayWhatHappened(c, served, timings, now, tier.cache.l2?.breaker.state() === "closed");
  const view = { route: "/", id: LISTING_ID, served, hot: false, ms: now - arrivedAt } as const;
  // Not offered as a hot product: "home" is the listing's id, not a product to warm.
  if (listing?.outcome !== "found") {
    tier.recordPage({ ...view, outcome: "unavailable", status: 503 }, requestColo(c), background);
    return errorPage(c, 503, "The product list is not available right now.", "no-store", { retryAfterSeconds: pageRetryAfterSeconds(tier.config) });
  }
  tier.recordPage({ ...view, outcome: "ok", status: 200 }, requestColo(c), background);

  const ids = listing.data!.ids;
  const products = await tier.cache.readCached(ids, PAGE_SUBJECT, background);
  const toFill = ids.filter((id) => !products.has(id)).slice(0, FILLS_AT_ONCE);
  await Promise.all(
    toFill.map(async (id) => {
      const product = (await tier.cache.read(id, [PAGE_SUBJECT], background)).data[PAGE_SUBJECT];
      if (product?.outcome === "found") products.set(id, product.data!);
    }),
  );

  c.header("Cache-Control", "public, max-age=60");
  c.header(...VARY_ON_ENCODING);
  return c.html(renderHomePage({ products: ids.map((id) => ({ id, title: products.get(id)?.title ?? null })) }));
}
