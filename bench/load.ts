// The load generator: closed-loop HTTP/1.1 clients on node:http keep-alive
// sockets, and the tally of what came back.
//
// Closed loop: each connection sends its next request when the previous
// answer has been read to the end, so the offered load adapts to the server
// and latency is the time a visitor waits (request written → last byte read).
// node:http rather than a load-testing library because every scenario needs
// its own sequence of paths (one product, distinct products, Zipf draws) and
// the Cache-Status header of every single response.
import { Agent, request } from "node:http";
import { createHistogram, performance, type RecordableHistogram } from "node:perf_hooks";

/** Where each product page's `product` resource came from, per its Cache-Status member. */
export type ProductTier = "l1" | "l2" | "origin" | "none";

/**
 * Where one resource of the pages came from (Cache-Status members whose
 * detail names it): the tier, and how many of those were served stale (within
 * stale-while-revalidate, or stale-if-error) and how many waited for the origin (`fwd=`).
 */
export interface ResourceTiers {
  l1: number;
  l2: number;
  origin: number;
  none: number;
  stale: number;
  forwarded: number;
}

/** Counters a progress line can read while a run goes on. */
export interface Live {
  requests: number;
  errors: number;
}

/** Everything measured over one or several runs (see `runLoad`'s `into`). */
export class Tally {
  /** Microseconds, request start to last byte (HDR histogram, 3 significant digits). */
  readonly latency: RecordableHistogram = createHistogram({ lowest: 1, highest: 120_000_000, figures: 3 });
  requests = 0;
  errors = 0;
  readonly statuses: Record<string, number> = {};
  readonly errorKinds: Record<string, number> = {};
  /** Responses that carried a Cache-Status header, i.e. product pages. */
  pages = 0;
  /** Pages with no `pp-origin` member: nothing of them needed an origin fetch. */
  pagesWithoutOrigin = 0;
  readonly productTier: Record<ProductTier, number> = { l1: 0, l2: 0, origin: 0, none: 0 };
  /** Pages whose product member says `collapsed`: they waited for another request's fill. */
  collapsed = 0;
  /** Per resource (product, inventory, reviews, recommendations): which tier answered, stale and forwarded members. */
  readonly resourceTiers: Record<string, ResourceTiers> = {};
  /** Cache-Status members that report a failed or stale-if-error origin fetch, as "resource fwd-status". */
  readonly originFailures: Record<string, number> = {};
  /** Server-Timing durations summed by metric (l1, l2, origin, render, total), and the pages that sent them. */
  readonly serverTiming: Record<string, number> = {};
  timedPages = 0;
  bytes = 0;
  /** The first few distinct bodies of 5xx answers other than 503 (whose page is the tier's own): who answered, and why. */
  readonly errorBodies: string[] = [];
  /** Time spent measuring, summed over the runs that fed this tally. */
  elapsedMs = 0;

  record(outcome: Outcome, micros: number, live?: Live): void {
    this.requests++;
    if (live) live.requests++;
    this.latency.record(Math.max(1, Math.round(micros)));
    if (outcome.error !== undefined) {
      this.errors++;
      if (live) live.errors++;
      this.errorKinds[outcome.error] = (this.errorKinds[outcome.error] ?? 0) + 1;
      return;
    }
    const status = outcome.status ?? 0;
    this.statuses[status] = (this.statuses[status] ?? 0) + 1;
    this.bytes += outcome.bytes;
    // Errors are answers outside 2xx/3xx (a 404 page counts: the benchmark asks only for existing products).
    if (status < 200 || status >= 400) {
      this.errors++;
      if (live) live.errors++;
    }
    if (outcome.errorBody !== undefined && this.errorBodies.length < 3 && !this.errorBodies.includes(outcome.errorBody)) {
      this.errorBodies.push(outcome.errorBody);
    }
    if (outcome.cacheStatus !== undefined) this.countCacheStatus(outcome.cacheStatus);
    if (outcome.serverTiming !== undefined) this.countServerTiming(outcome.serverTiming);
  }

  /** `l1;dur=0.0,l2;dur=2.0,origin;dur=40.0,render;dur=3.0,total;dur=47.0;desc="..."` */
  private countServerTiming(header: string): void {
    this.timedPages++;
    for (const match of header.matchAll(/(?:^|,)\s*([a-z0-9]+);dur=([\d.]+)/gi)) {
      this.serverTiming[match[1]!] = (this.serverTiming[match[1]!] ?? 0) + Number(match[2]);
    }
  }

  private countCacheStatus(header: string): void {
    this.pages++;
    const members = parseCacheStatus(header);
    if (!members.some((member) => member.tier === "origin")) this.pagesWithoutOrigin++;
    const product = members.find((member) => member.resource === "product");
    this.productTier[product?.tier ?? "none"]++;
    if (product?.params.includes("collapsed")) this.collapsed++;
    for (const member of members) {
      const tiers = (this.resourceTiers[member.resource] ??= noTiers());
      tiers[member.tier]++;
      if (isStale(member)) tiers.stale++;
      if (member.params.some((param) => param.startsWith("fwd="))) tiers.forwarded++;
      const failed = member.params.find((param) => param.startsWith("fwd-status=") && param !== "fwd-status=200");
      if (failed) {
        const key = `${member.resource} ${failed.slice("fwd-status=".length)}`;
        this.originFailures[key] = (this.originFailures[key] ?? 0) + 1;
      }
    }
  }

  /** Adds another tally's counts and latencies to this one. */
  add(other: Tally): void {
    this.latency.add(other.latency);
    this.requests += other.requests;
    this.errors += other.errors;
    this.pages += other.pages;
    this.pagesWithoutOrigin += other.pagesWithoutOrigin;
    this.collapsed += other.collapsed;
    this.bytes += other.bytes;
    this.elapsedMs += other.elapsedMs;
    addCounts(this.statuses, other.statuses);
    addCounts(this.errorKinds, other.errorKinds);
    addCounts(this.productTier, other.productTier);
    addCounts(this.originFailures, other.originFailures);
    for (const [resource, tiers] of Object.entries(other.resourceTiers)) {
      const mine = (this.resourceTiers[resource] ??= noTiers());
      for (const key of Object.keys(tiers) as Array<keyof ResourceTiers>) mine[key] += tiers[key];
    }
    for (const body of other.errorBodies) if (this.errorBodies.length < 3 && !this.errorBodies.includes(body)) this.errorBodies.push(body);
    addCounts(this.serverTiming, other.serverTiming);
    this.timedPages += other.timedPages;
  }

  summary(): TallySummary {
    const ms = (micros: number) => Math.round(micros / 10) / 100;
    const seconds = this.elapsedMs / 1000;
    const count = this.latency.count;
    return {
      requests: this.requests,
      seconds: Math.round(seconds * 100) / 100,
      rps: seconds > 0 ? Math.round(this.requests / seconds) : 0,
      latencyMs: {
        p50: count ? ms(this.latency.percentile(50)) : 0,
        p90: count ? ms(this.latency.percentile(90)) : 0,
        p99: count ? ms(this.latency.percentile(99)) : 0,
        max: count ? ms(this.latency.max) : 0,
        mean: count ? ms(this.latency.mean) : 0,
      },
      errors: this.errors,
      errorRate: this.requests ? this.errors / this.requests : 0,
      statuses: { ...this.statuses },
      errorKinds: { ...this.errorKinds },
      pages: this.pages,
      productTier: { ...this.productTier },
      collapsed: this.collapsed,
      noOriginShare: this.pages ? this.pagesWithoutOrigin / this.pages : null,
      originFailures: { ...this.originFailures },
      resourceTiers: Object.fromEntries(Object.entries(this.resourceTiers).map(([resource, tiers]) => [resource, { ...tiers }])),
      errorBodies: [...this.errorBodies],
      serverTimingMeanMs: Object.fromEntries(
        Object.entries(this.serverTiming).map(([name, sum]) => [name, Math.round((sum / this.timedPages) * 10) / 10]),
      ),
      meanBytes: this.requests - this.errors > 0 ? Math.round(this.bytes / (this.requests - this.errors)) : 0,
    };
  }
}

function noTiers(): ResourceTiers {
  return { l1: 0, l2: 0, origin: 0, none: 0, stale: 0, forwarded: 0 };
}

function addCounts(target: Record<string, number>, source: Record<string, number>): void {
  for (const [key, value] of Object.entries(source)) target[key] = (target[key] ?? 0) + value;
}

export interface TallySummary {
  requests: number;
  seconds: number;
  rps: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number; mean: number };
  errors: number;
  errorRate: number;
  statuses: Record<string, number>;
  errorKinds: Record<string, number>;
  pages: number;
  productTier: Record<ProductTier, number>;
  collapsed: number;
  /** Share of product pages served without any origin fetch; null when no page was served. */
  noOriginShare: number | null;
  /** Failed or stale-if-error origin fetches named in Cache-Status, as "resource fwd-status". */
  originFailures: Record<string, number>;
  /** Per resource: which tier answered its Cache-Status members, and how many were stale or forwarded to the origin. */
  resourceTiers: Record<string, ResourceTiers>;
  /** Up to 3 distinct bodies of 5xx answers other than 503, as text (tags stripped), 300 characters at most. */
  errorBodies: string[];
  /** Mean Server-Timing per metric over the pages (the worker's own view, ms resolution in workerd). */
  serverTimingMeanMs: Record<string, number>;
  meanBytes: number;
}

export interface CacheStatusMember {
  tier: ProductTier;
  /** The resource named first in `detail` ("product", "inventory"...). */
  resource: string;
  params: string[];
}

/**
 * `pp-l1; hit; ttl=283; detail="product", pp-origin; fwd=uri-miss; ...; detail="reviews"`
 * → one entry per member (src/http/headers.ts writes it; details never hold commas).
 */
export function parseCacheStatus(header: string): CacheStatusMember[] {
  return header
    .split(/,\s*(?=pp-)/)
    .map((text) => {
      const params = text.split(";").map((part) => part.trim());
      const name = params[0] ?? "";
      const tier: ProductTier = name === "pp-l1" ? "l1" : name === "pp-l2" ? "l2" : name === "pp-origin" ? "origin" : "none";
      const resource = /detail="([a-z]+)/.exec(text)?.[1] ?? "";
      return { tier, resource, params: params.slice(1) };
    });
}

/**
 * A member that says it was served stale: `detail="inventory stale"` (within
 * stale-while-revalidate, refreshing in the background), `detail="product
 * stale-if-error"`, or `fwd=stale` (the origin was asked because the copy at
 * hand was stale).
 */
export function isStale(member: CacheStatusMember): boolean {
  return member.params.some((param) => param === "fwd=stale" || (param.startsWith("detail=") && /\bstale\b/.test(param)));
}

// ---------------------------------------------------------------- one request

/** What came back for one request (handed to `LoadSpec.onResponse`). */
export interface Outcome {
  status?: number;
  cacheStatus?: string;
  serverTiming?: string;
  /** The body, for a 5xx other than 503 (text, tags stripped). */
  errorBody?: string;
  bytes: number;
  /** A failure without an HTTP answer: socket error, timeout. */
  error?: string;
}

const REQUEST_HEADERS = {
  accept: "text/html,application/json",
  // No accept-encoding: the runtime would gzip every answer here, work that
  // Cloudflare's front line does outside the isolate in production.
};

function get(base: URL, path: string, agent: Agent, timeoutMs: number): Promise<Outcome> {
  return new Promise((done) => {
    let settled = false;
    const finish = (outcome: Outcome) => {
      if (!settled) {
        settled = true;
        done(outcome);
      }
    };
    const req = request(
      { host: base.hostname, port: base.port, path, agent, method: "GET", headers: REQUEST_HEADERS },
      (res) => {
        let bytes = 0;
        const status = res.statusCode ?? 0;
        // Only unexpected failures are worth reading: their body says who gave up (the worker's page or the runtime).
        const keep = status >= 500 && status !== 503 ? ([] as Buffer[]) : null;
        res.on("data", (chunk: Buffer) => {
          bytes += chunk.length;
          if (keep && bytes <= 16_384) keep.push(chunk);
        });
        res.once("end", () => {
          const header = res.headers["cache-status"];
          finish({
            status,
            cacheStatus: Array.isArray(header) ? header.join(", ") : header,
            serverTiming: res.headers["server-timing"] as string | undefined,
            errorBody: keep ? bodyText(Buffer.concat(keep).toString("utf8")) : undefined,
            bytes,
          });
        });
        res.once("error", (err) => finish({ bytes, error: errorKind(err) }));
        res.once("aborted", () => finish({ bytes, error: "aborted" }));
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(Object.assign(new Error("timeout"), { code: "TIMEOUT" })));
    req.once("error", (err) => finish({ bytes: 0, error: errorKind(err) }));
    req.end();
  });
}

/** The readable text of an HTML or JSON body, squeezed to one line. */
function bodyText(body: string): string {
  return body
    .replace(/<(script|style)[\s\S]*?<\/\1>/gi, " ")
    .replace(/<[^>]+>/g, " ")
    .replace(/\s+/g, " ")
    .trim()
    .slice(0, 300);
}

function errorKind(err: Error): string {
  return (err as NodeJS.ErrnoException).code ?? err.message.slice(0, 60);
}

// ---------------------------------------------------------------- runs

export interface LoadSpec {
  /** Base URLs; connection i talks to targets[i % targets.length]. */
  targets: string[];
  connections: number;
  /** The path of the next request, or null when this connection is done (count-bounded runs). */
  next: () => string | null;
  /** Stop sending new requests after this long; without it, run until `next` returns null. */
  durationMs?: number;
  /** Per request (default 10 s): a hung answer becomes an error, never a hung benchmark. */
  timeoutMs?: number;
  /** Aborts the run: in-flight requests are dropped, not counted. */
  signal?: AbortSignal;
  /** Live counters for the progress line. */
  live?: Live;
  /**
   * Called with every answer counted (path, outcome, latency in µs), after it
   * is added to the tally: for figures a Tally does not keep (per product,
   * per phase of a fault, per shard).
   */
  onResponse?: (path: string, outcome: Outcome, micros: number) => void;
  /**
   * Paces each connection: its requests start at most every `intervalMs`
   * (open loop while the server keeps up), e.g. 2 connections × 100 ms = 20
   * requests a second. Without it, each connection sends its next request
   * as soon as it has read the previous answer.
   */
  intervalMs?: number;
}

/**
 * Runs closed-loop clients and adds what they measured to `into` (a new
 * Tally by default). Each connection has its own agent with one socket, so
 * `connections` is exactly the number of sockets and requests in flight.
 */
export async function runLoad(spec: LoadSpec, into = new Tally()): Promise<Tally> {
  const timeoutMs = spec.timeoutMs ?? 10_000;
  const agents: Agent[] = [];
  const started = performance.now();
  const deadline = spec.durationMs === undefined ? Infinity : started + spec.durationMs;

  async function connection(index: number): Promise<void> {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    agents.push(agent);
    const base = new URL(spec.targets[index % spec.targets.length]!);
    let nextStart = performance.now();
    while (performance.now() < deadline && !spec.signal?.aborted) {
      if (spec.intervalMs !== undefined) {
        const wait = nextStart - performance.now();
        if (wait > 0) await pause(Math.min(wait, deadline - performance.now()), spec.signal);
        if (performance.now() >= deadline || spec.signal?.aborted) return;
        nextStart = Math.max(nextStart + spec.intervalMs, performance.now());
      }
      const path = spec.next();
      if (path === null) return;
      const t0 = performance.now();
      const outcome = await get(base, path, agent, timeoutMs);
      if (spec.signal?.aborted) return;
      const micros = (performance.now() - t0) * 1000;
      into.record(outcome, micros, spec.live);
      spec.onResponse?.(path, outcome, micros);
    }
  }

  // On abort, destroying the sockets ends the requests in flight at once.
  const destroyAll = () => agents.forEach((agent) => agent.destroy());
  spec.signal?.addEventListener("abort", destroyAll, { once: true });
  try {
    await Promise.all(Array.from({ length: spec.connections }, (_, i) => connection(i)));
  } finally {
    into.elapsedMs += performance.now() - started;
    spec.signal?.removeEventListener("abort", destroyAll);
    destroyAll();
  }
  return into;
}

/** Sleeps `ms`, or less if `signal` aborts. */
function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((done) => {
    if (ms <= 0 || signal?.aborted) return done();
    const timer = setTimeout(finish, ms);
    function finish() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", finish);
      done();
    }
    signal?.addEventListener("abort", finish, { once: true });
  });
}

export interface BurstSpec {
  targets: string[];
  /** Simultaneous requests per target, each on its own socket. */
  perTarget: number;
  path: string;
  timeoutMs?: number;
  live?: Live;
}

/**
 * Fires `perTarget` requests at every target at the same instant. The
 * sockets are opened (and the isolates started) first with /healthz, so that
 * connection set-up does not spread the burst over time: the product
 * requests then leave within one turn of the event loop.
 */
export async function burst(spec: BurstSpec): Promise<Tally> {
  const timeoutMs = spec.timeoutMs ?? 10_000;
  const tally = new Tally();
  const agents = spec.targets.map(() => new Agent({ keepAlive: true, maxSockets: spec.perTarget, maxFreeSockets: spec.perTarget }));
  const all = <T>(fn: (base: URL, agent: Agent) => Promise<T>) =>
    Promise.all(spec.targets.flatMap((target, i) => Array.from({ length: spec.perTarget }, () => fn(new URL(target), agents[i]!))));
  try {
    const warm = await all((base, agent) => get(base, "/healthz", agent, timeoutMs));
    const failed = warm.filter((outcome) => outcome.error !== undefined || outcome.status !== 200).length;
    if (failed > 0) throw new Error(`${failed} of ${warm.length} socket warm-up requests failed`);
    const started = performance.now();
    await all(async (base, agent) => {
      const t0 = performance.now();
      const outcome = await get(base, spec.path, agent, timeoutMs);
      tally.record(outcome, (performance.now() - t0) * 1000, spec.live);
    });
    tally.elapsedMs = performance.now() - started;
  } finally {
    for (const agent of agents) agent.destroy();
  }
  return tally;
}
