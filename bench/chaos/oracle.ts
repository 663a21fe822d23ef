// bench:chaos's oracle: it judges the tier from the outside, never from its
// own counters. A prober asks the hot products in turn and Zipf draws, and
// records every answer (instance, product, when sent and answered, status,
// the price shown, Cache-Status); a price changer, the shop's backend,
// changes a hot product's price at the origin (the origin itself tells
// nobody) and purges it, retrying until the 202 (priceChanger.ts). After the
// run, every answer is judged against the price changes and the timeline of
// faults (faults.ts): freshness (no old price after a purge's deadline) and
// availability (no failure for a page the tier has served). All times are ms
// from the load's start, on this process's one monotonic clock. The rules:
// bench/chaos/README.md.
import { setTimeout as sleep } from "node:timers/promises";
import { member } from "../../dev/harness/cacheStatus";
import { mulberry32 } from "../../dev/harness/random";
import { PAGE_RESOURCES, PAGE_SUBJECT } from "../../src/origin/resources";
import { priceNow } from "../lib/page";
import { get, percentile } from "../lib/probe";
import { faultName, type Timeline } from "./faults";
import { lostPurgeExcuse } from "./lostPurge";
import { PROBE_TIMEOUT_MS, WATCH } from "./plan";
import type { PriceChange } from "./priceChanger";

/** One answer (or none) the prober got. */
export interface ProbeRecord {
  inst: number;
  id: string;
  hot: boolean;
  sent: number;
  answered: number;
  /** 0: no answer (socket error, or none within PROBE_TIMEOUT_MS). */
  status: number;
  price: string | null;
  cacheStatus: string;
  /** The tier's own account of the page's time (Server-Timing): where a slow answer spent it. */
  serverTiming: string;
}

/**
 * `rate` requests a second, each on a socket of its own (a restarted isolate
 * leaves no dead pooled connection behind), half for the hot products in
 * turn, half Zipf draws (`zipfRank`), each to an instance drawn from `seed`.
 * `watch(id, until)`: WATCH.rate more a second for that product, to the
 * instances in turn, until `until` settles (a purge-through-redis's
 * product: an old copy shown past the deadline is seen, not missed between
 * two of the turn's visits). `pause()` stops sending and waits for the
 * requests in flight (a deploy); `stop()` the same, for good.
 */
export function startProber(o: { targets: readonly string[]; rate: number; hotIds: readonly string[]; zipfId: () => string; seed: number; now: () => number }) {
  const records: ProbeRecord[] = [];
  const random = mulberry32(o.seed);
  let [credit, sent, inFlight, paused, hot] = [0, 0, 0, false, 0];
  /** The products watched, each with how many watches are on. */
  const watched = new Map<string, number>();
  let [watchCredit, watchTurn] = [0, 0];
  const send = () => {
    const isHot = sent++ % 2 === 0;
    const id = isHot ? o.hotIds[hot++ % o.hotIds.length]! : o.zipfId();
    sendTo(id, Math.floor(random() * o.targets.length), isHot);
  };
  const sendTo = (id: string, inst: number, isHot: boolean) => {
    const at = o.now();
    inFlight++;
    void get(`${o.targets[inst]}/products/${id}`, PROBE_TIMEOUT_MS, true).then((answer) => {
      inFlight--;
      const ok = answer.status === 200 && answer.body !== undefined;
      const cacheStatus = answer.headers?.["cache-status"];
      const serverTiming = answer.headers?.["server-timing"];
      records.push({
        inst,
        id,
        hot: isHot,
        sent: at,
        answered: at + answer.ms,
        status: answer.status,
        price: ok ? priceNow(answer.body!) : null,
        cacheStatus: typeof cacheStatus === "string" ? cacheStatus : "",
        serverTiming: typeof serverTiming === "string" ? serverTiming : "",
      });
    });
  };
  // This process's own lateness (its event loop busy: a herd's 200 answers, the re-price's bodies), sampled
  // with the ticks: an answer read late here is timed late, and a p99 taken then says as much about the prober.
  const lags: { at: number; ms: number }[] = [];
  let lastTick = o.now();
  const timer = setInterval(() => {
    const at = o.now();
    if (at - lastTick - 20 > 5) lags.push({ at, ms: Math.round(at - lastTick - 20) });
    lastTick = at;
    if (paused) return;
    credit += o.rate / 50;
    // A bound on what hangs (the tier answers within seconds; the time-out is 10 s).
    for (; credit >= 1; credit--) if (inFlight < 400) send();
    if (watched.size) watchCredit += WATCH.rate / 50;
    for (; watchCredit >= 1; watchCredit--) for (const id of watched.keys()) if (inFlight < 400) sendTo(id, watchTurn++ % o.targets.length, false);
  }, 20);
  const drained = async () => {
    for (let waited = 0; inFlight > 0 && waited < PROBE_TIMEOUT_MS + 1000; waited += 20) await sleep(20);
  };
  return {
    records,
    /** The prober's own lateness over [a, b): its largest, ms (0: never over 5 ms). */
    lagMax: (a: number, b: number) => Math.max(0, ...lags.filter((l) => l.at >= a && l.at < b).map((l) => l.ms)),
    async pause(): Promise<void> {
      paused = true;
      credit = 0;
      await drained();
    },
    resume: () => void (paused = false),
    watch(id: string, until: Promise<unknown>): void {
      watched.set(id, (watched.get(id) ?? 0) + 1);
      const done = () => {
        const left = (watched.get(id) ?? 1) - 1;
        if (left > 0) watched.set(id, left);
        else watched.delete(id);
      };
      until.then(done, done);
    },
    async stop(): Promise<void> {
      clearInterval(timer);
      await drained();
    },
  };
}

/** The minor units of a price as a page shows it ("$100.07" → 10007). */
const minorOf = (shown: string) => Number(shown.replace(/[^\d]/g, ""));

/** The tier's settings the deadlines are made of, as the workers report them. */
export interface TierTimes {
  pollMs: number;
  l2TimeoutMs: number;
}

/**
 * When a purge acknowledged at `ack` must show everywhere. It counts from its
 * 202 (Redis was up then, or there would be no 202): ack + PURGE_POLL_MS +
 * one L2 round trip (L2_TIMEOUT_MS plus the gateway's added latency then).
 * While Redis is unreachable the isolates cannot read the purge log (blind):
 * an outage (`timeline.redisOut()`) that BEGINS within the purge's window
 * [ack, deadline] moves the deadline by its length, and so does each one
 * that begins within the window so extended (in order of start). An outage
 * that began before the 202 moves nothing, even one whose recorded end is
 * after it: the purge was retried through it, and its 202 says Redis is back.
 */
export function purgeDeadline(ack: number, timeline: Timeline, times: TierTimes): number {
  const roundTrip = times.pollMs + times.l2TimeoutMs;
  let deadline = ack + roundTrip + timeline.slowMs(ack, ack + roundTrip);
  for (const out of timeline.redisOut()) {
    if (out.start > deadline) break;
    if (out.start >= ack) deadline += out.end - out.start;
  }
  return deadline;
}

/** The faults on over [a, b], named; "none". */
const faultsDuring = (timeline: Timeline, a: number, b = a) => timeline.activeDuring(a, b).map((r) => faultName(r.fault));

export interface FreshnessViolation {
  id: string;
  inst: number;
  sent: number;
  /** ms after the deadline the request was sent. */
  lateMs: number;
  shown: string;
  expected: string;
  cacheStatus: string;
  /** The change that should have shown: acknowledged at, by which instance, its deadline. */
  ackAt: number;
  ackInst: number;
  deadline: number;
  faults: string[];
  /** Why it is the documented exception (lostPurge.ts: a purge lost with Redis's data, the page stale-if-error while the origin failed), counted apart; null: a violation. */
  excused: string | null;
}

const dollars = (minor: number) => `$${Math.floor(minor / 100)}.${String(minor % 100).padStart(2, "0")}`;

/**
 * Every 200 showing a price older than a change whose deadline had passed
 * when the request was sent: a violation, unless every change it missed is a
 * purge lost with Redis's data and the page was stale-if-error while the
 * origin failed for it (lostPurgeExcuse: then `excused` says so).
 */
export function judgeFreshness(records: readonly ProbeRecord[], changes: readonly PriceChange[], timeline: Timeline, times: TierTimes): FreshnessViolation[] {
  const byId = new Map<string, { change: PriceChange; deadline: number }[]>();
  for (const change of changes) {
    const list = byId.get(change.id) ?? [];
    list.push({ change, deadline: change.ackAt === null ? Infinity : purgeDeadline(change.ackAt, timeline, times) });
    byId.set(change.id, list);
  }
  const violations: FreshnessViolation[] = [];
  for (const r of records) {
    const list = byId.get(r.id);
    if (r.status !== 200 || !list || r.price === null) continue;
    // The latest change due by the time the request was sent (changes are in order, and so are their deadlines but for outages).
    let due = -1;
    for (const [k, { deadline }] of list.entries()) if (deadline < r.sent) due = k;
    if (due < 0) continue;
    const shownMinor = minorOf(r.price);
    const shown = list.findIndex(({ change }) => change.minor === shownMinor);
    if (shown >= due) continue;
    const { change, deadline } = list[due]!;
    violations.push({
      id: r.id,
      inst: r.inst,
      sent: Math.round(r.sent),
      lateMs: Math.round(r.sent - deadline),
      shown: r.price,
      expected: dollars(change.minor),
      cacheStatus: r.cacheStatus,
      ackAt: Math.round(change.ackAt!),
      ackInst: change.ackInst!,
      deadline: Math.round(deadline),
      faults: faultsDuring(timeline, r.sent),
      excused: lostPurgeExcuse(
        r,
        list.slice(shown + 1, due + 1).map(({ change }) => change),
        timeline,
        times,
      ),
    });
  }
  return violations;
}

/** A non-200 answer, judged. */
export interface Failure {
  id: string;
  inst: number;
  sent: number;
  ms: number;
  status: number;
  /** violation: a page already served; excused / allowed: see the reason; restart: the harness stopped the isolate under it. */
  verdict: "violation" | "excused" | "allowed" | "not served" | "restart";
  reason: string;
  faults: string[];
  /** The failed answer's Cache-Status (what each part came to), and the page's last 200s before it (instance, s sent, the product part's tier and the inventory's): what held it. */
  cacheStatus: string;
  history: string;
}

/**
 * Every answer other than 200. A page counts as served once some instance
 * answered it 200, showing its latest price change's price, to a request
 * sent after that change's purge's 202 (and before this one): a 200 within
 * the purge's deadline may show the copy the purge then takes away. So may
 * one that shows the new price from L1 within the deadline: a copy fetched
 * after the price changed but before the purge was recorded (its 202 held
 * back by a Redis fault) is one the purge takes away too, on every part
 * the purge names. Allowed: a 503 for a page not served while a core
 * service is faulted. Excused: a 503 for a served page while a core service
 * is faulted, from an isolate that holds no copy of it (it has not answered
 * it 200 since it started and the purge: restarted since, or never did; or
 * its L1 pushed out entries since its last 200 there, and an LRU may have
 * dropped it: evictedSince) while
 * L2 cannot have it either: Redis faulted, or emptied since and the page not
 * written to it again (no answer since whose product came from L2 or the
 * origin). Nothing could hold it. Any other failure of a served page
 * is a violation; of a page not served yet (no core fault), it is listed,
 * not judged.
 */
export function judgeAvailability(
  records: readonly ProbeRecord[],
  changes: readonly PriceChange[],
  timeline: Timeline,
  times: TierTimes,
  l1: readonly L1Sample[] = [],
): Failure[] {
  const acks = new Map<string, PriceChange[]>();
  for (const c of changes) if (c.ackAt !== null) acks.set(c.id, [...(acks.get(c.id) ?? []), c]);
  const oks = new Map<string, ProbeRecord[]>();
  for (const r of records) if (r.status === 200) oks.set(r.id, [...(oks.get(r.id) ?? []), r]);
  const failures: Failure[] = [];
  for (const r of records) {
    if (r.status === 200) continue;
    const end = r.answered;
    const failure = (verdict: Failure["verdict"], reason: string): Failure => ({
      id: r.id,
      inst: r.inst,
      sent: Math.round(r.sent),
      ms: Math.round(r.answered - r.sent),
      status: r.status,
      verdict,
      reason,
      faults: faultsDuring(timeline, r.sent, end),
      cacheStatus: r.cacheStatus,
      history: (oks.get(r.id) ?? [])
        .filter((q) => q.answered < r.sent)
        .slice(-3)
        .map((q) => `#${q.inst + 1} ${(q.sent / 1000).toFixed(1)} s ${tierOf(q.cacheStatus, PAGE_SUBJECT)}/${tierOf(q.cacheStatus, "inventory")}`)
        .join(", "),
    });
    if (timeline.activeDuring(r.sent, end).some((f) => f.restart && f.restart.start <= end && r.sent <= f.restart.end)) {
      failures.push(failure("restart", "the harness restarted the isolate meanwhile (deploy)"));
      continue;
    }
    // The page as of its latest purge: a 200 sent after the purge's 202 that shows the new price (one sent
    // within the purge's deadline may still show the old copy, which the purge then takes away).
    const lastChange = (acks.get(r.id) ?? []).filter((c) => c.ackAt! < r.sent).at(-1);
    const ok = (oks.get(r.id) ?? []).filter((q) => q.answered < r.sent);
    const deadline = lastChange ? purgeDeadline(lastChange.ackAt!, timeline, times) : 0;
    // Within the deadline, a part from L1 may be a copy the purge takes away (fetched before it was recorded).
    const purgeProof = (q: ProbeRecord) => q.sent > deadline || PAGE_RESOURCES.every((resource) => tierOf(q.cacheStatus, resource) !== "pp-l1");
    const served = ok.filter((q) => !lastChange || (q.sent > lastChange.ackAt! && q.price !== null && minorOf(q.price) === lastChange.minor && purgeProof(q)));
    const core = timeline.coreFaulted(r.sent, end);
    if (served.length === 0) {
      if (r.status === 503 && core) failures.push(failure("allowed", "not served yet, a core service faulted"));
      else failures.push(failure("not served", core ? "not served yet (not a 503)" : "not served yet, no core fault"));
      continue;
    }
    const started = timeline.lastRestartBefore(r.sent);
    const lastHere = served.filter((q) => q.inst === r.inst && q.answered > started).at(-1);
    const evicted = lastHere ? evictedSince(l1, r.inst, lastHere.sent, r.answered) : null;
    const heldHere = lastHere !== undefined && !evicted;
    const loss = timeline.lastLossBefore(r.sent);
    const l2Lost = loss !== null && !ok.some((q) => q.sent > loss.end && ["pp-l2", "pp-origin"].includes(tierOf(q.cacheStatus, PAGE_SUBJECT)));
    const l2Out = timeline.redisFaulted(r.sent, end);
    if (r.status === 503 && core && !heldHere && (l2Out || l2Lost)) {
      const restarted = ok.some((q) => q.inst === r.inst && q.answered < started);
      const here = evicted
        ? `isolate's L1 pushed out ${evicted} entries since its last 200 of the page`
        : restarted
          ? "isolate restarted since its last 200 of the page"
          : "isolate never answered it 200 since its start and the page's purge";
      failures.push(failure("excused", `${here}; ${l2Out ? "Redis faulted" : "Redis emptied since the page was in it"}; a core service faulted`));
      continue;
    }
    failures.push(failure("violation", lastHere && evicted === null ? "a served page (its isolate's L1 not sampled then)" : "a served page"));
  }
  return failures;
}

/** One isolate's L1 as its status reported it at `at` (ms from the load's start): entries its byte bound pushed out since the isolate started. */
export interface L1Sample {
  inst: number;
  at: number;
  evictions: number;
  /** Admission then (overload.admission of the status: the limit, cold pages in progress and waiting, shed so far), for reading a window's 503s. */
  admission?: Record<string, unknown>;
}

/**
 * How many entries an isolate's L1 pushed out between `from` and `to`,
 * counted between the last sample at or before `from` and the first at or
 * after `to` (so none is missed); null without such samples or across a
 * restart (its count starts again). Any at all, and an LRU may have dropped
 * a page not asked for since: each eviction takes the least recently used,
 * which it is once every older entry has been asked for again.
 */
export function evictedSince(samples: readonly L1Sample[], inst: number, from: number, to: number): number | null {
  const own = samples.filter((x) => x.inst === inst);
  const before = own.filter((x) => x.at <= from).at(-1);
  const after = own.find((x) => x.at >= to);
  if (!before || !after || after.evictions < before.evictions) return null;
  return after.evictions - before.evictions;
}

/**
 * Whether every part of a page came from L1 or the location (Cache-Status)
 * with no origin asked first: a cached page; anything else is cold (a copy
 * usable on error, `fwd=stale`, is served only after the origin failed or
 * ran out of time: the page waited for that).
 */
export function isCached(cacheStatus: string): boolean {
  if (!cacheStatus) return false;
  try {
    return PAGE_RESOURCES.every((resource) => {
      const part = member(cacheStatus, resource);
      return ["pp-l1", "pp-location"].includes(part.split(";")[0]!.trim()) && !part.includes("fwd=");
    });
  } catch {
    return false;
  }
}

/** The tier of one part of a page ("pp-l1"...; "" when absent). */
export function tierOf(cacheStatus: string, resource: string): string {
  try {
    return member(cacheStatus, resource).split(";")[0]!.trim();
  } catch {
    return "";
  }
}

/** What the prober got over [a, b) (by time sent): answers by status, the p99 ms of cached and of cold pages. */
export function probeFigures(records: readonly ProbeRecord[], a: number, b: number) {
  const within = records.filter((r) => r.sent >= a && r.sent < b);
  const statuses: Record<string, number> = {};
  for (const r of within) statuses[r.status || "none"] = (statuses[r.status || "none"] ?? 0) + 1;
  const ms = (list: ProbeRecord[]) => list.map((r) => r.answered - r.sent).sort((x, y) => x - y);
  const answered = within.filter((r) => r.status !== 0);
  const cached = ms(answered.filter((r) => isCached(r.cacheStatus)));
  const cold = ms(answered.filter((r) => !isCached(r.cacheStatus)));
  const p99 = (sorted: number[]) => (sorted.length ? Math.round(percentile(sorted, 99) * 10) / 10 : null);
  return { count: within.length, statuses, cachedP99: p99(cached), cached: cached.length, coldP99: p99(cold), cold: cold.length };
}
