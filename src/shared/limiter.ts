// A cap on work in flight per isolate, with a bounded queue: slots held as
// leases. The origin client caps its fetches with one (a stampede must not
// reach the origin even when every cache misses), and admission caps the
// pages that need new work (overload/admission.ts). Beyond the cap, callers
// queue for a bounded time in a bounded queue; past either bound they get
// LimiterFull at once, which the caller turns into stale data, a default or
// a 503.
//
// Slots and places in the queue are leases (src/shared/leases.ts): a caller
// whose request is cancelled while it holds a slot or waits for one never
// runs its `finally`, so its slot comes back at the lease's deadline instead,
// and its place in the queue lapses with its wait. A waiter looks for a
// free slot on timers of its own, oldest first: no request ever wakes another.
import { createLeaseTable, pollUntil } from "../shared/leases";

export interface LimiterOptions {
  /** Fetches in flight at once. */
  maxConcurrent: number;
  /** Callers allowed to wait for a slot; more are refused at once. */
  maxQueued: number;
  /** How long a caller waits for a slot before giving up. */
  maxWaitMs: number;
  /** The longest a slot is held from its grant, whatever became of its holder (callers pass their own deadline when shorter). */
  maxHoldMs: number;
  /**
   * Slots that may be held now, if fewer than maxConcurrent (admission: the
   * isolate's limit of cold pages, overload/limit.ts). Waiters look again on
   * their timers.
   */
  limit?: () => number;
  /**
   * Whether a waiter that has waited `waitedMs` may take a slot past `limit`
   * (never past maxConcurrent): asked only when the limit leaves no room
   * (admission: a page's last chance, overload/admission.ts).
   */
  pastLimit?: (waitedMs: number) => boolean;
  /**
   * A holder whose `caller` signal aborts gives its slot back then (admission:
   * what is left of a departed visitor's page is background work, bounded on
   * its own, overload/departures.ts). Not the origin's: a fetch finishing in the background still uses its slot.
   */
  freeWhenCallerLeaves?: boolean;
  /**
   * The order of the waiters of one criticality (RunOptions.sheddable): a waiter whose key ranks lower goes first, the
   * oldest first among equals (admission: the client holding fewest cold
   * pages, overload/fairShare.ts). Unset: oldest first. With a rank, a
   * caller finding the queue full takes the place of the oldest waiter of
   * the key ranking highest, if that is ordered after it (FQ-CoDel's
   * drop from the fattest flow, RFC 8290): a flood fills the queue, and
   * another client's page still gets a place.
   */
  rank?: (key: string) => number;
  clock?: { now(): number };
}

/** How one call waits and holds its slot. */
interface RunOptions {
  /** Shortens the wait for a slot (maxWaitMs at most). */
  waitMs?: number;
  /** The most the task may keep its slot (its own deadline), after which the slot is reclaimed. */
  holdMs?: number;
  priority?: Priority;
  /** The caller's own signal: a waiter whose caller left gives up its place at once. Only the caller's request may touch it (Workers). */
  caller?: AbortSignal;
  /** Whose call this is, for `rank` (admission: the page's client). */
  key?: string;
  /**
   * The caller has something to show if refused (admission: a copy of every
   * core part its page lacks). Waiters without go first, and a full queue
   * gives a sheddable waiter's place to one without: Google's criticality
   * (Site Reliability Engineering, ch. 21, "Handling Overload"), where
   * sheddable requests are refused before critical ones. `rank` then orders those alike.
   */
  sheddable?: boolean;
}

export interface Limiter {
  /** Runs `task` in a slot, or rejects with LimiterFull without running it. */
  run<T>(task: () => Promise<T>, options?: RunOptions): Promise<T>;
  /** How many refreshes would get a slot now, one after the other (none is started when none would). */
  refreshRoom(): number;
  /** Slots held by live leases. */
  readonly inFlight: number;
  /** Callers waiting for a slot (whose wait has not lapsed). */
  readonly queued: number;
  /** Slots taken back from holders past their deadline: requests that vanished holding one. */
  readonly reclaimed: number;
  /** Waiters whose place in a full queue went to a caller of a key ranking lower. */
  readonly pushedOut: number;
}

/**
 * `visitor`: somebody waits and has nothing else to show. `refresh`: a copy
 * is served already, so the task gives way: it never queues, and never takes
 * the last quarter of the slots, which under load go to pages that cannot be
 * served otherwise.
 */
export type Priority = "visitor" | "refresh";

export class LimiterFull extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = "LimiterFull";
  }
}

/** Why a caller got no slot: a few fixed reasons, so that one error per reason is enough. */
type FullReason =
  | "origin slots kept for visitors"
  | "queue full"
  | "the caller left while it waited"
  | "its place went to another caller"
  | "no slot within its wait";
const fullFor = new Map<FullReason, LimiterFull>();

/**
 * The LimiterFull of `reason`, made once: a flood throws thousands a second,
 * and an Error takes its stack trace when made. It carries no request's
 * data, so one per reason is shared (as overload/departures.ts's Departed).
 */
function full(reason: FullReason): LimiterFull {
  let error = fullFor.get(reason);
  if (!error) fullFor.set(reason, (error = new LimiterFull(reason)));
  return error;
}

/** A waiter's place in the queue: whose it is (`rank`'s key), and whether it is sheddable (RunOptions). */
interface Waiter {
  key: string;
  sheddable: boolean;
}

/**
 * The order of the waiters for one walk of the queue, lower first: by
 * criticality (those not sheddable first), then by `rank`, asked once per
 * key (many waiters share a key: a client's pages). Unranked, all keys equal.
 */
function orderOf(rank: ((key: string) => number) | undefined): (a: Waiter, b: Waiter) => number {
  const ranks = new Map<string, number>();
  const rankOf = (key: string) => {
    let value = ranks.get(key);
    if (value === undefined) ranks.set(key, (value = rank ? rank(key) : 0));
    return value;
  };
  return (a, b) => Number(a.sheddable) - Number(b.sheddable) || rankOf(a.key) - rankOf(b.key);
}

export function createLimiter({
  maxConcurrent,
  maxQueued,
  maxWaitMs,
  maxHoldMs,
  limit = () => maxConcurrent,
  pastLimit = () => false,
  freeWhenCallerLeaves = false,
  rank,
  clock = { now: () => Date.now() },
}: LimiterOptions): Limiter {
  const slots = createLeaseTable<number, true>({ clock, capacity: maxConcurrent });
  /** Slots a refresh may use: the rest are kept for visitors. */
  const refreshSlots = Math.max(1, Math.floor((maxConcurrent * 3) / 4));
  /** Callers waiting for a slot, oldest first; each place lapses with its caller's wait. */
  const waiting = createLeaseTable<number, Waiter>({ clock, capacity: maxQueued });
  let nextTicket = 0;
  let pushedOut = 0;
  /** Slots free now. */
  const room = () => Math.min(maxConcurrent, limit()) - slots.size();

  const refreshRoom = () => (waiting.size() === 0 ? Math.max(0, refreshSlots - slots.size()) : 0);

  /** Live waiters a free slot goes to before `me` (counted up to `enough`): those ordered lower, then those older. */
  function ahead(ticket: number, me: Waiter, enough: number): number {
    let count = 0;
    const order = orderOf(rank);
    let older = true;
    waiting.each((other, them) => {
      if (other === ticket) {
        older = false;
        // Unranked, nobody after `me` goes first unless `me` is sheddable: the walk stops there.
        return rank !== undefined || me.sheddable;
      }
      const versus = order(them, me);
      if (versus < 0 || (versus === 0 && older)) count++;
      // Past `enough` the answer is known: under a flood, hundreds of waiters look every few ms, and most stop here after a few steps.
      return count < enough;
    });
    return count;
  }

  /**
   * A slot for the waiter `ticket`, if one is free for it now. Cheap when
   * none is (the common case under load, checked by every waiter at every
   * look): the queue is walked only when there are fewer free slots than
   * waiters, to find whether this one is among the first.
   */
  function slotFor(ticket: number, me: Waiter, holdMs: number, waitedMs: number): true | undefined {
    const free = room();
    if (free <= 0) {
      // Past the limit only as `pastLimit` allows, never past maxConcurrent.
      if (slots.size() >= maxConcurrent || !pastLimit(waitedMs)) return undefined;
    } else if (free < waiting.size() && ahead(ticket, me, free) >= free) return undefined;
    return slots.take(ticket, clock.now() + holdMs, true) || undefined;
  }

  /** Frees a place for `me` in a full queue: the oldest of the waiters ordered highest gives its place up, if ordered higher than `me`. */
  function pushOut(me: Waiter): boolean {
    const order = orderOf(rank);
    let worst = me;
    let victim: number | undefined;
    waiting.each((ticket, them) => {
      if (order(them, worst) > 0) [worst, victim] = [them, ticket];
    });
    if (victim === undefined) return false;
    waiting.release(victim, worst);
    pushedOut++;
    return true;
  }

  /**
   * Waits for a slot for `waitedMs` at most. The caller looks for one on
   * timers of its own (never woken by a releasing request: a promise resolved
   * from another request runs its continuation in a context the runtime may
   * have cancelled, and I/O started there belongs to the wrong request).
   */
  async function waitForSlot(ticket: number, me: Waiter, holdMs: number, waitedMs: number, caller: AbortSignal | undefined): Promise<void> {
    const askedAt = clock.now();
    const giveUpAt = askedAt + waitedMs;
    const placed = () => waiting.take(ticket, giveUpAt, me);
    if (!placed() && !(pushOut(me) && placed())) throw full("queue full");
    let left = false;
    let out = false;
    const look = () => {
      if (caller?.aborted) return (left = true);
      // Its place was given to a caller ordered before it (pushOut), rather than lapsed with its wait.
      if (waiting.holder(ticket) === undefined && clock.now() < giveUpAt) return (out = true);
      return slotFor(ticket, me, holdMs, clock.now() - askedAt);
    };
    // A cancelled request's timers may never fire again: its place goes as its caller leaves, not when its wait would have ended.
    const onLeave = () => waiting.release(ticket, me);
    caller?.addEventListener("abort", onLeave, { once: true });
    try {
      if ((await pollUntil(look, giveUpAt, clock.now)) && !left && !out) return;
    } finally {
      caller?.removeEventListener("abort", onLeave);
      waiting.release(ticket, me);
    }
    throw full(left ? "the caller left while it waited" : out ? "its place went to another caller" : "no slot within its wait");
  }

  return {
    async run(task, { waitMs = maxWaitMs, holdMs = maxHoldMs, priority = "visitor", caller, key = "", sheddable = false } = {}) {
      const ticket = ++nextTicket;
      const hold = Math.max(1, Math.min(holdMs, maxHoldMs));
      if (priority === "refresh" && refreshRoom() === 0) throw full("origin slots kept for visitors");
      // Waiters first: a newcomer does not overtake the queue.
      const free = waiting.size() === 0 && room() > 0 && slots.take(ticket, clock.now() + hold, true);
      if (!free) await waitForSlot(ticket, { key, sheddable }, hold, Math.max(0, Math.min(waitMs, maxWaitMs)), caller);
      // A cancelled request never runs its `finally`, but its signal's listeners do run when it aborts.
      const onLeave = () => slots.release(ticket, true);
      const listening = freeWhenCallerLeaves && caller !== undefined;
      if (listening) caller.addEventListener("abort", onLeave, { once: true });
      try {
        return await task();
      } finally {
        if (listening) caller.removeEventListener("abort", onLeave);
        slots.release(ticket, true);
      }
    },
    refreshRoom,
    get inFlight() {
      return slots.size();
    },
    get queued() {
      return waiting.size();
    },
    get reclaimed() {
      return slots.reclaimed;
    },
    get pushedOut() {
      return pushedOut;
    },
  };
}
