// POST /__known-ids {ids: [...]} — the origin says these products were just created (dev/origin calls it with
// the PURGE_TOKEN). Acknowledged only once Redis recorded them: with Redis unavailable the answer is 503 and
// the origin retries, since an unrecorded id could be refused by other isolates until the next rebuild.
import { Hono } from "hono";
import * as v from "valibot";
import { ADMIN_LIMITS } from "../config/defaults";
import { idsSchema } from "../invalidation/record";
import type { AppEnv } from "./appEnv";
import { requirePurgeToken } from "./adminAuth";
import { l2Unavailable, limitedJsonBody, validJson } from "./jsonBody";

/** The purge endpoint's ids (valid, at most ADMIN_LIMITS.ids), at least one. */
const knownIdsRequestSchema = v.strictObject({ ids: v.pipe(idsSchema, v.minLength(1, "ids must not be empty")) });

export const knownIdsRoute = new Hono<AppEnv>().post(
  "/__known-ids",
  requirePurgeToken(),
  limitedJsonBody(ADMIN_LIMITS.bodyBytes),
  validJson(knownIdsRequestSchema, Object.keys(knownIdsRequestSchema.entries)),
  async (c) => {
    const knownIds = c.get("tier").knownIds;
    const { ids } = c.req.valid("json");
    // No L2, no filter: every id already "might exist".
    if (!knownIds) return c.json({ recorded: ids.length, filter: "off" }, 200);
    if (!(await knownIds.add(ids))) return l2Unavailable(c, "Redis did not record the ids; retry");
    return c.json({ recorded: ids.length, status: knownIds.status().state }, 200);
  },
);
