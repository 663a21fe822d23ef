// A cap on concurrent origin fetches per isolate (Workers allow 6 open
// connections per request, and a stampede must not reach the origin even
// when every cache misses). Beyond the cap, callers queue for a bounded time
// in a bounded queue; past either bound they get an `overloaded` answer at
// once, which the tier turns into stale data, a default or a 503.

export interface LimiterOptions {
  /** Fetches in flight at once. */
  maxConcurrent: number;
  /** Callers allowed to wait for a slot; more are refused at once. */
  maxQueued: number;
  /** How long a caller waits for a slot before giving up. */
  maxWaitMs: number;
}

export interface Limiter {
  /** Runs `task` in a slot, or rejects with LimiterFull without running it. `waitMs` shortens the wait for a slot. */
  run<T>(task: () => Promise<T>, waitMs?: number): Promise<T>;
  readonly inFlight: number;
  readonly queued: number;
}

export class LimiterFull extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = "LimiterFull";
  }
}

export function createLimiter({ maxConcurrent, maxQueued, maxWaitMs }: LimiterOptions): Limiter {
  let inFlight = 0;
  const waiting: { grant: () => void; timer: ReturnType<typeof setTimeout> }[] = [];

  function release(): void {
    const next = waiting.shift();
    if (next) {
      clearTimeout(next.timer);
      next.grant(); // the slot passes straight to the next caller
    } else {
      inFlight--;
    }
  }

  function acquire(waitMs: number): Promise<void> {
    if (inFlight < maxConcurrent) {
      inFlight++;
      return Promise.resolve();
    }
    if (waiting.length >= maxQueued) return Promise.reject(new LimiterFull("origin queue full"));
    return new Promise((resolve, reject) => {
      const waiter = {
        grant: resolve,
        timer: setTimeout(() => {
          waiting.splice(waiting.indexOf(waiter), 1);
          reject(new LimiterFull(`no origin slot within ${waitMs} ms`));
        }, waitMs),
      };
      waiting.push(waiter);
    });
  }

  return {
    async run(task, waitMs = maxWaitMs) {
      await acquire(Math.min(waitMs, maxWaitMs));
      try {
        return await task();
      } finally {
        release();
      }
    },
    get inFlight() {
      return inFlight;
    },
    get queued() {
      return waiting.length;
    },
  };
}
