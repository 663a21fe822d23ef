// The demo origin: the reference implementation of docs/origin-contract.md,
// a Hono app over the generated catalog (./catalog.ts), served from
// node:http (./node.ts). Its routes: the contract's endpoints
// (./contract.ts), placeholder images (./images.ts), and the admin
// endpoints under /__admin/ (./admin.ts) that count requests, inject faults
// and change products, notifying the tier's purge endpoint as a real shop
// would.
import { setMaxListeners } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Hono } from "hono";
import { adminRoutes } from "./admin";
import { CatalogStore, MAX_CATALOG_SIZE } from "./catalog";
import { contractRoutes } from "./contract";
import { errorBody, type OriginEnv } from "./http";
import { imageRoutes } from "./images";
import { nodeListener } from "./node";
import { createCounters, createFaults, MAX_LATENCY_MS, type OriginState, type Settings } from "./state";

export interface DemoOriginOptions {
  /** 0 = a free port (default). */
  port?: number;
  /** Default "127.0.0.1". */
  host?: string;
  /** Default 10,000, at most 1,000,000; costs no memory up front. */
  catalogSize?: number;
  /** Base latency of every service request, default 30. */
  latencyMs?: number;
  /** Uniform jitter around latencyMs, default 10. */
  jitterMs?: number;
  /** The tier's purge endpoint, called with `{ids: [id]}` after each admin change. */
  purgeUrl?: string;
  /** Bearer token for purgeUrl and knownIdsUrl. */
  purgeToken?: string;
  /** Called with `{ids: [id]}` when a product is created. */
  knownIdsUrl?: string;
}

export interface DemoOrigin {
  url: string;
  port: number;
  close(): Promise<void>;
}

export const DEFAULT_CATALOG_SIZE = 10_000;

export async function startDemoOrigin(opts: DemoOriginOptions = {}): Promise<DemoOrigin> {
  const settings = resolveSettings(opts);
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(settings.port, settings.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${urlHost(settings.host)}:${port}`;
  const closing = new AbortController();
  // Every answer being delayed (its latency, a fault) listens to this signal
  // until it ends: one listener per request in flight, each removed when its
  // delay ends. Node's default of 10 took a busy origin for a leak (the
  // MaxListenersExceededWarning of the cancellation tests); the bound is the
  // requests in flight, which the test or benchmark sets.
  setMaxListeners(0, closing.signal);
  const state: OriginState = {
    settings,
    store: new CatalogStore(settings.catalogSize, url),
    counters: createCounters(),
    faults: createFaults(),
    closing: closing.signal,
  };
  server.on("request", nodeListener(originApp(state).fetch, url));

  let closed: Promise<void> | undefined;
  const close = async () => {
    closing.abort();
    state.faults.wake();
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      // Keep-alive sockets and hanging requests would otherwise hold close() forever.
      server.closeAllConnections();
    });
  };
  return { url, port, close: () => (closed ??= close()) };
}

function originApp(state: OriginState): Hono<OriginEnv> {
  return new Hono<OriginEnv>()
    .route("/", contractRoutes(state))
    .route("/", imageRoutes())
    .route("/__admin", adminRoutes(state))
    .notFound((c) => c.json(errorBody("not_found"), 404))
    .onError((err, c) => {
      console.error("demo origin: unexpected error", err);
      return c.json(errorBody("internal_error"), 500);
    });
}

function resolveSettings(opts: DemoOriginOptions): Settings {
  const settings: Settings = {
    port: opts.port ?? 0,
    host: opts.host ?? "127.0.0.1",
    catalogSize: opts.catalogSize ?? DEFAULT_CATALOG_SIZE,
    latencyMs: opts.latencyMs ?? 30,
    jitterMs: opts.jitterMs ?? 10,
    purgeUrl: opts.purgeUrl,
    purgeToken: opts.purgeToken,
    knownIdsUrl: opts.knownIdsUrl,
  };
  if (!Number.isInteger(settings.catalogSize) || settings.catalogSize < 1 || settings.catalogSize > MAX_CATALOG_SIZE) {
    throw new RangeError(`CATALOG_SIZE (--catalog-size) must be a whole number from 1 to ${MAX_CATALOG_SIZE}, got ${settings.catalogSize}`);
  }
  // Named as the operator sets them (the environment, and dev/origin/main.ts's flags).
  for (const [key, name] of [
    ["latencyMs", "ORIGIN_LATENCY_MS (--latency)"],
    ["jitterMs", "ORIGIN_JITTER_MS (--jitter)"],
  ] as const) {
    const value = settings[key];
    if (!(Number.isFinite(value) && value >= 0 && value <= MAX_LATENCY_MS)) {
      throw new RangeError(`${name} must be from 0 to ${MAX_LATENCY_MS} ms, got ${value}`);
    }
  }
  return settings;
}

/** A host that clients can reach: the wildcard addresses are not. */
function urlHost(host: string): string {
  if (host === "0.0.0.0" || host === "::") return "127.0.0.1";
  return host.includes(":") ? `[${host}]` : host;
}
