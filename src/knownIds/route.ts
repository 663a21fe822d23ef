// POST /__known-ids {ids: [...]} — the origin says these products were just
// created (dev/origin calls it with the PURGE_TOKEN). Acknowledged only once
// Redis recorded them: with Redis unavailable the answer is 503 and the
// origin retries, since an unrecorded id could be refused by other isolates
// until the next rebuild.
import { sValidator } from "@hono/standard-validator";
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import * as v from "valibot";
import type { Env } from "../config";
import { requirePurgeToken } from "../http/adminAuth";
import { PRODUCT_ID_PATTERN } from "../origin/types";
import type { Tier } from "../tier";
import { KNOWN_IDS_LIMITS } from "./defaults";
import type { KnownIds } from "./store";

const RETRY_AFTER_SECONDS = 5;
/** 1,000 ids of 40 characters fit with room to spare. */
const BODY_BYTES = 64 * 1024;

export const knownIdsRequestSchema = v.strictObject({
  ids: v.pipe(
    v.array(v.pipe(v.string(), v.regex(PRODUCT_ID_PATTERN, "each id must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$"))),
    v.minLength(1, "ids must not be empty"),
    v.maxLength(KNOWN_IDS_LIMITS.maxIdsPerAdd, `at most ${KNOWN_IDS_LIMITS.maxIdsPerAdd} ids`),
  ),
});

/** The route, given where the tier keeps its filter (null: no L2, nothing to record). */
export function knownIdsRoute(knownIdsOf: (tier: Tier) => KnownIds | null) {
  return new Hono<{ Bindings: Env; Variables: { tier: Tier } }>().post(
    "/__known-ids",
    requirePurgeToken(),
    bodyLimit({
      maxSize: BODY_BYTES,
      onError: (c) => c.json({ error: "body_too_large", message: `the body must be at most ${BODY_BYTES} bytes` }, 413),
    }),
    async (c, next) => {
      if (!/^application\/json\b/i.test(c.req.header("content-type") ?? "")) {
        return c.json({ error: "bad_request", message: "send a JSON body with content-type: application/json" }, 400);
      }
      await next();
    },
    sValidator("json", knownIdsRequestSchema, (result, c) => {
      if (!result.success) {
        const issue = result.error[0];
        const where = issue?.path?.map((part) => (typeof part === "object" ? String(part.key) : String(part))).join(".");
        return c.json({ error: "bad_request", message: where ? `${where}: ${issue?.message}` : issue?.message }, 400);
      }
    }),
    async (c) => {
      const knownIds = knownIdsOf(c.get("tier"));
      const { ids } = c.req.valid("json");
      // No L2, no filter: every id already "might exist".
      if (!knownIds) return c.json({ recorded: ids.length, filter: "off" }, 200);
      if (!(await knownIds.add(ids))) {
        c.header("Retry-After", String(RETRY_AFTER_SECONDS));
        return c.json({ error: "l2_unavailable", message: "Redis did not record the ids; retry" }, 503);
      }
      return c.json({ recorded: ids.length, status: knownIds.status().state }, 200);
    },
  );
}
