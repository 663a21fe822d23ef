// The headers that say what happened: Cache-Status (RFC 9211), one member per resource of the page named by the tier that
// answered it (its members by example: docs/architecture.md, "Saying what happened"), Cache-Control, the ETag and Server-Timing;
// and the security headers of every answer. `ttl` is the seconds of freshness left (negative: stale for that long).
import type { Context, MiddlewareHandler } from "hono";
import { secureHeaders } from "hono/secure-headers";
import { setMetric } from "hono/timing";
import type { Timings } from "../cache/pageRequest";
import type { Served } from "../cache/served";
import type { ResourcePolicy } from "../config";
import type { OriginFailure } from "../origin/failure";
import type { ResourceName } from "../origin/resources";
import { hashPair } from "../shared/hash";

/**
 * hono's secure headers with a strict Content-Security-Policy: nothing runs (the JSON-LD block is
 * data, not a script), styles are the page's own inline ones, nothing frames it, images only from
 * `imgSrc`. Set over whatever the handler set (overwrite: no `has` per header on every cached page).
 */
export function strictSecurityHeaders(imgSrc: string[]): MiddlewareHandler {
  return secureHeaders({
    contentSecurityPolicy: {
      defaultSrc: ["'none'"],
      imgSrc,
      styleSrc: ["'unsafe-inline'"],
      baseUri: ["'none'"],
      formAction: ["'none'"],
      frameAncestors: ["'none'"],
    },
  });
}

/**
 * Every HTML answer's Vary: the runtime compresses what it sends for the clients that accept it (workerd
 * and Cloudflare alike, Content-Encoding gzip or br), so a cache downstream must keep the encodings apart.
 */
export const VARY_ON_ENCODING = ["Vary", "Accept-Encoding"] as const;

const FAILURE_STATUS: Record<OriginFailure, number> = {
  timeout: 504,
  unreachable: 502,
  status: 502,
  rejected: 502,
  invalid: 502,
  overloaded: 503,
  "circuit-open": 503,
  // Nobody is answered: the client closed the request (as Nginx's 499 says).
  abandoned: 499,
};

/** RFC 9211's `fwd`: why the origin was asked. */
function forwardReason(served: Served<unknown>): string {
  if (served.forward === "stale" || served.forward === "bypass") return served.forward;
  return "uri-miss";
}

function member(served: Served<unknown>, now: number, l2Stored: boolean): string {
  const params: string[] = [`pp-${served.tier ?? "origin"}`];
  const ttl = served.entry ? Math.round((served.entry.freshUntil - now) / 1000) : undefined;
  let detail: string = served.resource;
  // A failure behind the answer: none, a copy kept for errors, or an answer about this id that could not be used, standing as "no data" (never stored in L2).
  const failed = served.outcome === "failed" ? "failed" : served.freshness === "stale-if-error" ? "stale-if-error" : served.failure ? "rejected" : undefined;
  if (failed) {
    params.push(`fwd=${failed === "stale-if-error" ? "stale" : forwardReason(served)}`, `fwd-status=${FAILURE_STATUS[served.failure ?? "unreachable"]}`);
    detail += ` ${failed}`;
  } else if (served.forward) {
    // The origin's own status: 404 for an id it says does not exist (kept as "absent"), 200 for data.
    params.push(`fwd=${forwardReason(served)}`, `fwd-status=${served.outcome === "absent" ? 404 : 200}`);
    if (served.tier === "origin" && l2Stored) params.push("stored");
    if (served.collapsed) params.push("collapsed");
  } else {
    params.push("hit");
    if (served.freshness === "stale") detail += " stale";
  }
  if (served.outcome === "absent" && !served.failure) detail += " absent";
  if (ttl !== undefined && served.outcome !== "failed") params.push(`ttl=${ttl}`);
  params.push(`detail="${detail}"`);
  return params.join("; ");
}

/**
 * Cache-Control for browsers and CDNs, derived from the entries that made the page: nobody downstream may
 * keep it fresh longer than its shortest-lived part, nor serve it stale longer than its shortest grace.
 */
export function pageCacheControl(page: Served<unknown>[], policies: Record<string, ResourcePolicy>, now: number): string {
  if (page.some((served) => served.outcome === "failed" || served.freshness === "stale-if-error")) {
    // A degraded page must not be kept downstream once the origin is back.
    return "no-cache";
  }
  const entries = page.filter((served) => served.entry);
  const fresh = Math.max(0, Math.min(...entries.map((served) => Math.floor((served.entry!.freshUntil - now) / 1000))));
  const grace = Math.min(...entries.map((served) => policies[served.resource]!.swr));
  return `public, max-age=${fresh}, s-maxage=${fresh}, stale-while-revalidate=${grace}`;
}

/** What a page's HTML depends on besides its URL: the template version and each part's version and state. */
export function pageIdentity(page: Served<unknown>[], renderVersion: string): string {
  const parts = page.map(
    (served) => `${served.resource}:${served.outcome}:${served.entry?.version ?? "-"}:${served.freshness === "stale-if-error" ? "e" : ""}`,
  );
  return `${renderVersion}|${parts.join("|")}`;
}

/**
 * A validator from the page's identity: same versions and states, same HTML. Weak (W/), because the runtime sends the same page
 * gzipped or not, and a strong validator names one sequence of bytes (RFC 9110, 8.8.1; Cloudflare weakens a strong one when it
 * compresses); If-None-Match compares weakly, so 304s are unchanged. 64 bits of a fast hash, the same in every isolate: an ETag only
 * has to tell this URL's versions apart, and a digest through crypto.subtle cost a render a promise and a call into the runtime.
 */
export function pageEtag(identity: string): string {
  const [high, low] = hashPair(identity);
  return `W/"${high!.toString(16).padStart(8, "0")}${low!.toString(16).padStart(8, "0")}"`;
}

/**
 * Whether `ifNoneMatch` names `etag` (RFC 9110, 13.1.2: "*", or any of its tags by weak comparison), as hono/etag judges the home page's.
 */
export function notModified(ifNoneMatch: string | undefined, etag: string): boolean {
  const opaque = (tag: string) => tag.trim().replace(/^W\//, "");
  return ifNoneMatch !== undefined && (ifNoneMatch.trim() === "*" || ifNoneMatch.split(",").some((tag) => opaque(tag) === opaque(etag)));
}

/**
 * The `Link` of what a product page's first paint needs beyond its HTML (its CSS is inline): its main image, preloaded. From it Cloudflare
 * sends a 103 Early Hints (RFC 8297) before the page, so the browser fetches the image while the page is read. The URL parser's
 * serialization percent-encodes whatever a header may not hold (spaces, controls, `<`, `>`); an address it rejects gives no hint.
 */
export function preloadLink(imageUrl: string | undefined): string | undefined {
  if (imageUrl === undefined) return undefined;
  try {
    return `<${new URL(imageUrl).href}>; rel=preload; as=image`;
  } catch {
    return undefined;
  }
}

/**
 * What a page's read did: Cache-Status, also returned ("stored": written to L2 as well as L1, which an open breaker
 * prevents), and Server-Timing for the steps that wait on I/O: the runtime's clock moves across I/O alone, so L1
 * and the render would always read 0 (docs/architecture.md, "Saying what happened"). A streamed page's headers say
 * what was known before its body: its `streamed` parts are named as such, and its origin timing is its core's.
 */
export function sayWhatHappened(
  c: Context,
  page: Served<unknown>[],
  timings: Timings,
  now: number,
  l2Stored: boolean,
  streamed: readonly ResourceName[] = [],
): string {
  for (const step of ["location", "l2", "origin"] as const) if (timings[step] !== undefined) setMetric(c, step, timings[step]);
  // A part the page streams is still at the origin when the headers go: asked for, its answer not known yet.
  const members = [
    ...page.map((served) => member(served, now, l2Stored)),
    ...streamed.map((resource) => `pp-origin; fwd=uri-miss; detail="${resource} streamed"`),
  ];
  const status = members.join(", ");
  c.header("Cache-Status", status);
  return status;
}

/**
 * This isolate's Cloudflare location, from the first request that names it (`request.cf.colo`), for the
 * fleet's figures; undefined off the platform. Read once: an isolate runs in one data center, and reading
 * `request.cf` builds the request's whole cf object. Plain data, shared by the isolate's requests.
 */
let isolateColo: string | undefined;

export function requestColo(c: Context): string | undefined {
  if (isolateColo !== undefined) return isolateColo;
  const colo = (c.req.raw.cf as { colo?: unknown } | undefined)?.colo;
  if (typeof colo === "string" && colo.length <= 8) isolateColo = colo;
  return isolateColo;
}
