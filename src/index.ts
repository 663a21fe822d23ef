// The Worker entry point: pages through the Hono app, and a daily cron that
// rebuilds the known-ids filter from the origin's listing.
import { createApp } from "./app";
import { ConfigError, type Env } from "./config";
import { listingOf } from "./knownIds";
import { tierFor } from "./tier";

const app = createApp();

export default {
  fetch: app.fetch,

  scheduled(_event, env, ctx) {
    const tier = tierFor(env);
    if (tier instanceof ConfigError || !tier.knownIds) return;
    ctx.waitUntil(
      tier.knownIds.rebuild(listingOf(tier.origin)).then(
        (result) => console.log(JSON.stringify({ event: "known_ids_rebuilt", ...result })),
        (error) => console.error(JSON.stringify({ event: "known_ids_rebuild_failed", message: String(error) })),
      ),
    );
  },
} satisfies ExportedHandler<Env>;
