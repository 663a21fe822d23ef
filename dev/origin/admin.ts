// The admin endpoints under /__admin/, outside the contract: count requests,
// inject faults, change the base latency, and change or create products as
// a shop's back office would (telling the tier, ./notify.ts, unless the change
// says `notify: false`). Never slowed
// or faulted. Bodies are JSON, at most 64 KiB, checked with valibot.
import { sValidator } from "@hono/standard-validator";
import { Hono, type Context, type MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import * as v from "valibot";
import type { ChangeResult } from "./catalog";
import { describeIssue, errorBody, productId, type OriginEnv } from "./http";
import { notifyTier } from "./notify";
import { MAX_LATENCY_MS, type OriginState } from "./state";
import { RESOURCE_NAMES } from "../../src/origin/resources";

const MAX_BODY_BYTES = 64 * 1024;

const milliseconds = v.pipe(v.number(), v.minValue(0), v.maxValue(MAX_LATENCY_MS));
const cents = v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(Number.MAX_SAFE_INTEGER));
const stock = v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(1_000_000));
const title = v.pipe(v.string(), v.minLength(1), v.maxLength(200));

const faultBody = v.object({
  service: v.picklist([...RESOURCE_NAMES, "all"], `must be one of ${RESOURCE_NAMES.join(", ")}, all`),
  latencyMs: v.optional(milliseconds, 0),
  errorRate: v.optional(v.pipe(v.number(), v.minValue(0), v.maxValue(1)), 0),
  down: v.nullish(v.union([v.literal(false), v.picklist(["500", "refuse", "hang"])], 'must be false, "500", "refuse" or "hang"'), false),
  unknownIdStatus: v.optional(v.pipe(v.number(), v.integer(), v.minValue(400), v.maxValue(499)), 404),
  canonicalIds: v.nullish(v.boolean(), false),
});

const latencyBody = v.object({ latencyMs: v.optional(milliseconds), jitterMs: v.optional(milliseconds) });

const newProductBody = v.object({ id: productId, title, price: cents, available: v.optional(stock) });

// `notify: false`: the tier is not told (the caller purges, as a shop's backend would; bench:chaos).
const changeBody = v.pipe(
  v.object({ price: v.optional(cents), title: v.optional(title), available: v.optional(stock), notify: v.optional(v.boolean(), true) }),
  v.check(({ notify: _, ...change }) => Object.values(change).some((value) => value !== undefined), "give price, title or available"),
);

export function adminRoutes({ settings, store, counters, faults, closing }: OriginState): Hono<OriginEnv> {
  const notify = (url: string | undefined, id: string) => notifyTier(url, settings.purgeToken, id, closing);

  return new Hono<OriginEnv>()
    .use(
      bodyLimit({
        maxSize: MAX_BODY_BYTES,
        // The rest of the body is left unread: the connection must not carry another request.
        onError: (c) => c.json(errorBody("payload_too_large", `bodies are limited to ${MAX_BODY_BYTES} bytes`), 413, { connection: "close" }),
      }),
    )
    .get("/counters", (c) => c.json(counters.snapshot()))
    .post("/counters/reset", (c) => {
      counters.reset();
      return c.json(counters.snapshot());
    })
    .get("/faults", (c) => c.json(faults.snapshot()))
    .put("/faults", jsonBody(faultBody), (c) => {
      const { service, ...fault } = c.var.body;
      faults.set(service === "all" ? RESOURCE_NAMES : [service], fault);
      return c.json(faults.snapshot());
    })
    .delete("/faults", (c) => {
      faults.clear();
      return c.json(faults.snapshot());
    })
    .post("/latency", jsonBody(latencyBody), (c) => {
      const { latencyMs, jitterMs } = c.var.body;
      settings.latencyMs = latencyMs ?? settings.latencyMs;
      settings.jitterMs = jitterMs ?? settings.jitterMs;
      return c.json({ latencyMs: settings.latencyMs, jitterMs: settings.jitterMs });
    })
    .post("/reset", (c) => {
      store.reset();
      faults.clear();
      counters.reset();
      return c.json({ ok: true });
    })
    .post("/products", jsonBody(newProductBody), async (c) => {
      const result = store.create(c.var.body, Date.now());
      if (!result.ok) return refused(c, result);
      const { id } = c.var.body;
      const knownIds = await notify(settings.knownIdsUrl, id);
      // The tier may have remembered this id as absent (negative caching): purge that too.
      const purge = await notify(settings.purgeUrl, id);
      return c.json({ product: result.product, inventory: result.inventory, knownIds, purge }, 201);
    })
    .post(
      "/products/:id",
      sValidator("param", v.object({ id: productId }), (result, c) => (result.success ? undefined : c.json(errorBody("not_found"), 404))),
      jsonBody(changeBody),
      async (c) => {
        const { id } = c.req.valid("param");
        const { notify: tellTier, ...change } = c.var.body;
        const result = store.change(id, change, Date.now());
        if (!result.ok) return refused(c, result);
        // Answer only once the tier knows, so that callers (tests) can rely on it.
        const purge = tellTier ? await notify(settings.purgeUrl, id) : null;
        return c.json({ product: result.product, inventory: result.inventory, purge });
      },
    );
}

const REFUSAL_STATUS: Record<Extract<ChangeResult, { ok: false }>["error"], ContentfulStatusCode> = {
  not_found: 404,
  conflict: 409,
  too_many_overrides: 507,
};

function refused(c: Context, result: Extract<ChangeResult, { ok: false }>) {
  return c.json(errorBody(result.error), REFUSAL_STATUS[result.error]);
}

/**
 * The body as JSON, checked against `schema`, in `c.var.body`. Hono's json
 * validator would read only bodies sent as application/json; the admin
 * endpoints take JSON whatever the content-type says (`curl -d`, `fetch`
 * with a string body), as they always have.
 */
function jsonBody<S extends v.GenericSchema>(schema: S): MiddlewareHandler<OriginEnv & { Variables: { body: v.InferOutput<S> } }> {
  return async (c, next) => {
    let json: unknown;
    try {
      json = JSON.parse(await c.req.text());
    } catch {
      return c.json(errorBody("bad_request", "body must be JSON"), 400);
    }
    // valibot's object() takes arrays too.
    if (typeof json !== "object" || json === null || Array.isArray(json)) {
      return c.json(errorBody("bad_request", "body must be a JSON object"), 400);
    }
    const result = v.safeParse(schema, json);
    if (!result.success) return c.json(errorBody("bad_request", describeIssue(result.issues)), 400);
    c.set("body", result.output);
    await next();
  };
}
