// The Hono app: routes and the middleware that Hono already ships.
import { Hono } from "hono";
import { etag, RETAINED_304_HEADERS } from "hono/etag";
import { timing } from "hono/timing";
import { ConfigError } from "./config";
import { closedEndpoint } from "./http/adminAuth";
import { errorPage } from "./http/errorPage";
import { MALFORMED_JSON } from "./http/jsonBody";
import { homePage } from "./http/homePage";
import { productPage } from "./http/productPage";
import { purgeRoute } from "./http/purgeRoute";
import { knownIdsRoute } from "./http/knownIdsRoute";
import { statusRoute, statusSecurityHeaders } from "./http/statusPage";
import { strictSecurityHeaders } from "./http/headers";
import { logEvent } from "./shared/log";
import { HTTPException } from "hono/http-exception";
import { tierFor } from "./tier";
import { withSubrequestGate } from "./shared/subrequests";
import type { AppEnv } from "./http/appEnv";

/** The pages' addresses, and the methods they take (HEAD: Hono answers it as GET, without the body). */
const PAGE_PATHS = ["/", "/products/:id"];
const PAGE_METHODS = "GET, HEAD, OPTIONS";
/** The operators' endpoints, and the methods they take. */
const API_METHODS = [
  ["/__purge", "POST"],
  ["/__known-ids", "POST"],
  ["/__status", "GET, HEAD"],
  ["/__status.json", "GET, HEAD"],
] as const;

/** What every route says of a bad configuration, /healthz included: the same words wherever an operator looks. */
function configErrorText(error: ConfigError): string {
  return `Configuration error: ${error.message}. See the README's configuration reference.`;
}

export function createApp(): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  // Public: whether the Worker is up and configured, nothing more (L2's state is the status page's).
  app.get("/healthz", (c) => {
    const tier = tierFor(c.env);
    if (tier instanceof ConfigError) return c.json({ ok: false, error: configErrorText(tier) }, 500);
    return c.json({ ok: true });
  });

  // Bad configuration: one clear answer naming the setting, on every route.
  app.use("*", async (c, next) => {
    const tier = tierFor(c.env);
    if (tier instanceof ConfigError) return c.text(configErrorText(tier), 500);
    c.set("tier", tier);
    // Every request's outgoing connections go through a gate of its own (shared/subrequests.ts).
    await withSubrequestGate(tier.config.maxSubrequests, next);
  });

  // The status page's own policy, registered first: the outer middleware sets its headers last.
  app.use("/__status", statusSecurityHeaders);
  // The pages' images come from the web (the origin's image URLs, http(s)
  // only: see render/urls.ts) or are data: (the empty favicon).
  app.use("*", strictSecurityHeaders(["https:", "http:", "data:"]));
  for (const pages of ["/", "/products/*"]) app.use(pages, timing({ total: true, crossOrigin: false }));
  // The home page's ETag is its body's, and hono/etag answers 304 to a matching If-None-Match. A product page's is
  // known before its body (its parts' versions: http/productPage.ts answers its 304s), and a streamed one has none:
  // hashing its body would hold the page until its last section.
  app.use("/", etag({ retainedHeaders: [...RETAINED_304_HEADERS, "cache-status", "server-timing"] }));

  app.route("/", purgeRoute);
  app.route("/", knownIdsRoute);
  app.route("/", statusRoute);
  app.get("/", (c) => homePage(c, c.get("tier")));
  app.get("/products/:id", (c) => productPage(c, c.get("tier")));
  // The pages are there to be read: another method is told which ones they
  // take (RFC 9110: 405 with Allow; OPTIONS answered with Allow), not that
  // the address does not exist.
  app.on("OPTIONS", PAGE_PATHS, (c) => c.body(null, 204, { Allow: PAGE_METHODS }));
  for (const path of PAGE_PATHS) {
    // Any method but those above (POST, TRACE, PROPFIND...): GET and HEAD have answered before this handler.
    app.all(path, (c) => {
      c.header("Allow", PAGE_METHODS);
      return errorPage(c, 405, "This page can only be read.", "no-store");
    });
  }
  // The endpoints asked with another method: a JSON answer in their own language, with what they take
  // (closed without a token: 404 whatever the method, as for the methods they take).
  for (const [path, allow] of API_METHODS) {
    app.all(path, (c) => {
      if (!c.get("tier").config.purgeToken) return closedEndpoint(c);
      c.header("Allow", allow);
      c.header("Cache-Control", "no-store");
      return c.json({ error: "method_not_allowed", message: `${path} takes ${allow}` }, 405);
    });
  }

  app.notFound((c) => errorPage(c, 404, "There is no page at this address.", "public, max-age=60"));
  app.onError((error, c) => {
    // A middleware's own answer (hono/bearer-auth's 401 with its WWW-Authenticate challenge, say): as it made it.
    if (error instanceof HTTPException && error.res) return error.getResponse();
    if (error instanceof HTTPException && error.status < 500) {
      // Malformed requests (bad JSON and the like): a readable answer in the endpoint's own language.
      const path = new URL(c.req.url).pathname;
      const message = error.message === MALFORMED_JSON.thrown ? MALFORMED_JSON.said : error.message;
      if (path.startsWith("/__")) return c.json({ error: "bad_request", message }, error.status);
      return errorPage(c, 400, "That request could not be understood.", "no-store");
    }
    // Last resort: log the detail, show the visitor a page, never the stack.
    logEvent("unhandled_error", { path: new URL(c.req.url).pathname, message: String(error) }, "error");
    return errorPage(c, 500, "Something went wrong on our side.", "no-store");
  });
  return app;
}
