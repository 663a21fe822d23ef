import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { renderErrorPage } from "../render";
import type { ErrorPageModel } from "../render/model";
import { systemClock } from "../shared/clock";
import { createRateLimitedLog } from "../shared/log";
import { VARY_ON_ENCODING } from "./headers";
import type { Config } from "../config";
import { DEFAULTS } from "../config/defaults";

/**
 * Error pages as rendered, by status, message and Retry-After. Messages are the code's own constants (a dozen
 * pages at most), so this stays small; a flood of shed requests, junk ids or 404s then costs no render each.
 */
const rendered = new Map<string, string>();

/**
 * Seconds a visitor is asked to wait before retrying a page's 503 or 429: the breaker's cool-down and a cold page's
 * wait together, so that a retry comes after the breaker's probe and the queue's turnover, not into the same refusal.
 */
export function pageRetryAfterSeconds(config: Pick<Config, "coldPageWaitMs">): number {
  return Math.ceil((DEFAULTS.breakerCoolDownMs + config.coldPageWaitMs) / 1000);
}

/**
 * Render failures, by their message: each logged once per isolate, not once per request (an interval
 * no isolate outlives; the log's own bound on keys guards against an unexpected variety of messages).
 */
const logRenderFailure = createRateLimitedLog({ intervalMs: Number.POSITIVE_INFINITY, clock: systemClock });

/**
 * The page given when the error page itself cannot be rendered (a template that fails, say): a constant
 * that no template, data or engine can break, so that the 500 of a broken render is still a readable
 * page, never an exception out of the app on every HTML route. Only the code's own texts go in.
 */
function staticErrorPage(status: number, message: string): string {
  const text = message.replace(/[&<>"]/g, (c) => (c === "&" ? "&amp;" : c === "<" ? "&lt;" : c === ">" ? "&gt;" : "&quot;"));
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Error ${status}</title><link rel="icon" href="data:,"></head><body style="font-family:system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem"><h1>Sorry</h1><p>${text}</p><p>Error ${status}</p><p><a href="/">Back to the home page</a></p></body></html>`;
}

/** A readable HTML error page; never an exception text or a stack trace. */
export function errorPage(
  c: Context,
  status: 400 | 404 | 405 | 413 | 429 | 500 | 503,
  message: string,
  cacheControl: string,
  { retryAfterSeconds, heading }: Pick<ErrorPageModel, "retryAfterSeconds" | "heading"> = {},
): Response {
  c.header("Cache-Control", cacheControl);
  // The page says when to come back; so does the header a client or crawler acts on.
  if (retryAfterSeconds !== undefined) c.header("Retry-After", String(retryAfterSeconds));
  const key = `${status}|${retryAfterSeconds ?? ""}|${heading ?? ""}|${message}`;
  let html = rendered.get(key);
  if (html === undefined) {
    try {
      html = renderErrorPage({ status, message, retryAfterSeconds, heading });
      rendered.set(key, html);
    } catch (error) {
      const cause = String(error);
      logRenderFailure(cause, "render_failed", { page: `error ${status}`, message: cause });
      html = staticErrorPage(status, message);
    }
  }
  c.header(...VARY_ON_ENCODING);
  return c.html(html, status as ContentfulStatusCode);
}
