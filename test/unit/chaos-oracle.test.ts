// bench:chaos's oracle (bench/chaos/oracle.ts), judged on answers and
// faults written by hand: when a purge is due (from its 202, moved only by a
// Redis outage that begins within its window), which old prices are stale,
// and which failures of a page are violations, excused or allowed. Times are
// ms from the load's start, as the oracle's clock counts them.
import { describe, expect, it } from "vitest";
import { type FaultRecord, type Span, Timeline } from "../../bench/chaos/faults";
import { judgeAvailability, judgeFreshness, evictedSince, type L1Sample, type ProbeRecord, purgeDeadline, type TierTimes } from "../../bench/chaos/oracle";
import { LOST_PURGE } from "../../bench/chaos/lostPurge";
import type { PriceChange } from "../../bench/chaos/priceChanger";
import type { FaultSpec } from "../../bench/chaos/schedule";

/** PURGE_POLL_MS and L2_TIMEOUT_MS: a purge is due 1,100 ms after its 202 when nothing moves it. */
const TIMES: TierTimes = { pollMs: 1000, l2TimeoutMs: 100 };
const BOUND_MS = TIMES.pollMs + TIMES.l2TimeoutMs;
/** How long a fault's effect outlasts its undo (run.ts: the origin breaker's way back; the L2 breaker's). */
const TAILS = { coreMs: 2500, redisMs: 750 };

const span = (start: number, end: number): Span => ({ start, end });

/** A fault as it ran: its spec, its window, and what it did when (the spans faultControls notes). */
function ran(n: number, spec: FaultSpec, window: Span, did: Partial<Omit<FaultRecord, "fault" | "span">> = {}): FaultRecord {
  return {
    fault: { n, atS: Math.round(window.start / 1000), durationS: Math.round((window.end - window.start) / 1000), spec, herdAtS: null },
    span: window,
    redisOut: [],
    redisFault: [],
    coreFault: null,
    slow: null,
    restart: null,
    lost: null,
    ...did,
  };
}

function timelineOf(...records: FaultRecord[]): Timeline {
  const timeline = new Timeline(TAILS);
  timeline.records.push(...records);
  return timeline;
}

/** A Redis pause over `out`, within a purge-through-redis's window (which goes on 5 s after it). */
function pauseThrough(n: number, out: Span): FaultRecord {
  const spec: FaultSpec = { kind: "purge-through-redis", redis: "pause", outS: Math.round((out.end - out.start) / 1000) };
  return ran(n, spec, span(out.start, out.end + 5000), { redisOut: [{ ...out }], redisFault: [{ ...out }] });
}

/** "$100.02" for 10002, as a page shows a price. */
const shown = (minor: number) => `$${Math.floor(minor / 100)}.${String(minor % 100).padStart(2, "0")}`;

function change(id: string, minor: number, ackAt: number | null, ackInst = 0): PriceChange {
  return { id, minor, changedAt: (ackAt ?? 0) - 50, ackAt, ackInst: ackAt === null ? null : ackInst, attempts: 1, fault: null };
}

/** One answer the prober got: a 200 showing `price` (minor units), or another status. */
function answer(o: { id: string; sent: number; inst?: number; status?: number; price?: number; cacheStatus?: string }): ProbeRecord {
  const status = o.status ?? 200;
  return {
    inst: o.inst ?? 0,
    id: o.id,
    hot: true,
    sent: o.sent,
    answered: o.sent + 20,
    status,
    price: status === 200 && o.price !== undefined ? shown(o.price) : null,
    cacheStatus: o.cacheStatus ?? "",
    serverTiming: "",
  };
}

const ID = "p-000042";
/** The page's price before the change judged, and after it; the change's 202 at ACK. */
const [OLD, NEW] = [10_001, 10_002];
const ACK = 10_000;
const changes = [change(ID, OLD, 5000), change(ID, NEW, ACK)];

describe("when a purge is due (purgeDeadline)", () => {
  it("counts from the 202: PURGE_POLL_MS and one L2 round trip", () => {
    expect(purgeDeadline(ACK, timelineOf(), TIMES)).toBe(ACK + BOUND_MS);
  });

  it("adds the gateway's latency while a slow Redis is on then", () => {
    const slow = ran(1, { kind: "redis-slow", ms: 80 }, span(9000, 20_000), { redisFault: [span(9000, 20_000)], slow: { ms: 80, span: span(9000, 20_000) } });
    expect(purgeDeadline(ACK, timelineOf(slow), TIMES)).toBe(ACK + BOUND_MS + 80);
  });

  it("is moved by the length of an outage that begins within its window", () => {
    expect(purgeDeadline(ACK, timelineOf(pauseThrough(1, span(10_500, 13_500))), TIMES)).toBe(ACK + BOUND_MS + 3000);
  });

  it("is moved again by an outage that begins within the window so extended, not by one that begins after it", () => {
    // The first moves the deadline to 13,100; the second begins at 13,000 (within it) and moves it 1 s more, to 14,100;
    // the third begins at 14,200, after it.
    const timeline = timelineOf(pauseThrough(1, span(10_500, 12_500)), pauseThrough(2, span(13_000, 14_000)), pauseThrough(3, span(14_200, 16_000)));
    expect(purgeDeadline(ACK, timeline, TIMES)).toBe(ACK + BOUND_MS + 2000 + 1000);
  });

  it.each([
    ["ended before the 202", 9980],
    ["ended at the 202", ACK],
    ["is recorded as ending after the 202 (the harness heard of Redis's return after the tier did)", ACK + 200],
  ])("is not moved by an outage that began before the 202 and %s", (_, end) => {
    expect(purgeDeadline(ACK, timelineOf(pauseThrough(1, span(7000, end))), TIMES)).toBe(ACK + BOUND_MS);
  });
});

describe("freshness (judgeFreshness)", () => {
  it("catches a late purge: an old price in a 200 to a request sent after the deadline", () => {
    const records = [answer({ id: ID, sent: ACK + BOUND_MS + 200, inst: 1, price: OLD, cacheStatus: 'pp-l1; hit; detail="product"' })];
    const [violation, ...more] = judgeFreshness(records, changes, timelineOf(), TIMES);
    expect(more).toEqual([]);
    expect(violation).toMatchObject({
      id: ID,
      inst: 1,
      lateMs: 200,
      shown: shown(OLD),
      expected: shown(NEW),
      ackAt: ACK,
      deadline: ACK + BOUND_MS,
      cacheStatus: 'pp-l1; hit; detail="product"',
      faults: [],
    });
  });

  it("takes an old price sent before the deadline, and the new one after it, as no violation", () => {
    const records = [
      answer({ id: ID, sent: ACK + 300, price: OLD }),
      answer({ id: ID, sent: ACK + BOUND_MS - 1, price: OLD }),
      answer({ id: ID, sent: ACK + 5000, price: NEW }),
    ];
    expect(judgeFreshness(records, changes, timelineOf(), TIMES)).toEqual([]);
  });

  it("excuses an old price while an outage that began within the purge's window delays it, up to the deadline moved by its length, not after", () => {
    const timeline = timelineOf(pauseThrough(1, span(ACK + 500, ACK + 3500)));
    const moved = ACK + BOUND_MS + 3000;
    const excused = answer({ id: ID, sent: moved - 100, price: OLD });
    const late = answer({ id: ID, sent: moved + 100, price: OLD });
    const violations = judgeFreshness([excused, late], changes, timeline, TIMES);
    expect(violations.map((v) => ({ sent: v.sent, lateMs: v.lateMs, deadline: v.deadline }))).toEqual([{ sent: moved + 100, lateMs: 100, deadline: moved }]);
    expect(violations[0]!.faults).toEqual(["#1 purge-through-redis (redis paused 3 s)"]);
  });

  it.each([
    ["just before the 202", ACK - 20],
    ["at the 202", ACK],
  ])("excuses nothing for an outage that ended %s (the purge was retried through it): an old price 1.5 s after the 202 is caught", (_, end) => {
    const timeline = timelineOf(pauseThrough(1, span(ACK - 3000, end)));
    const violations = judgeFreshness([answer({ id: ID, sent: ACK + 1500, price: OLD })], changes, timeline, TIMES);
    expect(violations).toMatchObject([{ lateMs: 1500 - BOUND_MS, deadline: ACK + BOUND_MS, shown: shown(OLD), expected: shown(NEW) }]);
  });

  it("excuses nothing for an outage recorded as ending just after the 202: it began before it", () => {
    const timeline = timelineOf(pauseThrough(1, span(ACK - 3000, ACK + 200)));
    const violations = judgeFreshness([answer({ id: ID, sent: ACK + BOUND_MS + 100, price: OLD })], changes, timeline, TIMES);
    expect(violations).toMatchObject([{ lateMs: 100, deadline: ACK + BOUND_MS }]);
  });

  it("judges no change whose purge was never acknowledged", () => {
    const unacknowledged = [change(ID, OLD, 5000), change(ID, NEW, null)];
    expect(judgeFreshness([answer({ id: ID, sent: 60_000, price: OLD })], unacknowledged, timelineOf(), TIMES)).toEqual([]);
  });
});

describe("a purge lost with Redis's data (lostPurgeExcuse): the documented exception, excused only when every condition holds", () => {
  /** Redis killed 200 ms after the purge's 202 (its data, the purge log with it, lost), back empty 3 s later: the deadline moves 3 s. */
  const LOSS = ACK + 200;
  const restartEmpty = (at = LOSS) =>
    ran(1, { kind: "redis-restart-empty", downS: 3 }, span(at, at + 9000), {
      redisOut: [span(at, at + 3000)],
      redisFault: [span(at, at + 9000)],
      lost: span(at, at + 3000),
    });
  /** Every origin service hanging from before the purge until long after. */
  const hang = ran(2, { kind: "origin-hang", service: "all" }, span(ACK - 5000, ACK + 30_000), { coreFault: span(ACK - 5000, ACK + 30_000) });
  /** The page as the isolate that never read the purge serves it while the origin fails: every part a copy kept for errors. */
  const STALE_IF_ERROR =
    'pp-l1; fwd=stale; fwd-status=503; ttl=-7; detail="product stale-if-error", pp-l1; fwd=stale; fwd-status=503; ttl=-9; detail="inventory stale-if-error"';
  /** Instance 1's old price, 6 s after the 202 (after the deadline, moved to ACK + 4.1 s by the outage). */
  const stale = (o: { inst?: number; cacheStatus?: string; sent?: number } = {}) =>
    answer({ id: ID, sent: o.sent ?? ACK + 6000, inst: o.inst ?? 1, price: OLD, cacheStatus: o.cacheStatus ?? STALE_IF_ERROR });
  const judged = (records: ProbeRecord[], timeline: Timeline, list = changes) => judgeFreshness(records, list, timeline, TIMES).map((v) => v.excused);

  it("excuses an old price from the other isolate, stale-if-error while the origin hangs for the product, its purge acknowledged 200 ms before Redis lost its data", () => {
    const [violation, ...more] = judgeFreshness([stale()], changes, timelineOf(restartEmpty(), hang), TIMES);
    expect(more).toEqual([]);
    // Still listed, with its deadline: counted apart, never dropped.
    expect(violation).toMatchObject({ inst: 1, deadline: ACK + BOUND_MS + 3000, lateMs: 6000 - BOUND_MS - 3000, excused: LOST_PURGE });
  });

  it("excuses a loss just within one poll and the L2 round trip after the 202, not one at or past it", () => {
    expect(judged([stale()], timelineOf(restartEmpty(ACK + BOUND_MS - 1), hang))).toEqual([LOST_PURGE]);
    expect(judged([stale()], timelineOf(restartEmpty(ACK + BOUND_MS), hang))).toEqual([null]);
  });

  it("calls it a violation when Redis lost no data: paused, not killed", () => {
    expect(judged([stale()], timelineOf(pauseThrough(1, span(LOSS, LOSS + 3000)), hang))).toEqual([null]);
  });

  it("calls it a violation when the loss came before the purge's 202 (the purge was logged after Redis came back)", () => {
    expect(judged([stale({ sent: ACK + 2000 })], timelineOf(restartEmpty(ACK - 4000), hang))).toEqual([null]);
  });

  it("calls it a violation from the isolate that acknowledged the purge: it applied it", () => {
    expect(judged([stale({ inst: 0 })], timelineOf(restartEmpty(), hang))).toEqual([null]);
  });

  it.each([
    ["an L1 hit", 'pp-l1; hit; ttl=200; detail="product", pp-l1; hit; ttl=5; detail="inventory"'],
    ["stale-while-revalidate", 'pp-l1; hit; ttl=-4; detail="product stale", pp-l1; hit; ttl=5; detail="inventory"'],
    [
      "another part stale-if-error, the price's product part not",
      'pp-l1; hit; ttl=200; detail="product", pp-l1; fwd=stale; fwd-status=503; ttl=-9; detail="inventory stale-if-error"',
    ],
    ["no Cache-Status", ""],
  ])("calls it a violation when the page was not served stale-if-error: %s", (_, cacheStatus) => {
    expect(judged([stale({ cacheStatus })], timelineOf(restartEmpty(), hang))).toEqual([null]);
  });

  it.each([
    ["no origin fault", []],
    ["only another service hanging", [ran(2, { kind: "origin-hang", service: "reviews" }, span(ACK - 5000, ACK + 30_000), {})]],
    [
      "the product only slow",
      [ran(2, { kind: "origin-slow", service: "product", latencyMs: 2000 }, span(ACK - 5000, ACK + 30_000), { coreFault: span(ACK - 5000, ACK + 30_000) })],
    ],
    [
      "the product's fault undone longer than its breaker's tail before",
      [
        ran(2, { kind: "origin-failing", service: "product", errorRate: 1 }, span(ACK - 5000, ACK), {
          coreFault: span(ACK - 5000, ACK + 6000 - TAILS.coreMs - 1),
        }),
      ],
    ],
  ] as [string, FaultRecord[]][])("calls it a violation when the origin was not failing for the product: %s", (_, origin) => {
    expect(judged([stale()], timelineOf(restartEmpty(), ...origin))).toEqual([null]);
  });

  it("excuses it within the product's breaker's tail after its fault was undone", () => {
    const failing = ran(2, { kind: "origin-failing", service: "product", errorRate: 0.5 }, span(ACK - 5000, ACK), {
      coreFault: span(ACK - 5000, ACK + 6000 - TAILS.coreMs + 1),
    });
    expect(judged([stale()], timelineOf(restartEmpty(), failing))).toEqual([LOST_PURGE]);
  });

  it("calls it a violation when the price shown is older than an earlier purge Redis did not lose", () => {
    const three = [change(ID, 10_000, 2000), change(ID, OLD, 5000), change(ID, NEW, ACK)];
    const older = answer({ id: ID, sent: ACK + 6000, inst: 1, price: 10_000, cacheStatus: STALE_IF_ERROR });
    expect(judged([older], timelineOf(restartEmpty(), hang), three)).toEqual([null]);
    // The same answer showing the price just before the lost purge is excused.
    expect(judged([stale()], timelineOf(restartEmpty(), hang), three)).toEqual([LOST_PURGE]);
  });
});

describe("availability (judgeAvailability)", () => {
  /** The page served: instance 0 answered it 200 with its latest price, to a request sent after the purge's 202. */
  const served = answer({ id: ID, sent: ACK + 500, inst: 0, price: NEW, cacheStatus: 'pp-origin; fwd=miss; detail="product"' });
  const verdictOf = (records: ProbeRecord[], timeline: Timeline) => judgeAvailability(records, changes, timeline, TIMES).map((f) => f.verdict);

  it('calls a 503 for a page already served, with no fault on, a "violation"', () => {
    const failed = answer({ id: ID, sent: ACK + 2000, inst: 1, status: 503 });
    const [failure] = judgeAvailability([served, failed], changes, timelineOf(), TIMES);
    expect(failure).toMatchObject({ verdict: "violation", reason: "a served page", status: 503, inst: 1, faults: [] });
  });

  it("does not count a 200 showing the old price, even after the 202, as serving the page", () => {
    const old = answer({ id: ID, sent: ACK + 500, inst: 0, price: OLD });
    expect(verdictOf([old, answer({ id: ID, sent: ACK + 2000, status: 503 })], timelineOf())).toEqual(["not served"]);
  });

  it("does not count a 200 from L1 within the purge's deadline as serving the page, even at the new price: the purge may take that copy away; after the deadline it does", () => {
    const failing = ran(1, { kind: "origin-failing", service: "inventory", errorRate: 1 }, span(ACK + 1000, ACK + 5000), {
      coreFault: span(ACK + 1000, ACK + 5000),
    });
    const fromL1 = (sent: number) => answer({ id: ID, sent, inst: 0, price: NEW, cacheStatus: 'pp-l1; hit; detail="product", pp-l1; hit; detail="inventory"' });
    const failed = answer({ id: ID, sent: ACK + 4000, inst: 0, status: 503 });
    expect(verdictOf([fromL1(ACK + 500), failed], timelineOf(failing))).toEqual(["allowed"]);
    expect(verdictOf([fromL1(ACK + BOUND_MS + 100), failed], timelineOf(failing))).toEqual(["violation"]);
  });

  it('calls a 503 for a page not served yet, while a core service is faulted, "allowed"', () => {
    const failing = ran(1, { kind: "origin-failing", service: "product", errorRate: 1 }, span(ACK + 1000, ACK + 5000), {
      coreFault: span(ACK + 1000, ACK + 5000),
    });
    const failed = answer({ id: ID, sent: ACK + 2000, status: 503 });
    expect(verdictOf([failed], timelineOf(failing))).toEqual(["allowed"]);
    // The same 503 with no fault on is listed, not judged.
    expect(verdictOf([failed], timelineOf())).toEqual(["not served"]);
  });

  describe('"excused": a 503 for a served page while a core service is faulted, which nothing could hold', () => {
    /** Redis paused at ACK + 1 s, and a second later the product service failing, both to ACK + 6 s. */
    const redisThenOrigin = ran(2, { kind: "redis-then-origin", redis: "pause", service: "product", errorRate: 1 }, span(ACK + 1000, ACK + 6000), {
      redisOut: [span(ACK + 1000, ACK + 6000)],
      redisFault: [span(ACK + 1000, ACK + 6000)],
      coreFault: span(ACK + 2000, ACK + 6000),
    });

    it("from an isolate that never answered it 200, while Redis is faulted", () => {
      const failed = answer({ id: ID, sent: ACK + 3000, inst: 1, status: 503 });
      const [failure] = judgeAvailability([served, failed], changes, timelineOf(redisThenOrigin), TIMES);
      expect(failure?.verdict).toBe("excused");
      expect(failure?.reason).toContain("Redis faulted");
    });

    it("but not from the isolate that served it: it held a copy", () => {
      const failed = answer({ id: ID, sent: ACK + 3000, inst: 0, status: 503 });
      expect(verdictOf([served, failed], timelineOf(redisThenOrigin))).toEqual(["violation"]);
    });

    it("nor with Redis healthy and holding it, the core service alone faulted", () => {
      const coreOnly = ran(2, { kind: "origin-failing", service: "product", errorRate: 1 }, span(ACK + 2000, ACK + 6000), {
        coreFault: span(ACK + 2000, ACK + 6000),
      });
      const failed = answer({ id: ID, sent: ACK + 3000, inst: 1, status: 503 });
      expect(verdictOf([served, failed], timelineOf(coreOnly))).toEqual(["violation"]);
    });

    /** Redis killed at ACK + 1 s and restarted empty at ACK + 3 s; later, from ACK + 20 s, the product service hanging. */
    const emptied = ran(3, { kind: "redis-restart-empty", downS: 2 }, span(ACK + 1000, ACK + 5000), {
      redisOut: [span(ACK + 1000, ACK + 3000)],
      redisFault: [span(ACK + 1000, ACK + 5000)],
      lost: span(ACK + 1000, ACK + 3000),
    });
    const hang = ran(4, { kind: "origin-hang", service: "product" }, span(ACK + 20_000, ACK + 25_000), { coreFault: span(ACK + 20_000, ACK + 25_000) });

    it("from an isolate that never answered it 200, after Redis came back empty and no answer since wrote the page to it", () => {
      const failed = answer({ id: ID, sent: ACK + 21_000, inst: 1, status: 503 });
      const [failure] = judgeAvailability([served, failed], changes, timelineOf(emptied, hang), TIMES);
      expect(failure?.verdict).toBe("excused");
      expect(failure?.reason).toContain("Redis emptied since the page was in it");
    });

    /** Instance 0's L1 once a second from ACK: `evicted` entries pushed out between its 200 (ACK + 0.5 s) and the 503 (ACK + 21 s). */
    const l1Of = (evicted: number): L1Sample[] =>
      Array.from({ length: 23 }, (_, k) => ({ inst: 0, at: ACK + k * 1000, evictions: 7 + (k >= 10 ? evicted : 0) }));

    it("from the isolate that served it, once its L1 pushed out entries since (an LRU may have dropped the page), after Redis came back empty", () => {
      const failed = answer({ id: ID, sent: ACK + 21_000, inst: 0, status: 503 });
      const [failure] = judgeAvailability([served, failed], changes, timelineOf(emptied, hang), TIMES, l1Of(1));
      expect(failure?.verdict).toBe("excused");
      expect(failure?.reason).toContain("L1 pushed out 1 entries since its last 200 of the page");
    });

    it("but not while its L1 pushed out nothing: the page is still in it", () => {
      const failed = answer({ id: ID, sent: ACK + 21_000, inst: 0, status: 503 });
      expect(judgeAvailability([served, failed], changes, timelineOf(emptied, hang), TIMES, l1Of(0)).map((f) => f.verdict)).toEqual(["violation"]);
      // Nor without samples of its L1 around both answers: nothing says it dropped anything.
      expect(judgeAvailability([served, failed], changes, timelineOf(emptied, hang), TIMES, l1Of(5).slice(0, 20)).map((f) => f.verdict)).toEqual(["violation"]);
    });

    it("nor with Redis healthy: the page is still in L2", () => {
      const failed = answer({ id: ID, sent: ACK + 21_000, inst: 0, status: 503 });
      expect(judgeAvailability([served, failed], changes, timelineOf(hang), TIMES, l1Of(1000)).map((f) => f.verdict)).toEqual(["violation"]);
    });

    it("but not once an answer since the loss read the page from the origin (and wrote it to L2)", () => {
      const refilled = answer({ id: ID, sent: ACK + 10_000, inst: 0, price: NEW, cacheStatus: 'pp-origin; fwd=miss; detail="product"' });
      const failed = answer({ id: ID, sent: ACK + 21_000, inst: 1, status: 503 });
      expect(verdictOf([served, refilled, failed], timelineOf(emptied, hang))).toEqual(["violation"]);
    });
  });
});

describe("what an L1 pushed out meanwhile (evictedSince)", () => {
  const at = (t: number, evictions: number, inst = 0): L1Sample => ({ inst, at: t, evictions });

  it("counts from the last sample at or before the page's last 200 to the first at or after the failure: none missed", () => {
    const samples = [at(0, 0), at(1000, 100), at(2000, 100), at(3000, 900)];
    expect(evictedSince(samples, 0, 1500, 2000)).toBe(0);
    expect(evictedSince(samples, 0, 500, 2000)).toBe(100);
    expect(evictedSince(samples, 0, 1500, 2500)).toBe(800);
    // No sample after the failure yet: unknown.
    expect(evictedSince(samples, 0, 1500, 3500)).toBeNull();
  });

  it("reads only the isolate's own samples, and none across a restart (its count starts again)", () => {
    expect(evictedSince([at(0, 0, 1), at(3000, 5000, 1)], 0, 500, 2500)).toBeNull();
    expect(evictedSince([at(0, 5000), at(3000, 200)], 0, 500, 2500)).toBeNull();
  });
});
