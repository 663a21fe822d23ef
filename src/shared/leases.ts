// Leases: the one way this isolate holds anything on behalf of a request
// (docs/architecture.md#sharing-work-across-requests-in-one-isolate). In
// Workers a promise belongs to the request that made it; when that request is
// cancelled, its promises may never settle and its `finally` blocks never
// run. So whatever bounds the isolate (an origin slot, a place in a queue, a
// fill, a breaker probe, a purge sync) is a lease with a deadline: given back
// by its holder, or reclaimed by the next caller once past due. Only plain
// data (a deadline, a value the holder chose) crosses requests here.

export interface LeaseTableOptions {
  /** Milliseconds since the epoch (the tier's clock; a fake one in tests). */
  clock: { now(): number };
  /** Live leases at most (`take` fails when they are all live); unbounded when absent. */
  capacity?: number;
}

export interface LeaseTable<K, V> {
  /** The live holder's value for `key`; a lease past its deadline is reclaimed first. */
  holder(key: K): V | undefined;
  /** Takes the lease on `key` until `until` (absolute), unless a live holder has it or all `capacity` leases are live: whether it did. */
  take(key: K, until: number, value: V): boolean;
  /** Gives the lease back, if `value` still holds it (a reclaimed holder's late release changes nothing). */
  release(key: K, value: V): void;
  /** Live leases, past-due ones reclaimed first. */
  size(): number;
  /** The earliest deadline among live leases (Infinity when none): when a slot frees up at the latest. */
  nextDeadline(): number;
  /**
   * Visits the live leases, oldest first, until `visit` returns false. Not an
   * iterator: the limiter walks its waiters at every look of every waiter, and
   * a pair per lease was 2.5% of a flooded isolate's CPU (bench:soak --flood-profile).
   */
  each(visit: (key: K, value: V) => unknown): void;
  /** Leases reclaimed past their deadline since the table was made: holders that vanished. */
  readonly reclaimed: number;
}

interface Held<V> {
  until: number;
  value: V;
}

export function createLeaseTable<K, V>({ clock, capacity = Infinity }: LeaseTableOptions): LeaseTable<K, V> {
  // A Map keeps insertion order: oldest lease first.
  const held = new Map<K, Held<V>>();
  let reclaimed = 0;
  /** No lease ends before this, so no sweep till then: walking hundreds of leases at every waiter's look was a tenth of a busy isolate's CPU (bench:soak). */
  let noneDueBefore = Infinity;

  function live(key: K, lease: Held<V> | undefined, now: number): lease is Held<V> {
    if (!lease) return false;
    if (lease.until > now) return true;
    held.delete(key);
    reclaimed++;
    return false;
  }

  function reclaimPastDue(now: number): void {
    if (now < noneDueBefore) return;
    noneDueBefore = Infinity;
    for (const [key, lease] of held) if (live(key, lease, now)) noneDueBefore = Math.min(noneDueBefore, lease.until);
  }

  return {
    holder(key) {
      const lease = held.get(key);
      return live(key, lease, clock.now()) ? lease.value : undefined;
    },
    take(key, until, value) {
      const now = clock.now();
      if (live(key, held.get(key), now)) return false;
      if (held.size >= capacity) reclaimPastDue(now);
      if (held.size >= capacity) return false;
      held.set(key, { until, value });
      noneDueBefore = Math.min(noneDueBefore, until);
      return true;
    },
    release(key, value) {
      if (held.get(key)?.value === value) held.delete(key);
    },
    size() {
      reclaimPastDue(clock.now());
      return held.size;
    },
    nextDeadline() {
      let next = Infinity;
      for (const lease of held.values()) next = Math.min(next, lease.until);
      return next;
    },
    each(visit) {
      const now = clock.now();
      for (const [key, lease] of held) if (live(key, lease, now) && visit(key, lease.value) === false) return;
    },
    get reclaimed() {
      return reclaimed;
    },
  };
}

/**
 * `work`'s outcome, or `onTimeout()` after `ms` on this request's own timer:
 * work another request started may never settle, and in Workers a request
 * whose only pending work is another request's is taken for hung.
 */
export async function within<T, F>(work: Promise<T>, ms: number, onTimeout: () => F): Promise<T | F> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<F>((resolve) => {
    timer = setTimeout(() => resolve(onTimeout()), Math.max(0, ms));
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** A call ended by its time budget (`AbortSignal.timeout`, or an abort). */
export function isTimeout(error: unknown): boolean {
  return error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError");
}

/** This isolate's own failure, never the service's (no breaker counts it): I/O of another request refused, or the subrequest budget spent. */
export function isIsolateError(error: unknown): boolean {
  return error instanceof Error && (error.message.includes("on behalf of a different request") || error.name === "SubrequestBudgetSpent");
}

/**
 * How late this isolate may run and still read replies on time: a failure
 * noticed later than this (or a quarter of its budget) past its budget is the
 * isolate's delay (noticedLate), and so is a missing reply while the isolate's
 * lag is past it (cache/readThrough.ts); a key's L2 read counts as under way
 * this long past its budget, for pages that join it (cache/pageSteps.ts); and
 * a location lookup, answered in a ms or two, has this budget
 * (cache/location/location.ts).
 */
export const ISOLATE_LATE_MS = 50;

/**
 * The longest this isolate stalls at once (a major GC, a burst of rendering;
 * a saturated isolate reads replies 100–200 ms late). Time-outs closer
 * together were stalled together here: a breaker's must span more
 * (breaker.ts, minFailureSpanMs), the probe that confirms an L2 outage
 * has this budget (tier.ts), and a joiner's interest in a fill outlives its
 * next look by it (cache/fill/flights.ts). An origin slot, and a call's place in the
 * connection gate, outlive its deadline by it (origin/exchange.ts,
 * cache/l2/l2Guard.ts): a slot taken back from a holder only late to its
 * abort lets more calls run than the cap allows.
 */
export const ISOLATE_STALL_MS = 500;

/** A lease outlives its call's budget by the isolate's longest stall: the end of a call may be read that late. */
export function leaseFor(budgetMs: number): number {
  return budgetMs + ISOLATE_STALL_MS;
}

/**
 * A call with a time budget failed, and this isolate learnt of it well after
 * the budget ran out: the isolate was too busy to handle the reply or the
 * abort when it came, so the time-out says nothing about the service. When a
 * service hangs, an isolate with time to spare notices within a few ms.
 */
export function noticedLate(startedAt: number, budgetMs: number, now = Date.now()): boolean {
  return startedAt > 0 && now - startedAt > budgetMs + isolateDelayAllowedMs(budgetMs);
}

/** How much of a budget the isolate's own delays may take and leave the call on time (noticedLate; origin/client.ts, a slot's wait). */
export function isolateDelayAllowedMs(budgetMs: number): number {
  return Math.max(ISOLATE_LATE_MS, budgetMs / 4);
}

/**
 * How long this isolate takes now to run a 1 ms timer, beyond it: the queue
 * ahead of any callback, a reply's included. A time-out noticed on time may
 * still be the isolate's delay (a reply read behind other requests' renders);
 * a hanging service leaves the isolate idle, near 0. One timer: asked only after a time-out.
 */
export async function currentLagMs(): Promise<number> {
  const asked = Date.now();
  await new Promise((resolve) => setTimeout(resolve, 1));
  return Math.max(0, Date.now() - asked - 1);
}

/** The longest pause of a poll, doubled up to from 1 ms (the shortest timer): a shared fill usually ends within one origin round trip. */
const POLL_MAX_MS = 16;

/** A poll's pauses until `until`, for a loop that sleeps on a clock of its own (cache/l2/outbox.ts). */
export function pollPauses(until: number, now: () => number): Generator<number> {
  return pauses(1, POLL_MAX_MS, until, now);
}

/**
 * Waits, on this request's own timers, until `check` returns a value or
 * `until` passes (then `undefined`). This is how a request waits for work
 * another request does: it never awaits that request's promise, since a
 * continuation resumed by another request may run its I/O on behalf of the
 * wrong request ("Cannot perform I/O on behalf of a different request"),
 * or never run at all if that request was cancelled. Only the plain data
 * that `check` reads crosses requests. Its pauses are pollPauses'.
 */
export async function pollUntil<T>(check: () => T | undefined, until: number, now: () => number = Date.now): Promise<T | undefined> {
  for (const pause of pollPauses(until, now)) {
    const value = check();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, Math.max(1, pause)));
  }
  return check();
}

/**
 * A poll's pauses: doubled from `firstMs` up to `maxMs`, cut to what is left
 * before `until`, none past it. Every poll of the tier takes them from here
 * (pollUntil, cache/fill/lockWait.ts, invalidation/watcher.ts).
 */
export function* pauses(firstMs: number, maxMs: number, until: number, now: () => number): Generator<number> {
  for (let pause = firstMs; ; pause = Math.min(pause * 2, maxMs)) {
    const left = until - now();
    if (left <= 0) return;
    yield Math.min(pause, left);
  }
}
