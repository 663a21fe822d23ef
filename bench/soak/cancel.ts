// Visitors who leave: each request for a product on a socket of its own,
// closed 1–30 ms after it was sent, whatever the worker was doing with it. In
// Workers the request is then cancelled, and what it held (fills, limiter
// slots, locks) must not outlive it
// (docs/architecture.md#sharing-work-across-requests-in-one-isolate).
// Two shapes: the soak's cancellers, a small rate of Zipf-drawn products
// beside wrk's load; and the departing flood of `--flood departing`,
// connections each sending its next request as soon as it left the last one
// (also beside the soak's wrk with `--departing N`, startDepartingVisitors).
import { request } from "node:http";

export interface CancelCounts {
  /** Requests started. */
  sent: number;
  /** Written to the socket and closed before any answer came: really cancelled mid-request. */
  abortedInFlight: number;
  /** Closed before the request was even written (the worker never saw it). */
  abortedUnsent: number;
  /** Answered (headers in) before the close. */
  answered: number;
}

const TICK_MS = 20;
const zero = (): CancelCounts => ({ sent: 0, abortedInFlight: 0, abortedUnsent: 0, answered: 0 });

/**
 * One GET on a socket of its own, left 1–30 ms after it was sent: `left` is
 * called then, with how far it got (and the status, when answered first);
 * `closed` once its socket is closed. `client`: sent as `CF-Connecting-IP`,
 * the address the worker names a client by (none: no header).
 */
function sendAndLeave(
  url: string,
  on: { left(outcome: Exclude<keyof CancelCounts, "sent">, status: number): void; closed(): void },
  reported = true,
  client?: string,
): void {
  const req = request(url, { agent: false, ...(client ? { headers: { "CF-Connecting-IP": client } } : {}) });
  let status = 0;
  let written = false;
  req.on("response", (res) => ((status = res.statusCode ?? 0), res.resume().on("error", () => undefined)));
  req.on("finish", () => (written = true));
  req.on("error", () => undefined); // our own destroy() and its "socket hang up"
  req.on("close", on.closed);
  req.end();
  setTimeout(
    () => {
      const answered = status !== 0;
      on.left(answered ? "answered" : written ? "abortedInFlight" : "abortedUnsent", status);
      // A reset, as a closed tab or a lost mobile connection often is: workerd
      // cancels the request at once (a plain close it notices only when it
      // writes). Unreported: the plain close, as proxies and CDNs may leave a
      // departure to the worker, which then never hears of it.
      if (reported && req.socket && !answered) req.socket.resetAndDestroy();
      else req.destroy();
    },
    1 + Math.random() * 29,
  );
}

/** Resolves once `pending()` is 0 (2 s at most). */
async function drained(pending: () => number): Promise<void> {
  for (let waited = 0; pending() > 0 && waited < 2000; waited += 10) await new Promise((done) => setTimeout(done, 10));
}

/** The soak's cancellers: `perSecond` requests (changed with setRate) for `nextPath()`, spread over `targets`. */
export function startCancellers(targets: string[], nextPath: () => string, perSecond: number) {
  let rate = perSecond;
  let credit = 0;
  let counts = zero();
  const total = zero();
  let pending = 0;
  const count = (key: keyof CancelCounts) => (counts[key]++, total[key]++);

  const send = () => {
    const url = `${targets[total.sent % targets.length]}${nextPath()}`;
    count("sent");
    pending++;
    sendAndLeave(url, { left: (outcome) => count(outcome), closed: () => pending-- });
  };
  const timer = setInterval(() => {
    credit += (rate * TICK_MS) / 1000;
    for (; credit >= 1; credit--) send();
  }, TICK_MS);

  return {
    setRate: (perSecondNow: number) => void (rate = perSecondNow),
    get rate() {
      return rate;
    },
    /** Counts since the last call. */
    take(): CancelCounts {
      const taken = counts;
      counts = zero();
      return taken;
    },
    total,
    /** Stops sending; resolves once every socket is closed (at most ~30 ms later). */
    async stop(): Promise<void> {
      clearInterval(timer);
      await drained(() => pending);
    },
  };
}

/** What a departing flood did: its counts, and the statuses of the requests answered before their visitor left. */
export interface DepartingCounts extends CancelCounts {
  statuses: Record<string, number>;
}

/** One departing client's share of the flood: requests sent, left in flight (written, unanswered), answered before leaving (by status). */
export interface DepartingClientCounts {
  sent: number;
  abortedInFlight: number;
  answered: number;
  statuses: Record<string, number>;
}

/**
 * The departing flood: `connections` visitors, each in a closed loop: a
 * request for `nextPath()`, left 1–30 ms after it was sent, then at once the
 * next one; `reported`: left with a reset (workerd cancels the request), or
 * with a plain close (it never hears of it). `client(i)`: connection i's
 * address (`CF-Connecting-IP`, i from 0), its requests then also counted per
 * client in `clients`; without it no header, and `clients` stays empty.
 * `stop()` ends the loops and resolves once every socket is closed.
 */
export function startDepartingFlood(target: string, nextPath: () => string, connections: number, reported = true, client?: (i: number) => string) {
  const counts: DepartingCounts = { ...zero(), statuses: {} };
  const clients: Record<string, DepartingClientCounts> = {};
  // Sockets not closed yet, and requests not yet left (an answered one may close first).
  let pending = 0;
  let staying = 0;
  let stopped = false;
  const send = (address: string | undefined) => {
    if (stopped) return;
    const mine = address === undefined ? null : (clients[address] ??= { sent: 0, abortedInFlight: 0, answered: 0, statuses: {} });
    counts.sent++;
    if (mine) mine.sent++;
    pending++;
    staying++;
    sendAndLeave(
      `${target}${nextPath()}`,
      {
        left: (outcome, status) => {
          staying--;
          counts[outcome]++;
          if (status) counts.statuses[status] = (counts.statuses[status] ?? 0) + 1;
          if (mine && outcome !== "abortedUnsent") mine[outcome]++;
          if (mine && status) mine.statuses[status] = (mine.statuses[status] ?? 0) + 1;
          send(address);
        },
        closed: () => pending--,
      },
      reported,
      address,
    );
  };
  for (let i = 0; i < connections; i++) send(client?.(i));
  return {
    counts,
    /** Per client (with `client`), by address. */
    clients,
    /** Ends the loops; resolves once every request has left and its socket is closed (counts final). */
    async stop(): Promise<void> {
      stopped = true;
      await drained(() => pending + staying);
    },
  };
}

/**
 * The soak's `--departing N`: departing floods (startDepartingFlood) beside
 * wrk for the whole soak, the N connections spread over `targets` (instance
 * i gets ⌈N / instances⌉ or ⌊N / instances⌋). `take()` gives the counts, all
 * instances together, since its last call.
 */
export function startDepartingVisitors(targets: string[], nextPath: () => string, connections: number) {
  const floods = targets.map((target, i) =>
    startDepartingFlood(target, nextPath, Math.floor(connections / targets.length) + (i < connections % targets.length ? 1 : 0)),
  );
  const keys = ["sent", "abortedInFlight", "abortedUnsent", "answered"] as const;
  const sum = (): DepartingCounts => {
    const all: DepartingCounts = { ...zero(), statuses: {} };
    for (const { counts } of floods) {
      for (const key of keys) all[key] += counts[key];
      for (const [status, n] of Object.entries(counts.statuses)) all.statuses[status] = (all.statuses[status] ?? 0) + n;
    }
    return all;
  };
  let taken: DepartingCounts = { ...zero(), statuses: {} };
  return {
    /** Counts since the last call (all instances). */
    take(): DepartingCounts {
      const now = sum();
      const since: DepartingCounts = { ...zero(), statuses: {} };
      for (const key of keys) since[key] = now[key] - taken[key];
      for (const [status, n] of Object.entries(now.statuses)) if (n > (taken.statuses[status] ?? 0)) since.statuses[status] = n - (taken.statuses[status] ?? 0);
      taken = now;
      return since;
    },
    /** Counts since the start (all instances). */
    total: sum,
    /** Ends every loop; resolves once every socket is closed. */
    async stop(): Promise<void> {
      await Promise.all(floods.map((flood) => flood.stop()));
    },
  };
}
