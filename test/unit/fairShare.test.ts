// Cold work shared among clients (src/overload/fairShare.ts, client.ts): who a
// client is, and which client gives way while the isolate is under pressure.
import { describe, expect, it } from "vitest";
import { clientOf } from "../../src/overload/client";
import { createFairShare } from "../../src/overload/fairShare";
import { fakeClock } from "../support/fakes";

describe("a client's name", () => {
  it("is its IPv4 address, its IPv6 /64, or unknown", () => {
    expect(clientOf("203.0.113.7")).toBe("203.0.113.7");
    expect(clientOf("2001:db8:0:1:aaaa:bbbb:cccc:dddd")).toBe("2001:db8:0:1::/64");
    expect(clientOf("2001:DB8:0:1::5")).toBe("2001:db8:0:1::/64");
    expect(clientOf("2001:db8::1")).toBe("2001:db8:0:0::/64");
    expect(clientOf("::1")).toBe("0:0:0:0::/64");
    for (const junk of [null, undefined, "", "not an address", "1.2.3", "2001:db8::1::2", "<script>", "1.2.3.4, 5.6.7.8"])
      expect(clientOf(junk)).toBe("unknown");
  });
});

describe("fair share of the cold work", () => {
  it("refuses a client holding over twice what the others with cold work hold on average, two pages or more; never a client alone", () => {
    const clock = fakeClock();
    const fair = createFairShare(clock);
    const flood = Array.from({ length: 5 }, () => fair.start("flood", 10_000));
    expect(fair.overShare("flood")).toBe(false); // alone: nothing to share with
    const visitor = fair.start("visitor", 10_000);
    expect(fair.overShare("flood")).toBe(true);
    expect(fair.overShare("visitor")).toBe(false);
    expect(fair.overShare("newcomer")).toBe(false);
    // Two each: clients holding as much as each other are within their share, one holding a little more (3 against 2) too; 5 against 2 is not.
    for (const release of flood.slice(0, 3)) release();
    const second = fair.start("visitor", 10_000);
    expect([fair.overShare("flood"), fair.overShare("visitor")]).toEqual([false, false]);
    const third = fair.start("visitor", 10_000);
    expect([fair.overShare("flood"), fair.overShare("visitor")]).toEqual([false, false]);
    const more = [fair.start("visitor", 10_000), fair.start("visitor", 10_000)];
    expect([fair.overShare("flood"), fair.overShare("visitor")]).toEqual([false, true]);
    for (const release of [...more, third, second]) release();
    visitor();
    expect(fair.overShare("flood")).toBe(false);
    expect(fair.clients()).toBe(1);
  });

  it("holds a page's place as a lease: a page whose request vanished stops counting at its deadline", () => {
    const clock = fakeClock();
    const fair = createFairShare(clock);
    for (let i = 0; i < 4; i++) fair.start("flood", 1000); // never released
    fair.start("visitor", 60_000);
    expect(fair.overShare("flood")).toBe(true);
    clock.advance(1001);
    expect(fair.overShare("flood")).toBe(false);
    expect(fair.clients()).toBe(1);
  });

  it("tells whether another client's page waits for a slot", () => {
    const clock = fakeClock();
    const fair = createFairShare(clock);
    const mine = fair.wait("flood", 2000);
    expect(fair.othersWait("flood")).toBe(false);
    const theirs = fair.wait("visitor", 2000);
    expect(fair.othersWait("flood")).toBe(true);
    theirs();
    expect(fair.othersWait("flood")).toBe(false);
    mine();
  });
});
