// One invocation's outgoing connections (src/shared/subrequests.ts): at most
// MAX_OPEN_SUBREQUESTS at once, the rest queued in order, each invocation
// with a gate of its own.
import { afterEach, describe, expect, it, vi } from "vitest";
import { MAX_OPEN_SUBREQUESTS, subrequest, SubrequestBudgetSpent, subrequestsOfThisInvocation, withSubrequestGate } from "../../src/shared/subrequests";

const BUDGET = 45;
/** Each call's place in the gate: longer than any test. */
const HOLD_MS = 10_000;

/** A call the test finishes by hand. */
function heldCall() {
  let finish!: () => void;
  const done = new Promise<void>((resolve) => (finish = resolve));
  const call = { started: false, finish, run: () => ((call.started = true), done) };
  return call;
}

const settle = async () => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

describe("subrequests of one invocation", () => {
  it("keeps at most MAX_OPEN_SUBREQUESTS connections open and starts the rest in order as others finish", async () => {
    await withSubrequestGate(BUDGET, async () => {
      const calls = Array.from({ length: 9 }, () => heldCall());
      const running = calls.map((call) => subrequest(call.run, HOLD_MS));
      await settle();
      expect(calls.filter((call) => call.started)).toHaveLength(MAX_OPEN_SUBREQUESTS);
      expect(subrequestsOfThisInvocation()).toMatchObject({ open: MAX_OPEN_SUBREQUESTS, waiting: 9 - MAX_OPEN_SUBREQUESTS });
      calls[0]!.finish();
      await settle();
      expect(calls.map((call) => call.started)).toEqual([...Array(MAX_OPEN_SUBREQUESTS + 1).fill(true), ...Array(9 - MAX_OPEN_SUBREQUESTS - 1).fill(false)]);
      for (const call of calls) call.finish();
      await Promise.all(running);
      expect(subrequestsOfThisInvocation()).toMatchObject({ open: 0, waiting: 0 });
    });
  });

  it("a failed call frees its connection too", async () => {
    await withSubrequestGate(BUDGET, async () => {
      const failures = Array.from({ length: MAX_OPEN_SUBREQUESTS * 2 }, () =>
        subrequest(() => Promise.reject(new Error("refused")), HOLD_MS).catch(() => "failed"),
      );
      expect(await Promise.all(failures)).toEqual(Array(MAX_OPEN_SUBREQUESTS * 2).fill("failed"));
      expect(subrequestsOfThisInvocation()).toMatchObject({ open: 0, waiting: 0 });
    });
  });

  it("two invocations do not share a gate", async () => {
    const first = heldCall();
    const holding = withSubrequestGate(BUDGET, () => Promise.all(Array.from({ length: MAX_OPEN_SUBREQUESTS }, () => subrequest(first.run, HOLD_MS))));
    await settle();
    const second = await withSubrequestGate(BUDGET, () => subrequest(async () => "served at once", HOLD_MS));
    expect(second).toBe("served at once");
    first.finish();
    await holding;
  });

  it("outside an invocation (tools, tests), calls run at once", async () => {
    expect(subrequestsOfThisInvocation()).toBeNull();
    const calls = Array.from({ length: 9 }, () => heldCall());
    const running = calls.map((call) => subrequest(call.run, HOLD_MS));
    await settle();
    expect(calls.every((call) => call.started)).toBe(true);
    for (const call of calls) call.finish();
    await Promise.all(running);
  });
});

describe("subrequests per invocation", () => {
  it(`refuses the call past ${BUDGET} with SubrequestBudgetSpent, without making it`, async () => {
    await withSubrequestGate(BUDGET, async () => {
      for (let i = 0; i < BUDGET; i++) await subrequest(async () => i, HOLD_MS);
      let made = false;
      await expect(subrequest(async () => (made = true), HOLD_MS)).rejects.toBeInstanceOf(SubrequestBudgetSpent);
      expect(made).toBe(false);
    });
    // The next invocation starts afresh.
    await expect(withSubrequestGate(BUDGET, () => subrequest(async () => "ok", HOLD_MS))).resolves.toBe("ok");
  });
});

describe("places whose call never gives them back", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  // The runtime cancels the response part of an invocation when the visitor
  // resets the connection, while its waitUntil part goes on: a call of the
  // cancelled part never settles, and never runs its finally.
  it("are taken back at their deadline, so that the rest of the invocation goes on", async () => {
    vi.useFakeTimers();
    await withSubrequestGate(BUDGET, async () => {
      for (let i = 0; i < MAX_OPEN_SUBREQUESTS; i++) void subrequest(() => new Promise<never>(() => undefined), 1_000);
      await settle();
      let served = false;
      const later = subrequest(async () => (served = true), HOLD_MS);
      await vi.advanceTimersByTimeAsync(999);
      expect(served).toBe(false);
      await vi.advanceTimersByTimeAsync(2);
      await later;
      expect(served).toBe(true);
    });
  });
});
