import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { renderErrorPage } from "../render";

/**
 * Error pages as rendered, by status, message and Retry-After. Messages are
 * the code's own constants (a dozen pages at most), so this stays small; a
 * flood of shed requests, junk ids or 404s then costs no render each.
 */
const rendered = new Map<string, string>();

/** A readable HTML error page; never an exception text or a stack trace. */
export function errorPage(c: Context, status: 400 | 404 | 413 | 500 | 503, message: string, cacheControl: string, retryAfterSeconds?: number): Response {
  c.header("Cache-Control", cacheControl);
  const key = `${status}|${retryAfterSeconds ?? ""}|${message}`;
  let html = rendered.get(key);
  if (html === undefined) {
    html = renderErrorPage({ status, message, retryAfterSeconds });
    rendered.set(key, html);
  }
  return c.html(html, status as ContentfulStatusCode);
}
