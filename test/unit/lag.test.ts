// The isolate's lag (src/shared/lag.ts): how late it reads replies, with a clock moved by hand.
import { afterEach, describe, expect, it, vi } from "vitest";
import { createLagMeter, type LagMeter } from "../../src/shared/lag";
import { INTERVAL_MS, TARGET_MS } from "../../src/overload/limit";
import { fakeClock } from "../support/fakes";
import { ISOLATE_STALL_MS } from "../../src/shared/leases";

/** As the overload wires it: the average over CoDel's interval, a reply weighing for its target at least. */
const codel = { intervalMs: INTERVAL_MS, stepMs: TARGET_MS };

describe("the lag meter", () => {
  afterEach(() => vi.useRealTimers());

  it("reads the lag after each reply and each late-noticed time-out is taken in, for the limit", () => {
    const clock = fakeClock();
    const readings: number[] = [];
    const meter: LagMeter = createLagMeter({ clock, ...codel, onReading: () => void readings.push(meter.lagMs()) });
    meter.observeReply(4);
    clock.advance(10);
    meter.observeReply(3);
    clock.advance(10);
    meter.observeReply(40);
    // Another service, measured against its own fastest: its reply is no wait, and the smallest lag counts.
    meter.observeReply(30, "origin:product");
    meter.observeLate(60);
    expect(readings).toHaveLength(5);
    expect(readings[0]).toBe(0);
    expect(readings[1]).toBeLessThan(1);
    expect(readings[2]).toBeGreaterThan(3);
    expect(readings[3]).toBe(0);
    expect(readings[4]).toBe(60);
  });

  it("reads how late replies are handled: the running average of L2 reply times beyond the fastest of the last windows", () => {
    const clock = fakeClock();
    const meter = createLagMeter({ clock, ...codel });
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
    // Quiet for longer than the isolate's longest stall: no news is no lag.
    clock.advance(ISOLATE_STALL_MS);
    expect(meter.lagMs()).toBe(0);
    // A Redis that got slower for good (50 ms) is its new normal once the windows have turned.
    replies(2100, () => 50);
    expect(meter.lagMs()).toBe(0);
  });

  it("takes the smallest lag of the services heard from: a service that got slower alone is no lag of the isolate's; a delay they all show is", () => {
    const clock = fakeClock();
    const meter = createLagMeter({ clock, ...codel });
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
    const meter = createLagMeter({ clock, ...codel });
    expect(meter.lagMs()).toBe(0);
    meter.observeLate(80);
    expect(meter.lagMs()).toBe(80);
    clock.advance(ISOLATE_STALL_MS - 1);
    expect(meter.lagMs()).toBe(80);
    clock.advance(1);
    expect(meter.lagMs()).toBe(0);
  });
});
