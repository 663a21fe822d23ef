// At most a few connections per request at once, and a bounded count of
// subrequests per invocation (docs/architecture.md#sharing-work-across-requests-in-one-isolate,
// rule 6, says why): every L2 call and origin fetch passes this gate, which
// belongs to one invocation (fetch or cron) and never crosses requests. A
// call's budget starts when it leaves the gate: the wait is this isolate's
// own delay, and counts against nobody's breaker. Its places are leases
// (./leases.ts): a cancelled response part's call never gives its place back.
import { AsyncLocalStorage } from "node:async_hooks";
import { createLeaseTable, leaseFor, type LeaseTable } from "./leases";

/** Connections one invocation keeps open at once: the runtime's 6, less one left for what the runtime does on its own. */
export const MAX_OPEN_SUBREQUESTS = 5;
/**
 * Fills one invocation runs at once (a home page's list, a warming run): each
 * costs an L2 read, a claim, an origin fetch and a write, one connection at a
 * time; as many as the gate opens but one, left for what the invocation
 * started in the background, so that no fill queues for a connection.
 */
export const FILLS_AT_ONCE = MAX_OPEN_SUBREQUESTS - 1;

export class SubrequestBudgetSpent extends Error {
  constructor(budget: number) {
    super(`this invocation already made its ${budget} subrequests`);
    this.name = "SubrequestBudgetSpent";
  }
}

// Plain data only: the gate lives as long as all its invocation starts (docs/architecture.md, rule 6).
interface Gate {
  /** Made at the invocation's first subrequest: most page views (L1 hits) make none. */
  open: LeaseTable<number, true> | null;
  /** Calls waiting for a place: woken, all of them, when one is given back. */
  waiting: Set<() => void> | null;
  tickets: number;
  /** Subrequests started so far, and how many it may make. */
  made: number;
  budget: number;
  /** Of those, the L2 calls and origin fetches (the fleet's figures per page). */
  l2: number;
  origin: number;
}

/** Hands work to the invocation to finish after its answer (the request's `waitUntil`). */
export type Background = (work: Promise<unknown>) => void;

/** What a subrequest is, for the counts the fleet reports per page (observability/fleet.ts). */
export type SubrequestKind = "l2" | "origin" | "other";

const invocation = new AsyncLocalStorage<Gate>();
const clock = { now: () => Date.now() };

/** Runs `work` (one request's or one cron run's handling) with a gate of its own, allowing `budget` subrequests. */
export function withSubrequestGate<T>(budget: number, work: () => T): T {
  const gate: Gate = { open: null, waiting: null, tickets: 0, made: 0, budget, l2: 0, origin: 0 };
  return invocation.run(gate, work);
}

/**
 * How long a call's place in the gate is held at most: its budget, and the
 * isolate's longest stall: the abort that ends a call may be read that
 * late, and a place taken back before it lets more calls open than the
 * runtime keeps.
 */
export function gatePlaceMs(budgetMs: number): number {
  return leaseFor(budgetMs);
}

/**
 * Runs `call` (an L2 call, an origin fetch up to its headers) once fewer than
 * MAX_OPEN_SUBREQUESTS of this invocation's are open; its place is taken back
 * after `holdMs` (its own time-out, and some). Outside an invocation, at once.
 */
export async function subrequest<T>(call: () => Promise<T>, holdMs: number, kind: SubrequestKind = "other"): Promise<T> {
  const gate = invocation.getStore();
  if (!gate) return call();
  if (gate.made >= gate.budget) throw new SubrequestBudgetSpent(gate.budget);
  gate.made++;
  if (kind !== "other") gate[kind]++;
  const ticket = ++gate.tickets;
  const open = (gate.open ??= createLeaseTable({ clock, capacity: MAX_OPEN_SUBREQUESTS }));
  const waiting = (gate.waiting ??= new Set());
  while (!open.take(ticket, clock.now() + holdMs, true)) {
    // Woken when a place is given back, or when the first one falls due.
    let wake!: () => void;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await new Promise<void>((resolve) => {
      wake = resolve;
      waiting.add(wake);
      timer = setTimeout(resolve, Math.max(1, open.nextDeadline() - clock.now()));
    });
    waiting.delete(wake);
    clearTimeout(timer);
  }
  try {
    return await call();
  } finally {
    open.release(ticket, true);
    for (const waiter of waiting) waiter();
  }
}

/** The L2 calls and origin fetches the current invocation has started so far; null outside one. */
export function callsOfThisInvocation(): { l2: number; origin: number } | null {
  const gate = invocation.getStore();
  return gate ? { l2: gate.l2, origin: gate.origin } : null;
}

/** Subrequests the current invocation may still make (Infinity outside one). */
export function subrequestsLeft(): number {
  const gate = invocation.getStore();
  return gate ? gate.budget - gate.made : Number.POSITIVE_INFINITY;
}

/** Connections of the current invocation open and waiting, and subrequests made (for tests). */
export function subrequestsOfThisInvocation(): { open: number; waiting: number; made: number } | null {
  const gate = invocation.getStore();
  return gate ? { open: gate.open?.size() ?? 0, waiting: gate.waiting?.size ?? 0, made: gate.made } : null;
}
