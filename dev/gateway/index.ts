/**
 * A local stand-in for Upstash: speaks the Upstash Redis REST protocol (what
 * `@upstash/redis` sends) over node:http and runs the commands on a real
 * redis-server. Lets tests and `wrangler dev` use L2 without a cloud account.
 *
 *   POST /            ["SET","k","v"]              → {"result": ...} | 400 {"error": ...}
 *   POST /pipeline    [["SET","a","1"],["GET","a"]] → [{"result": ...}, {"error": ...}]
 *   POST /multi-exec  same, inside MULTI/EXEC        → same shape, atomically
 *   GET|POST /set/k/v path style                    → like POST /
 *
 * Redis unreachable or too slow → 503 {"error": ...}, promptly; the connection
 * keeps reconnecting in the background, so the gateway heals by itself.
 *
 * The benchmarks change two things while it runs (bench:chaos): the latency
 * it holds every request first (setLatency), and whether it is reachable at
 * all (setDown: every open connection reset, every new one reset at once).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { encodeResult, type CommandResult } from "./encode";
import { connectRedis, RedisReplyError, RedisUnavailableError, type RedisLink, type Settled } from "./redis-link";
import { bearerCheck, HttpError, parseCommand, parseCommandList, parseJson, parsePathCommand, readBody } from "./request";

export interface GatewayOptions {
  /** Port to listen on; 0 = pick a free port. */
  port?: number;
  host?: string;
  /** The redis-server to talk to. */
  redisHost?: string;
  redisPort: number;
  /** Bearer token clients must present (401 otherwise). */
  token: string;
  /** Per-command timeout towards redis, ms (default 5000). */
  commandTimeoutMs?: number;
  /** Where connection-state lines go (default: stderr). */
  log?: (line: string) => void;
  /**
   * Held before each request is handled, ms (default 0): the round trip to
   * a database in another region (Upstash is in one region; a data center
   * far from it is tens of milliseconds away), for the benchmarks.
   */
  latencyMs?: number;
}

export interface Gateway {
  url: string;
  port: number;
  /** From now on, holds every request this long first (GatewayOptions.latencyMs at runtime). */
  setLatency(ms: number): void;
  /** `true`: unreachable (open connections reset, new ones reset as they come) until `setDown(false)`. */
  setDown(down: boolean): void;
  close(): Promise<void>;
}

/** How long startGateway waits for redis before listening anyway (and answering 503). */
const INITIAL_CONNECT_WAIT_MS = 3000;
/** Longer than undici's default (4 s) so that a reused idle socket is not closed under the client. */
const KEEP_ALIVE_TIMEOUT_MS = 30_000;

interface Context {
  redis: RedisLink;
  authorized: (authorization: string | undefined) => boolean;
  log: (line: string) => void;
}

export async function startGateway(options: GatewayOptions): Promise<Gateway> {
  if (!options.token) throw new Error("startGateway: a non-empty token is required");
  if (!Number.isInteger(options.redisPort) || options.redisPort <= 0) {
    throw new Error(`startGateway: invalid redisPort ${options.redisPort}`);
  }
  const host = options.host ?? "127.0.0.1";
  const commandTimeoutMs = options.commandTimeoutMs ?? 5000;
  const log = options.log ?? ((line: string) => console.error(line));
  const redis = connectRedis({
    host: options.redisHost ?? "127.0.0.1",
    port: options.redisPort,
    commandTimeoutMs,
    log,
  });
  const context: Context = { redis, authorized: bearerCheck(options.token), log };

  let latencyMs = options.latencyMs ?? 0;
  let down = false;
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    const answer = () =>
      handle(req, res, context).catch((err: unknown) => {
        log(`gateway: unexpected failure: ${(err as Error)?.stack ?? String(err)}`);
        sendJson(res, 500, { error: "ERR internal gateway error" });
      });
    if (latencyMs > 0) setTimeout(answer, latencyMs);
    else void answer();
  });
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  server.on("connection", (socket: Socket) => {
    if (down) return void socket.resetAndDestroy();
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });

  try {
    await redis.waitReady(Math.min(INITIAL_CONNECT_WAIT_MS, commandTimeoutMs));
    await listen(server, options.port ?? 0, host);
  } catch (err) {
    await redis.close();
    throw err;
  }
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${host.includes(":") ? `[${host}]` : host}:${port}`,
    port,
    setLatency: (ms) => void (latencyMs = ms),
    setDown: (value) => {
      down = value;
      if (down) for (const socket of sockets) socket.resetAndDestroy();
    },
    close: once(() => closeGateway(server, redis)),
  };
}

async function handle(req: IncomingMessage, res: ServerResponse, context: Context): Promise<void> {
  try {
    if (!context.authorized(req.headers.authorization)) throw new HttpError(401, "Unauthorized");
    const { status, body } = await route(req, context.redis, wantsBase64(req));
    sendJson(res, status, body);
  } catch (err) {
    sendError(res, err, context);
  }
}

interface Answer {
  status: number;
  body: CommandResult | CommandResult[];
}

async function route(req: IncomingMessage, redis: RedisLink, base64: boolean): Promise<Answer> {
  const pathname = pathOf(req.url);
  if (req.method === "POST" && pathname === "/") {
    const command = parseCommand(parseJson(await readBody(req)));
    return single(await redis.single(command), base64);
  }
  if (req.method === "POST" && pathname === "/pipeline") {
    const commands = parseCommandList(parseJson(await readBody(req)));
    return { status: 200, body: (await redis.pipeline(commands)).map((o) => toResult(o, base64)) };
  }
  if (req.method === "POST" && pathname === "/multi-exec") {
    const commands = parseCommandList(parseJson(await readBody(req)));
    return { status: 200, body: (await redis.multiExec(commands)).map((o) => toResult(o, base64)) };
  }
  if (req.method === "GET" || req.method === "POST") {
    const body = req.method === "POST" ? await readBody(req) : undefined;
    return single(await redis.single(parsePathCommand(pathname, body)), base64);
  }
  throw new HttpError(405, `ERR method ${req.method ?? "?"} not allowed`);
}

function pathOf(url: string | undefined): string {
  try {
    return new URL(url ?? "/", "http://gateway").pathname;
  } catch {
    throw new HttpError(400, "ERR malformed request URL");
  }
}

/** A single command's Redis error is a 400, as Upstash answers it. */
function single(outcome: Settled, base64: boolean): Answer {
  return { status: outcome.ok ? 200 : 400, body: toResult(outcome, base64) };
}

function toResult(outcome: Settled, base64: boolean): CommandResult {
  return outcome.ok ? { result: encodeResult(outcome.reply, base64) } : { error: outcome.message };
}

/** @upstash/redis sends `Upstash-Encoding: base64` unless responseEncoding is false. */
function wantsBase64(req: IncomingMessage): boolean {
  return String(req.headers["upstash-encoding"] ?? "").toLowerCase() === "base64";
}

function sendError(res: ServerResponse, err: unknown, context: Context): void {
  if (err instanceof HttpError) {
    // After a 413 the rest of the body is still on the wire: do not reuse the socket.
    const headers = err.status === 413 ? { connection: "close" } : undefined;
    sendJson(res, err.status, { error: err.message }, headers);
    return;
  }
  if (err instanceof RedisReplyError) {
    sendJson(res, 400, { error: err.message });
    return;
  }
  if (err instanceof RedisUnavailableError) {
    sendJson(res, 503, { error: `ERR redis unavailable: ${err.message}` });
    return;
  }
  context.log(`gateway: unexpected failure: ${(err as Error)?.stack ?? String(err)}`);
  sendJson(res, 500, { error: "ERR internal gateway error" });
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

async function closeGateway(server: Server, redis: RedisLink): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  // server.close() alone would wait for idle keep-alive sockets to time out.
  server.closeAllConnections();
  await closed;
  await redis.close();
}

function once(fn: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  return () => (running ??= fn());
}
