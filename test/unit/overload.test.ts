// Admission of new work and the budget of fills nobody waits for
// (docs/architecture.md#overload), with a clock moved by hand.
import { afterEach, describe, expect, it, vi } from "vitest";
import { createAdmission } from "../../src/overload/admission";
import { createDepartures } from "../../src/overload/departures";
import { createLagMeter, type LagMeter } from "../../src/overload/lag";
import { createPatience } from "../../src/overload/patience";
import { fakeClock } from "../support/fakes";
import { DEFAULTS } from "../../src/config/defaults";

/** A lag meter that says what the test says. */
function fixedLag(): LagMeter & { set(ms: number): void } {
  let lagMs = 0;
  return { sample: () => undefined, observeReply: () => undefined, observeLate: () => undefined, lagMs: () => lagMs, set: (ms) => void (lagMs = ms) };
}

/** An admission with these bounds over `lag` (a fixed lag meter by default), the rest as in most tests here. */
function admissionWith(bounds: Partial<Parameters<typeof createAdmission>[0]>) {
  return createAdmission({
    clock: { now: () => Date.now() },
    lag: fixedLag(),
    patience: createPatience({ clock: { now: () => Date.now() }, departedShare: 0.5, maxHoldMs: 0 }),
    maxHoldMs: 0,
    maxLagMs: 30,
    maxColdPages: 4,
    minColdPages: 0,
    patienceMs: 10_000,
    patientColdPages: 0,
    paceMs: 0,
    paceBurst: 1,
    maxColdPagesQueued: 4,
    overShareAnswerMs: DEFAULTS.overShareAnswerMs,
    coldPageWaitMs: 1000,
    coldPageLeaseMs: 10_000,
    // Out of the way unless a test is about it: no count of pages in progress reaches it.
    mostlyCold: { coldPages: Number.POSITIVE_INFINITY, lagMs: 5, share: 0.5 },
    lastChance: { afterShare: 0.8, perSecond: 0 },
    ...bounds,
  });
}

describe("admission of pages that need new work", () => {
  afterEach(() => vi.useRealTimers());

  /** Work that stays in progress until the test lets it go. */
  function heldWork() {
    let release = () => {};
    const done = new Promise<string>((resolve) => (release = () => resolve("done")));
    return { work: () => done, release };
  }

  it("lets waiting pages go by client, the client holding fewest cold pages first: a flood's waiting pages go after another client's", async () => {
    vi.useFakeTimers({ now: 0 });
    const admission = admissionWith({ clock: { now: () => Date.now() }, maxColdPages: 1, maxColdPagesQueued: 8, coldPageWaitMs: 5000 });
    const order: string[] = [];
    const first = heldWork();
    const running = admission.admit(first.work, true, undefined, "198.51.100.9");
    // The flood's next pages wait; then another client's page comes.
    const flood = [1, 2, 3].map((n) => admission.admit(async () => void order.push(`flood ${n}`), true, undefined, "198.51.100.9"));
    await vi.advanceTimersByTimeAsync(10);
    const visitor = admission.admit(async () => void order.push("visitor"), true, undefined, "203.0.113.7");
    await vi.advanceTimersByTimeAsync(10);
    expect(admission.stats()).toMatchObject({ coldPages: 1, coldPagesQueued: 4, clients: 2 });
    first.release();
    await vi.advanceTimersByTimeAsync(200);
    await Promise.all([running, visitor, ...flood]);
    expect(order).toEqual(["visitor", "flood 1", "flood 2", "flood 3"]);
    // One client alone: oldest first, as ever.
    const alone: string[] = [];
    const held = heldWork();
    const holding = admission.admit(held.work, true);
    const pages = [1, 2, 3].map((n) => admission.admit(async () => void alone.push(`page ${n}`), true));
    await vi.advanceTimersByTimeAsync(10);
    held.release();
    await vi.advanceTimersByTimeAsync(200);
    await Promise.all([holding, ...pages]);
    expect(alone).toEqual(["page 1", "page 2", "page 3"]);
    expect(admission.stats()).toMatchObject({ admitted: 9, shed: { lagging: 0, busy: 0 }, clients: 0 });
  });

  it("a client holding more than its share of the queue: its shed pages are its excess ('over share', a 429); 'unknown' never is", async () => {
    vi.useFakeTimers({ now: 0 });
    /** Pages shed after a second of a lagging isolate. */
    async function shedWhileLagging(clients: string[]) {
      const lag = fixedLag();
      lag.set(31);
      const admission = admissionWith({ clock: { now: () => Date.now() }, lag, maxColdPages: 1, maxColdPagesQueued: 64, coldPageWaitMs: 1000 });
      const pages = clients.map((client) => admission.admit(async () => "ran", true, undefined, client));
      await vi.advanceTimersByTimeAsync(1001);
      return { answers: await Promise.all(pages), stats: admission.stats() };
    }
    const visitors = Array.from({ length: 8 }, (_, i) => `203.0.113.${i + 1}`);
    // 9 clients share 64 places (about 7 each): the flood's 50 pages are 7 times its share.
    const flooded = await shedWhileLagging([...visitors, ...Array.from({ length: 50 }, () => "198.51.100.9")]);
    expect(flooded.answers.slice(0, 8)).toEqual(visitors.map(() => "lagging"));
    // Shed one after the other, each while its client holds more than its share (its last few, shed once it holds no more, are the isolate's).
    const excess = flooded.answers.slice(8).filter((answer) => answer === "over share").length;
    expect(excess).toBeGreaterThanOrEqual(40);
    expect(flooded.answers.slice(8 + excess)).toEqual(flooded.answers.slice(8 + excess).map(() => "lagging"));
    expect(flooded.stats).toMatchObject({ shed: { lagging: 58, busy: 0 }, overShare: excess });
    // The same 58 pages from 58 clients, each within its share: the isolate's own busyness.
    const spread = await shedWhileLagging(Array.from({ length: 58 }, (_, i) => `192.0.2.${i + 1}`));
    expect(new Set(spread.answers)).toEqual(new Set(["lagging"]));
    // Off the platform every request is "unknown": all visitors, never one client's excess.
    const unknown = await shedWhileLagging([...Array.from({ length: 50 }, () => "unknown"), ...visitors]);
    expect(new Set(unknown.answers.slice(0, 50))).toEqual(new Set(["lagging"]));
  });

  it("a client already holding its share of the queue while pages wait: its next cold page is not queued but answered 'over share' after 50 ms, its work never started; 'unknown' never is, nor a client alone", async () => {
    vi.useFakeTimers({ now: 0 });
    const lag = fixedLag();
    lag.set(31);
    const admission = admissionWith({ clock: { now: () => Date.now() }, lag, maxColdPages: 1, maxColdPagesQueued: 16, coldPageWaitMs: 1000 });
    let ran = 0;
    const work = async () => (++ran, "ran");
    const flood = "198.51.100.9";
    // The isolate runs late: a visitor's page and the flood's first pages wait (two clients: 8 places each).
    const visitor = admission.admit(work, true, undefined, "203.0.113.7");
    const queued = Array.from({ length: 8 }, () => admission.admit(work, true, undefined, flood));
    await vi.advanceTimersByTimeAsync(20);
    expect(admission.stats()).toMatchObject({ coldPagesQueued: 9, clients: 2 });
    const answers: string[] = [];
    const refused = [1, 2].map(() => admission.admit(work, true, undefined, flood).then((answer) => void answers.push(String(answer))));
    await vi.advanceTimersByTimeAsync(DEFAULTS.overShareAnswerMs - 1);
    expect(answers).toEqual([]);
    await vi.advanceTimersByTimeAsync(2);
    expect(answers).toEqual(["over share", "over share"]);
    await Promise.all(refused);
    // Never queued: the queue holds what it held, and neither page's work ran.
    expect(admission.stats()).toMatchObject({ coldPagesQueued: 9, shed: { lagging: 0, busy: 0, overShare: 2 }, overShare: 2 });
    // Another client's page is queued as before; once the isolate keeps up, every queued page runs.
    const another = admission.admit(work, true, undefined, "192.0.2.1");
    await vi.advanceTimersByTimeAsync(20);
    expect(admission.stats().coldPagesQueued).toBe(10);
    lag.set(0);
    await vi.advanceTimersByTimeAsync(300);
    expect(await Promise.all([visitor, ...queued, another])).toEqual(Array.from({ length: 10 }, () => "ran"));
    expect(ran).toBe(10);
    // Off the platform every request is "unknown": everybody's pages, queued whatever their number.
    lag.set(31);
    const unknown = Array.from({ length: 16 }, () => admission.admit(work, true));
    await vi.advanceTimersByTimeAsync(20);
    expect(admission.stats()).toMatchObject({ coldPagesQueued: 16, shed: { overShare: 2 } });
    lag.set(0);
    await vi.advanceTimersByTimeAsync(400);
    await Promise.all(unknown);
    expect(ran).toBe(26);
    // A client alone has nobody to share with: its pages are queued whatever their number, and shed ones are the isolate's busyness.
    lag.set(31);
    const alone = Array.from({ length: 17 }, () => admission.admit(work, true, undefined, flood));
    await vi.advanceTimersByTimeAsync(20);
    expect(admission.stats()).toMatchObject({ coldPagesQueued: 16, shed: { lagging: 1, overShare: 2 }, overShare: 2 });
    lag.set(0);
    await vi.advanceTimersByTimeAsync(400);
    expect((await Promise.all(alone)).sort()).toEqual(["lagging", ...Array.from({ length: 16 }, () => "ran")]);
  });

  it("a visitor holding fewer pages than one browser asks for at once is never past its share, however many visitors split the queue", async () => {
    vi.useFakeTimers({ now: 0 });
    const lag = fixedLag();
    lag.set(31);
    const admission = admissionWith({ clock: { now: () => Date.now() }, lag, maxColdPages: 1, maxColdPagesQueued: 32, coldPageWaitMs: 1000 });
    const work = async () => "ran";
    // Twenty visitors with a cold page each (a restarted isolate under a shop's traffic): 32 places split 21 ways, about 1.5 each.
    const visitors = Array.from({ length: 20 }, (_, i) => admission.admit(work, true, undefined, `203.0.113.${i + 1}`));
    // One visitor with tabs open: six pages, four times that split, all queued.
    const tabs = Array.from({ length: 6 }, () => admission.admit(work, true, undefined, "192.0.2.77"));
    await vi.advanceTimersByTimeAsync(20);
    expect(admission.stats()).toMatchObject({ coldPagesQueued: 26, overShare: 0 });
    // A seventh: more than one browser asks for, and past its share: refused.
    const seventh = admission.admit(work, true, undefined, "192.0.2.77");
    await vi.advanceTimersByTimeAsync(DEFAULTS.overShareAnswerMs + 1);
    expect(await seventh).toBe("over share");
    lag.set(0);
    await vi.advanceTimersByTimeAsync(600);
    expect(new Set(await Promise.all([...visitors, ...tabs]))).toEqual(new Set(["ran"]));
  });

  it("runs work at once while the isolate keeps up", async () => {
    const lag = fixedLag();
    const admission = admissionWith({
      clock: fakeClock(),
      lag,
    });
    expect(await admission.admit(async () => "read", true)).toBe("read");
    lag.set(30);
    expect(await admission.admit(async () => "read", false)).toBe("read");
    expect(admission.stats()).toMatchObject({ admitted: 2, shed: { lagging: 0, busy: 0 }, coldPages: 0 });
  });

  it("holds new work back while the isolate runs late: a page waits for the lag to come down, or is shed once its wait is over", async () => {
    vi.useFakeTimers({ now: 0 });
    const lag = fixedLag();
    const clock = { now: () => Date.now() };
    const admission = admissionWith({
      clock,
      lag,
    });
    lag.set(31);
    let ran = 0;
    const waiting = admission.admit(async () => ++ran, true);
    await vi.advanceTimersByTimeAsync(500);
    expect(ran).toBe(0);
    expect(admission.stats().coldPagesQueued).toBe(1);
    lag.set(10);
    await vi.advanceTimersByTimeAsync(20);
    expect(await waiting).toBe(1);

    lag.set(31);
    const shed = admission.admit(async () => ++ran, true);
    await vi.advanceTimersByTimeAsync(1001);
    expect(await shed).toBe("lagging");
    // A page with a copy to show does not wait.
    expect(await admission.admit(async () => ++ran, false)).toBe("lagging");
    expect(ran).toBe(1);
    expect(admission.stats()).toMatchObject({ admitted: 1, shed: { lagging: 2, busy: 0 }, coldPagesQueued: 0 });
  });

  it("gives a page near the end of its wait a last chance, a few a second whatever the bounds; past that budget it is shed", async () => {
    vi.useFakeTimers({ now: 0 });
    const lag = fixedLag();
    const admission = admissionWith({
      clock: { now: () => Date.now() },
      lag,
      maxColdPages: 8,
      maxColdPagesQueued: 8,
      coldPageWaitMs: 1000,
      lastChance: { afterShare: 0.8, perSecond: 1 },
    });
    lag.set(200); // late for good: no other rule lets a page go
    let ran = 0;
    const [first, second] = [admission.admit(async () => ++ran, true), admission.admit(async () => ++ran, true)];
    await vi.advanceTimersByTimeAsync(790);
    expect(ran).toBe(0);
    // At 80% of its wait the first page takes the one last chance of this second; the second page finds none left.
    await vi.advanceTimersByTimeAsync(30);
    expect(ran).toBe(1);
    expect(await first).toBe(1);
    await vi.advanceTimersByTimeAsync(200);
    expect(await second).toBe("lagging");
    // A page with a copy to show does not wait, so it never reaches a last chance.
    await vi.advanceTimersByTimeAsync(2000);
    expect(await admission.admit(async () => ++ran, false)).toBe("lagging");
    expect(admission.stats()).toMatchObject({ admitted: 1, lastChance: 1, shed: { lagging: 2, busy: 0 } });
  });

  it("keeps minColdPages in progress whatever the lag: cold pages move while cached pages alone keep the isolate late", async () => {
    vi.useFakeTimers({ now: 0 });
    const lag = fixedLag();
    lag.set(500);
    const clock = { now: () => Date.now() };
    const admission = admissionWith({
      clock,
      lag,
      maxColdPages: 8,
      minColdPages: 2,
    });
    const [first, second] = [heldWork(), heldWork()];
    const running = [admission.admit(first.work, true), admission.admit(second.work, true)];
    const third = admission.admit(async () => "third", true);
    await vi.advanceTimersByTimeAsync(100);
    expect(admission.stats()).toMatchObject({ coldPages: 2, coldPagesQueued: 1 });
    first.release();
    await vi.advanceTimersByTimeAsync(20);
    expect(await third).toBe("third");
    second.release();
    await Promise.all(running);
  });

  it("lets a page held back for patienceMs go while fewer than patientColdPages are in progress, whatever the lag", async () => {
    vi.useFakeTimers({ now: 0 });
    const lag = fixedLag();
    const admission = admissionWith({
      clock: { now: () => Date.now() },
      lag,
      minColdPages: 1,
      patienceMs: 250,
      patientColdPages: 2,
      coldPageWaitMs: 1000,
    });
    lag.set(200); // late for good, as under closed-loop clients of cached pages
    const first = heldWork();
    const running = admission.admit(first.work, true); // the one that always goes
    const second = heldWork();
    let secondStarted = false;
    const patient = admission.admit(() => ((secondStarted = true), second.work()), true);
    const third = admission.admit(async () => "third", true);
    await vi.advanceTimersByTimeAsync(200);
    expect(secondStarted).toBe(false);
    await vi.advanceTimersByTimeAsync(70);
    // Past its patience, with one page in progress (< 2): it goes.
    expect(secondStarted).toBe(true);
    // The third has waited as long, but two are in progress: it waits on, and is shed at its wait's end.
    await vi.advanceTimersByTimeAsync(800);
    expect(await third).toBe("lagging");
    first.release();
    second.release();
    expect(await Promise.all([running, patient])).toEqual(["done", "done"]);
  });

  it("while most recent pages are cold, starts more than mostlyCold.coldPages only while the lag is at most mostlyCold.lagMs; while most come from L1, the usual bound holds", async () => {
    vi.useFakeTimers({ now: 0 });
    const lag = fixedLag();
    const admissionFor = () =>
      admissionWith({
        clock: { now: () => Date.now() },
        lag,
        maxLagMs: 30,
        maxColdPages: 8,
        minColdPages: 1,
        patienceMs: 100,
        patientColdPages: 8,
        mostlyCold: { coldPages: 2, lagMs: 5, share: 0.5 },
      });
    /** Two pages in progress, then a third asked for at a lag of 10 ms (late by the mostly-cold bound, not by maxLagMs). */
    async function third(admission: ReturnType<typeof admissionFor>) {
      lag.set(0);
      const inProgress = [heldWork(), heldWork()];
      const running = inProgress.map((held) => admission.admit(held.work, true));
      lag.set(10);
      let started = false;
      const page = admission.admit(async () => ((started = true), "third"), true);
      await vi.advanceTimersByTimeAsync(300);
      const startedLate = started;
      lag.set(4);
      await vi.advanceTimersByTimeAsync(20);
      const startedAt4 = started;
      for (const held of inProgress) held.release();
      await Promise.all([...running, page]);
      return { startedLate, startedAt4, stats: admission.stats() };
    }

    // A crawler: every recent page started new work (16 of them: fewer say nothing, overload/window.ts).
    const crawled = admissionFor();
    for (let i = 0; i < 16; i++) await crawled.admit(async () => "cold", true);
    const crawl = await third(crawled);
    expect(crawl.startedLate).toBe(false); // not at 10 ms, not on patience either
    expect(crawl.startedAt4).toBe(true);
    expect(crawl.stats).toMatchObject({ mostlyCold: true, startedMostlyCold: 4 });

    // The same pages among many served from L1: at 10 ms the isolate keeps up.
    const mixed = admissionFor();
    for (let i = 0; i < 16; i++) await mixed.admit(async () => "cold", true);
    for (let i = 0; i < 30; i++) mixed.noteNoWork();
    const zipf = await third(mixed);
    expect(zipf.startedLate).toBe(true);
    expect(zipf.stats).toMatchObject({ mostlyCold: false });
  });

  it("holds at most maxColdPages in progress and maxColdPagesQueued waiting; more are shed at once", async () => {
    vi.useFakeTimers({ now: 0 });
    const clock = { now: () => Date.now() };
    const admission = admissionWith({
      clock,
      lag: fixedLag(),
      maxColdPages: 2,
      maxColdPagesQueued: 1,
    });
    const [first, second] = [heldWork(), heldWork()];
    const running = [admission.admit(first.work, true), admission.admit(second.work, true)];
    const queued = admission.admit(async () => "third", true);
    expect(await admission.admit(async () => "fourth", true)).toBe("busy");
    expect(admission.stats()).toMatchObject({ coldPages: 2, coldPagesQueued: 1 });
    first.release();
    await vi.advanceTimersByTimeAsync(20);
    expect(await queued).toBe("third");
    second.release();
    expect(await Promise.all(running)).toEqual(["done", "done"]);
    expect(admission.stats()).toMatchObject({ admitted: 3, shed: { lagging: 0, busy: 1 }, coldPages: 0 });
  });

  it("takes back the slot of a page whose request vanished, at its lease's end", async () => {
    vi.useFakeTimers({ now: 0 });
    const clock = { now: () => Date.now() };
    const admission = admissionWith({
      clock,
      lag: fixedLag(),
      maxColdPages: 1,
      maxColdPagesQueued: 1,
      coldPageWaitMs: 0,
      coldPageLeaseMs: 2000,
    });
    void admission.admit(() => new Promise<never>(() => {}), true); // never settles, as a cancelled request's work may not
    expect(await admission.admit(async () => "next", true)).toBe("busy");
    vi.setSystemTime(2001);
    expect(await admission.admit(async () => "next", true)).toBe("next");
  });

  it("counts what the shed pages got", () => {
    const admission = admissionWith({
      clock: fakeClock(),
      lag: fixedLag(),
      maxLagMs: 50,
      maxColdPages: 1,
      maxColdPagesQueued: 1,
      coldPageWaitMs: 0,
      coldPageLeaseMs: 1000,
    });
    admission.noteShed("stale");
    admission.noteShed("refused");
    admission.noteShed("refused");
    expect(admission.stats()).toMatchObject({ shedServedStale: 1, shedRefused: 2 });
  });
});

describe("the hold while visitors leave", () => {
  afterEach(() => vi.useRealTimers());

  const options = { departedShare: 0.5, maxHoldMs: 100 };

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

  it("holds nobody while most visitors stay, or too few pages say anything", async () => {
    vi.useFakeTimers({ now: 0 });
    const patience = createPatience({ ...options, clock: { now: () => Date.now() } });
    await leavers(patience, 10, 5);
    expect(patience.holdMs()).toBe(0); // 10 pages: too few to say
    for (let i = 0; i < 12; i++) patience.follow(new AbortController().signal)();
    await vi.advanceTimersByTimeAsync(50);
    expect(patience.holdMs()).toBe(0); // 10 of 22 left: under half
    expect(patience.stats().departedShare).toBeCloseTo(10 / 22);
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
    const left = admission.admit(work, true, leaving.signal);
    await vi.advanceTimersByTimeAsync(10);
    leaving.abort();
    await vi.advanceTimersByTimeAsync(30);
    expect(await left).toBe("left");
    expect(runs).toBe(0);

    const staying = admission.admit(work, true, new AbortController().signal);
    await vi.advanceTimersByTimeAsync(25);
    expect(runs).toBe(0);
    await vi.advanceTimersByTimeAsync(2);
    expect(await staying).toBe("read");
    expect(runs).toBe(1);

    expect(await admission.admit(work, false, new AbortController().signal)).toBe("read");
    expect(patience.stats()).toMatchObject({ held: 2, leftWhileHeld: 1 });
  });
});

describe("fills nobody waits for", () => {
  it("finish within the budget, and are dropped past it until a lease ends", () => {
    const clock = fakeClock();
    const departures = createDepartures({ clock, maxBackgroundFills: 2, backgroundFillMs: 1000 });
    expect([departures.mayFinish(), departures.mayFinish(), departures.mayFinish()]).toEqual([true, true, false]);
    expect(departures.stats()).toMatchObject({ fillsFinished: 2, fillsDropped: 1, backgroundFills: 2 });
    clock.advance(1001);
    expect(departures.mayFinish()).toBe(true);
  });

  it("with a budget of 0, none finishes", () => {
    const departures = createDepartures({ clock: fakeClock(), maxBackgroundFills: 0, backgroundFillMs: 1000 });
    expect(departures.mayFinish()).toBe(false);
    expect(departures.stats().fillsDropped).toBe(1);
  });
});

describe("the lag meter", () => {
  afterEach(() => vi.useRealTimers());

  it("measures how late a 1 ms timer fires, sees a probe still out as lag, and forgets old samples", async () => {
    vi.useFakeTimers({ now: 0 });
    const clock = { now: () => Date.now() };
    const meter = createLagMeter({ clock, everyMs: 25, sampleLifeMs: 1000, probeLostMs: 5000 });
    const work: Promise<unknown>[] = [];
    meter.sample((promise) => void work.push(promise));
    expect(work).toHaveLength(1);
    // A second request while the probe is out starts none.
    meter.sample((promise) => void work.push(promise));
    expect(work).toHaveLength(1);
    // The isolate is busy for 120 ms before the timer can run: the probe out says so already.
    vi.setSystemTime(120);
    expect(meter.lagMs()).toBe(119);
    await vi.advanceTimersByTimeAsync(1);
    await work[0];
    expect(meter.lagMs()).toBeGreaterThanOrEqual(119);
    // A second later with no new sample, the old one says nothing about now.
    vi.setSystemTime(Date.now() + 1000);
    expect(meter.lagMs()).toBe(0);
  });

  it("reads how late replies are handled: the running average of L2 reply times beyond the fastest of the last windows", () => {
    const clock = fakeClock();
    const meter = createLagMeter({ clock, fastestWindowMs: 10_000, sampleLifeMs: 1000 });
    /** `count` replies, one every 10 ms, the i-th taking `ms(i)`. */
    const replies = (count: number, ms: (i: number) => number) => {
      for (let i = 0; i < count; i++) {
        meter.observeReply(ms(i));
        clock.advance(10);
      }
    };
    // An idle isolate: Redis answers in 2-3 ms.
    replies(50, (i) => 2 + (i % 2));
    expect(meter.lagMs()).toBeLessThan(1);
    // Busy: each reply waits ~40 ms to be read.
    replies(50, () => 42);
    expect(meter.lagMs()).toBeGreaterThan(35);
    expect(meter.lagMs()).toBeLessThanOrEqual(40);
    // The busy moment ends and replies become a trickle (a purge sync now and then): the first ones read on time say so.
    for (let i = 0; i < 2; i++) {
      clock.advance(290);
      meter.observeReply(2);
    }
    expect(meter.lagMs()).toBeLessThan(2);
    replies(50, () => 42);
    // Quiet for a second: no news is no lag.
    clock.advance(1000);
    expect(meter.lagMs()).toBe(0);
    // A Redis that got slower for good (50 ms) is its new normal once the windows have turned.
    replies(2100, () => 50);
    expect(meter.lagMs()).toBe(0);
  });

  it("takes the smallest lag of the services heard from: a service that got slower alone is no lag of the isolate's; a delay they all show is", () => {
    const clock = fakeClock();
    const meter = createLagMeter({ clock, fastestWindowMs: 10_000, sampleLifeMs: 1000 });
    /** `count` rounds 10 ms apart, each an L2 reply taking `l2` ms and a product reply taking `product` ms. */
    const rounds = (count: number, l2: number, product: number) => {
      for (let i = 0; i < count; i++) {
        meter.observeReply(l2);
        meter.observeReply(product, "origin:product");
        clock.advance(10);
      }
    };
    rounds(50, 2, 20);
    expect(meter.lagMs()).toBeLessThan(1);
    // Redis 63 ms slower, the origin as before: the isolate is not late.
    rounds(50, 65, 20);
    expect(meter.lagMs()).toBeLessThan(1);
    // Redis alone heard from (no page went to the origin in the last second): its delay is all there is to go by.
    for (let i = 0; i < 150; i++) {
      meter.observeReply(65);
      clock.advance(10);
    }
    expect(meter.lagMs()).toBeGreaterThan(50);
    // Every reply 40 ms late: the isolate's queue.
    rounds(50, 2 + 40, 20 + 40);
    expect(meter.lagMs()).toBeGreaterThan(35);
  });

  it("counts a time-out this isolate noticed late as a sample of its lag, until the sample is old", () => {
    const clock = fakeClock();
    const meter = createLagMeter({ clock, sampleLifeMs: 1000 });
    expect(meter.lagMs()).toBe(0);
    meter.observeLate(80);
    expect(meter.lagMs()).toBe(80);
    clock.advance(1000);
    expect(meter.lagMs()).toBe(0);
  });

  it("takes a probe whose timer never fired for lost, and starts another", () => {
    let now = 0;
    const meter = createLagMeter({ clock: { now: () => now }, everyMs: 25, sampleLifeMs: 1000, probeLostMs: 5000 });
    const work: Promise<unknown>[] = [];
    const timers = vi.spyOn(globalThis, "setTimeout").mockImplementation((() => 0) as never); // the timer never fires
    try {
      meter.sample((promise) => void work.push(promise));
      now = 4000;
      expect(meter.lagMs()).toBe(3999);
      now = 5001;
      expect(meter.lagMs()).toBe(0);
      meter.sample((promise) => void work.push(promise));
      expect(work).toHaveLength(2);
    } finally {
      timers.mockRestore();
    }
  });
});
