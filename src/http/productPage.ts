// GET /products/:id — validate, read the page's resources through the cache
// tiers, decide what the visitor gets, render, and say what happened.
import type { Context } from "hono";
import type { Served } from "../cache/served";
import { PAGE_RESOURCES, PAGE_SUBJECT, RESOURCES, type PageResource, type ResourceTypes } from "../origin/resources";
import { isValidProductId } from "../origin/types";
import { PRODUCT_PAGE_PIECES, renderProductPage } from "../render";
import { fillBoundMs } from "../cache/fill/fill";
import { isCore } from "../config";
import type { PageData } from "../cache/pageRequest";
import { streamedBody } from "./streamedPage";
import type { Section } from "../render/model";
import type { TierServices } from "../tier";
import { notModified, pageCacheControl, pageEtag, pageIdentity, preloadLink, requestColo, sayWhatHappened, VARY_ON_ENCODING } from "./headers";
import { shownImages } from "../render/view";
import { errorPage, pageRetryAfterSeconds } from "./errorPage";
import { clientOf } from "./client";
import type { Background } from "../shared/subrequests";

/** What a visitor is told of a product that does not exist. */
const PRODUCT_NOT_FOUND = "We could not find that product. It does not exist or is no longer available.";

/** What a client asking for more new pages at once than its share is told (pages already cached are served to it as usual). */
const TOO_MANY_PAGES = "You are asking for many pages at once: please try again in a few seconds.";

/** The parts a page may send after its first byte: those its first piece does not show (the product and its stock). */
const STREAMED = PAGE_RESOURCES.filter((resource) => !PRODUCT_PAGE_PIECES[0]!.shows.includes(resource));

/** Bumped when templates change the HTML for the same data, so that ETags change too. */
const RENDER_VERSION = "4";

/**
 * What the page shows of one resource. A copy kept only for the origin's failures is shown when the
 * registry says it may be (stock that old is not promised: its section gets its default instead).
 * Judged without the data, which only a render reads (an L1 entry parses it then: cache/entry.ts).
 */
function sectionState(resource: PageResource, served: Served<unknown> | undefined): Section<unknown>["state"] {
  if (!served || served.outcome === "failed") return "unavailable";
  if (served.outcome === "absent") return "none";
  if (served.freshness === "stale-if-error" && !RESOURCES[resource].showStaleIfError) return "unavailable";
  return "ok";
}

/** The section a render gets: its state, and for "ok" its data (parsed now, if it came from L1). */
function section<T>(state: Section<T>["state"], served: Served<T> | undefined): Section<T> {
  if (state === "ok" && served?.data != null) return { state: "ok", data: served.data };
  return { state: state === "ok" ? "none" : state };
}

/**
 * The answer to a visitor who has left: nobody reads it, so nothing is rendered or recorded as a page; the isolate counts it.
 */
function visitorLeft(tier: TierServices, id: string, colo: string | undefined, background: Background): Response {
  tier.overload.departures.pageLeft();
  tier.fleet.page({ route: "/products/:id", id, outcome: "left", status: 503 }, colo, background);
  return new Response(null, { status: 503, headers: { "Cache-Control": "no-store" } });
}

export async function productPage(c: Context, tier: TierServices): Promise<Response> {
  const id = c.req.param("id") ?? "";
  if (!isValidProductId(id)) {
    // Never reaches Redis or the origin: nothing is read, nothing is cached.
    return errorPage(c, 400, "That is not a valid product id.", "public, max-age=300");
  }

  const background = (work: Promise<unknown>) => c.executionCtx.waitUntil(work);
  const colo = requestColo(c);
  const known = tier.knownIds?.lookup(id, background) ?? "unknown";
  if (known === "absent") {
    // Not in the filter of existing ids: no L2 read, no origin fetch. Kept short
    // downstream, since another isolate learns of a new product within its refresh.
    c.header("Cache-Status", 'pp-known-ids; hit; detail="product absent"');
    tier.recordPage({ route: "/products/:id", id, outcome: "filtered", status: 404 }, colo, background);
    return errorPage(c, 404, PRODUCT_NOT_FOUND, "public, max-age=10", { heading: "Product not found" });
  }

  const arrivedAt = tier.clock.now();
  // Aborted when the visitor leaves: nothing new is started, nothing rendered (docs/architecture.md, "Overload").
  const visitor = c.req.raw.signal;
  // Synced only now, past the id checks: a malformed or unknown id costs Redis nothing.
  await tier.purges.sync(background);
  if (visitor.aborted) return visitorLeft(tier, id, colo, background);
  // An id the filter lists is a product (but for its ~1% false positives): a
  // cold page may fill all its parts at once (cache/pageSteps.ts, readFromOrigin).
  // Who asks: a client's waiting cold pages go after those of clients holding fewer (overload/fairShare.ts).
  const client = clientOf(c.req.header("cf-connecting-ip"));
  // A page whose core is read while other parts still come from the origin is streamed (./streamedPage.ts).
  const { data, timings, overShare, later } = await tier.cache.read(id, PAGE_RESOURCES, background, {
    listed: known === "listed",
    visitor,
    client,
    streams: STREAMED,
  });
  if (visitor.aborted) {
    later?.leave();
    return visitorLeft(tier, id, colo, background);
  }

  const all: Served<unknown>[] = PAGE_RESOURCES.flatMap((resource) => data[resource] ?? []);
  const streamed = PAGE_RESOURCES.filter((resource) => later?.parts[resource] !== undefined);
  const now = tier.clock.now();
  const status = sayWhatHappened(c, all, timings, now, tier.cache.l2?.breaker.state() === "closed", streamed);
  const ms = now - arrivedAt;
  tier.pageRead({ id, ms, timings, cacheStatus: status });

  const subject = data[PAGE_SUBJECT]!;
  if (subject.outcome === "absent") {
    const remaining = Math.max(0, Math.floor((subject.entry!.freshUntil - now) / 1000));
    tier.recordPage({ route: "/products/:id", id, outcome: "absent", status: 404, ms, served: all }, colo, background);
    return errorPage(c, 404, PRODUCT_NOT_FOUND, `public, max-age=${remaining}`, { heading: "Product not found" });
  }
  // The others are read whenever the subject exists (cache/readThrough.ts): a core one missing is one that failed.
  const failed = (resource: PageResource) => (data[resource]?.outcome ?? "failed") === "failed";
  // Without a core resource there is no page (503).
  const missingCore = PAGE_RESOURCES.filter((resource) => isCore(tier.config, resource) && failed(resource));
  if (missingCore.length > 0) {
    // "overloaded": this isolate did not start the work (shed, or its origin slots were full), not a failing service.
    const busy = missingCore.every((resource) => data[resource]?.failure === "overloaded");
    // Shed while its client held more than its share of the cold work: that client's own excess (RFC 6585's 429), not the isolate's busyness.
    const status = busy && overShare ? 429 : 503;
    tier.recordPage({ route: "/products/:id", id, outcome: "unavailable", status, ms, served: all, shed: busy }, colo, background);
    const message =
      status === 429 ? TOO_MANY_PAGES : busy ? "We are very busy right now: please try again in a few seconds." : "The product service is not answering.";
    return errorPage(c, status, message, "no-store", { retryAfterSeconds: pageRetryAfterSeconds(tier.config) });
  }

  const states = Object.fromEntries(PAGE_RESOURCES.map((resource) => [resource, sectionState(resource, data[resource])])) as {
    [R in PageResource]: Section<unknown>["state"];
  };
  const defaulted = PAGE_RESOURCES.filter((resource) => states[resource] === "unavailable" && !streamed.includes(resource));
  if (defaulted.length > 0) c.header("Cache-Degraded", defaulted.join(", "));
  tier.hotReport?.offer(id, background);
  const link = () => preloadLink(shownImages(subject.data!)[0]?.url);
  // Nothing of the request but its validated id goes into the page or its key (docs/architecture.md, "Saying what happened").
  const model = () => ({ ...modelOf(states, data), product: subject.data!, pageUrl: `${tier.config.publicUrl}/products/${id}` });
  if (later) {
    const body = await streamedBody({
      pieces: PRODUCT_PAGE_PIECES,
      model: model(),
      served: all,
      later: later.parts,
      section: (resource, served) => section(sectionState(resource, served), served),
      boundMs: (resource) => fillBoundMs(tier.config, resource),
      visitor,
      leave: later.leave,
      ended(end) {
        // Gone mid-stream: a page left before its whole answer.
        if (end.left) tier.overload.departures.pageLeft();
        const sections = end.served.filter((served) => (streamed as readonly string[]).includes(served.resource));
        const withDefaults = sections
          .filter((served) => sectionState(served.resource as PageResource, served) === "unavailable")
          .map((served) => served.resource);
        const view = { route: "/products/:id", id, outcome: "ok", status: 200, ms, served: end.served } as const;
        tier.recordPage({ ...view, defaulted: [...defaulted, ...withDefaults], streamed, late: end.late }, colo, background);
      },
    });
    // No ETag: the same URL may end differently; and a section may still end with its default, which is not kept downstream.
    c.header("Cache-Control", "no-cache");
    // Sent as written: a compressor holds a stream's pieces until it has enough (Cloudflare's and Miniflare's alike pass
    // an identity body through), and a cold page's few kilobytes more cost less than its sections' wait.
    c.header("Content-Encoding", "identity");
    return htmlAnswer(c, body, link());
  }
  tier.recordPage({ route: "/products/:id", id, outcome: "ok", status: 200, ms, served: all, defaulted }, colo, background);

  // The same parts in the same states render the same HTML: rendered once per isolate and kept until one of them changes.
  const identity = pageIdentity(all, RENDER_VERSION);
  const renderKey = `${id}|${identity}`;
  // CACHING=off keeps nothing, the rendered page included (cache/bypass.ts).
  let page = tier.config.caching ? tier.renderedPages.get(renderKey) : undefined;
  if (!page) {
    const html = renderProductPage(model());
    // TextEncoder always returns bytes over a fresh ArrayBuffer, never a shared one.
    const body = new TextEncoder().encode(html) as Uint8Array<ArrayBuffer>;
    page = { body, etag: pageEtag(identity), link: link() };
    if (tier.config.caching) tier.renderedPages.set(renderKey, page);
  }

  c.header("Cache-Control", pageCacheControl(all, tier.config.policies, now));
  c.header("ETag", page.etag);
  // A 304 carries what the 200 would have said of the page (RFC 9110, 15.4.5), Cache-Status and Server-Timing included.
  if (notModified(c.req.header("if-none-match"), page.etag)) {
    c.header(...VARY_ON_ENCODING);
    return c.body(null, 304);
  }
  // The Response copies the bytes (Fetch's "extract a body"): the cached page is never handed over.
  return htmlAnswer(c, page.body, page.link);
}

/** The sections of the parts read (a part still to come is "unavailable" until it arrives: its piece is not rendered before). */
function modelOf(states: { [R in PageResource]: Section<unknown>["state"] }, data: PageData) {
  return Object.fromEntries(PAGE_RESOURCES.map((resource) => [resource, section<unknown>(states[resource], data[resource])])) as {
    [R in PageResource]: Section<ResourceTypes[R]>;
  };
}

/** A product page's 200, whole or streamed: its preload hint (Early Hints) and its content headers. */
function htmlAnswer(c: Context, body: Uint8Array<ArrayBuffer> | ReadableStream<Uint8Array>, link: string | undefined): Response {
  if (link) c.header("Link", link);
  c.header("Content-Type", "text/html; charset=UTF-8");
  c.header(...VARY_ON_ENCODING);
  return c.body(body, 200);
}
