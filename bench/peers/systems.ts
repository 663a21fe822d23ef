// The systems under test, each with its own demo origin so that origin
// counters belong to one system:
//
//   nginx      Nginx proxy_cache  → 2 render-only workers → its demo origin
//   varnish    Varnish            → 2 render-only workers → its demo origin
//   tier       2 Miniflare instances of the tier (L1 + L2: redis-server behind
//              the Upstash REST gateway, as every benchmark starts them (bench/stack.ts)) → its demo origin
//   tier-300s  the same, every page resource fresh for the peers' 300 s (CACHE_POLICIES)
//   tier-location  the tier's defaults with its location tier on (LOCATION_CACHE=on, off in the
//              other rows): the two instances share one data center's cache (dev/harness/locationServer.ts)
//   tier-off   2 render-only workers, nothing in front: the tier with no cache at all
//
// A render-only worker is the tier's own bundle with CACHING=off (every part
// of every page from the origin, nothing kept: src/cache/bypass.ts), so that
// a peer caches the very HTML the tier renders, each peer miss costs the
// origin calls a real render does, and tier-off is what the same worker
// does without its caches.
import { productId } from "../../dev/origin/catalog";
import { PAGE_RESOURCES, PAGE_SUBJECT, RESOURCES } from "../../src/origin/resources";
import { member } from "../../dev/harness/cacheStatus";
import type { OriginAdmin } from "../../dev/harness/originAdmin";
import {
  BENCH_PUBLIC_URL,
  buildKnownIdsFilter,
  startOrigin,
  startServers,
  startWorker,
  type FilterBuild,
  type Servers,
  type WorkerInstance,
  type WorkerLogs,
} from "../stack";
import { workerdPids } from "../lib/cpu";
import { startNginx, startVarnish, type CachePolicy, type CacheServer } from "./procs";
import { RedisProbe } from "../../dev/harness/redisProbe";
import { useLocationServer } from "../../dev/harness/bundle";
import { forkLocationServer } from "../../dev/harness/locationServer";
import { getPage, priceNow, title } from "../lib/page";

export type SystemName = "nginx" | "varnish" | "tier" | "tier-300s" | "tier-location" | "tier-off";
export type TierName = "tier" | "tier-300s" | "tier-location";

export interface Settings {
  quick: boolean;
  /** Connections of the saturation phases (wrk -t2 -cN). */
  connections: number;
  /** Connections of the paced phases: enough that one is free whenever a send is due. */
  pacedConnections: number;
  /** The offered rate of the paced phases, when given (--rate); otherwise half the tier's saturation rate, measured first. */
  rate: number | null;
  catalogSize: number;
  originLatencyMs: number;
  originJitterMs: number;
}

/** The tier's default policy for the product (src/origin/resources.ts), which the peers are configured with. */
const SUBJECT_DEFAULTS = RESOURCES[PAGE_SUBJECT].defaults;
export const PRODUCT_POLICY: CachePolicy = { ttlS: SUBJECT_DEFAULTS.ttl, graceS: SUBJECT_DEFAULTS.swr, notFoundTtlS: SUBJECT_DEFAULTS.negativeTtl };
/** The same policy for every resource of a page, as CACHE_POLICIES takes it. */
const everyPageResource = (policy: Record<string, number>) => JSON.stringify(Object.fromEntries(PAGE_RESOURCES.map((name) => [name, policy])));

/** No cache at all (the peers' upstream, and tier-off), no known-ids filter (it needs Redis). */
export const RENDER_ONLY_VARS: Record<string, string> = {
  PUBLIC_URL: BENCH_PUBLIC_URL,
  CACHING: "off",
  KNOWN_IDS: "off",
};

/** The tier with the peers' freshness: every resource of a page fresh for 300 s, then served stale while refreshing for 3600 s (Varnish's grace). */
const PEERS_FRESHNESS = { ttl: PRODUCT_POLICY.ttlS, swr: PRODUCT_POLICY.graceS };
export const TIER_VARS: Record<TierName, Record<string, string>> = {
  tier: {},
  "tier-300s": {
    CACHE_POLICIES: everyPageResource(PEERS_FRESHNESS),
  },
  "tier-location": {
    LOCATION_CACHE: "on",
  },
};

const RENDER_ONLY_INSTANCES = 2;
const TIER_INSTANCES = 2;
const PURGE_TOKEN = "bench-purge-token";

export interface System {
  name: SystemName;
  /** One line for the report: what serves the requests. */
  description: string;
  /** Base URLs; the load generator's connection i talks to targets[i % n]. */
  targets: string[];
  /** The system's demo origin. */
  origin: OriginAdmin;
  /** Process trees whose CPU is this system's, by role: "workerd" (its own instances), the cache server, the origin. */
  cpuRoots: Record<string, number[]>;
  /** What a shop does right after a price change: returns what was done. */
  purge(id: string): Promise<string>;
  /** Configuration to show in the report. */
  config: string;
  /** The check of the render-only upstream (peers), or of the tier's page. */
  check: string;
  close(): Promise<void>;
}

/** Stops registered by the caller (run.ts) so that everything stops on error or signal. */
export type OnCleanup = (name: string, stop: () => Promise<void>) => () => Promise<void>;

// ---------------------------------------------------------------- peers

/** A demo origin and the render-only workers in front of it; `stops` gets their stops. */
async function startRenderOnly(name: SystemName, settings: Settings, logs: WorkerLogs, onCleanup: OnCleanup, stops: Array<() => Promise<void>>) {
  const origin = await startOrigin({ catalogSize: settings.catalogSize, latencyMs: settings.originLatencyMs, jitterMs: settings.originJitterMs });
  stops.push(onCleanup(`${name}: demo origin`, () => origin.close()));
  const bindings = { ORIGIN_URL: origin.url, ...RENDER_ONLY_VARS };
  const before = workerdPids();
  const workers: WorkerInstance[] = [];
  for (let i = 0; i < RENDER_ONLY_INSTANCES; i++) {
    const worker = await startWorker(bindings, logs);
    workers.push(worker);
    stops.push(onCleanup(`${name}: render-only worker ${worker.url}`, () => worker.close()));
  }
  const check = await checkRenderOnly(workers[0]!.url, origin.admin);
  return { origin, workers, workerd: newPids(before), check };
}

/** tier-off: the render-only workers with nothing in front, the load split across them as the tier's is. */
export async function startTierOff(settings: Settings, logs: WorkerLogs, onCleanup: OnCleanup): Promise<System> {
  const stops: Array<() => Promise<void>> = [];
  try {
    const { origin, workers, workerd, check } = await startRenderOnly("tier-off", settings, logs, onCleanup, stops);
    return {
      name: "tier-off",
      description: `this tier with CACHING=off: ${RENDER_ONLY_INSTANCES} Miniflare (workerd) instances, no cache at all (every part of every page from the origin), load split across them → demo origin`,
      targets: workers.map((w) => w.url),
      origin: origin.admin,
      cpuRoots: { workerd, origin: [origin.pid] },
      purge: async () => "none (nothing is kept)",
      config: `worker settings: ${Object.entries(RENDER_ONLY_VARS)
        .map(([k, v]) => `${k}=${v}`)
        .join(", ")}`,
      check,
      close: () => stopAll(stops),
    };
  } catch (err) {
    await stopAll(stops);
    throw err;
  }
}

export async function startPeer(name: "nginx" | "varnish", settings: Settings, dir: string, logs: WorkerLogs, onCleanup: OnCleanup): Promise<System> {
  const stops: Array<() => Promise<void>> = [];
  try {
    const { origin, workers, workerd, check } = await startRenderOnly(name, settings, logs, onCleanup, stops);
    const server: CacheServer =
      name === "nginx"
        ? await startNginx(
            dir,
            workers.map((w) => w.url),
            PRODUCT_POLICY,
          )
        : await startVarnish(
            dir,
            workers.map((w) => w.url),
            PRODUCT_POLICY,
          );
    stops.push(onCleanup(`${name}: ${name === "nginx" ? "nginx" : "varnishd"} pid ${server.pid}`, () => server.close()));
    const same = await samePage(server.url, workers[1]!.url);
    return {
      name,
      description:
        name === "nginx"
          ? `Nginx proxy_cache (worker_processes auto) → ${RENDER_ONLY_INSTANCES} render-only workers (round robin, keepalive) → demo origin`
          : `Varnish (malloc 256 MB, default thread pools) → ${RENDER_ONLY_INSTANCES} render-only workers (directors.round_robin) → demo origin`,
      targets: [server.url],
      origin: origin.admin,
      cpuRoots: { workerd, [name]: [server.pid], origin: [origin.pid] },
      purge: async (id) => {
        if (name === "nginx") return "none (open-source Nginx has no purge: expiry only)";
        return retried(`PURGE /products/${id}`, () => fetch(`${server.url}/products/${id}`, { method: "PURGE", signal: AbortSignal.timeout(5000) }));
      },
      config: server.config,
      check: `${check}; ${same}`,
      close: () => stopAll(stops),
    };
  } catch (err) {
    await stopAll(stops);
    throw err;
  }
}

/**
 * The render-only worker must answer the tier's HTML, and keep nothing: two
 * requests one after the other must both show the product from the origin,
 * caching bypassed.
 */
async function checkRenderOnly(url: string, origin: OriginAdmin): Promise<string> {
  const id = productId(1);
  const product = (await (await fetch(`${origin.url}/products/${id}`)).json()) as { title: string };
  const first = await getPage(`${url}/products/${id}`);
  const problems: string[] = [];
  if (first.status !== 200) problems.push(`HTTP ${first.status}`);
  if (!/^text\/html/.test(first.contentType)) problems.push(`content-type ${first.contentType}`);
  if (!/^<!doctype html>/i.test(first.body.trimStart())) problems.push("no doctype");
  if (!first.body.includes(product.title)) problems.push("title missing");
  if (priceNow(first.body) === null) problems.push("price missing");
  const second = await getPage(`${url}/products/${id}`);
  const fromOrigin = [first, second].every((page) => productFromOrigin(page.cacheStatus));
  if (!fromOrigin) problems.push(`not fetched from the origin again (Cache-Status: ${second.cacheStatus})`);
  if (problems.length) throw new Error(`the render-only worker's page for ${id} is wrong: ${problems.join(", ")}`);
  return `render-only check: ${id} → 200 text/html, ${first.body.length.toLocaleString("en-US")} bytes, title and price (${priceNow(first.body)}) present, product fetched from the origin again at once (CACHING=off)`;
}

/** Whether the product's member of a Cache-Status says the origin served it, caching bypassed; false for a header that is not a valid list. */
function productFromOrigin(cacheStatus: string): boolean {
  try {
    return /^pp-origin; fwd=bypass(;|$)/.test(member(cacheStatus, PAGE_SUBJECT));
  } catch {
    return false;
  }
}

/** The page through the cache server is the page the render-only worker renders. */
async function samePage(cacheUrl: string, renderUrl: string): Promise<string> {
  const id = productId(2);
  const [cached, rendered] = [await getPage(`${cacheUrl}/products/${id}`), await getPage(`${renderUrl}/products/${id}`)];
  // Only the inline time-dependent parts could differ; strip nothing, compare the visible essentials.
  const same = cached.status === 200 && priceNow(cached.body) === priceNow(rendered.body) && title(cached.body) === title(rendered.body);
  if (!same)
    throw new Error(
      `the page through the cache differs from the render-only worker's (${cached.status}, ${priceNow(cached.body)} vs ${priceNow(rendered.body)})`,
    );
  return `through the cache: ${id} → 200, same title and price as rendered (${cached.body.length === rendered.body.length ? "same length" : `${cached.body.length} vs ${rendered.body.length} bytes`})`;
}

// ---------------------------------------------------------------- the tier

export interface Tier extends System {
  servers: Servers;
  filter: FilterBuild;
  /** The redis-server's pid (a child of the servers process), for the Redis-down scenario. */
  serversPid: number;
  /** Redis's own counts (INFO) and the MONITOR census. */
  redis: RedisProbe;
}

export async function startTier(name: TierName, settings: Settings, logs: WorkerLogs, onCleanup: OnCleanup): Promise<Tier> {
  const stops: Array<() => Promise<void>> = [];
  const servers = await startServers({ catalogSize: settings.catalogSize, latencyMs: settings.originLatencyMs, jitterMs: settings.originJitterMs });
  stops.push(onCleanup(`${name}: redis-server, gateway, demo origin`, () => servers.close()));
  try {
    const redis = await RedisProbe.connect(servers.redisPort);
    stops.push(onCleanup(`${name}: Redis probe`, async () => redis.close()));
    const filter = await buildKnownIdsFilter(servers);
    // tier-location's instances send their Cache API calls to one location cache, in a process of its own.
    const location = name === "tier-location" ? await forkLocationServer() : null;
    if (location) stops.push(onCleanup(`${name}: location cache`, () => location.close()));
    const before = workerdPids();
    const workers: WorkerInstance[] = [];
    useLocationServer(location?.address);
    try {
      for (let i = 0; i < TIER_INSTANCES; i++) {
        const worker = await startWorker({ ...servers.bindings, ...TIER_VARS[name] }, logs);
        workers.push(worker);
        stops.push(onCleanup(`${name}: worker ${worker.url}`, () => worker.close()));
      }
    } finally {
      useLocationServer(undefined);
    }
    const id = productId(1);
    const page = await getPage(`${workers[0]!.url}/products/${id}`);
    if (page.status !== 200 || priceNow(page.body) === null) {
      const text = page.body
        .replace(/<(script|style)[\s\S]*?<\/\1>/gi, " ")
        .replace(/<[^>]+>/g, " ")
        .replace(/\s+/g, " ")
        .trim();
      throw new Error(`the tier's page for ${id} is wrong: HTTP ${page.status}: ${text.slice(0, 300)}`);
    }
    const origin = servers.origin;
    const vars = TIER_VARS[name];
    return {
      name,
      description:
        `this tier: ${TIER_INSTANCES} Miniflare (workerd) instances, L1 lru-cache + L2 redis-server via the Upstash REST gateway, load split across them → demo origin; ` +
        (name === "tier-300s"
          ? `policies: every page resource fresh for ${PEERS_FRESHNESS.ttl} s, stale-while-revalidate ${PEERS_FRESHNESS.swr} s (the peers' freshness)`
          : name === "tier-location"
            ? "the tier's default policies, its location tier on: both instances share one data center's cache (a process of its own)"
            : "the tier's default policies"),
      targets: workers.map((w) => w.url),
      origin,
      cpuRoots: { workerd: newPids(before), "origin+gateway": [servers.pid], ...(location ? { location: [location.pid] } : {}) },
      purge: (productIdToPurge) =>
        retried(`POST /__purge {"ids":["${productIdToPurge}"]} to one instance`, () =>
          fetch(`${workers[0]!.url}/__purge`, {
            method: "POST",
            headers: { authorization: `Bearer ${PURGE_TOKEN}`, "content-type": "application/json" },
            body: JSON.stringify({ ids: [productIdToPurge] }),
            signal: AbortSignal.timeout(5000),
          }),
        ),
      config: `worker settings: ${
        Object.keys(vars).length
          ? Object.entries(vars)
              .map(([k, v]) => `${k}=${v}`)
              .join(", ")
          : "the tier's defaults"
      }; bindings ORIGIN_URL, PUBLIC_URL, UPSTASH_REDIS_REST_URL/TOKEN (gateway), PURGE_TOKEN`,
      check: `tier check: ${id} → 200, ${page.body.length.toLocaleString("en-US")} bytes, price ${priceNow(page.body)}; known-ids filter ${filter.built ? `built in ${filter.seconds} s` : `NOT built (${filter.detail})`}`,
      servers,
      filter,
      serversPid: servers.pid,
      redis,
      close: () => stopAll(stops),
    };
  } catch (err) {
    await stopAll(stops);
    throw err;
  }
}

/** Stops what a system started, last started first, each whatever became of the others. */
async function stopAll(stops: Array<() => Promise<void>>): Promise<void> {
  for (const stop of stops.reverse()) await stop().catch(() => undefined);
}

/** The workerd processes started since `before` was taken: one system's instances. */
function newPids(before: Set<number>): number[] {
  return [...workerdPids()].filter((pid) => !before.has(pid));
}

// ---------------------------------------------------------------- purge calls

/** The demo origin's own notify policy (dev/origin/index.ts): 1 + 3 retries, 100 ms backoff doubling. */
const ORIGIN_NOTIFY_ATTEMPTS = 4;
/** We retry longer, as a shop backend with a queue would: backoff 100 ms doubling up to 1 s, for at most this long. */
const PURGE_RETRY_FOR_MS = 15_000;

/**
 * Sends a purge, retrying 5xx, 429 and network errors, and says how it went:
 * "→ HTTP 202 {...}" or "→ HTTP 503 ×3, then HTTP 202 after 1.2 s (…)".
 */
async function retried(what: string, send: () => Promise<Response>): Promise<string> {
  const started = Date.now();
  const failures: string[] = [];
  let delay = 100;
  for (;;) {
    let outcome: string;
    let done = false;
    try {
      const response = await send();
      const text = (await response.text()).replace(/\s+/g, " ").trim().slice(0, 100);
      outcome = `HTTP ${response.status}${text && !response.ok ? ` ${text}` : ""}`;
      done = response.ok || (response.status < 500 && response.status !== 429);
    } catch (err) {
      outcome = (err as Error).message.slice(0, 60);
    }
    if (done) {
      if (!failures.length) return `${what} → ${outcome}`;
      const gaveUp = failures.length >= ORIGIN_NOTIFY_ATTEMPTS ? "; the demo origin's own notify (4 attempts in 0.7 s) would have given up" : "";
      return `${what} → ${summarise(failures)}, then ${outcome} after ${((Date.now() - started) / 1000).toFixed(1)} s (${failures.length + 1} attempts${gaveUp})`;
    }
    failures.push(outcome);
    if (Date.now() - started + delay > PURGE_RETRY_FOR_MS)
      return `${what} → ${summarise(failures)}: given up after ${((Date.now() - started) / 1000).toFixed(1)} s`;
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(1000, delay * 2);
  }
}

function summarise(failures: string[]): string {
  const counts = new Map<string, number>();
  for (const f of failures) counts.set(f, (counts.get(f) ?? 0) + 1);
  return [...counts].map(([f, n]) => (n > 1 ? `${f} ×${n}` : f)).join(", ");
}
