// The contract's endpoints (docs/origin-contract.md), one route each, over
// the catalog. Every request to them is first counted and put through its
// service's faults (./state.ts); then its id or query is checked with
// valibot: an id outside the contract's pattern is one the service has
// nothing for (404), a bad listing query a 400.
import { sValidator } from "@hono/standard-validator";
import { Hono, type Context, type MiddlewareHandler } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import * as v from "valibot";
import { LISTING, PAGE_RESOURCES, RESOURCES, type PageResource, type ResourceName } from "../../src/origin/resources";
import { MAX_LIST_LIMIT } from "./catalog";
import { describeIssue, errorBody, productId, type OriginEnv } from "./http";
import { delay, type OriginState } from "./state";

const byId = v.object({ id: productId });

const DEFAULT_LIST_LIMIT = 100;
const LIMIT_MESSAGE = `must be an integer from 1 to ${MAX_LIST_LIMIT}`;

const listingQuery = v.object({
  limit: v.optional(
    v.pipe(
      v.string(LIMIT_MESSAGE),
      v.regex(/^\d{1,4}$/, LIMIT_MESSAGE),
      v.transform(Number),
      v.minValue(1, LIMIT_MESSAGE),
      v.maxValue(MAX_LIST_LIMIT, LIMIT_MESSAGE),
    ),
    String(DEFAULT_LIST_LIMIT),
  ),
  // Opaque: the store tells whether it made it. Empty means the first page.
  cursor: v.optional(v.string("must be given once")),
});

type ValidId = { in: { param: { id: string } }; out: { param: { id: string } } };

/** The listing's path; each resource of a product is served at the path the tier's registry gives it (src/origin/resources.ts). */
const LISTING_PATH = "/products";
/** The contract's paths, for the 405 that other methods get. */
const PATHS = [LISTING_PATH, ...PAGE_RESOURCES.map((name) => RESOURCES[name].path(":id"))];

export function contractRoutes(state: OriginState): Hono<OriginEnv> {
  const { store, faults } = state;
  const service = serviceCall(state);
  const validId = (name: PageResource) => sValidator("param", byId, (result, c) => (result.success ? undefined : unknownId(c, name)));

  /** The resource for the id asked (in lower case with canonicalIds), or the unknown-id answer. */
  const resource = (name: PageResource, lookup: (id: string) => unknown) => (c: Context<OriginEnv, string, ValidId>) => {
    const { id } = c.req.valid("param");
    const value = lookup(faults.get(name).canonicalIds ? id.toLowerCase() : id);
    return value === null ? unknownId(c, name) : c.json(value);
  };

  /** 404 as the contract says, or the fault's unknownIdStatus (400 to 499). */
  const unknownId = (c: Context, name: PageResource) => {
    const status = faults.get(name).unknownIdStatus;
    return status === 404 ? c.json(errorBody("not_found"), 404) : c.json(errorBody("invalid_id"), status as ContentfulStatusCode);
  };

  /** Where each resource of a product comes from in the catalog. */
  const lookups: Record<PageResource, (id: string) => unknown> = {
    product: (id) => store.product(id),
    inventory: (id) => store.inventory(id),
    reviews: (id) => store.reviews(id),
    recommendations: (id) => store.recommendations(id),
  };

  const app = new Hono<OriginEnv>().get(
    LISTING_PATH,
    service(LISTING),
    sValidator("query", listingQuery, (result, c) => (result.success ? undefined : c.json(errorBody("bad_request", describeIssue(result.error)), 400))),
    (c) => {
      const { limit, cursor } = c.req.valid("query");
      const page = store.listIds(cursor || null, limit);
      return page ? c.json(page) : c.json(errorBody("bad_request", "unknown cursor"), 400);
    },
  );
  for (const name of PAGE_RESOURCES) app.get(RESOURCES[name].path(":id"), service(name), validId(name), resource(name, lookups[name]));
  return app.on(["POST", "PUT", "PATCH", "DELETE"], PATHS, (c) => c.json(errorBody("method_not_allowed"), 405));
}

/**
 * A service's request: counted, then delayed by the base latency plus the
 * fault's, then the fault: `hang` until the faults change (or the client or
 * the server goes), `refuse` destroys the connection, `500` and errorRate
 * answer 500; each of those is counted as failed too (a herd's bound is on
 * answered fetches: a failed one lets a waiter fetch again). Admin endpoints
 * never pass here.
 */
function serviceCall({ settings, counters, faults, closing }: OriginState) {
  return (service: ResourceName): MiddlewareHandler<OriginEnv> =>
    async (c, next) => {
      counters.count(service, c.req.param("id"));
      const { socket } = c.env.incoming;
      // A refused connection fails at once; latency would only blur that.
      if (faults.get(service).down !== "refuse") {
        const jitter = (Math.random() * 2 - 1) * settings.jitterMs;
        await delay(Math.max(0, settings.latencyMs + jitter) + faults.get(service).latencyMs, closing);
      }
      const gone = () => closing.aborted || socket.destroyed;
      while (faults.get(service).down === "hang" && !gone()) await faults.nextChange(socket);

      const fault = faults.get(service);
      const id = c.req.param("id");
      if (gone() || fault.down === "refuse") {
        counters.failed(service, id);
        socket.destroy();
        return c.body(null); // never sent: the adapter writes nothing to a destroyed socket
      }
      if (fault.down === "500" || Math.random() < fault.errorRate) {
        counters.failed(service, id);
        return c.json(errorBody("injected_failure"), 500);
      }
      await next();
    };
}
