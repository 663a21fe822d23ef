import { describe, expect, it } from "vitest";
import { createBreaker } from "../../src/shared/breaker";
import { fakeClock } from "../support/fakes";

describe("circuit breaker", () => {
  it("opens after repeated failures, probes once after the cool-down, closes on success", () => {
    const clock = fakeClock();
    const breaker = createBreaker({ failureThreshold: 3, coolDownMs: 5000, clock });
    for (let i = 0; i < 2; i++) {
      expect(breaker.allow()).toBe(true);
      breaker.failure();
    }
    expect(breaker.state()).toBe("closed");
    breaker.failure();
    expect(breaker.state()).toBe("open");
    expect(breaker.allow()).toBe(false);
    clock.advance(5000);
    expect(breaker.allow()).toBe(true); // the probe
    expect(breaker.allow()).toBe(false); // only one at a time
    breaker.success();
    expect(breaker.state()).toBe("closed");
    expect(breaker.allow()).toBe(true);
  });

  it("asks for a recovery probe while open, at most every recoveryProbeEveryMs, and closes on its answer, long before the cool-down", () => {
    const clock = fakeClock();
    const breaker = createBreaker({ failureThreshold: 1, coolDownMs: 5000, recoveryProbeEveryMs: 250, clock });
    expect(breaker.recoveryProbeDue()).toBe(false); // closed: nothing to recover from
    breaker.failure();
    expect(breaker.state()).toBe("open");
    expect(breaker.recoveryProbeDue()).toBe(true);
    expect(breaker.recoveryProbeDue()).toBe(false); // one per interval
    breaker.recovered(false); // still down: stays open
    expect(breaker.state()).toBe("open");
    clock.advance(249);
    expect(breaker.recoveryProbeDue()).toBe(false);
    clock.advance(1);
    expect(breaker.recoveryProbeDue()).toBe(true);
    breaker.recovered(true);
    expect(breaker.state()).toBe("closed");
    expect(breaker.allow()).toBe(true);
    // Closed by the probe, it judges afresh: one failure (the threshold) opens it again.
    breaker.failure();
    expect(breaker.state()).toBe("open");
  });

  it("asks for no recovery probe without recoveryProbeEveryMs", () => {
    const clock = fakeClock();
    const breaker = createBreaker({ failureThreshold: 1, coolDownMs: 5000, clock });
    breaker.failure();
    expect(breaker.recoveryProbeDue()).toBe(false);
  });

  it("re-opens when the probe fails", () => {
    const clock = fakeClock();
    const breaker = createBreaker({ failureThreshold: 1, coolDownMs: 1000, clock });
    breaker.failure();
    clock.advance(1000);
    expect(breaker.allow()).toBe(true);
    breaker.failure();
    expect(breaker.state()).toBe("open");
    expect(breaker.allow()).toBe(false);
  });

  it("is not closed again by a call that began before it opened", () => {
    const clock = fakeClock();
    const breaker = createBreaker({ failureThreshold: 2, coolDownMs: 1000, clock });
    expect(breaker.allow()).toBe(true); // a slow call starts
    breaker.failure();
    breaker.failure();
    expect(breaker.state()).toBe("open");
    breaker.success(); // the slow call ends well, after the breaker opened
    expect(breaker.state()).toBe("open");
    expect(breaker.allow()).toBe(false);
    clock.advance(1000);
    expect(breaker.allow()).toBe(true);
    breaker.success();
    expect(breaker.state()).toBe("closed");
  });

  it("stays closed while failures are fewer than half of the recent calls, however many there are", () => {
    const breaker = createBreaker({ failureThreshold: 3, coolDownMs: 1000, clock: fakeClock() });
    for (let i = 0; i < 100; i++) {
      breaker.failure();
      breaker.success();
      breaker.success();
    }
    expect(breaker.state()).toBe("closed");
  });

  it("opens once failures are at least half of the recent calls (an outage after a healthy stretch)", () => {
    const breaker = createBreaker({ failureThreshold: 5, coolDownMs: 1000, clock: fakeClock() });
    for (let i = 0; i < 100; i++) breaker.success();
    for (let i = 0; i < 9; i++) breaker.failure();
    expect(breaker.state()).toBe("closed"); // 9 of the last 20
    breaker.failure();
    expect(breaker.state()).toBe("open"); // 10 of the last 20
  });

  it("does not count a failure when another call succeeded while it was under way (a busy isolate, not a failing service)", () => {
    const breaker = createBreaker({ failureThreshold: 2, coolDownMs: 1000, clock: fakeClock() });
    const slowCalls = [breaker.successes, breaker.successes, breaker.successes];
    breaker.success(); // a call that started later came back
    for (const successesAtStart of slowCalls) breaker.failure(successesAtStart);
    expect(breaker.state()).toBe("closed");
    // With no success in between, the same failures open it.
    const failing = [breaker.successes, breaker.successes];
    for (const successesAtStart of failing) breaker.failure(successesAtStart);
    expect(breaker.state()).toBe("open");
  });

  it("hands out a new probe when the last one never reported (its request vanished)", () => {
    const clock = fakeClock();
    const breaker = createBreaker({ failureThreshold: 1, coolDownMs: 1000, clock });
    breaker.failure();
    clock.advance(1000);
    expect(breaker.allow()).toBe(true); // the probe, never heard of again
    expect(breaker.allow()).toBe(false);
    clock.advance(999);
    expect(breaker.allow()).toBe(false);
    clock.advance(1);
    expect(breaker.allow()).toBe(true); // the lease ran out: another probe
    breaker.success();
    expect(breaker.state()).toBe("closed");
  });

  it("does not open on failures that all came within minFailureSpanMs (a stall here), and opens once they last", () => {
    const clock = fakeClock();
    const breaker = createBreaker({ failureThreshold: 5, coolDownMs: 1000, minFailureSpanMs: 500, clock });
    for (let i = 0; i < 10; i++) breaker.failure(undefined, true); // ten time-outs at the same instant
    expect(breaker.state()).toBe("closed");
    clock.advance(499);
    breaker.failure(undefined, true);
    expect(breaker.state()).toBe("closed");
    clock.advance(1);
    breaker.failure(undefined, true);
    expect(breaker.state()).toBe("open");
  });

  it("counts errors (refused, 5xx) at once: the span is for time-outs only", () => {
    const breaker = createBreaker({ failureThreshold: 5, coolDownMs: 1000, minFailureSpanMs: 500, clock: fakeClock() });
    for (let i = 0; i < 5; i++) breaker.failure();
    expect(breaker.state()).toBe("open");
  });

  describe("with confirmTimeouts", () => {
    const confirming = (clock = fakeClock()) => ({ clock, breaker: createBreaker({ failureThreshold: 3, coolDownMs: 1000, confirmTimeouts: true, clock }) });

    it("asks for one probe instead of opening on time-outs, and opens when the probe fails", () => {
      const { breaker } = confirming();
      expect(breaker.failure(undefined, true)).toBeUndefined();
      expect(breaker.failure(undefined, true)).toBeUndefined();
      expect(breaker.failure(undefined, true)).toBe("confirm");
      expect(breaker.state()).toBe("closed");
      expect(breaker.confirming()).toBe(true);
      expect(breaker.failure(undefined, true)).toBeUndefined(); // one confirmation out at a time
      expect(breaker.state()).toBe("closed");
      breaker.confirmed(true);
      expect(breaker.state()).toBe("open");
    });

    it("forgets the time-outs when the service answers the probe", () => {
      const { breaker } = confirming();
      for (let i = 0; i < 2; i++) breaker.failure(undefined, true);
      expect(breaker.failure(undefined, true)).toBe("confirm");
      breaker.confirmed(false);
      expect(breaker.state()).toBe("closed");
      expect(breaker.confirming()).toBe(false);
      // Two more time-outs are two, not five: no new confirmation yet.
      expect(breaker.failure(undefined, true)).toBeUndefined();
      expect(breaker.failure(undefined, true)).toBeUndefined();
      expect(breaker.failure(undefined, true)).toBe("confirm");
    });

    it("asks again once a confirmation whose request vanished lapses", () => {
      const { breaker, clock } = confirming();
      for (let i = 0; i < 2; i++) breaker.failure(undefined, true);
      expect(breaker.failure(undefined, true)).toBe("confirm");
      clock.advance(999);
      expect(breaker.failure(undefined, true)).toBeUndefined();
      clock.advance(1);
      expect(breaker.failure(undefined, true)).toBe("confirm");
    });

    it("gives the lease back on a probe that says nothing, without opening", () => {
      const { breaker } = confirming();
      for (let i = 0; i < 2; i++) breaker.failure(undefined, true);
      expect(breaker.failure(undefined, true)).toBe("confirm");
      breaker.confirmed(undefined);
      expect(breaker.state()).toBe("closed");
      expect(breaker.failure(undefined, true)).toBe("confirm");
    });

    it("still opens at once on errors: a refusal is the service's own word", () => {
      const { breaker } = confirming();
      for (let i = 0; i < 2; i++) breaker.failure(undefined, true);
      expect(breaker.failure()).toBeUndefined();
      expect(breaker.state()).toBe("open");
    });
  });
});
