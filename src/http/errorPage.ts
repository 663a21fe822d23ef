import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { renderErrorPage } from "../render";

/** A readable HTML error page; never an exception text or a stack trace. */
export function errorPage(c: Context, status: 400 | 404 | 413 | 500 | 503, message: string, cacheControl: string, retryAfterSeconds?: number): Response {
  c.header("Cache-Control", cacheControl);
  return c.html(renderErrorPage({ status, message, retryAfterSeconds }), status as ContentfulStatusCode);
}
