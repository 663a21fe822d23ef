// The Worker entry point: pages through the Hono app; cron triggers rebuild
// the known-ids filter and warm L2 (see warming/scheduled.ts).
import { createApp } from "./app";
import { ConfigError, type Env } from "./config";
import { tierFor } from "./tier";
import { withSubrequestGate } from "./shared/subrequests";
import { runScheduled } from "./warming/scheduled";

const app = createApp();

export default {
  async fetch(request, env, ctx) {
    const response = await app.fetch(request, env, ctx);
    // The app sets Content-Encoding only on a body it encoded itself (the
    // rendered pages are kept gzipped, http/productPage.ts): the runtime is to
    // send those bytes as they are. Said here, past Hono's middleware, which
    // rebuild the Response and would drop `encodeBody`.
    if (!response.headers.has("Content-Encoding")) return response;
    return new Response(response.body, { status: response.status, statusText: response.statusText, headers: response.headers, encodeBody: "manual" });
  },

  scheduled(event, env, ctx) {
    const tier = tierFor(env);
    if (tier instanceof ConfigError) return;
    ctx.waitUntil(withSubrequestGate(tier.config.maxSubrequests, () => runScheduled(event.cron, tier, (work) => ctx.waitUntil(work))));
  },
} satisfies ExportedHandler<Env>;
