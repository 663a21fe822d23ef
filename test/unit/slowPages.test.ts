// The slow-page log (src/observability/wiring.ts, watchSlowPages): one warning
// line for a page whose data took long to read, rate-limited, with the count
// of those held back.
import { afterEach, describe, expect, it, vi } from "vitest";
import { watchSlowPages, type PageRead } from "../../src/observability/wiring";
import { fakeClock } from "../support/fakes";

const read = (ms: number, id = "p-000001"): PageRead => ({
  id,
  ms,
  timings: { l2: 3, origin: ms - 3 },
  cacheStatus: 'pp-origin; fwd=uri-miss; fwd-status=200; stored; ttl=300; detail="product"',
});

afterEach(() => vi.restoreAllMocks());

describe("slow_page", () => {
  it("warns for a read at or past the threshold only, with what the read waited on", () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    const pageRead = watchSlowPages(1000, fakeClock());
    pageRead(read(999));
    expect(warn).not.toHaveBeenCalled();
    pageRead(read(1400, "p-000777"));
    expect(warn).toHaveBeenCalledTimes(1);
    const line = JSON.parse(String(warn.mock.calls[0]![0]));
    expect(line).toMatchObject({ event: "slow_page", id: "p-000777", ms: 1400, slowMs: 1000, timings: { l2: 3, origin: 1397 }, suppressed: 0 });
    expect(line.cacheStatus).toContain("pp-origin");
  });

  it("writes one line per 10 s, counting the slow pages held back", () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    const clock = fakeClock();
    const pageRead = watchSlowPages(1000, clock);
    pageRead(read(2000));
    for (let i = 0; i < 5; i++) pageRead(read(3000));
    expect(warn).toHaveBeenCalledTimes(1);
    clock.advance(10_000);
    pageRead(read(2500, "p-000002"));
    expect(warn).toHaveBeenCalledTimes(2);
    expect(JSON.parse(String(warn.mock.calls[1]![0]))).toMatchObject({ id: "p-000002", suppressed: 5 });
  });
});
