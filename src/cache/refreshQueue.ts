// Background refreshes of many requests, sent together (issue: Redis commands
// per page). A refresh (a stale copy served, or a hot one refreshed ahead)
// costs two Redis calls, its lock claim and its write, whatever else is under
// way: at steady Zipf they were most of the tier's Redis calls. Nobody waits
// for a refresh, so it can wait a few milliseconds for others: the refreshes
// asked for within `windowMs` go out as one batch, their claims in one call
// and their writes in one (fillBatch.ts), whichever requests asked.
//
// The Workers rules (docs/architecture.md#sharing-work-across-requests-in-one-isolate):
// the queue is plain data (which keys, of which ids). The request that finds
// no send scheduled schedules one under its own `waitUntil`, and that request
// runs the whole batch, its Redis calls and origin fetches, as its own
// background work: no request awaits or wakes another. The scheduled send is
// a lease: if its request vanished (its `waitUntil` cut off), the first
// request to queue a refresh after the deadline schedules a send of its own.
// Bounded: at most `maxQueued` keys wait (more are dropped: a later view asks
// again), at most `maxPerSend` go in one send (the request's subrequest
// budget), and a key that waited past `maxWaitMs` is dropped, not sent late.
import type { ResourceName } from "../origin/resources";
import type { Clock } from "../shared/clock";

/** One refresh to make: the key, what it holds, and `freshBeyond` (refresh ahead: L2 copies fresh only until then are not worth taking). */
export interface QueuedRefresh {
  key: string;
  resource: ResourceName;
  id: string;
  freshBeyond: number;
}

export interface RefreshQueueOptions {
  clock: Clock;
  sleep: (ms: number) => Promise<void>;
  /** How long the first refresh of a batch waits for others. */
  windowMs: number;
  maxPerSend: number;
  maxQueued: number;
  maxWaitMs: number;
  /** Starts the refreshes of one send, as background work of the request that sends them. */
  send(refreshes: QueuedRefresh[], background: (work: Promise<unknown>) => void): void;
}

export interface RefreshQueue {
  /** Queues a refresh of `key` unless one is queued; `background` is the asking request's `waitUntil`, in case it must schedule the send. */
  add(refresh: QueuedRefresh, background: (work: Promise<unknown>) => void): void;
  stats(): { queued: number; sends: number; dropped: number; takenOver: number };
}

export function createRefreshQueue(options: RefreshQueueOptions): RefreshQueue {
  const { clock, windowMs } = options;
  const waiting = new Map<string, QueuedRefresh & { since: number }>();
  /** The scheduled send's lease: due at `sendAt`, taken over once past `sendAt + windowMs` (0: none scheduled). */
  let sendAt = 0;
  let sends = 0;
  let dropped = 0;
  let takenOver = 0;

  function schedule(background: (work: Promise<unknown>) => void): void {
    const due = clock.now() + windowMs;
    sendAt = due;
    background(options.sleep(windowMs).then(() => sendDue(due, background)));
  }

  function sendDue(due: number, background: (work: Promise<unknown>) => void): void {
    // Another request took the send over: this one's lease had lapsed.
    if (sendAt !== due) return;
    sendAt = 0;
    const now = clock.now();
    const batch: QueuedRefresh[] = [];
    for (const [key, refresh] of waiting) {
      if (batch.length === options.maxPerSend) break;
      waiting.delete(key);
      if (now - refresh.since > options.maxWaitMs) {
        dropped++;
        continue;
      }
      batch.push({ key, resource: refresh.resource, id: refresh.id, freshBeyond: refresh.freshBeyond });
    }
    if (batch.length === 0) return;
    sends++;
    options.send(batch, background);
    // What is left goes with the next request that queues one (not this one: its subrequest budget is spent).
  }

  return {
    add(refresh, background) {
      if (!waiting.has(refresh.key)) {
        if (waiting.size >= options.maxQueued) {
          dropped++;
          return;
        }
        waiting.set(refresh.key, { ...refresh, since: clock.now() });
      }
      if (sendAt === 0) schedule(background);
      else if (clock.now() > sendAt + windowMs) {
        takenOver++;
        schedule(background);
      }
    },
    stats: () => ({ queued: waiting.size, sends, dropped, takenOver }),
  };
}
