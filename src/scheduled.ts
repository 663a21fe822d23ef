// The cron entry point, beside app.ts for requests: what the cron triggers
// do (wrangler.toml [triggers]): rebuild the known-ids filter once a day,
// and every 15 minutes warm L2 with the fleet's hottest products,
// rate-limited (warming/ holds how), or build the filter if Redis has none.
import { listingOf } from "./knownIds";
import { logEvent } from "./shared/log";
import { PAGE_RESOURCES, PAGE_SUBJECT } from "./origin/resources";
import type { TierServices } from "./tier";
import { hottestIds } from "./warming/hotReport";
import { WARM_PER_SECOND, WARM_TOP, warmProducts } from "./warming/warm";
import { FILLS_AT_ONCE, type Background } from "./shared/subrequests";

export const REBUILD_CRON = "17 3 * * *";
export const WARM_CRON = "*/15 * * * *";

/**
 * Subrequests one product can cost when it is cold, counted from what its
 * read does: an origin fetch per resource, its L2 read, and the claims and
 * writes of its fills, made together where they run together
 * (cache/l2/fillBatch.ts: the product's claim, then its write; the others'
 * claims, then their writes). A run warms only what fits in the
 * invocation's budget (MAX_SUBREQUESTS; the Free plan's 50 warms 5 products
 * a run).
 */
const SUBREQUESTS_PER_PRODUCT = PAGE_RESOURCES.length + 1 + 2 + 2;

/** Products one warm run can afford: the hot list's read and a margin come first. */
export function productsPerWarmRun(maxSubrequests: number): number {
  return Math.max(0, Math.min(WARM_TOP, Math.floor((maxSubrequests - 5) / SUBREQUESTS_PER_PRODUCT)));
}

/** A new version of the known-ids filter from the origin's listing; `reason`: why now. Logged, never thrown. */
async function rebuildKnownIds(knownIds: NonNullable<TierServices["knownIds"]>, tier: TierServices, reason: "daily" | "missing"): Promise<void> {
  try {
    logEvent("known_ids_rebuilt", { reason, ...(await knownIds.rebuild(listingOf(tier.origin))) });
  } catch (error) {
    logEvent("known_ids_rebuild_failed", { reason, message: String(error) }, "error");
  }
}

export async function runScheduled(cron: string, tier: TierServices, background: Background): Promise<void> {
  if (cron === REBUILD_CRON) {
    if (tier.knownIds) await rebuildKnownIds(tier.knownIds, tier, "daily");
    return;
  }
  // A filter Redis lacks (the first deploy, or lost with Redis's data) is built within the quarter hour, not
  // at the next night's run: until then every junk id reaches the origin. The build takes this run's budget.
  if (cron === WARM_CRON && tier.knownIds && (await tier.knownIds.needsBuilding())) {
    await rebuildKnownIds(tier.knownIds, tier, "missing");
    return;
  }
  if (cron === WARM_CRON && tier.cache.l2) {
    const top = productsPerWarmRun(tier.config.maxSubrequests);
    if (top === 0) return;
    const ids = await hottestIds(tier.cache.l2, tier.config.keyPrefix, top);
    const result = await warmProducts({ ids, perSecond: WARM_PER_SECOND, concurrency: FILLS_AT_ONCE, warmOne: (id) => warmOne(tier, id, background) });
    logEvent("warmed", { products: ids.length, ...result });
  }
}

/** One product through the tier's read path: fills what is missing or stale in L2. */
export async function warmOne(tier: TierServices, id: string, background: Background): Promise<boolean> {
  const { data } = await tier.cache.read(id, PAGE_RESOURCES, background);
  return data[PAGE_SUBJECT]?.outcome === "found";
}
