// POST /__purge — record a purge in Redis, then answer 202 (see README,
// "Purging"). A purge is acknowledged only once it is recorded: with Redis
// unavailable the answer is 503 and the caller retries, so nothing is lost.
import { sValidator } from "@hono/standard-validator";
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { Env } from "../config";
import { PURGE_LIMITS, purgeRequestSchema, recordFrom } from "../invalidation/record";
import type { Tier } from "../tier";
import { requirePurgeToken } from "./adminAuth";

const RETRY_AFTER_SECONDS = 5;

export const purgeRoute = new Hono<{ Bindings: Env; Variables: { tier: Tier } }>().post(
  "/__purge",
  requirePurgeToken(),
  bodyLimit({
    maxSize: PURGE_LIMITS.bodyBytes,
    onError: (c) => c.json({ error: "body_too_large", message: `the body must be at most ${PURGE_LIMITS.bodyBytes} bytes` }, 413),
  }),
  async (c, next) => {
    if (!/^application\/json\b/i.test(c.req.header("content-type") ?? "")) {
      return c.json({ error: "bad_request", message: "send a JSON body with content-type: application/json" }, 400);
    }
    await next();
  },
  sValidator("json", purgeRequestSchema, (result, c) => {
    if (!result.success) {
      const issue = result.error[0];
      const where = issue?.path?.map((part) => (typeof part === "object" ? String(part.key) : String(part))).join(".");
      return c.json({ error: "bad_request", message: where ? `${where}: ${issue?.message}` : issue?.message }, 400);
    }
  }),
  async (c) => {
    const tier = c.get("tier");
    if (!tier.purgeLog) {
      c.header("Retry-After", String(RETRY_AFTER_SECONDS));
      return c.json({ error: "l2_unavailable", message: "purges are recorded in Redis, and no Redis is configured" }, 503);
    }
    const record = recordFrom(c.req.valid("json"), tier.clock.now());
    const seq = await tier.purgeLog.record(record);
    if (seq === undefined) {
      c.header("Retry-After", String(RETRY_AFTER_SECONDS));
      return c.json({ error: "l2_unavailable", message: "Redis did not record the purge; retry" }, 503);
    }
    tier.purges.apply({ ...record, seq });
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
