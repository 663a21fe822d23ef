// bench:chaos's price changer, the shop's backend: it changes a hot
// product's price at the demo origin (which tells nobody) and purges it,
// retrying until the tier records the purge (202). Every 2–3 s on its own,
// and at once when a purge-through-redis fault starts a Redis outage
// (`changeNow`), so that the purge's retries run through the outage and its
// 202 comes as Redis returns. One change at a time: the two are serialised.
// Times are ms from the load's start (oracle.ts judges them).
import { setTimeout as sleep } from "node:timers/promises";
import type { OriginAdmin } from "../../dev/harness/originAdmin";
import { mulberry32 } from "../../dev/harness/random";
import { PRICE_CHANGE_EVERY_MS, PURGE_RETRY_MS, THROUGH_HOT_RANKS } from "./plan";
import { purgeUntilAccepted } from "./purge";

/** One price change: made at the origin at `changedAt`, its purge acknowledged (202) at `ackAt` (null: never). */
export interface PriceChange {
  id: string;
  /** The price in minor units: unique to this change. */
  minor: number;
  changedAt: number;
  ackAt: number | null;
  /** The instance whose /__purge answered 202, and the attempts it took. */
  ackInst: number | null;
  attempts: number;
  /** The purge-through-redis fault whose Redis outage it was made at the start of (its number), or null: the changer's own. */
  fault: number | null;
}

/**
 * Every 2–3 s: a hot product's price changed at the origin (`notify: false`:
 * the origin tells nobody), then POST /__purge {"ids": [id]} to the
 * instances in turn until one answers 202 (a 503, Redis could not record
 * it: again after PURGE_RETRY_MS, as a shop's backend retries). Prices are
 * unique per change ($100.00 and up, never ending in 99 as the catalog's
 * do), so a price shown names its change. `changeNow(fault)`: one more
 * change at once (after the one under way, if any), of one of the
 * THROUGH_HOT_RANKS hottest products, drawn from a stream of its own (the
 * changer's own draws stay as the seed gives them).
 */
export function startPriceChanger(o: {
  targets: readonly string[];
  origin: OriginAdmin;
  token: string;
  hotIds: readonly string[];
  seed: number;
  now: () => number;
}) {
  const changes: PriceChange[] = [];
  const random = mulberry32(o.seed);
  const randomNow = mulberry32(o.seed ^ 0x5eed);
  let stopped = false;
  let next = 10_000;
  let turn = 0;
  const change = async (id: string, fault: number | null) => {
    if (++next % 100 === 99) next++;
    const made: PriceChange = { id, minor: next, changedAt: o.now(), ackAt: null, ackInst: null, attempts: 0, fault };
    await o.origin.changePrice(id, made.minor, { notify: false });
    made.changedAt = o.now();
    changes.push(made);
    const inst = await purgeUntilAccepted({
      targets: o.targets,
      token: o.token,
      body: JSON.stringify({ ids: [id] }),
      first: turn++,
      timeoutMs: 5000,
      retryMs: PURGE_RETRY_MS,
      stopped: () => stopped,
      onAttempt: () => void made.attempts++,
    });
    if (inst === null) return;
    made.ackAt = o.now();
    made.ackInst = inst;
  };
  // One change at a time: each waits for the one before (its purge acknowledged or given up).
  let queue: Promise<void> = Promise.resolve();
  const inTurn = (task: () => Promise<void>): Promise<void> => {
    const run = queue.then(task);
    queue = run.catch(() => undefined);
    return run;
  };
  const loop = (async () => {
    while (!stopped) {
      const [lo, hi] = PRICE_CHANGE_EVERY_MS;
      await sleep(lo + random() * (hi - lo));
      if (stopped) break;
      const id = o.hotIds[Math.floor(random() * o.hotIds.length)]!;
      await inTurn(() => change(id, null));
    }
  })();
  const extra: Promise<void>[] = [];
  const errors: unknown[] = [];
  return {
    changes,
    /** A change made at once, after the one under way: its product, and when its purge's attempts are over (never rejects). */
    changeNow(fault: number): { id: string; done: Promise<void> } {
      const id = o.hotIds[Math.floor(randomNow() * Math.min(THROUGH_HOT_RANKS, o.hotIds.length))]!;
      const done = stopped ? Promise.resolve() : inTurn(() => change(id, fault)).catch((err: unknown) => void errors.push(err));
      extra.push(done);
      return { id, done };
    },
    /** Stops after the changes under way (their purges acknowledged or given up); throws what one of them threw. */
    async stop(): Promise<void> {
      stopped = true;
      await loop;
      await Promise.all(extra);
      if (errors.length) throw errors[0];
    },
  };
}
