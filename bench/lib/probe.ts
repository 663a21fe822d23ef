// What the soak reads besides wrk's figures: single pages on sockets of their
// own, each instance's /__status.json and its V8 heap (through workerd's
// inspector), what changed in them over a window, and the worker's log lines
// it counts.
import { once } from "node:events";
import { request, type IncomingHttpHeaders } from "node:http";
import WebSocket from "ws";

const PURGE_TOKEN = "bench-purge-token"; // bench/stack.ts's bindings
const MB = 1024 * 1024;

/** `status` 0: no answer (socket error or timeout). */
export interface Answer {
  status: number;
  ms: number;
  /** The answer's headers (absent without an answer). */
  headers?: IncomingHttpHeaders;
  /** The answer's body, when asked for (`keepBody`). */
  body?: string;
}

/** One GET on a socket of its own and without accept-encoding, as wrk sends them; its body kept with `keepBody`. */
export function get(url: string, timeoutMs = 10_000, keepBody = false): Promise<Answer> {
  const started = performance.now();
  return new Promise((done) => {
    const answer = (status: number, headers?: IncomingHttpHeaders, body?: string) =>
      done({ status, ms: Math.round((performance.now() - started) * 100) / 100, ...(headers ? { headers } : {}), ...(body === undefined ? {} : { body }) });
    const req = request(url, { agent: false, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      if (keepBody) res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => answer(res.statusCode ?? 0, res.headers, keepBody ? Buffer.concat(chunks).toString("utf8") : undefined)).on("error", () => answer(0));
      if (!keepBody) res.resume();
    });
    req
      .on("timeout", () => req.destroy())
      .on("error", () => answer(0))
      .end();
  });
}

/** `requests` GETs of `path` at once, each on a socket of its own, spread over `targets`: the cold herd of bench:soak and bench:peers. */
export async function herd(targets: readonly string[], path: string, requests: number): Promise<{ answers: Answer[]; seconds: number }> {
  const started = performance.now();
  const answers = await Promise.all(Array.from({ length: requests }, (_, i) => get(`${targets[i % targets.length]}${path}`, 30_000)));
  return { answers, seconds: (performance.now() - started) / 1000 };
}

/** Answers by status ("no answer" for 0). */
export const countStatuses = (answers: readonly Answer[]) =>
  answers.reduce<Record<string, number>>((c, a) => ((c[a.status || "no answer"] = (c[a.status || "no answer"] ?? 0) + 1), c), {});

/** The `p`th percentile of ascending `sorted`. */
export const percentile = (sorted: readonly number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;

/**
 * The fields of /__status.json the soak reads (src/observability/status.ts).
 * The last three are being added to the worker: absent, they print "n/a".
 */
export interface Status {
  isolate: { startedAt: string };
  last15m: {
    from: number;
    pages: number;
    outcomes: { ok: number; absent: number; filtered: number; unavailable: number };
    total: Tiers;
    originTotal: OriginCalls;
  };
  l2: { stats: L2Stats | null };
  breakerChanges: { name: string; since: number | null }[];
  /** `entries`: what L1 holds, counted in entries (one per resource of a product); `evictions`: entries its byte bound pushed out since the isolate started. */
  l1: { bytes: number; entries?: number; evictions?: number };
  /** The location tier (the data center's Cache API): `stats` null when it is off. */
  location?: { enabled: boolean; stats: LocationStats | null };
  breakerTransitions?: Record<string, number>;
  originSlots?: { inUse: number; queued: number; reclaimed: number };
  fills?: { inFlight: number; takenOver: number };
  /** What the worker shed under load (pages, fills dropped or stopped...), being added to it: read generically (numericChanges). */
  overload?: Record<string, unknown>;
  /** The settings the isolate runs with (those the benchmarks read). */
  config?: { purgePollMs: number; l2TimeoutMs: number; policies: Record<string, { ttl: number; core: boolean; originTimeoutMs: number }> };
}
interface Tiers {
  l1: number;
  /** Absent from a worker without the location tier: read as 0. */
  location: number;
  l2: number;
  origin: number;
  failed: number;
}
/** Origin calls the worker made (`fetches`, of which `errors` failed) and did not make (`shed`: queue full, breaker open). */
interface OriginCalls {
  fetches: number;
  errors: number;
  shed: number;
}
/**
 * src/cache/location/location.ts' LocationStats, read by name (lookups, hits, purged,
 * unvouched...): parts looked up, copies served, copies turned down, puts.
 */
type LocationStats = Record<string, number>;
interface L2Stats {
  skipped: number;
  failures: number;
  droppedWrites: number;
  /** Failures the breaker counted as Redis's: time-outs, other errors. */
  countedTimeouts: number;
  countedErrors: number;
  /** Times those time-outs would have opened the breaker and Redis answered a direct probe. */
  outagesDismissed: number;
}

export async function statusOf(url: string): Promise<Status | null> {
  try {
    const res = await fetch(`${url}/__status.json`, { headers: { authorization: `Bearer ${PURGE_TOKEN}` }, signal: AbortSignal.timeout(5000) });
    return res.ok ? ((await res.json()) as Status) : null;
  } catch {
    return null;
  }
}

interface Heap {
  /** Runtime.getHeapUsage's usedSize, as found. */
  usedMB: number;
  /** The same after a full GC (HeapProfiler.collectGarbage): what is really held. */
  afterGcMB: number;
}

/** An instance's heap, read over the DevTools protocol (a second try if the first fails); null when it cannot be read. */
async function heapOf(worker: { url: string; inspector?: string }): Promise<Heap | null> {
  if (!worker.inspector) return null;
  for (let attempt = 1; ; attempt++) {
    try {
      return await readHeap(worker.inspector, worker.url);
    } catch (err) {
      console.error(`heap of ${worker.url}: ${String(err)}${attempt === 1 ? "; trying again" : ""}`);
      if (attempt === 2) return null;
    }
  }
}

async function readHeap(inspector: string, url: string): Promise<Heap> {
  const ws = new WebSocket(inspector);
  const replies = new Map<number, (result: { usedSize: number }) => void>();
  ws.on("message", (data: Buffer) => {
    const message = JSON.parse(String(data)) as { id?: number; result: { usedSize: number } };
    if (message.id !== undefined) replies.get(message.id)?.(message.result);
  });
  let nextId = 0;
  const call = (method: string) =>
    new Promise<{ usedSize: number }>((done) => {
      replies.set(++nextId, done);
      ws.send(JSON.stringify({ id: nextId, method }));
    });
  let poke: NodeJS.Timeout | undefined;
  const read = async (): Promise<Heap> => {
    await once(ws, "open");
    const found = await call("Runtime.getHeapUsage");
    // workerd runs the GC (and answers) when the isolate next takes a request:
    // an idle one (before or after the load) is given some /healthz to do.
    poke = setInterval(() => void get(`${url}/healthz`), 200);
    await call("HeapProfiler.collectGarbage");
    clearInterval(poke);
    const kept = await call("Runtime.getHeapUsage");
    return { usedMB: round1(found.usedSize / MB), afterGcMB: round1(kept.usedSize / MB) };
  };
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([read(), new Promise<never>((_, fail) => (timer = setTimeout(() => fail(new Error("no answer in 10 s")), 10_000)))]);
  } finally {
    clearTimeout(timer);
    clearInterval(poke);
    ws.terminate();
  }
}

/** One instance, read at the end of a window. */
export interface Snapshot {
  at: number;
  status: Status | null;
  heap: Heap | null;
}

/** Each instance's status now (and its heap, read over the inspector, with `heap`). */
export function snapshots(workers: readonly { url: string; inspector?: string }[], heap = false): Promise<Snapshot[]> {
  return Promise.all(workers.map(async (w) => ({ at: Date.now(), status: await statusOf(w.url), heap: heap ? await heapOf(w) : null })));
}

/** What changed in one instance between two snapshots; null where the status could not say. */
export interface Change {
  /** Resource answers by tier; null once the status' 15 minutes no longer reach back to the isolate's start. */
  tiers: Tiers | null;
  /** Product pages the isolate answered (every outcome); null as `tiers`. */
  pages: number | null;
  workerOrigin: OriginCalls | null;
  l2: L2Stats | null;
  /** What the location tier did in the window; null when it is off (or the worker has none). */
  location: LocationStats | null;
  /** Breaker state changes: exact with `breakerTransitions`, else breakers whose last change fell in the window (a floor). */
  breakers: { count: number; exact: boolean; names: string[] } | null;
  slots: Status["originSlots"] | null;
  fills: Status["fills"] | null;
  heap: Heap | null;
  /** What L1 says it holds (its own byte count, capped by L1_MAX_BYTES): the heap grows with it until it is full. */
  l1MB: number | null;
  /** Cold pages admission shed in the window (after their wait or with no room to wait, on arrival past their client's share), and what they got (every part from a stale copy, or a part missing: a 503, a 429 or a default). */
  shed: { busy: number; overShare: number; stale: number; refused: number } | null;
}

export function change(before: Snapshot, after: Snapshot): Change {
  const [a, b] = [before.status, after.status];
  const covered = a && b && Date.parse(b.isolate.startedAt) >= b.last15m.from;
  const minus = <T extends object>(x: T, y: T) =>
    Object.fromEntries(Object.keys(x).map((k) => [k, (x[k as keyof T] as number) - (y[k as keyof T] as number)])) as T;
  let breakers: Change["breakers"] = null;
  if (a && b?.breakerTransitions) {
    const moved = Object.entries(b.breakerTransitions)
      .map(([name, n]) => [name, n - (a.breakerTransitions?.[name] ?? 0)] as const)
      .filter(([, n]) => n > 0);
    breakers = { count: moved.reduce((sum, [, n]) => sum + n, 0), exact: true, names: moved.map(([name]) => name) };
  } else if (b) {
    const moved = b.breakerChanges.filter((note) => note.since !== null && note.since > before.at && note.since <= after.at);
    breakers = { count: moved.length, exact: false, names: moved.map((note) => note.name) };
  }
  return {
    tiers: covered ? minus(pickTiers(b.last15m.total), pickTiers(a.last15m.total)) : null,
    pages: covered ? b.last15m.pages - a.last15m.pages : null,
    workerOrigin: covered ? minus(pickOrigin(b.last15m.originTotal), pickOrigin(a.last15m.originTotal)) : null,
    l2: a?.l2.stats && b?.l2.stats ? minus(pickL2(b.l2.stats), pickL2(a.l2.stats)) : null,
    location: a?.location?.stats && b?.location?.stats ? minus(b.location.stats, a.location.stats) : null,
    breakers,
    slots: b?.originSlots ?? null,
    fills: b?.fills ?? null,
    heap: after.heap,
    l1MB: b ? round1(b.l1.bytes / MB) : null,
    shed: shedChange(a?.overload, b?.overload),
  };
}

/** Admission's shed counts (status `overload.admission`) moved between two readings; null when either lacks them. */
function shedChange(before: Status["overload"], after: Status["overload"]): Change["shed"] {
  const pick = (o: Status["overload"]) => {
    const admission = o?.admission as { shed?: { busy?: number; overShare?: number }; shedServedStale?: number; shedRefused?: number } | undefined;
    if (typeof admission?.shed?.busy !== "number") return null;
    const { busy, overShare = 0 } = admission.shed;
    return { busy, overShare, stale: admission.shedServedStale ?? 0, refused: admission.shedRefused ?? 0 };
  };
  const [x, y] = [pick(before), pick(after)];
  if (!x || !y) return null;
  return {
    busy: y.busy - x.busy,
    overShare: y.overShare - x.overShare,
    stale: y.stale - x.stale,
    refused: y.refused - x.refused,
  };
}

/** One number of a status section (nested keys joined with "."), and how much it moved since the earlier reading (null: not there then). */
export interface NumericChange {
  key: string;
  value: number;
  change: number | null;
}

/** Every number in `after` (nested objects flattened), with its change since `before`: a section read without knowing its fields. */
export function numericChanges(before: unknown, after: unknown, prefix = ""): NumericChange[] {
  if (typeof after === "number") return [{ key: prefix, value: after, change: typeof before === "number" ? after - before : null }];
  if (after === null || typeof after !== "object" || Array.isArray(after)) return [];
  const earlier = before !== null && typeof before === "object" ? (before as Record<string, unknown>) : {};
  return Object.entries(after).flatMap(([key, value]) => numericChanges(earlier[key], value, prefix ? `${prefix}.${key}` : key));
}

/** The worker log lines the soak counts: unhandled errors, I/O from another request's context, workerd's cross-request promise warning. */
export interface LogCounts {
  unhandled: number;
  io: number;
  crossRequest: number;
}

export function countLogLine(counts: LogCounts, line: string): void {
  if (line.includes("unhandled_error")) counts.unhandled++;
  if (line.includes("Cannot perform I/O")) counts.io++;
  // workerd's warning when a promise of a finished or cancelled request is settled from another one.
  if (line.includes("from a different request context")) counts.crossRequest++;
}

const pickTiers = ({ l1, location, l2, origin, failed }: Tiers): Tiers => ({ l1, location: location ?? 0, l2, origin, failed });
const pickOrigin = ({ fetches, errors, shed }: OriginCalls): OriginCalls => ({ fetches, errors, shed });
const pickL2 = ({ skipped, failures, droppedWrites, countedTimeouts, countedErrors, outagesDismissed }: L2Stats): L2Stats => ({
  skipped,
  failures,
  droppedWrites,
  countedTimeouts,
  countedErrors,
  outagesDismissed,
});
const round1 = (value: number) => Math.round(value * 10) / 10;
