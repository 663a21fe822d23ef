// POST /__purge — record a purge in Redis, then answer 202 (see README, "Purging"). A purge is acknowledged only
// once it is recorded: with Redis unavailable the answer is 503 and the caller retries, so nothing is lost.
import { Hono } from "hono";
import { purgeRequestSchema, recordFrom } from "../invalidation/record";
import { ADMIN_LIMITS } from "../config/defaults";
import type { AppEnv } from "./appEnv";
import { requirePurgeToken } from "./adminAuth";
import { l2Unavailable, limitedJsonBody, validJson } from "./jsonBody";
import { logEvent } from "../shared/log";

export const purgeRoute = new Hono<AppEnv>().post(
  "/__purge",
  requirePurgeToken(),
  limitedJsonBody(ADMIN_LIMITS.bodyBytes),
  validJson(purgeRequestSchema, Object.keys(purgeRequestSchema.pipe[0].entries)),
  async (c) => {
    const tier = c.get("tier");
    if (!tier.purgeLog) return l2Unavailable(c, "purges are recorded in Redis, and no Redis is configured");
    const record = recordFrom(c.req.valid("json"), tier.clock.now());
    const seq = await tier.purgeLog.record(record);
    if (seq === undefined) return l2Unavailable(c, "Redis did not record the purge; retry");
    tier.purges.apply({ ...record, seq });
    logEvent("purge_recorded", { seq, ids: record.ids.length, tags: record.tags.length, all: record.all, mode: record.mode, resources: record.resources });
    return c.json(
      {
        seq,
        recorded: { ids: record.ids.length, tags: record.tags, all: record.all, mode: record.mode, resources: record.resources },
        // After this answer, no isolate serves the purged data for longer than this.
        maxPropagationMs: tier.config.purgePollMs,
      },
      202,
    );
  },
);
