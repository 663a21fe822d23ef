// The tier's own endpoints (purge, known ids) take the PURGE_TOKEN as a
// bearer token, compared in constant time by hono/bearer-auth. Without a
// configured token they do not exist: 404 for everyone.
import type { Context, MiddlewareHandler, Next } from "hono";
import { bearerAuth } from "hono/bearer-auth";
import type { Tier } from "../tier";
import type { AppEnv } from "./appEnv";

const guards = new WeakMap<Tier, MiddlewareHandler>();

export function requirePurgeToken(): MiddlewareHandler<AppEnv> {
  return async (c: Context<AppEnv>, next: Next) => {
    const tier = c.get("tier");
    const token = tier.config.purgeToken;
    if (!token) return c.json({ error: "not_found", message: "this endpoint is closed: no PURGE_TOKEN is configured" }, 404);
    let guard = guards.get(tier);
    if (!guard) {
      guard = bearerAuth({
        token,
        noAuthenticationHeader: { message: { error: "unauthorized", message: "send Authorization: Bearer <PURGE_TOKEN>" } },
        invalidAuthenticationHeader: { message: { error: "bad_request", message: "malformed Authorization header" } },
        invalidToken: { message: { error: "unauthorized", message: "invalid token" } },
      });
      guards.set(tier, guard);
    }
    return guard(c, next);
  };
}
