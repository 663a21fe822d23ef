// In-process stand-ins for unit tests of the cache engine: a clock moved by
// hand, an origin whose answers and failures the test decides, and a data
// center's cache.
import { parseConfig, type Config } from "../../src/config";
import type { FillContext } from "../../src/cache/fill/fill";
import type { LocationStore } from "../../src/cache/location/location";
import type { Clock } from "../../src/shared/clock";
import type { L2 } from "../../src/cache/l2/l2";
import { createOutbox, type Outbox } from "../../src/cache/l2/outbox";
import { DEFAULTS } from "../../src/config/defaults";
import type { OriginAnswer, OriginClient } from "../../src/origin/client";
import { OriginError } from "../../src/origin/failure";
import { PAGE_RESOURCES, PAGE_SUBJECT, RESOURCE_NAMES, type PageResource, type ResourceName, type ResourceTypes } from "../../src/origin/resources";
import type { ProductPageModel } from "../../src/render/model";
import type { Product } from "../../src/origin/types";

export interface FakeClock extends Clock {
  advance(ms: number): void;
  set(ms: number): void;
}

export function fakeClock(start = Date.UTC(2026, 10, 22)): FakeClock {
  let now = start;
  return {
    now: () => now,
    advance: (ms) => void (now += ms),
    set: (ms) => void (now = ms),
  };
}

/** `reject`: an answer about the id the tier cannot use (a 422), as opposed to `fail`, a 500. */
type FakeBehaviour = "ok" | "absent" | "fail" | "reject" | "hang";

export interface FakeOrigin extends OriginClient {
  calls: Record<ResourceName, number>;
  /** How each resource answers from now on. */
  behaviour: Record<ResourceName, FakeBehaviour>;
  /** The version the next answers carry. */
  version: number;
  /** Resolves pending "hang" calls (as failures). */
  releaseHung(): void;
  /** A promise that each call awaits before answering; lets tests hold calls open. */
  gate: Promise<void> | null;
}

export function sampleProduct(id: string, version = 1): Product {
  return {
    id,
    title: `Product ${id}`,
    description: "A product.",
    brand: "Acme",
    category: ["Shoes"],
    price: { amount: 1299, currency: "USD" },
    images: [],
    attributes: {},
    tags: ["brand:acme"],
    version,
    updatedAt: "2026-11-20T10:00:00Z",
  };
}

export function sample<R extends ResourceName>(resource: R, id: string, version: number): ResourceTypes[R] {
  const data: { [K in ResourceName]: ResourceTypes[K] } = {
    product: sampleProduct(id, version),
    inventory: { id, available: 7, status: "in_stock", version, updatedAt: "2026-11-20T10:00:00Z" },
    reviews: { id, rating: 4.5, count: 2, top: [], version },
    recommendations: { id, items: [], version },
    listing: { id, ids: ["p-000001", "p-000002"], version },
  };
  return data[resource];
}

/** `value` for every resource of the registry. */
export function eachResource<T>(value: T): Record<ResourceName, T> {
  return Object.fromEntries(RESOURCE_NAMES.map((name) => [name, value])) as Record<ResourceName, T>;
}

/** `value` for every resource of the product page, as the registry lists them. */
export function eachPageResource<T>(value: T): Record<PageResource, T> {
  return Object.fromEntries(PAGE_RESOURCES.map((name) => [name, value])) as Record<PageResource, T>;
}

/** A product page's model: every resource of the page (the registry's) at its sample data. */
export function samplePageModel(id: string, version = 1): ProductPageModel {
  const parts = PAGE_RESOURCES.map((name) => [name, name === PAGE_SUBJECT ? sample(name, id, version) : { state: "ok", data: sample(name, id, version) }]);
  return { ...Object.fromEntries(parts), pageUrl: `https://shop.example/products/${id}` } as ProductPageModel;
}

export function fakeOrigin(): FakeOrigin {
  const hung: (() => void)[] = [];
  const origin: FakeOrigin = {
    calls: eachResource(0),
    behaviour: eachResource<FakeBehaviour>("ok"),
    version: 1,
    gate: null,
    refreshRoom: () => Number.POSITIVE_INFINITY,
    releaseHung: () => hung.splice(0).forEach((release) => release()),
    async fetchResource<R extends ResourceName>(resource: R, id: string): Promise<OriginAnswer<ResourceTypes[R]>> {
      origin.calls[resource]++;
      const version = origin.version;
      const behaviour = origin.behaviour[resource];
      if (origin.gate) await origin.gate;
      else await Promise.resolve();
      if (behaviour === "hang") {
        await new Promise<void>((resolve) => hung.push(resolve));
        throw new OriginError(resource, "timeout", "hung");
      }
      if (behaviour === "fail") throw new OriginError(resource, "status", "HTTP 500");
      if (behaviour === "reject") throw new OriginError(resource, "rejected", "HTTP 422");
      if (behaviour === "absent") return { found: false };
      return { found: true, data: sample(resource, id, version) };
    },
    async listProductIds() {
      return { ids: [], next: null };
    },
  };
  return origin;
}

/** The tier's configuration as unit tests use it: the demo addresses, and `overrides` on top. */
export function testConfig(overrides: Record<string, unknown> = {}): Config {
  return parseConfig({ ORIGIN_URL: "http://origin.test", PUBLIC_URL: "https://shop.example", ...overrides });
}

/** A fill's context for unit tests: its background work collected; `settle` waits for it all, and for what it started. */
export function testFillContext(id: string, resource: ResourceName = "product"): { context: FillContext; settle: () => Promise<void> } {
  const background: Promise<unknown>[] = [];
  const context: FillContext = {
    resource,
    id,
    background: (work) => void background.push(work),
    notBefore: 0,
    freshAfter: 0,
    purgedAt: () => 0,
    freshBeyond: 0,
  };
  const settle = async () => {
    while (background.length > 0) await Promise.all(background.splice(0));
  };
  return { context, settle };
}

/** The parts of an L2 fake that the read path asks about but unit tests do not vary: no backlog, every key accepted, the breaker closed, locks released. */
export const healthyL2Parts = {
  backlogSize: () => 0,
  recoverIfDue: () => undefined,
  flushBacklog: async () => {},
  accepts: () => true,
  answered: () => 1,
  breaker: { state: () => "closed" },
};

/** A data center's cache (the location tier): what was put, by URL, answered as the Cache API does (a new Response each time). */
export function fakeStore() {
  const stored = new Map<string, { body: string; headers: [string, string][] }>();
  const calls = { match: 0, put: 0 };
  const store: LocationStore = {
    async match(request) {
      calls.match++;
      const found = stored.get(String(request));
      return found && new Response(found.body, { headers: found.headers });
    },
    async put(request, response) {
      calls.put++;
      stored.set(String(request), { body: await response.text(), headers: [...response.headers] });
    },
  };
  return { store, stored, calls };
}

/** The tier's outbox of claims and writes (src/cache/l2/outbox.ts) over `l2`, with the tier's numbers. */
export function testOutbox(l2: L2, clock: Clock, sleep: (ms: number) => Promise<void>): Outbox {
  return createOutbox(l2, { clock, sleep, maxWaitMs: DEFAULTS.lockTtlMs });
}
