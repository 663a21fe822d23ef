// GET /__status (HTML) and GET /__status.json (the same data): what this isolate has been doing, for operators. Behind the
// purge token, like every endpoint of the tier's own (404 for everyone when none is configured), and never stored by anybody.
import { Hono, type Context } from "hono";
import { buildStatus, type StatusSources } from "../observability/statusModel";
import { renderStatusPage } from "../render";
import type { TierServices } from "../tier";
import type { AppEnv } from "./appEnv";
import { requirePurgeToken } from "./adminAuth";
import { strictSecurityHeaders } from "./headers";

/**
 * The status page's security headers: nothing from outside the page (inline styles and inline SVG
 * only). app.ts registers it ahead of the pages' own, so that it has the last word on this route.
 */
export const statusSecurityHeaders = strictSecurityHeaders(["data:"]);

/** The gauges, read now from the tier; the counters come with `metrics`. */
function statusSourcesOf(tier: TierServices): StatusSources {
  const { cache, metrics, config } = tier;
  const l2 = cache.l2;
  return {
    now: tier.clock.now(),
    metrics,
    config,
    l2: l2
      ? { shards: l2.shards.map((shard) => ({ name: shard.name, state: shard.breaker.state() })), stats: l2.stats, invalidValues: cache.l2ValueStats() }
      : null,
    l1: cache.l1.stats(),
    location: cache.locationStats(),
    purges: tier.purges.status(),
    originSlots: { inUse: tier.originLimiter.inFlight, queued: tier.originLimiter.queued, reclaimed: tier.originLimiter.reclaimed },
    fills: cache.fillStats(),
    overload: tier.overload.stats(),
    knownIds: tier.knownIds?.status() ?? null,
  };
}

/** Whatever the answer (401 and 404 included): never cached, by browsers or anybody in between. */
async function noStore(c: Context<AppEnv>, next: () => Promise<void>): Promise<void> {
  await next();
  c.res.headers.set("Cache-Control", "no-store");
}

export const statusRoute = new Hono<AppEnv>()
  .get("/__status.json", noStore, requirePurgeToken(), (c) => c.json(buildStatus(statusSourcesOf(c.get("tier")))))
  .get("/__status", noStore, requirePurgeToken(), (c) => c.html(renderStatusPage(buildStatus(statusSourcesOf(c.get("tier"))))));
