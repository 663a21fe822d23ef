// bench:chaos's side of the shop's backend: a purge sent as a shop sends it,
// retried until the tier records it (the price changer's, oracle.ts, and the
// bulk re-price's, reprice.ts).
import { setTimeout as sleep } from "node:timers/promises";

/**
 * POST /__purge with `body`, to the instances in turn from `first`, until
 * one answers 202; the instance that did, or null. A 503 (Redis did not
 * record it) is tried again after `retryMs` when given (the price changer's:
 * a shop's backend retrying every 500 ms), else after its Retry-After (1 s at
 * most: the bulk re-price's), no answer
 * (an isolate restarting) on the next instance after 250 ms; another 4xx
 * is final (null). Each attempt's status (0: no answer) goes to `onAttempt`.
 */
export async function purgeUntilAccepted(o: {
  targets: readonly string[];
  token: string;
  body: string;
  first: number;
  timeoutMs: number;
  /** The wait after a 503, ms; without it, the answer's Retry-After (1 s at most). */
  retryMs?: number;
  stopped: () => boolean;
  onAttempt?: (status: number) => void;
}): Promise<number | null> {
  for (let attempt = 0; !o.stopped(); attempt++) {
    const inst = (o.first + attempt) % o.targets.length;
    let status = 0;
    let wait = 250;
    try {
      const response = await fetch(`${o.targets[inst]}/__purge`, {
        method: "POST",
        headers: { authorization: `Bearer ${o.token}`, "content-type": "application/json" },
        body: o.body,
        signal: AbortSignal.timeout(o.timeoutMs),
      });
      await response.arrayBuffer();
      status = response.status;
      if (status === 503) wait = o.retryMs ?? Math.min(1000, 1000 * (Number(response.headers.get("retry-after")) || 1));
    } catch {
      // no answer: again, on the next instance
    }
    o.onAttempt?.(status);
    if (status === 202) return inst;
    if (status >= 400 && status < 500 && status !== 429) return null;
    await sleep(wait);
  }
  return null;
}
