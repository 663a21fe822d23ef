// The demo origin: a node:http server that implements
// docs/origin-contract.md over the generated catalog (./catalog.ts), with
// admin endpoints under /__admin/ to count requests, inject faults and change
// products (which notifies the tier's purge endpoint, as a real shop would).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { isValidProductId } from "../../src/origin/types";
import { CatalogStore, MAX_CATALOG_SIZE, MAX_LIST_LIMIT, type ChangeResult, type ProductChange } from "./catalog";

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

const SERVICES = ["product", "inventory", "reviews", "recommendations", "listing"] as const;
type ServiceName = (typeof SERVICES)[number];

type DownMode = false | "500" | "refuse" | "hang";

interface Fault {
  /** Added to the base latency. */
  latencyMs: number;
  /** Fraction of requests answered 500. */
  errorRate: number;
  down: DownMode;
  /**
   * What ids the service holds nothing for are answered: 404 as the contract
   * says, or 400 to 499, as an origin that validates ids more strictly than
   * the contract would (junk ids answered 400 or 422).
   */
  unknownIdStatus: number;
  /**
   * Ids looked up in lower case and answered with the catalog's spelling: an
   * origin that canonicalises `P-000001` to `p-000001`, so that the answer
   * names another id than the one asked for.
   */
  canonicalIds: boolean;
}

/** What came of telling the tier about a change; status null when no HTTP answer came. */
interface NotifyResult {
  status: number | null;
  error?: string;
}

const MAX_BODY_BYTES = 64 * 1024;
const MAX_COUNTED_IDS = 100_000;
const MAX_LATENCY_MS = 600_000;
const MAX_TITLE_LENGTH = 200;
const DEFAULT_LIST_LIMIT = 100;
const NOTIFY_RETRIES = 3;
const NOTIFY_BACKOFF_MS = 100;
const NOTIFY_TIMEOUT_MS = 2_000;
const NOT_FOUND = { error: "not_found" };
const NO_FAULT: Fault = { latencyMs: 0, errorRate: 0, down: false, unknownIdStatus: 404, canonicalIds: false };
const DOWN_MODES: readonly DownMode[] = [false, "500", "refuse", "hang"];

/** Ends a request with a JSON error; thrown by validation, caught in one place. */
class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message = code,
  ) {
    super(message);
  }
}

// ---------------------------------------------------------------- counters

/** Requests each service received, and per id (bounded: new ids stop being added, totals go on). */
class Counters {
  private total = 0;
  private services = zeroServices();
  private ids = new Map<string, number>();

  count(service: ServiceName, id: string | undefined): void {
    this.total++;
    this.services[service]++;
    // Only well-formed ids become keys, so hostile paths cannot grow the map with junk.
    if (id === undefined || !isValidProductId(id)) return;
    const key = `${service}:${id}`;
    const seen = this.ids.get(key);
    if (seen !== undefined) this.ids.set(key, seen + 1);
    else if (this.ids.size < MAX_COUNTED_IDS) this.ids.set(key, 1);
  }

  reset(): void {
    this.total = 0;
    this.services = zeroServices();
    this.ids.clear();
  }

  toJSON() {
    return { total: this.total, services: { ...this.services }, ids: Object.fromEntries(this.ids) };
  }
}

function zeroServices(): Record<ServiceName, number> {
  return { product: 0, inventory: 0, reviews: 0, recommendations: 0, listing: 0 };
}

// ---------------------------------------------------------------- faults

class Faults {
  private readonly faults = new Map<ServiceName, Fault>();
  /** Hanging requests, woken whenever the faults change or the server closes. */
  private readonly waiters = new Set<() => void>();

  get(service: ServiceName): Fault {
    return this.faults.get(service) ?? NO_FAULT;
  }

  set(services: readonly ServiceName[], fault: Fault): void {
    for (const service of services) this.faults.set(service, fault);
    this.wake();
  }

  clear(): void {
    this.faults.clear();
    this.wake();
  }

  /** Resolves at the next change of faults, or when `socket` closes. */
  nextChange(socket: IncomingMessage["socket"]): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.waiters.delete(done);
        socket.off("close", done);
        resolve();
      };
      this.waiters.add(done);
      socket.once("close", done);
    });
  }

  wake(): void {
    for (const waiter of [...this.waiters]) waiter();
  }

  toJSON(): Record<ServiceName, Fault> {
    return Object.fromEntries(SERVICES.map((service) => [service, this.get(service)])) as Record<ServiceName, Fault>;
  }
}

// ---------------------------------------------------------------- the server

interface Settings {
  port: number;
  host: string;
  catalogSize: number;
  latencyMs: number;
  jitterMs: number;
  purgeUrl: string | undefined;
  purgeToken: string | undefined;
  knownIdsUrl: string | undefined;
}

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
  const origin = new DemoOriginServer(settings, new CatalogStore(settings.catalogSize, url));
  server.on("request", (req, res) => origin.dispatch(req, res));
  let closed: Promise<void> | undefined;
  return { url, port, close: () => (closed ??= origin.close(server)) };
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
    throw new RangeError(`catalogSize must be an integer from 1 to ${MAX_CATALOG_SIZE}`);
  }
  for (const key of ["latencyMs", "jitterMs"] as const) {
    if (!isNumberIn(settings[key], 0, MAX_LATENCY_MS)) {
      throw new RangeError(`${key} must be from 0 to ${MAX_LATENCY_MS}`);
    }
  }
  return settings;
}

/** A host that clients can reach: the wildcard addresses are not. */
function urlHost(host: string): string {
  if (host === "0.0.0.0" || host === "::") return "127.0.0.1";
  return host.includes(":") ? `[${host}]` : host;
}

class DemoOriginServer {
  private readonly counters = new Counters();
  private readonly faults = new Faults();
  /** Aborts every pending delay (latency, retry backoff) when the server closes. */
  private readonly closing = new AbortController();

  constructor(
    private readonly settings: Settings,
    private readonly store: CatalogStore,
  ) {}

  dispatch(req: IncomingMessage, res: ServerResponse): void {
    this.handle(req, res).catch((err: unknown) => {
      if (!(err instanceof HttpError)) console.error("demo origin: unexpected error", err);
      const error = err instanceof HttpError ? err : new HttpError(500, "internal_error");
      // A body left unread (too large) must not be parsed as the next request.
      if (error.status === 413) res.setHeader("connection", "close");
      const message = error.message === error.code ? {} : { message: error.message };
      sendJson(res, error.status, { error: error.code, ...message });
    });
  }

  async close(server: Server): Promise<void> {
    this.closing.abort();
    this.faults.wake();
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      // Keep-alive sockets and hanging requests would otherwise hold close() forever.
      server.closeAllConnections();
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://origin");
    const segments = url.pathname.split("/").slice(1);
    if (segments[0] === "__admin") return this.admin(req, res, segments.slice(1));
    if (segments[0] === "images" && req.method === "GET") return serveImage(res, segments);

    const route = serviceRoute(segments);
    if (!route) throw new HttpError(404, "not_found");
    this.counters.count(route.service, route.id);
    if (req.method !== "GET") throw new HttpError(405, "method_not_allowed");
    if (!(await this.passFaults(route.service, req))) return;
    const [status, body] = this.serve(route, url.searchParams);
    sendJson(res, status, body);
  }

  /**
   * Waits the latency and applies the service's fault. Returns false when
   * the request must not be answered (refused, client gone, server closing).
   */
  private async passFaults(service: ServiceName, req: IncomingMessage): Promise<boolean> {
    // A refused connection fails at once; latency would only blur that.
    if (this.faults.get(service).down !== "refuse") await this.delay(this.latencyFor(service));
    const gone = () => this.closing.signal.aborted || req.socket.destroyed;
    while (this.faults.get(service).down === "hang" && !gone()) await this.faults.nextChange(req.socket);
    if (gone()) return false;

    const fault = this.faults.get(service);
    if (fault.down === "refuse") {
      req.socket.destroy();
      return false;
    }
    if (fault.down === "500" || Math.random() < fault.errorRate) throw new HttpError(500, "injected_failure");
    return true;
  }

  private latencyFor(service: ServiceName): number {
    const { latencyMs, jitterMs } = this.settings;
    const jitter = (Math.random() * 2 - 1) * jitterMs;
    return Math.max(0, latencyMs + jitter) + this.faults.get(service).latencyMs;
  }

  /** Sleeps, unless the server closes first. */
  private async delay(ms: number): Promise<void> {
    if (ms <= 0) return;
    await sleep(ms, undefined, { signal: this.closing.signal }).catch(() => undefined);
  }

  private serve(route: ServiceRoute, query: URLSearchParams): [number, unknown] {
    if (route.service === "listing") return [200, this.listing(query)];
    const { unknownIdStatus, canonicalIds } = this.faults.get(route.service);
    const id = canonicalIds ? route.id.toLowerCase() : route.id;
    const value = this.lookup(route.service, id);
    if (value !== null) return [200, value];
    return unknownIdStatus === 404 ? [404, NOT_FOUND] : [unknownIdStatus, { error: "invalid_id" }];
  }

  private lookup(service: Exclude<ServiceName, "listing">, id: string): unknown {
    switch (service) {
      case "product":
        return this.store.product(id);
      case "inventory":
        return this.store.inventory(id);
      case "reviews":
        return this.store.reviews(id);
      case "recommendations":
        return this.store.recommendations(id);
    }
  }

  private listing(query: URLSearchParams) {
    const raw = query.get("limit") ?? String(DEFAULT_LIST_LIMIT);
    const limit = /^\d{1,4}$/.test(raw) ? Number(raw) : Number.NaN;
    if (!(limit >= 1 && limit <= MAX_LIST_LIMIT)) {
      throw new HttpError(400, "bad_request", `limit must be an integer from 1 to ${MAX_LIST_LIMIT}`);
    }
    const page = this.store.listIds(query.get("cursor") || null, limit);
    if (!page) throw new HttpError(400, "bad_request", "unknown cursor");
    return page;
  }

  // ------------------------------------------------------------ admin (never slowed by latency or faults)

  private async admin(req: IncomingMessage, res: ServerResponse, segments: string[]): Promise<void> {
    const path = segments.join("/");
    switch (`${req.method} ${path}`) {
      case "GET counters":
        return sendJson(res, 200, this.counters);
      case "POST counters/reset":
        this.counters.reset();
        return sendJson(res, 200, this.counters);
      case "GET faults":
        return sendJson(res, 200, this.faults);
      case "PUT faults": {
        const { services, fault } = parseFault(await readJsonBody(req));
        this.faults.set(services, fault);
        return sendJson(res, 200, this.faults);
      }
      case "DELETE faults":
        this.faults.clear();
        return sendJson(res, 200, this.faults);
      case "POST latency":
        this.setLatency(await readJsonBody(req));
        return sendJson(res, 200, { latencyMs: this.settings.latencyMs, jitterMs: this.settings.jitterMs });
      case "POST reset":
        this.store.reset();
        this.faults.clear();
        this.counters.reset();
        return sendJson(res, 200, { ok: true });
      case "POST products":
        return this.createProduct(res, await readJsonBody(req));
    }
    if (req.method === "POST" && segments.length === 2 && segments[0] === "products") {
      return this.changeProduct(res, segments[1] as string, await readJsonBody(req));
    }
    throw new HttpError(404, "not_found");
  }

  private setLatency(body: unknown): void {
    const fields = asRecord(body);
    this.settings.latencyMs = optionalNumber(fields, "latencyMs", 0, MAX_LATENCY_MS) ?? this.settings.latencyMs;
    this.settings.jitterMs = optionalNumber(fields, "jitterMs", 0, MAX_LATENCY_MS) ?? this.settings.jitterMs;
  }

  private async changeProduct(res: ServerResponse, id: string, body: unknown): Promise<void> {
    const change = parseChange(body);
    const result = checked(this.store.change(id, change, Date.now()));
    // Answer only once the tier knows, so that callers (tests) can rely on it.
    const purge = await this.notify(this.settings.purgeUrl, id);
    sendJson(res, 200, { product: result.product, inventory: result.inventory, purge });
  }

  private async createProduct(res: ServerResponse, body: unknown): Promise<void> {
    const fields = asRecord(body);
    const id = fields.id;
    if (typeof id !== "string" || !isValidProductId(id)) {
      throw new HttpError(400, "bad_request", "id must match the contract's id pattern");
    }
    const title = requiredTitle(fields);
    const price = optionalNumber(fields, "price", 0, Number.MAX_SAFE_INTEGER, true);
    if (price === undefined) throw new HttpError(400, "bad_request", "price is required");
    const available = optionalNumber(fields, "available", 0, 1_000_000, true);

    const stock = available === undefined ? {} : { available };
    const result = checked(this.store.create({ id, title, price, ...stock }, Date.now()));
    const knownIds = await this.notify(this.settings.knownIdsUrl, id);
    // The tier may have remembered this id as absent (negative caching): purge that too.
    const purge = await this.notify(this.settings.purgeUrl, id);
    sendJson(res, 201, { product: result.product, inventory: result.inventory, knownIds, purge });
  }

  /**
   * POSTs `{ids: [id]}` to `url` with the bearer token, retrying network
   * errors, 429 and 5xx with exponential backoff. null when `url` is unset.
   */
  private async notify(url: string | undefined, id: string): Promise<NotifyResult | null> {
    if (!url) return null;
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (this.settings.purgeToken) headers.authorization = `Bearer ${this.settings.purgeToken}`;
    let result: NotifyResult = { status: null };
    for (let attempt = 0; attempt <= NOTIFY_RETRIES; attempt++) {
      if (attempt > 0) await this.delay(NOTIFY_BACKOFF_MS * 2 ** (attempt - 1));
      if (this.closing.signal.aborted) break;
      try {
        const response = await fetch(url, {
          method: "POST",
          headers,
          body: JSON.stringify({ ids: [id] }),
          signal: AbortSignal.any([this.closing.signal, AbortSignal.timeout(NOTIFY_TIMEOUT_MS)]),
        });
        await response.body?.cancel();
        const { status } = response;
        result = response.ok ? { status } : { status, error: `HTTP ${status}` };
        if (status < 500 && status !== 429) break;
      } catch (err) {
        result = { status: null, error: err instanceof Error ? err.message : String(err) };
      }
    }
    return result;
  }
}

// ---------------------------------------------------------------- routes

type ServiceRoute =
  | { service: "product" | "inventory" | "reviews" | "recommendations"; id: string }
  | { service: "listing"; id?: undefined };

/** The contract's paths; ids are checked later, so that malformed ones are counted and 404. */
function serviceRoute(segments: string[]): ServiceRoute | null {
  const [first, id, last] = segments;
  if (id === undefined) return first === "products" ? { service: "listing" } : null;
  if (segments.length === 2) {
    if (first === "products") return { service: "product", id };
    if (first === "inventory") return { service: "inventory", id };
    if (first === "recommendations") return { service: "recommendations", id };
  }
  if (segments.length === 3 && first === "reviews" && last === "summary") return { service: "reviews", id };
  return null;
}

/** GET /images/{id}/{n}.svg: a placeholder that shows the id, so pages have real image urls. */
function serveImage(res: ServerResponse, segments: string[]): void {
  const [, id, file] = segments;
  const n = /^([1-9])\.svg$/.exec(file ?? "")?.[1];
  if (segments.length !== 3 || id === undefined || !isValidProductId(id) || n === undefined) {
    throw new HttpError(404, "not_found");
  }
  // Safe to embed: valid ids are [A-Za-z0-9_-] only.
  const hue = (Number(n) * 47 + id.length * 13 + (id.charCodeAt(id.length - 1) || 0) * 7) % 360;
  const svg =
    `<svg xmlns="http://www.w3.org/2000/svg" width="400" height="400" viewBox="0 0 400 400">` +
    `<rect width="400" height="400" fill="hsl(${hue},45%,55%)"/>` +
    `<text x="200" y="200" font-family="sans-serif" font-size="32" text-anchor="middle" fill="#fff">` +
    `${id} #${n}</text>` +
    `</svg>`;
  res.writeHead(200, {
    "content-type": "image/svg+xml",
    "cache-control": "public, max-age=86400",
    "content-length": Buffer.byteLength(svg),
  });
  res.end(svg);
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

// ---------------------------------------------------------------- admin input

function readJsonBody(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      // Keep draining (and dropping) the rest, so that the 413 can still be sent.
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
      else reject(new HttpError(413, "payload_too_large", `bodies are limited to ${MAX_BODY_BYTES} bytes`));
    });
    req.on("end", () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString("utf8")));
      } catch {
        reject(new HttpError(400, "bad_request", "body must be JSON"));
      }
    });
    req.on("error", reject);
  });
}

function asRecord(body: unknown): Record<string, unknown> {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new HttpError(400, "bad_request", "body must be a JSON object");
  }
  return body as Record<string, unknown>;
}

function isNumberIn(value: unknown, min: number, max: number): value is number {
  return typeof value === "number" && Number.isFinite(value) && value >= min && value <= max;
}

function optionalNumber(
  fields: Record<string, unknown>,
  key: string,
  min: number,
  max: number,
  integer = false,
): number | undefined {
  const value = fields[key];
  if (value === undefined) return undefined;
  if (!isNumberIn(value, min, max) || (integer && !Number.isInteger(value))) {
    const kind = integer ? "an integer" : "a number";
    throw new HttpError(400, "bad_request", `${key} must be ${kind} from ${min} to ${max}`);
  }
  return value;
}

function requiredTitle(fields: Record<string, unknown>): string {
  const title = fields.title;
  if (typeof title !== "string" || title.length === 0 || title.length > MAX_TITLE_LENGTH) {
    throw new HttpError(400, "bad_request", `title must be a string of 1 to ${MAX_TITLE_LENGTH} characters`);
  }
  return title;
}

function parseChange(body: unknown): ProductChange {
  const fields = asRecord(body);
  const change: ProductChange = {};
  const price = optionalNumber(fields, "price", 0, Number.MAX_SAFE_INTEGER, true);
  const available = optionalNumber(fields, "available", 0, 1_000_000, true);
  if (price !== undefined) change.price = price;
  if (available !== undefined) change.available = available;
  if (fields.title !== undefined) change.title = requiredTitle(fields);
  if (Object.keys(change).length === 0) throw new HttpError(400, "bad_request", "give price, title or available");
  return change;
}

function parseFault(body: unknown): { services: readonly ServiceName[]; fault: Fault } {
  const fields = asRecord(body);
  const service = fields.service;
  const services = service === "all" ? SERVICES : SERVICES.filter((name) => name === service);
  if (services.length === 0) {
    throw new HttpError(400, "bad_request", `service must be one of ${SERVICES.join(", ")}, all`);
  }
  const down = fields.down ?? false;
  if (!DOWN_MODES.includes(down as DownMode)) {
    throw new HttpError(400, "bad_request", 'down must be false, "500", "refuse" or "hang"');
  }
  const canonicalIds = fields.canonicalIds ?? false;
  if (typeof canonicalIds !== "boolean") throw new HttpError(400, "bad_request", "canonicalIds must be true or false");
  return {
    services,
    fault: {
      latencyMs: optionalNumber(fields, "latencyMs", 0, MAX_LATENCY_MS) ?? 0,
      errorRate: optionalNumber(fields, "errorRate", 0, 1) ?? 0,
      down: down as DownMode,
      unknownIdStatus: optionalNumber(fields, "unknownIdStatus", 400, 499, true) ?? 404,
      canonicalIds,
    },
  };
}

function checked(result: ChangeResult): Extract<ChangeResult, { ok: true }> {
  if (result.ok) return result;
  const status = { not_found: 404, conflict: 409, too_many_overrides: 507 }[result.error];
  throw new HttpError(status, result.error);
}
