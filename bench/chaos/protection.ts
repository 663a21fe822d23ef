// bench:chaos's origin protection, judged from the demo origin's own counts
// (its requests per service and product, /__admin/counters): (a) in a quiet
// stretch, no product is fetched more often than each isolate refreshing it
// once per policy period (and once more per purge); (b) a herd for a cold
// product during a fault reaches the origin once per service (once per
// isolate while Redis is faulted). Counter resets are numbered, so that a
// reading that another reset cut short says so rather than undercount.
import { setTimeout as sleep } from "node:timers/promises";
import type { OriginAdmin } from "../../dev/harness/originAdmin";
import { PAGE_RESOURCES, type ResourcePolicy } from "../../src/origin/resources";
import { countStatuses, herd, percentile } from "../lib/probe";
import type { Timeline } from "./faults";
import type { PriceChange } from "./priceChanger";
import { HERD_REQUESTS } from "./plan";

/** The origin's counters, reset by one owner at a time: `epoch` tells a reading whether it was reset meanwhile. */
export function originCounters(origin: OriginAdmin) {
  let epoch = 0;
  return {
    get epoch() {
      return epoch;
    },
    /** Herds reading now: one that starts while another reads shares its reset rather than cut it short. */
    herds: 0,
    async reset(): Promise<number> {
      await origin.resetCounters();
      return ++epoch;
    },
    /** Requests per `service:id` since the last reset. */
    ids: async () => (await origin.request<{ ids?: Record<string, number> }>("/__admin/counters")).ids ?? {},
  };
}
type Counters = ReturnType<typeof originCounters>;

/** What a quiet stretch's origin fetches came to against the bound. */
export interface StretchVerdict {
  seconds: number;
  keys: number;
  over: number;
  /** The key with the most fetches beyond (or closest to) its bound: "inventory:p-001234 9 / 12"; with `ok` null, why not judged. */
  worst: string;
  ok: boolean | null;
}

/** The refresh period a bound allows: the policy's ttl less its jitter (0.9) and refreshed ahead at 75% of it. */
const PERIOD_FACTOR = 0.9 * 0.75;

/**
 * Per service and product, origin fetches over a quiet stretch of `seconds`
 * must be at most instances × (⌈seconds / (ttl × 0.9 × 0.75)⌉ + 1) plus
 * instances per purge of that product in it. null (n/a) when the counters
 * were reset by another (a herd) meanwhile, or the stretch is under 5 s.
 */
export async function judgeStretch(
  counters: Counters,
  epoch: number,
  span: { start: number; end: number },
  o: { instances: number; policies: Record<string, Pick<ResourcePolicy, "ttl">>; changes: readonly PriceChange[] },
): Promise<StretchVerdict> {
  const seconds = Math.round((span.end - span.start) / 100) / 10;
  const ids = await counters.ids();
  if (counters.epoch !== epoch || seconds < 5)
    return { seconds, keys: 0, over: 0, worst: counters.epoch !== epoch ? "counters reset meanwhile" : "under 5 s", ok: null };
  const purges = new Map<string, number>();
  for (const c of o.changes) {
    const at = c.ackAt ?? c.changedAt;
    if (at >= span.start && at <= span.end) purges.set(c.id, (purges.get(c.id) ?? 0) + 1);
  }
  let [keys, over, worstExcess, worst] = [0, 0, Number.NEGATIVE_INFINITY, "none"];
  for (const [key, count] of Object.entries(ids)) {
    const [service, id] = key.split(":") as [string, string];
    const policy = o.policies[service];
    if (!policy || !(PAGE_RESOURCES as readonly string[]).includes(service)) continue;
    keys++;
    const bound = o.instances * (Math.ceil(seconds / (policy.ttl * PERIOD_FACTOR)) + 1) + (purges.get(id) ?? 0) * o.instances;
    if (count > bound) over++;
    if (count - bound > worstExcess) [worstExcess, worst] = [count - bound, `${key} ${count} / ${bound}`];
  }
  return { seconds, keys, over, worst, ok: over === 0 };
}

/** One herd: its answers, the origin's fetches of its product per service, and the bound they are held to. */
export interface HerdResult {
  fault: number;
  id: string;
  at: number;
  seconds: number;
  statuses: Record<string, number>;
  p50Ms: number;
  maxMs: number;
  fetches: Record<string, number> | null;
  /** Of those, the ones the origin answered with an injected failure. */
  failures: Record<string, number> | null;
  redisFaulted: boolean;
  bound: number;
  ok: boolean | null;
}

/** HERD_REQUESTS requests at once for cold product `id`, spread over `targets`; then the origin's fetches of it. */
export async function sendHerd(o: {
  fault: number;
  id: string;
  targets: readonly string[];
  counters: Counters;
  origin: OriginAdmin;
  timeline: Timeline;
  now: () => number;
}): Promise<HerdResult> {
  const epoch = o.counters.herds++ > 0 ? o.counters.epoch : await o.counters.reset();
  try {
    return await herdOnce(o, epoch);
  } finally {
    o.counters.herds--;
  }
}

async function herdOnce(o: Parameters<typeof sendHerd>[0], epoch: number): Promise<HerdResult> {
  const at = o.now();
  const { answers, seconds } = await herd(o.targets, `/products/${o.id}`, HERD_REQUESTS);
  const end = o.now();
  await sleep(1000);
  const { requests, failed } = await o.origin.outcomesOf(o.id);
  const current = o.counters.epoch === epoch;
  const perService = (counts: Record<string, number>) => Object.fromEntries(PAGE_RESOURCES.map((service) => [service, counts[service] ?? 0]));
  const fetches = current ? perService(requests) : null;
  const failures = current ? perService(failed) : null;
  const redisFaulted = o.timeline.redisFaulted(at, end);
  const bound = redisFaulted ? o.targets.length : 1;
  const ms = answers.map((a) => a.ms).sort((a, b) => a - b);
  return {
    fault: o.fault,
    id: o.id,
    at: Math.round(at),
    seconds: Math.round(seconds * 10) / 10,
    statuses: countStatuses(answers),
    p50Ms: Math.round(percentile(ms, 50)),
    maxMs: Math.round(ms.at(-1) ?? 0),
    fetches,
    failures,
    redisFaulted,
    bound,
    // The bound is on answered fetches: a fetch the origin failed releases the lock, and a waiter fetches again (docs/architecture.md, "Coalescing").
    ok: fetches === null || failures === null ? null : PAGE_RESOURCES.every((service) => (fetches[service] ?? 0) - (failures[service] ?? 0) <= bound),
  };
}
