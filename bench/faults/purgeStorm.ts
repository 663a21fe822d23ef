// bench's purge-storm scenario: the shop's backend purging while visitors
// read. `rate` purges a second, each of one product drawn uniformly from the
// catalog, POST /__purge to the instances in turn (each with its own
// deadline, none waiting for another); and, a second into the storm, the
// most popular product's price changed at the origin and purged like the
// others: how long until every instance serves the new price.
import { setTimeout as sleep } from "node:timers/promises";
import type { OriginAdmin } from "../../dev/harness/originAdmin";
import { getPage, priceNow, priceOtherThan } from "../lib/page";
import { percentile } from "../lib/probe";

export interface PurgeStormResult {
  rate: number;
  sent: number;
  /** Answers by status ("0": none within the deadline, or no connection). */
  statuses: Record<string, number>;
  p50Ms: number;
  p99Ms: number;
  /** The price change: the product, and ms from the change to the first poll at which every instance served the new price (null: not within capMs). */
  price: { id: string; from: string | null; to: string; seenAfterMs: number | null; capMs: number };
}

const PURGE_DEADLINE_MS = 5000;
const POLL_MS = 50;

async function purge(target: string, token: string, id: string): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  try {
    const response = await fetch(`${target}/__purge`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ ids: [id] }),
      signal: AbortSignal.timeout(PURGE_DEADLINE_MS),
    });
    await response.arrayBuffer();
    return { status: response.status, ms: performance.now() - started };
  } catch {
    return { status: 0, ms: performance.now() - started };
  }
}

/** Every `1000 / rate` ms for `ms`, a purge of `randomId()`; the price change after a second; all answered before it returns. */
export async function purgeStorm(options: {
  targets: readonly string[];
  token: string;
  origin: OriginAdmin;
  rate: number;
  ms: number;
  randomId: () => string;
  hotId: string;
  /** How long to poll for the new price at most (the purge bound and then some). */
  capMs: number;
}): Promise<PurgeStormResult> {
  const { targets, token, rate } = options;
  const started = performance.now();
  const answers: Promise<{ status: number; ms: number }>[] = [];
  const priceSeen = (async () => {
    await sleep(1000);
    const from = priceNow((await getPage(`${targets[0]}/products/${options.hotId}`)).body);
    const { minor, shown: to } = priceOtherThan(from);
    await options.origin.changePrice(options.hotId, minor);
    const changedAt = performance.now();
    answers.push(purge(targets[0]!, token, options.hotId));
    while (performance.now() - changedAt < options.capMs) {
      const pages = await Promise.all(targets.map((target) => getPage(`${target}/products/${options.hotId}`).catch(() => null)));
      if (pages.every((page) => page !== null && priceNow(page.body) === to)) return { from, to, seenAfterMs: Math.round(performance.now() - changedAt) };
      await sleep(POLL_MS);
    }
    return { from, to, seenAfterMs: null };
  })();
  for (let n = 0; performance.now() - started < options.ms; n++) {
    const due = started + (n * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    answers.push(purge(targets[n % targets.length]!, token, options.randomId()));
  }
  const price = await priceSeen;
  const done = await Promise.all(answers);
  const statuses: Record<string, number> = {};
  for (const { status } of done) statuses[status] = (statuses[status] ?? 0) + 1;
  const ms = done.map((answer) => answer.ms).sort((a, b) => a - b);
  return {
    rate,
    sent: done.length,
    statuses,
    p50Ms: Math.round(percentile(ms, 50) * 10) / 10,
    p99Ms: Math.round(percentile(ms, 99) * 10) / 10,
    price: { id: options.hotId, ...price, capMs: options.capMs },
  };
}
