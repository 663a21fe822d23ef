// At most a few connections per request at once (design.md, "Lessons").
//
// Workers let one invocation have 6 connections waiting for response headers;
// more are queued by the runtime, and a queued call's time budget
// (`AbortSignal.timeout`) runs while it waits. A cold page view can want 9
// at once (purge sync, four fill claims, four origin fetches...), so without
// a bound here the runtime's queue turns into L2 "timeouts" that open the L2
// breaker although Redis answered in a few ms. So every L2 call and origin
// fetch passes through this gate, which belongs to the one invocation (fetch
// or cron) whose work it is: its counter and queue never cross requests. The
// time budget of a call starts when it leaves the gate; the wait in the gate
// is this isolate's own delay, and counts against nobody's breaker.
//
// The runtime also caps subrequests per invocation (50 on the Free plan), so
// the gate counts them: past the invocation's budget (MAX_SUBREQUESTS) a call is refused
// at once (SubrequestBudgetSpent), which callers treat as "L2 unavailable" or
// "origin overloaded" for this one request, and no breaker counts.
//
// `wrangler dev` and Miniflare enforce neither limit, so these bounds are the
// only thing that keeps tests and production alike.
import { AsyncLocalStorage } from "node:async_hooks";

/** Connections one invocation keeps open at once: the runtime's 6, less one left for what the runtime does on its own. */
export const MAX_OPEN_SUBREQUESTS = 5;

export class SubrequestBudgetSpent extends Error {
  constructor(budget: number) {
    super(`this invocation already made its ${budget} subrequests`);
    this.name = "SubrequestBudgetSpent";
  }
}

interface Gate {
  open: number;
  waiting: (() => void)[];
  /** Subrequests started so far, and how many it may make. */
  made: number;
  budget: number;
}

const invocation = new AsyncLocalStorage<Gate>();

/** Runs `work` (one request's or one cron run's handling) with a gate of its own, allowing `budget` subrequests. */
export function withSubrequestGate<T>(budget: number, work: () => T): T {
  return invocation.run({ open: 0, waiting: [], made: 0, budget }, work);
}

/**
 * Runs `call` (one outgoing connection: an L2 call, an origin fetch up to its
 * response headers) once fewer than MAX_OPEN_SUBREQUESTS of this invocation's
 * are open. Outside an invocation (tests, tools), it runs at once.
 */
export async function subrequest<T>(call: () => Promise<T>): Promise<T> {
  const gate = invocation.getStore();
  if (!gate) return call();
  if (gate.made >= gate.budget) throw new SubrequestBudgetSpent(gate.budget);
  gate.made++;
  if (gate.open >= MAX_OPEN_SUBREQUESTS) await new Promise<void>((resolve) => gate.waiting.push(resolve));
  else gate.open++;
  try {
    return await call();
  } finally {
    // The slot passes straight to the next call of the same invocation.
    const next = gate.waiting.shift();
    if (next) next();
    else gate.open--;
  }
}

/** Connections of the current invocation open and waiting (for tests and the status page). */
export function subrequestsOfThisInvocation(): { open: number; waiting: number; made: number } | null {
  const gate = invocation.getStore();
  return gate ? { open: gate.open, waiting: gate.waiting.length, made: gate.made } : null;
}
