// Serves a fetch handler (a Hono app's `app.fetch`) from node:http: the
// Request/Response conversion of @hono/node-server, which this project does
// not depend on, cut to what the demo origin needs. The handler also gets
// the node request (`c.env.incoming`, as with @hono/node-server), so that a
// fault can hang on its socket or destroy it.
import type { IncomingMessage, ServerResponse } from "node:http";
import { Readable } from "node:stream";

export interface NodeBindings {
  incoming: IncomingMessage;
}

type FetchHandler = (request: Request, env: NodeBindings) => Response | Promise<Response>;

/** A node:http "request" listener; `baseUrl` (scheme, host, port) is what requests' URLs are built on. */
export function nodeListener(fetch: FetchHandler, baseUrl: string): (incoming: IncomingMessage, outgoing: ServerResponse) => void {
  return (incoming, outgoing) => {
    respond(fetch, baseUrl, incoming, outgoing).catch((err: unknown) => {
      console.error("demo origin: unexpected error", err);
      if (!outgoing.headersSent) outgoing.writeHead(500);
      outgoing.end();
    });
  };
}

async function respond(fetch: FetchHandler, baseUrl: string, incoming: IncomingMessage, outgoing: ServerResponse): Promise<void> {
  let request: Request;
  try {
    request = toRequest(incoming, baseUrl);
  } catch {
    // A target or a header that node's parser let through and the URL or Headers parser does not.
    outgoing.writeHead(400, { connection: "close" }).end();
    return;
  }
  const response = await fetch(request, { incoming });
  // Whole answers only: the demo origin's are small, and a hang happens before its Response exists.
  const body = response.body === null ? undefined : await readAll(response.body);
  // Destroyed by the handler (a refused connection) or gone with the client.
  if (outgoing.destroyed || incoming.socket.destroyed) return;
  // No cookies here: forEach would join several set-cookie headers into one.
  const headers: Record<string, string | number> = {};
  response.headers.forEach((value, key) => (headers[key] = value));
  if (body !== undefined) headers["content-length"] = body.byteLength;
  outgoing.writeHead(response.status, headers).end(body);
}

/** A reader loop: undici's arrayBuffer() costs several times as much (some 15 µs) for bodies this small. */
async function readAll(stream: ReadableStream<Uint8Array>): Promise<Buffer> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) chunks.push(chunk.value);
  return Buffer.concat(chunks);
}

function toRequest(incoming: IncomingMessage, baseUrl: string): Request {
  const method = incoming.method ?? "GET";
  const url = baseUrl + (incoming.url ?? "/");
  if (method === "GET" || method === "HEAD") return new LazyRequest(method, new URL(url).href, incoming) as unknown as Request;
  // The body streams in as the handler reads it: what it reads is bounded there (hono/body-limit), never here.
  // duplex: node's fetch requires it for a stream body; the Workers types this project compiles with lack it.
  const init = { method, headers: headersOf(incoming), body: Readable.toWeb(incoming) as ReadableStream, duplex: "half" };
  return new Request(url, init as RequestInit);
}

function headersOf(incoming: IncomingMessage): Headers {
  const headers = new Headers();
  const raw = incoming.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) headers.append(raw[i] as string, raw[i + 1] as string);
  return headers;
}

/**
 * A bodiless request as the handler gets it: its method, url and headers,
 * and undici's Request (some 10 µs to build, as much as a route's own work)
 * only if the handler asks for anything else. Routing and hono's validators
 * read no more, so the origin's hot path (GET /products/{id} at wrk's rate)
 * never builds one; @hono/node-server does the same.
 */
class LazyRequest {
  private cachedHeaders: Headers | undefined;
  private cachedRequest: Request | undefined;

  constructor(
    readonly method: string,
    readonly url: string,
    private readonly incoming: IncomingMessage,
  ) {}

  get headers(): Headers {
    return (this.cachedHeaders ??= headersOf(this.incoming));
  }

  real(): Request {
    return (this.cachedRequest ??= new Request(this.url, { method: this.method, headers: this.headers }));
  }
}

for (const key of ["body", "bodyUsed", "cache", "credentials", "integrity", "keepalive", "mode", "redirect", "referrer", "referrerPolicy", "signal"] as const) {
  Object.defineProperty(LazyRequest.prototype, key, {
    get(this: LazyRequest) {
      return (this.real() as unknown as Record<string, unknown>)[key];
    },
  });
}
for (const key of ["arrayBuffer", "blob", "clone", "formData", "json", "text"] as const) {
  Object.defineProperty(LazyRequest.prototype, key, {
    value(this: LazyRequest) {
      return this.real()[key]();
    },
  });
}
