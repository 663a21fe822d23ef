// Real HTTP requests to a worker started with `port`: visitors who leave
// (the test drops the connection mid-request), requests with headers that
// fetch() would not let a test set (Host), and a look at the isolate's
// gauges through GET /__status.json.
//
// How a visitor leaves matters. workerd notices a client's orderly close
// (FIN) only when it writes the response, so the request runs to its end as
// if nobody had left. A connection reset (RST: a tab killed, a network that
// went away, a proxy giving up) makes it cancel the request at once, as the
// edge does when a visitor goes away: the request's pending I/O, timers and
// promise continuations never run again, not even its `finally` blocks
// (docs/architecture.md#sharing-work-across-requests-in-one-isolate). So `abort()` resets.
import { request } from "node:http";
import { freePort } from "../../dev/harness/ports";
import { PURGE_TOKEN, type Stack } from "./stack";
import { startWorker, type WorkerInstance } from "./worker";

/** A worker serving real HTTP on a free port; the port may be taken before workerd binds it, so it tries three. */
export async function startHttpWorker(bindings: Stack["bindings"]): Promise<WorkerInstance> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await startWorker(bindings, { port: await freePort() });
    } catch (error) {
      lastError = error;
    }
  }
  throw lastError;
}

export interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A GET over a connection of its own, with any headers, Host included (which fetch() would not let a test set). */
export function httpGet(baseUrl: string, path: string, headers: Record<string, string> = {}): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(baseUrl + path, { agent: false, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

export type VisitOutcome = { kind: "aborted" } | { kind: "answered"; status: number } | { kind: "failed"; message: string };

export interface Visit {
  /** Settles once the client's side is over: reset by us, answered, or failed otherwise. */
  done: Promise<VisitOutcome>;
  /** Resets the connection now (TCP RST), unless the answer came already. Idempotent. */
  abort(): void;
  /** Whether abort() was called before any answer came. */
  readonly aborted: boolean;
}

/** Starts a GET of `path` on `baseUrl` (a worker's `url`) on a connection of its own. */
export function visit(baseUrl: string, path: string): Visit {
  let aborted = false;
  let answered = false;
  let settle: (outcome: VisitOutcome) => void = () => undefined;
  const done = new Promise<VisitOutcome>((resolve) => (settle = resolve));
  const req = request(baseUrl + path, { agent: false });
  req.on("response", (res) => {
    answered = true;
    res.resume();
    res.on("end", () => settle({ kind: "answered", status: res.statusCode ?? 0 }));
    res.on("error", () => settle({ kind: "answered", status: res.statusCode ?? 0 }));
  });
  req.on("error", (error) => settle(aborted ? { kind: "aborted" } : { kind: "failed", message: error.message }));
  req.on("close", () => {
    if (aborted) settle({ kind: "aborted" });
  });
  req.end();
  return {
    done,
    get aborted() {
      return aborted;
    },
    abort() {
      if (aborted || answered) return;
      aborted = true;
      // Without a socket yet, nothing has left this process: destroying is enough.
      req.socket?.resetAndDestroy();
      req.destroy();
    },
  };
}

/** The parts of GET /__status.json these tests read (older builds lack the gauges: undefined). */
export interface TierStatus {
  originSlots?: { inUse: number; queued: number; reclaimed: number };
  fills?: { inFlight: number; takenOver: number };
  overload?: {
    admission: { coldPages: number };
    departures: { pagesLeft: number; fillsStopped: number; fillsFinished: number; fillsDropped: number };
  };
  purges: { syncAgeMs: number | null };
  l2: { shards: { name: string; state: string }[] };
}

export async function tierStatus(worker: WorkerInstance): Promise<TierStatus> {
  const response = await worker.fetch("/__status.json", { headers: { authorization: `Bearer ${PURGE_TOKEN}` } });
  if (response.status !== 200) throw new Error(`/__status.json answered ${response.status}`);
  return (await response.json()) as TierStatus;
}

/**
 * Polls `read` every 100 ms until `done(value)`; on timeout throws, naming
 * `what` and the last value read, so that a failure says what the isolate
 * was stuck at.
 */
export async function pollUntil<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last seen: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
