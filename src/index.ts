// The Worker entry point: pages through the Hono app; cron triggers rebuild
// the known-ids filter and warm L2 (see scheduled.ts).
import { createApp } from "./app";
import { ConfigError, type Env } from "./config";
import { tierFor } from "./tier";
import { withSubrequestGate } from "./shared/subrequests";
import { runScheduled } from "./scheduled";

const app = createApp();

export default {
  fetch: app.fetch,

  scheduled(event, env, ctx) {
    const tier = tierFor(env);
    if (tier instanceof ConfigError) return;
    ctx.waitUntil(withSubrequestGate(tier.config.maxSubrequests, () => runScheduled(event.cron, tier, (work) => ctx.waitUntil(work))));
  },
} satisfies ExportedHandler<Env>;
