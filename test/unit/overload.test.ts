// The isolate's limit of cold pages, admission of new work within it, and
// the budget of fills nobody waits for (docs/architecture.md#overload), with
// a clock moved by hand.
import { afterEach, describe, expect, it, vi } from "vitest";
import { createAdmission, createPageAdmission } from "../../src/overload/admission";
import { createColdLimit, INTERVAL_MS, TARGET_MS, type ColdLimit } from "../../src/overload/limit";
import { createPatience } from "../../src/overload/patience";
import { createOverload } from "../../src/overload";
import { ONE_BROWSER } from "../../src/overload/fairShare";
import { fakeClock } from "../support/fakes";

/** An admission with these bounds (its own limit, and no hold, unless given), the rest as in most tests here. */
function admissionWith(bounds: Partial<Parameters<typeof createAdmission>[0]> = {}) {
  const clock = bounds.clock ?? { now: () => Date.now() };
  const maxColdPages = bounds.maxColdPages ?? 4;
  return createAdmission({
    clock,
    limit: createColdLimit({ clock, min: 1, max: maxColdPages }),
    patience: createPatience({ clock, maxHoldMs: 0, windowMs: 2000, pagesKept: 64 }),
    maxColdPages,
    coldPageWaitMs: 1000,
    coldPageLeaseMs: 10_000,
    ...bounds,
  });
}

/** A limit whose isolate is congested for good: it stays at one page. */
const congested: ColdLimit = { current: () => 1, sample: () => undefined, congested: () => true, update: () => undefined };

/** Work that stays in progress until the test lets it go. */
function heldWork() {
  let release = () => {};
  const done = new Promise<string>((resolve) => (release = () => resolve("done")));
  return { work: () => done, release };
}

describe("the limit of cold pages in progress (AIMD, its signal CoDel's standing queue)", () => {
  it("starts at its floor and grows by one for each page that ends with at least half the limit in use, up to its ceiling", () => {
    const limit = createColdLimit({ clock: fakeClock(), min: 1, max: 3 });
    expect(limit.current()).toBe(1);
    limit.update(1);
    expect(limit.current()).toBe(2);
    limit.update(1); // 1 of 2 in use: half
    expect(limit.current()).toBe(3);
    limit.update(1); // 1 of 3: less than half, no growth
    expect(limit.current()).toBe(3);
    limit.update(3);
    expect(limit.current()).toBe(3); // the ceiling
  });

  it("is congested once every sample of a whole interval was above the target; one sample within it, or an interval without samples, ends it", () => {
    const clock = fakeClock();
    const limit = createColdLimit({ clock, min: 1, max: 100 });
    limit.sample(TARGET_MS + 1);
    expect(limit.congested()).toBe(false);
    clock.advance(INTERVAL_MS - 1);
    limit.sample(30);
    expect(limit.congested()).toBe(false);
    clock.advance(1);
    expect(limit.congested()).toBe(true);
    limit.sample(TARGET_MS);
    expect(limit.congested()).toBe(false);
    // Above again: a new interval must pass.
    limit.sample(50);
    clock.advance(INTERVAL_MS);
    limit.sample(50);
    expect(limit.congested()).toBe(true);
    // No reply read for an interval: nothing to show a queue.
    clock.advance(INTERVAL_MS);
    expect(limit.congested()).toBe(false);
  });

  it("a busy isolate that reads some replies at once is not congested, however late the others: the limit grows through it", () => {
    const clock = fakeClock();
    const limit = createColdLimit({ clock, min: 1, max: 100 });
    for (let i = 0; i < 10; i++) {
      limit.sample(i % 2 === 0 ? 0 : 40);
      clock.advance(INTERVAL_MS / 2);
      limit.update(limit.current());
    }
    expect(limit.current()).toBe(11);
  });

  it("halves at most once an interval while congested, never below its floor: pages that end together are one sign of it", () => {
    const clock = fakeClock();
    const limit = createColdLimit({ clock, min: 1, max: 100 });
    for (let i = 0; i < 19; i++) limit.update(limit.current());
    expect(limit.current()).toBe(20);
    limit.sample(TARGET_MS + 1);
    clock.advance(INTERVAL_MS);
    limit.sample(TARGET_MS + 1);
    limit.update(20);
    expect(limit.current()).toBe(10);
    // Other pages ending in the same interval change nothing.
    for (let i = 0; i < 5; i++) limit.update(10);
    expect(limit.current()).toBe(10);
    for (const expected of [5, 2, 1, 1]) {
      clock.advance(INTERVAL_MS);
      limit.sample(TARGET_MS + 1);
      limit.update(1);
      expect(limit.current()).toBe(expected);
    }
    // Congestion over, the limit grows again.
    limit.sample(0);
    limit.update(1);
    expect(limit.current()).toBe(2);
  });
  it("never falls below a floor above one page (the isolate's: one browser's pages), and starts there", () => {
    const clock = fakeClock();
    const limit = createColdLimit({ clock, min: ONE_BROWSER, max: 100 });
    expect(limit.current()).toBe(ONE_BROWSER);
    for (let i = 0; i < 3; i++) {
      limit.sample(TARGET_MS + 1);
      clock.advance(INTERVAL_MS);
      limit.sample(TARGET_MS + 1);
      limit.update(ONE_BROWSER);
    }
    expect(limit.congested()).toBe(true);
    expect(limit.current()).toBe(ONE_BROWSER);
  });
});

describe("admission of pages that need new work", () => {
  afterEach(() => vi.useRealTimers());

  it("runs a page at once within the limit; past it a page waits for a free place, or is shed once its wait is over; a page with a copy does not wait", async () => {
    vi.useFakeTimers({ now: 0 });
    // Its ceiling three pages: once it is reached no page goes past it (a last chance needs a slot under COLD_PAGES_MAX).
    const admission = admissionWith({ maxColdPages: 3 });
    const first = heldWork();
    const running = admission.admit(first.work, { wait: true });
    let ran = 0;
    const waiting = admission.admit(async () => ++ran, { wait: true });
    await vi.advanceTimersByTimeAsync(400);
    expect(ran).toBe(0);
    expect(admission.stats()).toMatchObject({ coldPages: 1, coldPagesQueued: 1, limit: 1 });
    expect(await admission.admit(async () => ++ran, { wait: false })).toBe("busy");
    first.release();
    await vi.advanceTimersByTimeAsync(20);
    expect(await waiting).toBe(1);
    expect(await running).toBe("done");
    // Two pages ended with the limit in use: it is 3 now.
    expect(admission.stats()).toMatchObject({ admitted: 2, limit: 3, shed: { busy: 1, overShare: 0 } });
    const held = [heldWork(), heldWork(), heldWork()];
    const three = held.map((page) => admission.admit(page.work, { wait: true }));
    const shed = admission.admit(async () => ++ran, { wait: true });
    await vi.advanceTimersByTimeAsync(1001);
    expect(await shed).toBe("busy");
    for (const page of held) page.release();
    expect(await Promise.all(three)).toEqual(["done", "done", "done"]);
    expect(ran).toBe(1);
    expect(admission.stats()).toMatchObject({ admitted: 5, shed: { busy: 2 }, coldPages: 0, coldPagesQueued: 0 });
  });

  it("while every reply is read late, the limit halves (once an interval); waiting pages go as it allows, oldest first", async () => {
    vi.useFakeTimers({ now: 0 });
    const clock = { now: () => Date.now() };
    const limit = createColdLimit({ clock, min: 1, max: 16 });
    const admission = admissionWith({ clock, limit, maxColdPages: 16 });
    for (let i = 0; i < 7; i++) await admission.admit(async () => "grow", { wait: true });
    // Pages one after the other grow the limit to 3 (one of 3 in use is less than half).
    expect(admission.stats().limit).toBe(3);
    const held = [heldWork(), heldWork(), heldWork()];
    const running = held.map((page) => admission.admit(page.work, { wait: true }));
    limit.sample(TARGET_MS + 20);
    await vi.advanceTimersByTimeAsync(INTERVAL_MS);
    const order: number[] = [];
    const waiting = [1, 2, 3].map((n) => admission.admit(async () => void order.push(n), { wait: true }));
    await vi.advanceTimersByTimeAsync(10);
    limit.sample(TARGET_MS + 20);
    expect(admission.stats()).toMatchObject({ congested: true, coldPagesQueued: 3 });
    for (const page of held) page.release();
    await Promise.all(running);
    expect(admission.stats().limit).toBe(1); // halved once (1.5): the three pages ended within one interval
    await vi.advanceTimersByTimeAsync(50);
    await Promise.all(waiting);
    expect(order).toEqual([1, 2, 3]);
    expect(admission.stats().shed.busy).toBe(0);
    expect(admission.stats().limit).toBeLessThanOrEqual(2);
  });

  it("lets waiting pages go by client, the client holding fewest cold pages first: a flood's waiting pages go after another client's", async () => {
    vi.useFakeTimers({ now: 0 });
    const admission = admissionWith({ limit: congested, maxColdPages: 8, coldPageWaitMs: 5000 });
    const order: string[] = [];
    const first = heldWork();
    const running = admission.admit(first.work, { wait: true, client: "198.51.100.9" });
    // The flood's next pages wait; then another client's page comes.
    const flood = [1, 2, 3].map((n) => admission.admit(async () => void order.push(`flood ${n}`), { wait: true, client: "198.51.100.9" }));
    await vi.advanceTimersByTimeAsync(10);
    const visitor = admission.admit(async () => void order.push("visitor"), { wait: true, client: "203.0.113.7" });
    await vi.advanceTimersByTimeAsync(10);
    expect(admission.stats()).toMatchObject({ coldPages: 1, coldPagesQueued: 4, clients: 2 });
    first.release();
    await vi.advanceTimersByTimeAsync(200);
    await Promise.all([running, visitor, ...flood]);
    expect(order).toEqual(["visitor", "flood 1", "flood 2", "flood 3"]);
    expect(admission.stats()).toMatchObject({ admitted: 5, shed: { busy: 0 }, clients: 0 });
  });

  it("lets one waiting page an interval go past the limit once it has waited half its wait: a congested isolate makes its visitors wait, not fail", async () => {
    vi.useFakeTimers({ now: 0 });
    const admission = admissionWith({ limit: congested, maxColdPages: 8, coldPageWaitMs: 1000 });
    const held = heldWork();
    const running = admission.admit(held.work, { wait: true });
    const order: number[] = [];
    const waiting = [1, 2, 3].map((n) => admission.admit(async () => void order.push(n), { wait: true }));
    await vi.advanceTimersByTimeAsync(480);
    // The limit (one page) is in use: nobody has gone yet.
    expect(order).toEqual([]);
    await vi.advanceTimersByTimeAsync(40);
    // Half its wait over: one page goes past the limit...
    expect(order).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(INTERVAL_MS / 2);
    // ...and no other within the same interval.
    expect(order).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(INTERVAL_MS);
    expect(order).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(INTERVAL_MS);
    expect(order).toHaveLength(3);
    await Promise.all(waiting);
    expect(admission.stats()).toMatchObject({ lastChance: 3, shed: { busy: 0 } });
    held.release();
    await running;
  });

  it("one client alone: its waiting pages go oldest first", async () => {
    vi.useFakeTimers({ now: 0 });
    const admission = admissionWith({ limit: congested, maxColdPages: 8 });
    const alone: string[] = [];
    const held = heldWork();
    const holding = admission.admit(held.work, { wait: true });
    const pages = [1, 2, 3].map((n) => admission.admit(async () => void alone.push(`page ${n}`), { wait: true }));
    await vi.advanceTimersByTimeAsync(10);
    held.release();
    await vi.advanceTimersByTimeAsync(200);
    await Promise.all([holding, ...pages]);
    expect(alone).toEqual(["page 1", "page 2", "page 3"]);
  });

  it("a client holding more than its share of the queue: its shed pages are its excess ('over share', a 429); 'unknown' never is", async () => {
    vi.useFakeTimers({ now: 0 });
    /** Pages shed after their wait, behind one page that never ends within it (a wait shorter than two intervals: one page at most goes at its last chance). */
    async function shedBehindOne(clients: string[]) {
      const admission = admissionWith({ limit: congested, maxColdPages: 64, coldPageWaitMs: 150 });
      const held = heldWork();
      const running = admission.admit(held.work, { wait: true, client: "192.0.2.200" });
      const pages = clients.map((client) => admission.admit(async () => "ran", { wait: true, client }));
      await vi.advanceTimersByTimeAsync(151);
      held.release();
      await running;
      return { answers: await Promise.all(pages), stats: admission.stats() };
    }
    const visitors = Array.from({ length: 8 }, (_, i) => `203.0.113.${i + 1}`);
    // 10 clients share 64 places (about 6 each): the flood's 50 pages are 8 times its share.
    const flooded = await shedBehindOne([...visitors, ...Array.from({ length: 50 }, () => "198.51.100.9")]);
    // A page an interval past half its wait goes at its last chance ("ran"); the visitors' others are the isolate's busyness.
    expect(new Set([...flooded.answers.slice(0, 8), "busy", "ran"])).toEqual(new Set(["busy", "ran"]));
    // The flood's pages: refused on arrival once it held its share, or shed after their wait while it held more than its share (its last few, shed once it holds no more, are the isolate's).
    const floodAnswers = flooded.answers.slice(8);
    const excess = floodAnswers.filter((answer) => answer === "over share").length;
    expect(excess).toBeGreaterThanOrEqual(40);
    expect(new Set([...floodAnswers, "over share", "busy", "ran"])).toEqual(new Set(["over share", "busy", "ran"]));
    expect(flooded.stats).toMatchObject({ shed: { overShare: excess } });
    // The same 58 pages from 58 clients, each within its share: the isolate's own busyness.
    const spread = await shedBehindOne(Array.from({ length: 58 }, (_, i) => `192.0.2.${i + 1}`));
    expect(new Set([...spread.answers, "busy", "ran"])).toEqual(new Set(["busy", "ran"]));
    // Off the platform every request is "unknown": all visitors, never one client's excess.
    const unknown = await shedBehindOne([...Array.from({ length: 50 }, () => "unknown"), ...visitors]);
    expect(new Set([...unknown.answers.slice(0, 50), "busy", "ran"])).toEqual(new Set(["busy", "ran"]));
  });

  it("a client already holding its share of the queue while pages wait: its next cold page is not queued but answered 'over share' one interval later, its work never started; 'unknown' never is, nor a client alone", async () => {
    vi.useFakeTimers({ now: 0 });
    const admission = admissionWith({ maxColdPages: 16, coldPageWaitMs: 1000 });
    let ran = 0;
    const work = async () => (++ran, "ran");
    const flood = "198.51.100.9";
    // One page holds the only place: a visitor's page and the flood's first pages wait (two clients: 8 places each).
    const held = heldWork();
    const running = admission.admit(held.work, { wait: true, client: flood });
    const visitor = admission.admit(work, { wait: true, client: "203.0.113.7" });
    const queued = Array.from({ length: 7 }, () => admission.admit(work, { wait: true, client: flood }));
    await vi.advanceTimersByTimeAsync(20);
    expect(admission.stats()).toMatchObject({ coldPagesQueued: 8, clients: 2 });
    const answers: string[] = [];
    const refused = [1, 2].map(() => admission.admit(work, { wait: true, client: flood }).then((answer) => void answers.push(String(answer))));
    await vi.advanceTimersByTimeAsync(INTERVAL_MS - 1);
    expect(answers).toEqual([]);
    await vi.advanceTimersByTimeAsync(2);
    expect(answers).toEqual(["over share", "over share"]);
    await Promise.all(refused);
    // Never queued: the queue holds what it held, and neither page's work ran.
    expect(admission.stats()).toMatchObject({ coldPagesQueued: 8, shed: { busy: 0, overShare: 2 } });
    // Another client's page is queued as before; once the place is free, every queued page runs.
    const another = admission.admit(work, { wait: true, client: "192.0.2.1" });
    await vi.advanceTimersByTimeAsync(20);
    expect(admission.stats().coldPagesQueued).toBe(9);
    held.release();
    await vi.advanceTimersByTimeAsync(300);
    expect(await Promise.all([visitor, ...queued, another])).toEqual(Array.from({ length: 9 }, () => "ran"));
    await running;
    expect(ran).toBe(9);
    // Off the platform every request is "unknown": everybody's pages, queued whatever their number.
    const heldAgain = heldWork();
    const runningAgain = admission.admit(heldAgain.work, { wait: true });
    // The limit grew while the queue drained: fill it.
    const fill = Array.from({ length: admission.stats().limit - 1 }, () => heldWork());
    const filling = fill.map((page) => admission.admit(page.work, { wait: true }));
    const unknown = Array.from({ length: 16 }, () => admission.admit(work, { wait: true }));
    await vi.advanceTimersByTimeAsync(20);
    expect(admission.stats()).toMatchObject({ coldPagesQueued: 16, shed: { overShare: 2 } });
    heldAgain.release();
    for (const page of fill) page.release();
    await vi.advanceTimersByTimeAsync(400);
    await Promise.all([runningAgain, ...filling, ...unknown]);
    expect(ran).toBe(25);
  });

  it("a visitor holding fewer pages than one browser asks for at once is never past its share, however many visitors split the queue", async () => {
    vi.useFakeTimers({ now: 0 });
    const admission = admissionWith({ maxColdPages: 32, coldPageWaitMs: 1000 });
    const work = async () => "ran";
    const held = heldWork();
    const running = admission.admit(held.work, { wait: true, client: "192.0.2.200" });
    // Twenty visitors with a cold page each (a restarted isolate under a shop's traffic): 32 places split 22 ways, about 1.5 each.
    const visitors = Array.from({ length: 20 }, (_, i) => admission.admit(work, { wait: true, client: `203.0.113.${i + 1}` }));
    // One visitor with tabs open: six pages, four times that split, all queued.
    const tabs = Array.from({ length: 6 }, () => admission.admit(work, { wait: true, client: "192.0.2.77" }));
    await vi.advanceTimersByTimeAsync(20);
    expect(admission.stats()).toMatchObject({ coldPagesQueued: 26, shed: { overShare: 0 } });
    // A seventh: more than one browser asks for, and past its share: refused.
    const seventh = admission.admit(work, { wait: true, client: "192.0.2.77" });
    await vi.advanceTimersByTimeAsync(INTERVAL_MS + 1);
    expect(await seventh).toBe("over share");
    held.release();
    await vi.advanceTimersByTimeAsync(600);
    await running;
    expect(new Set(await Promise.all([...visitors, ...tabs]))).toEqual(new Set(["ran"]));
  });

  it("a visitor who leaves gives up its place at once, and its slot: what is left of its page runs for nobody", async () => {
    vi.useFakeTimers({ now: 0 });
    const admission = admissionWith();
    const left = new AbortController();
    const held = heldWork();
    const running = admission.admit(held.work, { wait: true, visitor: left.signal });
    const waiting = new AbortController();
    let ran = 0;
    const gone = admission.admit(async () => ++ran, { wait: true, visitor: waiting.signal });
    await vi.advanceTimersByTimeAsync(10);
    expect(admission.stats().coldPagesQueued).toBe(1);
    waiting.abort();
    expect(admission.stats().coldPagesQueued).toBe(0);
    await vi.advanceTimersByTimeAsync(10);
    expect(await gone).toBe("left");
    // The holder's visitor leaves: its slot is free for the next page, though its work goes on.
    left.abort();
    expect(await admission.admit(async () => ++ran, { wait: true })).toBe(1);
    held.release();
    expect(await running).toBe("done");
    expect(ran).toBe(1);
  });

  it("holds at most maxColdPages waiting; a page finding the queue full takes the place of the oldest page of the client holding most, if that holds more", async () => {
    vi.useFakeTimers({ now: 0 });
    const admission = admissionWith({ maxColdPages: 2 });
    const held = heldWork();
    const running = admission.admit(held.work, { wait: true, client: "198.51.100.9" });
    const flood = [
      admission.admit(async () => "flood 1", { wait: true, client: "198.51.100.9" }),
      admission.admit(async () => "flood 2", { wait: true, client: "198.51.100.9" }),
    ];
    await vi.advanceTimersByTimeAsync(10);
    // Full: the same client's next page is shed at once (it holds most), another client's takes the flood's oldest place.
    expect(await admission.admit(async () => "flood 3", { wait: true, client: "198.51.100.9" })).toBe("busy");
    const visitor = admission.admit(async () => "visitor", { wait: true, client: "203.0.113.7" });
    // The pushed-out page is answered at its next look.
    await vi.advanceTimersByTimeAsync(20);
    expect(await flood[0]).toBe("busy");
    held.release();
    await vi.advanceTimersByTimeAsync(50);
    expect(await Promise.all([running, flood[1], visitor])).toEqual(["done", "flood 2", "visitor"]);
    expect(admission.stats()).toMatchObject({ pushedOut: 1, shed: { busy: 2 } });
  });

  it("takes back the slot of a page whose request vanished, at its lease's end", async () => {
    vi.useFakeTimers({ now: 0 });
    const admission = admissionWith({ maxColdPages: 1, coldPageWaitMs: 0, coldPageLeaseMs: 2000 });
    void admission.admit(() => new Promise<never>(() => {}), { wait: true }); // never settles, as a cancelled request's work may not
    expect(await admission.admit(async () => "next", { wait: true })).toBe("busy");
    vi.setSystemTime(2001);
    expect(await admission.admit(async () => "next", { wait: true })).toBe("next");
  });

  it("counts what the shed pages got", () => {
    const admission = admissionWith({ clock: fakeClock() });
    admission.noteShed("stale");
    admission.noteShed("refused");
    admission.noteShed("refused");
    expect(admission.stats()).toMatchObject({ shedServedStale: 1, shedRefused: 2 });
  });
});

describe("the hold while visitors leave", () => {
  afterEach(() => vi.useRealTimers());

  const options = { maxHoldMs: 100, windowMs: 2000, pagesKept: 64 };

  /** `n` cold pages at once whose visitors all leave `afterMs` into them. */
  async function leavers(patience: ReturnType<typeof createPatience>, n: number, afterMs: number) {
    const pages = Array.from({ length: n }, () => {
      const visitor = new AbortController();
      return { visitor, answered: patience.follow(visitor.signal) };
    });
    await vi.advanceTimersByTimeAsync(afterMs);
    for (const { visitor, answered } of pages) {
      visitor.abort();
      answered();
    }
  }

  it("holds nobody while most visitors stay, or no more than one browser's pages left", async () => {
    vi.useFakeTimers({ now: 0 });
    const patience = createPatience({ ...options, clock: { now: () => Date.now() } });
    await leavers(patience, ONE_BROWSER, 5);
    expect(patience.holdMs()).toBe(0); // all left, but one browser's pages: a closed tab, no flood
    for (let i = 0; i < 12; i++) patience.follow(new AbortController().signal)();
    await leavers(patience, 5, 5);
    await vi.advanceTimersByTimeAsync(50);
    expect(patience.holdMs()).toBe(0); // 11 of 23 left: under half
    expect(patience.stats().departedShare).toBeCloseTo(11 / 23);
    await leavers(patience, 2, 5);
    await vi.advanceTimersByTimeAsync(50);
    expect(patience.holdMs()).toBeGreaterThan(0); // 13 of 25: most left
  });

  it("holds cold pages a little longer than the leavers stay, at most maxHoldMs, and stops once visitors stay again", async () => {
    vi.useFakeTimers({ now: 0 });
    const patience = createPatience({ ...options, clock: { now: () => Date.now() } });
    await leavers(patience, 20, 20);
    // 95th percentile 20 ms, a quarter more, and 1.
    expect(patience.holdMs()).toBe(26);
    await vi.advanceTimersByTimeAsync(50);
    await leavers(patience, 20, 400);
    await vi.advanceTimersByTimeAsync(50);
    expect(patience.holdMs()).toBe(100);
    // Two windows of visitors who stay: the flood's departures are out of the window.
    for (let i = 0; i < 40; i++) {
      patience.follow(new AbortController().signal)();
      await vi.advanceTimersByTimeAsync(100);
    }
    expect(patience.holdMs()).toBe(0);
  });

  it("counts a visitor who leaves when the signal aborts, though the page never ends (a cancelled request)", async () => {
    vi.useFakeTimers({ now: 0 });
    const patience = createPatience({ ...options, clock: { now: () => Date.now() } });
    const visitors = Array.from({ length: 20 }, () => new AbortController());
    for (const visitor of visitors) patience.follow(visitor.signal); // their ends never come
    await vi.advanceTimersByTimeAsync(8);
    for (const visitor of visitors) visitor.abort();
    expect(patience.holdMs()).toBe(11);
  });

  it("is off at maxHoldMs 0", async () => {
    vi.useFakeTimers({ now: 0 });
    const patience = createPatience({ ...options, maxHoldMs: 0, clock: { now: () => Date.now() } });
    await leavers(patience, 20, 20);
    expect(patience.holdMs()).toBe(0);
  });

  it("in admission: a page whose visitor leaves during the hold starts no work; one who stays starts after the hold; a page with a copy is not held", async () => {
    vi.useFakeTimers({ now: 0 });
    const clock = { now: () => Date.now() };
    const patience = createPatience({ ...options, clock });
    const admission = admissionWith({ clock, patience });
    await leavers(patience, 20, 20);
    let runs = 0;
    const work = async () => {
      runs++;
      return "read";
    };
    const leaving = new AbortController();
    const left = admission.admit(work, { wait: true, visitor: leaving.signal });
    await vi.advanceTimersByTimeAsync(10);
    leaving.abort();
    await vi.advanceTimersByTimeAsync(30);
    expect(await left).toBe("left");
    expect(runs).toBe(0);

    const staying = admission.admit(work, { wait: true, visitor: new AbortController().signal });
    await vi.advanceTimersByTimeAsync(25);
    expect(runs).toBe(0);
    await vi.advanceTimersByTimeAsync(2);
    expect(await staying).toBe("read");
    expect(runs).toBe(1);

    expect(await admission.admit(work, { wait: false, visitor: new AbortController().signal })).toBe("read");
    expect(patience.stats()).toMatchObject({ held: 2, leftWhileHeld: 1 });
  });
});

describe("fills nobody waits for", () => {
  afterEach(() => vi.useRealTimers());

  it("finish in the room the limit has spare beside the pages in progress, while no page waits; each holds its place until its lease ends", async () => {
    vi.useFakeTimers({ now: 0 });
    const overload = createOverload({
      clock: { now: () => Date.now() },
      maxColdPages: 8,
      coldPageWaitMs: 1000,
      coldPageLeaseMs: 10_000,
      backgroundFillMs: 500,
    });
    const { admission, departures } = overload;
    // The limit starts at its floor, one browser's pages: with none in progress, that many fills may finish, and then hold their places.
    expect(Array.from({ length: ONE_BROWSER + 1 }, () => departures.mayFinish())).toEqual([...Array.from({ length: ONE_BROWSER }, () => true), false]);
    expect(departures.stats()).toMatchObject({ fillsFinished: ONE_BROWSER, fillsDropped: 1, backgroundFills: ONE_BROWSER });
    // A visitor's page never waits for them: it starts at once.
    expect(await admission.admit(async () => "page", { wait: true })).toBe("page");
    await vi.advanceTimersByTimeAsync(501);
    expect(departures.stats().backgroundFills).toBe(0);
    // All but one place of the limit in progress: one fill may finish...
    const held = Array.from({ length: ONE_BROWSER - 1 }, () => heldWork());
    const running = held.map((page) => admission.admit(page.work, { wait: true }));
    expect([departures.mayFinish(), departures.mayFinish()]).toEqual([true, false]);
    await vi.advanceTimersByTimeAsync(501);
    // ...but none while a page waits for its turn.
    const last = heldWork();
    const full = admission.admit(last.work, { wait: true });
    const waiting = admission.admit(async () => "waited", { wait: true });
    await vi.advanceTimersByTimeAsync(10);
    expect(admission.stats()).toMatchObject({ coldPages: ONE_BROWSER, coldPagesQueued: 1 });
    expect(departures.mayFinish()).toBe(false);
    for (const page of [...held, last]) page.release();
    await vi.advanceTimersByTimeAsync(50);
    expect(await Promise.all([...running, full, waiting])).toEqual([...Array.from({ length: ONE_BROWSER }, () => "done"), "waited"]);
    expect(departures.stats()).toMatchObject({ fillsFinished: ONE_BROWSER + 1, fillsDropped: 3 });
  });
});

describe("a product's place while its page waits for its turn", () => {
  it("a page refused for busyness joins what a page that went on meanwhile started for it, rather than being shed; with nothing under way it is shed", async () => {
    let startedMeanwhile = true;
    let underWay = false;
    // Refused: while it waited, a later page for its product went on and started the fill (or did not).
    const admission = { admit: async () => ((underWay = startedMeanwhile), "busy" as const), noteShed: () => undefined };
    const pages = createPageAdmission({ admission, clock: fakeClock(), turnLeaseMs: 100, places: 2 });
    const events: string[] = [];
    const page = {
      subjectKey: "a",
      joins: () => underWay,
      withCopies: false,
      sheddable: false,
      read: async (afterWait: boolean) => void events.push(`read after wait ${afterWait}`),
      shed: async (why: string) => (events.push(`shed ${why}`), "refused" as const),
    };
    expect(await pages.admitPage(page)).toBe(false);
    expect(events).toEqual(["read after wait true"]);
    [startedMeanwhile, underWay] = [false, false];
    expect(await pages.admitPage(page)).toBe(false);
    expect(events).toEqual(["read after wait true", "shed busy"]);
  });

  it("a cancelled page's place lapses and is reclaimed when the places are full: they stay bounded, and the product's next page is new work again", async () => {
    const clock = fakeClock();
    let asked = 0;
    // Admission never answers: the pages' requests were cancelled, so nothing gives their places back.
    const admission = { admit: () => (asked++, new Promise<never>(() => {})), noteShed: () => undefined };
    const pages = createPageAdmission({ admission, clock, turnLeaseMs: 100, places: 2 });
    const joined: string[] = [];
    const page = (key: string) => ({
      subjectKey: key,
      joins: () => false,
      withCopies: false,
      sheddable: false,
      read: async () => void joined.push(key),
      shed: async () => undefined,
    });
    void pages.admitPage(page("a"));
    void pages.admitPage(page("b"));
    await pages.admitPage(page("a"));
    expect([asked, joined]).toEqual([2, ["a"]]);
    // Both places full and live: a third product's page is still new work, but holds no place, so its follower is new work too.
    void pages.admitPage(page("c"));
    void pages.admitPage(page("c"));
    expect(asked).toBe(4);
    clock.advance(101);
    // Past their deadline, the places go as soon as the table is full: a new product takes one, and "a" is new work again.
    void pages.admitPage(page("d"));
    void pages.admitPage(page("a"));
    expect(asked).toBe(6);
    await pages.admitPage(page("d"));
    expect(asked).toBe(6);
    expect(joined).toEqual(["a", "d"]);
  });
});
