// The tier's JSON endpoints (purge, known ids) read their bodies the same way: bounded in bytes (413), JSON
// only, checked against a schema, and every refusal a readable JSON `{error, message}` with a 4xx status.
import { sValidator } from "@hono/standard-validator";
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { GenericSchema } from "valibot";
import { DEFAULTS } from "../config/defaults";
import type { AppEnv } from "./appEnv";

/** JSON bodies only, of at most `maxBytes` (hono/body-limit counts them as they stream in). */
export function limitedJsonBody(maxBytes: number): MiddlewareHandler<AppEnv> {
  const limit = bodyLimit({
    maxSize: maxBytes,
    onError: (c) => c.json({ error: "body_too_large", message: `the body must be at most ${maxBytes} bytes` }, 413),
  });
  return async (c, next) => {
    if (!/^application\/json\b/i.test(c.req.header("content-type") ?? "")) {
      return c.json({ error: "bad_request", message: "send a JSON body with content-type: application/json" }, 400);
    }
    return limit(c, next);
  };
}

/**
 * hono's standard validator, answering a failed check with the first issue and where it is; a field the endpoint
 * does not take is named as such, with the fields it does take (`fields`), not in the validation library's words.
 */
export function validJson<S extends GenericSchema>(schema: S, fields: readonly string[]) {
  return sValidator("json", schema, (result, c) => {
    if (!result.success) {
      const issue = result.error[0];
      const where = issue?.path?.map((part) => (typeof part === "object" ? String(part.key) : String(part))).join(".");
      if (where && (issue as { expected?: unknown } | undefined)?.expected === "never") {
        return c.json({ error: "bad_request", message: `unknown field "${where}": this endpoint takes ${fields.join(", ")}` }, 400);
      }
      return c.json({ error: "bad_request", message: where ? `${where}: ${issue?.message}` : issue?.message }, 400);
    }
  });
}

/**
 * Redis did not record what was asked, or there is none: a 503 the caller retries, once the L2 breaker, which a
 * failing Redis opens, may have let its probe through (its cool-down): a retry before that is refused at once.
 */
export function l2Unavailable(c: Context<AppEnv>, message: string): Response {
  c.header("Retry-After", String(Math.ceil(DEFAULTS.breakerCoolDownMs / 1000)));
  return c.json({ error: "l2_unavailable", message }, 503);
}

/** What hono's JSON body parser throws on an empty or malformed body, and the tier's words for it. */
export const MALFORMED_JSON = { thrown: "Malformed JSON in request body", said: "the body is not valid JSON (empty or malformed): send one JSON object" };
