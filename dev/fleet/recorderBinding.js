// The Workers Analytics Engine binding's stand-in for local runs: Miniflare
// loads this module as a wrapped binding, `env.url` being the recorder's
// points address (dev/fleet/recorder.ts, `POST /points`) and `env.dataset` the
// dataset's name. It runs inside the worker's isolate, in the context of the
// request that calls `writeDataPoint`, and imports nothing (a wrapped binding
// cannot import `cloudflare:workers`, so it has no `waitUntil` of its own).
//
// What it does: `writeDataPoint(point)` checks the point no more than AE does
// (at most 1 index, 20 blobs, 20 doubles, of the right types), stamps it with
// the dataset and the time, and buffers a copy; the buffer goes to the
// recorder in one POST about FLUSH_MS later, as JSON
// `{ points: [...], dropped: n }`.
//
// One difference from AE, whose writeDataPoint returns nothing: while no
// flush is under way, a write returns `{ deliver() }`, and a caller that can
// keep work alive (a request's `ctx.waitUntil`) calls `deliver()` and keeps
// the promise it gets (src/observability/fleet.ts does); otherwise the points
// wait for the next such caller. Why each part is as it is:
// - workerd cancels the I/O (timers, fetches) of a request context that
//   nobody keeps alive once its response is sent. A flush lives in the context
//   of the request that started it, so only a caller that keeps it alive may
//   start one: a write made in work nobody keeps (an origin call's outcome, a
//   breaker's change) only buffers its point.
// - The caller that started it may still not keep it (a request cancelled):
//   its flush then never settles, neither resolving nor rejecting. So a flush
//   is a lease with a deadline (LEASE_MS): past it, the next `deliver()`
//   starts a new flush as if none were pending.
// - Only plain data crosses request contexts: a promise, a stream or a
//   Response made in one request cannot be used in another. So the buffer holds
//   plain copies of the points, shared by every request of the isolate.
// - A flush may die at any point, its POST on the way included (its request
//   ends, and nobody kept it alive). So points leave the buffer only once the
//   recorder has said it stored them: a flush sends copies of what is buffered
//   when its wait ends, and on a 2xx removes the points it sent; a flush that
//   dies leaves them for the next one. Each point carries an id (this
//   isolate's nonce and a count), and the recorder stores an id once: a batch
//   sent twice (its answer lost) is not counted twice.
// - The returned promise never rejects (a rejection in waitUntil is logged as
//   an error of the worker's): a POST that fails (no answer, a 5xx) leaves its
//   points in the buffer; one the recorder refuses (a 4xx: malformed, too
//   large) is dropped and counted, as it would be refused again.
// - Points written while a batch is on its way go in a next round of the same
//   flush, while its lease lasts; after that, with the next write's flush.
// - The buffer is bounded (MAX_BUFFERED): with the recorder away the isolate
//   would otherwise grow without end. Past it the oldest points go, counted,
//   and the count travels as `dropped` with the next batch that is delivered.

/** How long a flush waits for more points before it sends them. */
const FLUSH_MS = 100;
/** How long a pending flush holds the lease: past it, a write starts a new one. */
const LEASE_MS = 2_000;
/** At most this many points wait in the isolate; past it the oldest are dropped. */
const MAX_BUFFERED = 10_000;
/** At most this many points go in one POST (a full buffer takes a few rounds). */
const MAX_BATCH = 2_000;
const MAX_INDEXES = 1;
const MAX_BLOBS = 20;
const MAX_DOUBLES = 20;

/**
 * One queue per recorder address, shared by every request of the isolate and by every binding that
 * names that address (several datasets may share one): `buffered`, the points waiting to be sent,
 * oldest first, plain data only; `dropped`, the points dropped since the last delivered batch;
 * `lease`, the pending flush (`{ deadline }`, ms since the epoch) or null.
 */
const queues = new Map();

function queueFor(url) {
  let queue = queues.get(url);
  if (!queue) queues.set(url, (queue = { buffered: [], dropped: 0, lease: null }));
  return queue;
}

const decoder = new TextDecoder();

/** A blob or index as AE takes it (a string, bytes, or null), as the string the recorder stores. */
function text(value, what) {
  if (value === null || value === undefined) return null;
  if (typeof value === "string") return value;
  if (value instanceof ArrayBuffer) return decoder.decode(value);
  if (ArrayBuffer.isView(value)) return decoder.decode(value);
  throw new TypeError(`writeDataPoint: ${what} must be a string, an ArrayBuffer or null`);
}

/** The point as plain data, or a TypeError where AE would throw one. */
function copyOf(point) {
  const { indexes = [], blobs = [], doubles = [] } = point ?? {};
  if (!Array.isArray(indexes) || indexes.length > MAX_INDEXES) throw new TypeError(`writeDataPoint: indexes must be an array of at most ${MAX_INDEXES}`);
  if (!Array.isArray(blobs) || blobs.length > MAX_BLOBS) throw new TypeError(`writeDataPoint: blobs must be an array of at most ${MAX_BLOBS}`);
  if (!Array.isArray(doubles) || doubles.length > MAX_DOUBLES) throw new TypeError(`writeDataPoint: doubles must be an array of at most ${MAX_DOUBLES}`);
  for (const value of doubles) {
    if (typeof value !== "number") throw new TypeError("writeDataPoint: doubles must be numbers");
  }
  return {
    indexes: indexes.map((value) => text(value, "an index")),
    blobs: blobs.map((value) => text(value, "a blob")),
    doubles: [...doubles],
  };
}

/** Keeps the queue's buffer within MAX_BUFFERED, dropping (and counting) the oldest. */
function trim(queue) {
  const excess = queue.buffered.length - MAX_BUFFERED;
  if (excess > 0) {
    queue.buffered.splice(0, excess);
    queue.dropped += excess;
  }
}

/** Waits FLUSH_MS, then sends what is buffered then; again while points keep coming within the lease. Never rejects. */
async function flush(url, queue, held) {
  try {
    do {
      await new Promise((resolve) => setTimeout(resolve, FLUSH_MS));
      // Copies of what is buffered now (what was written meanwhile goes too); they leave the buffer once stored.
      const points = queue.buffered.slice(0, MAX_BATCH);
      const lost = queue.dropped;
      if (points.length === 0 && lost === 0) return;
      let status = 0;
      try {
        const response = await fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ points, dropped: lost }),
        });
        status = response.status;
        await response.arrayBuffer();
      } catch {
        status = 0;
      }
      // The recorder is away or failed: the points stay, for the next flush.
      if (status < 200 || (status >= 300 && status < 400) || status >= 500) return;
      const sent = new Set(points.map((point) => point.id));
      queue.buffered = queue.buffered.filter((point) => !sent.has(point.id));
      queue.dropped -= lost;
      // Refused (malformed, or too large): sending it again would be refused again.
      if (status >= 400) {
        queue.dropped += points.length;
        return;
      }
    } while (queue.buffered.length > 0 && Date.now() + FLUSH_MS < held.deadline);
  } catch {
    // Nothing above should throw; whatever does, the promise resolves.
  } finally {
    if (queue.lease === held) queue.lease = null;
  }
}

/** This isolate's part of every point's id: random, so that two isolates' ids never meet (made at the first write: workerd allows no random values at a module's top level). */
let nonce = "";
let written = 0;

/** Whether a flush of the queue is under way (its lease not yet over). */
const leased = (queue) => queue.lease !== null && Date.now() < queue.lease.deadline;

export default function (env) {
  const url = String(env.url);
  const dataset = String(env.dataset);
  const queue = queueFor(url);
  const delivery = {
    /** Starts a flush, unless one is under way: its promise, to keep alive with waitUntil (never rejects); else undefined. */
    deliver() {
      if (leased(queue)) return undefined;
      const held = { deadline: Date.now() + LEASE_MS };
      queue.lease = held;
      return flush(url, queue, held);
    },
  };
  return {
    /** Buffers the point; `{ deliver }` while no flush is under way, else undefined. */
    writeDataPoint(point) {
      const { indexes, blobs, doubles } = copyOf(point);
      nonce ||= Array.from(crypto.getRandomValues(new Uint8Array(6)), (b) => b.toString(16).padStart(2, "0")).join("");
      queue.buffered.push({ id: `${nonce}-${++written}`, dataset, timestamp: Date.now(), indexes, blobs, doubles });
      trim(queue);
      return leased(queue) ? undefined : delivery;
    },
  };
}
