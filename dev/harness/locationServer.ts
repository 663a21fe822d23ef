// A data center's cache for the benchmarks, in a process of its own: what
// workerd's Cache API calls (its `cacheApiOutbound` service) reach on
// Cloudflare, shared by the isolates of one location and outside each of
// them. Miniflare's own implementation (used by the tests) runs inside the
// workerd process under test, as JavaScript over SQLite: its work counts as
// the isolate's CPU, and two workerd processes sharing its folder lose puts
// to SQLITE_BUSY. Neither is true of the location the tier is built for, so
// the benchmarks' isolates share this one instead (bench/soak/README.md).
//
// The protocol (workerd → the cache service; Miniflare's cache worker speaks
// the same): `match` is a GET of the key's URL, answered with
// `CF-Cache-Status: HIT` and the stored response, or `MISS`; `put` is a PUT
// whose body is the response serialised as HTTP/1.1 (status line, headers,
// blank line, body), answered 204 (stored) or 413 (refused); `delete` is a
// PURGE, answered 200 or 404. Named caches (`caches.open`) carry
// `CF-Cache-Namespace`. What it keeps: responses with an explicit lifetime
// (`s-maxage`, `max-age` or `Expires`), not `private` or `no-store`, no
// `Set-Cookie`, no `Vary: *`, for that lifetime, least recently used first
// out past `maxBytes` (lru-cache). Not implemented, because the tier never
// asks: ranges, conditional requests, `Vary` on request headers.
import { fork } from "node:child_process";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { LRUCache } from "lru-cache";
import { readBodyUpTo } from "./body";
import { stopChild } from "./children";

/** One stored response: its status, its headers as stored, its body, and when it was put (for `Age`). */
interface Stored {
  status: number;
  headers: [string, string][];
  body: Buffer;
  putAt: number;
}

export interface LocationServerStats {
  matches: number;
  hits: number;
  puts: number;
  refused: number;
  purges: number;
  entries: number;
  bytes: number;
}

export interface LocationServer {
  /** host:port, as workerd's external service address. */
  address: string;
  stats(): LocationServerStats;
  close(): Promise<void>;
}

/** Largest response a put may carry (Cloudflare's limit is far higher; the tier's copies are tens of KB at most). */
const MAX_PUT_BYTES = 8 * 1024 * 1024;

/** The response's lifetime in ms from its Cache-Control or Expires; undefined: not to be kept. */
export function lifetimeMs(headers: readonly [string, string][], now: number): number | undefined {
  const get = (name: string) => headers.find(([key]) => key.toLowerCase() === name)?.[1];
  if (get("set-cookie") !== undefined || get("vary")?.trim() === "*") return undefined;
  const directives = new Map(
    (get("cache-control") ?? "")
      .split(",")
      .map((part) => part.trim().toLowerCase())
      .filter(Boolean)
      .map((part) => {
        const [name, value] = part.split("=", 2);
        return [name!.trim(), value?.trim().replace(/^"|"$/g, "")] as const;
      }),
  );
  if (directives.has("private") || directives.has("no-store") || directives.has("no-cache")) return undefined;
  const seconds = Number(directives.get("s-maxage") ?? directives.get("max-age") ?? Number.NaN);
  if (Number.isFinite(seconds)) return seconds > 0 ? seconds * 1000 : undefined;
  const expires = Date.parse(get("expires") ?? "");
  return Number.isFinite(expires) && expires > now ? expires - now : undefined;
}

/** An HTTP/1.1 response message (as workerd serialises a put): status, headers, body; undefined if malformed. */
function parseResponseMessage(message: Buffer): Omit<Stored, "putAt"> | undefined {
  const end = message.indexOf("\r\n\r\n");
  if (end < 0) return undefined;
  const [statusLine, ...lines] = message.subarray(0, end).toString("latin1").split("\r\n");
  const status = /^HTTP\/\d(?:\.\d)? (\d{3})(?: .*)?$/.exec(statusLine ?? "");
  if (!status) return undefined;
  const headers: [string, string][] = [];
  for (const line of lines) {
    const colon = line.indexOf(":");
    if (colon <= 0) return undefined;
    headers.push([line.slice(0, colon).trim(), line.slice(colon + 1).trim()]);
  }
  return { status: Number(status[1]), headers, body: message.subarray(end + 4) };
}

/** Starts the cache on 127.0.0.1:`port` (0: one the OS picks), holding at most `maxBytes`. */
export async function startLocationServer(options: { maxBytes: number; port?: number }): Promise<LocationServer> {
  const store = new LRUCache<string, Stored>({
    maxSize: options.maxBytes,
    sizeCalculation: (stored) => Math.max(1, stored.body.length + stored.headers.reduce((n, [k, v]) => n + k.length + v.length, 0)),
  });
  const stats = { matches: 0, hits: 0, puts: 0, refused: 0, purges: 0 };

  const server: Server = createServer((request, response) => {
    const namespace = request.headers["cf-cache-namespace"];
    const key = `${typeof namespace === "string" ? namespace : ""} ${request.url ?? ""}`;
    const answer = (status: number, headers: Record<string, string> = {}, body?: Buffer) => {
      response.writeHead(status, { ...headers, "Content-Length": String(body?.length ?? 0) });
      response.end(body);
    };
    void (async () => {
      if (request.method === "GET") {
        stats.matches++;
        const stored = store.get(key);
        if (!stored) return answer(504, { "CF-Cache-Status": "MISS" });
        stats.hits++;
        response.writeHead(stored.status, [
          ...stored.headers.filter(([name]) => !/^(content-length|age|cf-cache-status)$/i.test(name)).flat(),
          ...["Age", String(Math.floor((Date.now() - stored.putAt) / 1000)), "CF-Cache-Status", "HIT", "Content-Length", String(stored.body.length)],
        ]);
        return response.end(stored.body);
      }
      if (request.method === "PUT") {
        const message = await readBodyUpTo(request, MAX_PUT_BYTES);
        const parsed = message && parseResponseMessage(message);
        const now = Date.now();
        const ttl = parsed && lifetimeMs(parsed.headers, now);
        if (!parsed || ttl === undefined) {
          stats.refused++;
          return answer(413);
        }
        store.set(key, { ...parsed, body: Buffer.from(parsed.body), putAt: now }, { ttl });
        stats.puts++;
        return answer(204);
      }
      if (request.method === "PURGE") {
        stats.purges++;
        return answer(store.delete(key) ? 200 : 404);
      }
      // The statistics, for a benchmark's report.
      if (request.method === "POST" && request.url === "/__stats") {
        return answer(200, { "Content-Type": "application/json" }, Buffer.from(JSON.stringify({ ...stats, entries: store.size, bytes: store.calculatedSize })));
      }
      answer(405);
    })().catch(() => answer(500));
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    stats: () => ({ ...stats, entries: store.size, bytes: store.calculatedSize }),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A data center's cache holds far more than an isolate: a whole 100,000-product catalog's parts take about 1 GB. */
const DATA_CENTER_BYTES = 2 * 1024 * 1024 * 1024;

/** The cache in a child process of its own (locationChild.ts), so that no load generator's event loop delays it, holding DATA_CENTER_BYTES. */
export async function forkLocationServer(): Promise<Omit<LocationServer, "stats"> & { pid: number; stats(): Promise<LocationServerStats> }> {
  const child = fork(fileURLToPath(new URL("./locationChild.ts", import.meta.url)), [], {
    execArgv: ["--import", "tsx"],
    env: { ...process.env, LOCATION_SERVER_MAX_BYTES: String(DATA_CENTER_BYTES) },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const address = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the location server did not start within 30 s")), 30_000);
    child.once("exit", (code) => reject(new Error(`the location server exited (${code}) before it listened`)));
    child.on("message", (message: { type: string; address?: string; message?: string }) => {
      clearTimeout(timer);
      if (message.type === "ready" && message.address) resolve(message.address);
      else reject(new Error(`the location server failed: ${message.message ?? "no reason given"}`));
    });
  }).catch(async (err: unknown) => {
    await stopChild(child, 5_000);
    throw err;
  });
  return {
    address,
    pid: child.pid ?? 0,
    async stats() {
      const response = await fetch(`http://${address}/__stats`, { method: "POST" });
      return (await response.json()) as LocationServerStats;
    },
    close: () => stopChild(child, 5_000),
  };
}
