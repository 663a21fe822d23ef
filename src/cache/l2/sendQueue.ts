// Background Redis work of many requests, sent together (issue: Redis
// commands per page). A background refresh costs a lock claim and a write,
// and every fill a write, whatever else is under way: at steady Zipf these
// were most of the tier's Redis calls. Nobody waits for them, so they can
// wait a few milliseconds for others: what the isolate's requests queue
// within `windowMs` goes out as one send (one call per shard for writes; the
// claims and the writes of refreshes, one each), whichever requests queued it,
// and a send's worth (`maxPerSend`, `maxBytesPerSend`) goes at once. Another
// call going out anyway may take waiting items along (`take`), and while
// calls do, the window's own send is put off (`holdWhileTakenMs`).
// Two queues use this: background refreshes (fill/refreshes.ts) and fill
// writes (fillWrites.ts), which lock claims carry.
//
// The Workers rules (docs/architecture.md#sharing-work-across-requests-in-one-isolate):
// a queue holds plain data (keys, encoded values). The request that finds no
// send scheduled schedules one under its own `waitUntil`, and that request
// makes the send, its Redis calls and origin fetches, as its own background
// work: no request awaits or wakes another, and nobody awaits a send. The
// scheduled send is a lease: if its request vanished (its `waitUntil` cut
// off), the first request to queue something past its deadline schedules a
// send of its own. Bounded: at most `maxQueued` items wait (`add` refuses
// more: the caller sends on its own or drops), at most `maxPerSend` go in one
// send (the sending request's subrequest budget, the size of one call), and an
// item that waited past `maxWaitMs` is dropped, not sent late.
import type { Clock } from "../../shared/clock";

export interface SendQueueOptions<T> {
  clock: Clock;
  sleep: (ms: number) => Promise<void>;
  /** How long the first item of a send waits for others. */
  windowMs: number;
  maxPerSend: number;
  maxQueued: number;
  maxWaitMs: number;
  /** Items with one key wait once (a second `add` of the key changes nothing). */
  keyOf(item: T): string;
  /**
   * While other calls take items (`take`: lock claims carrying writes; the
   * last take less than this ago), a window's send is put off by another
   * window, or until its oldest item has waited this long if sooner: under
   * load the next take carries them within tens of milliseconds, and the
   * send would be a call for the few that came since the last one. Unset:
   * never put off.
   */
  holdWhileTakenMs?: number;
  /**
   * Items nobody waits for (`patient`: most fills' writes) wait up to
   * `patientHoldMs` for a call to carry them: while only patient items wait,
   * the send goes that long after the oldest of them came (patientHoldLeft),
   * unless an item that is not patient comes meanwhile, whose window sends
   * them all.
   */
  patient?(item: T): boolean;
  patientHoldMs?: number;
  /** With `sizeOf`, a send stops short of `maxBytesPerSend` (one item always goes). */
  sizeOf?(item: T): number;
  maxBytesPerSend?: number;
  /** Makes one send, as background work of the request that sends it. */
  send(items: T[], background: (work: Promise<unknown>) => void): void;
}

export interface SendQueue<T> {
  /** Queues `item` (unless its key waits already); `background` is this request's `waitUntil`, in case it must schedule the send. false: the queue is full. */
  add(item: T, background: (work: Promise<unknown>) => void): boolean;
  /**
   * Takes the oldest waiting items that `accepts`, at most `maxItems` and,
   * past the first, `maxBytes` of them (sizeOf), out of the queue: another
   * call going out now carries them (l2.ts: a fill claim takes the writes of
   * its shard along). Plain data, like everything the queue holds.
   */
  take(accepts: (item: T) => boolean, maxItems: number, maxBytes: number): T[];
  stats(): SendStats;
}

/** `refused`: adds past maxQueued; `expired`: items dropped past maxWaitMs; `takenOver`: sends scheduled again past a lapsed lease; `carried`: items another call took along (take). */
export interface SendStats {
  queued: number;
  sends: number;
  refused: number;
  expired: number;
  takenOver: number;
  carried: number;
}

export function createSendQueue<T>(options: SendQueueOptions<T>): SendQueue<T> {
  const { clock, windowMs } = options;
  /** Items by key, oldest first, each with when it came and its size (sizeOf, 0 without). */
  const waiting = new Map<string, { item: T; since: number; size: number; patient: boolean }>();
  /** The scheduled send's lease: due at `sendAt`, taken over once past `sendAt + windowMs` (0: none scheduled). */
  let sendAt = 0;
  let sends = 0;
  let refused = 0;
  let expired = 0;
  let takenOver = 0;
  let carried = 0;
  /** When `take` last took something (holdWhileTakenMs). */
  let lastTakenAt = Number.NEGATIVE_INFINITY;
  /** The waiting items' sizes (sizeOf), so that a full send by bytes goes at once too. */
  let waitingBytes = 0;
  /** Waiting items that are not patient: while there is one, the send goes at its window. */
  let impatientWaiting = 0;
  /** When the oldest item waiting came, as the scheduled send was made for it. */
  let sendFor = Number.NEGATIVE_INFINITY;
  const maxBytes = options.maxBytesPerSend ?? Number.POSITIVE_INFINITY;

  function schedule(background: (work: Promise<unknown>) => void, delayMs = windowMs): void {
    const due = clock.now() + delayMs;
    sendAt = due;
    sendFor = waiting.values().next().value?.since ?? clock.now();
    background(options.sleep(delayMs).then(() => sendDue(due, background)));
  }

  function sendDue(due: number, background: (work: Promise<unknown>) => void): void {
    // Another request took the send over: this one's lease had lapsed.
    if (sendAt !== due) return;
    sendAt = 0;
    const heldFor = Math.max(holdingBackFor(), patientHoldLeft());
    if (heldFor > 0) {
      schedule(background, heldFor);
      return;
    }
    sendSome(background);
    // What is left goes with the next request that queues something (not this one: its subrequest budget is spent).
  }

  /**
   * How much longer what waits is better left for the next `take`
   * (holdWhileTakenMs; 0: send now): a window at most, and no further than
   * the oldest item's hold, so that no item waits past holdWhileTakenMs for
   * the hold (a departed fill's lease counts on it: tier.ts backgroundFillMs).
   */
  function holdingBackFor(): number {
    const hold = options.holdWhileTakenMs;
    if (hold === undefined || waiting.size === 0) return 0;
    const now = clock.now();
    const oldest = waiting.values().next().value!;
    if (now - lastTakenAt >= hold) return 0;
    return Math.max(0, Math.min(windowMs, hold - (now - oldest.since)));
  }

  /**
   * How much longer the patient items waiting may wait for a take (0: send
   * now). A send is scheduled by the first item that finds none scheduled;
   * if a take carried what it was scheduled for, the items that came since
   * wait out their own hold from when they came, not what was left of the
   * first one's (with one schedule for all, a write that came just before
   * the send waited for nothing: at a few pages a second, a third of the
   * patient writes went alone). Only items newer than what the send was
   * scheduled for: with a clock that does not move, nothing is put off twice.
   */
  function patientHoldLeft(): number {
    const oldest = waiting.values().next().value;
    if (!oldest || impatientWaiting > 0 || !oldest.patient || oldest.since <= sendFor) return 0;
    return Math.max(0, (options.patientHoldMs ?? windowMs) - (clock.now() - oldest.since));
  }

  /** Takes the oldest items `accepts`, within the limits, out of the queue; drops those that waited too long on the way. */
  function pick(accepts: (item: T) => boolean, maxItems: number, maxBytesTaken: number): T[] {
    const now = clock.now();
    const items: T[] = [];
    let bytes = 0;
    const remove = (key: string, size: number, patient: boolean) => {
      waiting.delete(key);
      waitingBytes -= size;
      if (!patient) impatientWaiting--;
    };
    for (const [key, { item, since, size, patient }] of waiting) {
      if (now - since > options.maxWaitMs) {
        remove(key, size, patient);
        expired++;
        continue;
      }
      if (items.length === maxItems) break;
      if (!accepts(item)) continue;
      if (items.length > 0 && bytes + size > maxBytesTaken) break;
      bytes += size;
      remove(key, size, patient);
      items.push(item);
    }
    return items;
  }

  /** Sends the oldest items, as many as one send takes. */
  function sendSome(background: (work: Promise<unknown>) => void): void {
    const items = pick(() => true, options.maxPerSend, maxBytes);
    if (items.length === 0) return;
    sends++;
    options.send(items, background);
  }

  return {
    add(item, background) {
      const key = options.keyOf(item);
      if (!waiting.has(key)) {
        if (waiting.size >= options.maxQueued) {
          refused++;
          return false;
        }
        const size = options.sizeOf?.(item) ?? 0;
        const patient = options.patient?.(item) ?? false;
        waiting.set(key, { item, since: clock.now(), size, patient });
        waitingBytes += size;
        if (!patient) impatientWaiting++;
      }
      // A full send goes at once, from this request: under load the window
      // is for grouping, not for holding a queue back (one send per window
      // fell behind the writes of a busy isolate, and the writes that
      // expired in the queue kept their locks, and other isolates waiting).
      if (waiting.size >= options.maxPerSend || waitingBytes >= maxBytes) {
        sendSome(background);
        return true;
      }
      const patient = waiting.get(key)!.patient;
      // A patient item alone is sent after its hold (one sleep: the send does not depend on the clock moving meanwhile).
      if (sendAt === 0) schedule(background, patient ? (options.patientHoldMs ?? windowMs) : windowMs);
      // Patient items alone had put the send off: an impatient one brings it back to its window.
      else if (!patient && sendAt > clock.now() + windowMs) schedule(background);
      else if (clock.now() > sendAt + windowMs) {
        takenOver++;
        schedule(background);
      }
      return true;
    },
    take(accepts, maxItems, maxBytesTaken) {
      const items = pick(accepts, maxItems, maxBytesTaken);
      carried += items.length;
      if (items.length > 0) lastTakenAt = clock.now();
      return items;
    },
    stats: () => ({ queued: waiting.size, sends, refused, expired, takenOver, carried }),
  };
}
