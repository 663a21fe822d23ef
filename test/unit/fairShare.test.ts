// Who a client is, and what it holds of the cold work (src/http/client.ts, src/overload/fairShare.ts).
import { describe, expect, it } from "vitest";
import { clientOf } from "../../src/http/client";
import { createFairShare, ONE_BROWSER, UNKNOWN_CLIENT } from "../../src/overload/fairShare";
import { TARGET_MS } from "../../src/overload/limit";
import { fakeClock } from "../support/fakes";

describe("a client's name", () => {
  it("is its IPv4 address, its IPv6 /64, or unknown (loopback included: Miniflare's stand-in for a request off the platform)", () => {
    expect(clientOf("203.0.113.7")).toBe("203.0.113.7");
    expect(clientOf("2001:db8:0:1:aaaa:bbbb:cccc:dddd")).toBe("2001:db8:0:1::/64");
    expect(clientOf("2001:DB8:0:1::5")).toBe("2001:db8:0:1::/64");
    expect(clientOf("2001:db8::1")).toBe("2001:db8:0:0::/64");
    for (const junk of [null, undefined, "", "127.0.0.1", "127.1.2.3", "::1", "not an address", "1.2.3", "2001:db8::1::2", "<script>", "1.2.3.4, 5.6.7.8"])
      expect(clientOf(junk)).toBe("unknown");
  });
});

describe("what a client holds of the cold work", () => {
  it("counts its pages until each is released, or reclaimed at its deadline if its request vanished", () => {
    const clock = fakeClock();
    const fair = createFairShare(clock);
    const released = fair.start("flood", 60_000);
    for (let i = 0; i < 3; i++) fair.start("flood", 1000); // never released
    fair.start("visitor", 60_000);
    expect([fair.holding("flood"), fair.holding("visitor"), fair.clients()]).toEqual([4, 1, 2]);
    released();
    expect(fair.holding("flood")).toBe(3);
    clock.advance(1001);
    expect([fair.holding("flood"), fair.holding("nobody"), fair.clients()]).toEqual([0, 0, 1]);
  });

  it("says how many times its share of a number of places a client holds, the places shared equally among the clients holding pages", () => {
    const clock = fakeClock();
    const fair = createFairShare(clock);
    for (let i = 0; i < 12; i++) fair.start("flood", 60_000);
    // Alone: no share to be past.
    expect(fair.timesShare("flood", 24)).toBe(0);
    const visitor = Array.from({ length: ONE_BROWSER }, () => fair.start("visitor", 60_000));
    fair.start("other", 60_000);
    clock.advance(TARGET_MS); // the clients are counted again once a CoDel target
    // 3 clients share 24 places: 8 each.
    expect([fair.timesShare("flood", 24), fair.timesShare("visitor", 24)]).toEqual([1.5, ONE_BROWSER / 8]);
    // Fewer than one browser's pages: never past its share.
    expect(fair.timesShare("other", 24)).toBe(0);
    visitor[0]!();
    expect(fair.timesShare("visitor", 24)).toBe(0);
    expect(fair.timesShare("nobody", 24)).toBe(0);
    for (let i = 0; i < 12; i++) fair.start(UNKNOWN_CLIENT, 60_000);
    clock.advance(TARGET_MS);
    // "unknown" is everybody off the platform, never one client.
    expect(fair.timesShare(UNKNOWN_CLIENT, 24)).toBe(0);
  });
});
