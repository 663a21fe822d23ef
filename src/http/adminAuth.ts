// The tier's own endpoints (purge, known ids) take the PURGE_TOKEN as a bearer token, compared in
// constant time by hono/bearer-auth. Without a configured token they do not exist: 404 for everyone.
import type { Context, MiddlewareHandler, Next } from "hono";
import { bearerAuth } from "hono/bearer-auth";
import type { TierServices } from "../tier";
import type { AppEnv } from "./appEnv";

const guards = new WeakMap<TierServices, MiddlewareHandler>();

/** The protection space the tier's own endpoints share (WWW-Authenticate: Bearer realm="…"). */
const REALM = "edge-product-pages admin";

/** What the endpoints answer while no token is configured, whatever the method. */
export function closedEndpoint(c: Context<AppEnv>): Response {
  return c.json({ error: "not_found", message: "this endpoint is closed: no PURGE_TOKEN is configured" }, 404);
}

export function requirePurgeToken(): MiddlewareHandler<AppEnv> {
  return async (c: Context<AppEnv>, next: Next) => {
    const tier = c.get("tier");
    const token = tier.config.purgeToken;
    if (!token) return closedEndpoint(c);
    let guard = guards.get(tier);
    if (!guard) {
      // RFC 6750: each 401 names the scheme and realm (WWW-Authenticate), and the body says what to send.
      guard = bearerAuth({
        token,
        realm: REALM,
        noAuthenticationHeader: { message: { error: "unauthorized", message: "send Authorization: Bearer <PURGE_TOKEN>" } },
        // Every challenge names the realm (hono's own omit it past the first: RFC 6750, section 3).
        invalidAuthenticationHeader: {
          wwwAuthenticateHeader: `Bearer realm="${REALM}", error="invalid_request"`,
          message: { error: "bad_request", message: "malformed Authorization header: send Authorization: Bearer <PURGE_TOKEN>" },
        },
        invalidToken: {
          wwwAuthenticateHeader: `Bearer realm="${REALM}", error="invalid_token"`,
          message: { error: "unauthorized", message: "invalid token: send Authorization: Bearer <PURGE_TOKEN>, the PURGE_TOKEN secret" },
        },
      });
      guards.set(tier, guard);
    }
    return guard(c, next);
  };
}
