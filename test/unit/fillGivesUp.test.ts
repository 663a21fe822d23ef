// A fill that lost the lock to another isolate and gives up waiting for it
// (src/cache/fill/fill.ts, waitForWinner): it polls L2 for the winner's result
// for at most lockTtlMs, then fetches from the origin itself; and when the
// winner lets go of its lock without writing (its origin fetch failed), it
// stops waiting at once. A fake clock that the fill's own sleeps move, so
// that no test waits in real time.
import { describe, expect, it } from "vitest";
import { createFill } from "../../src/cache/fill/fill";
import type { FillClaim, FillWrite, L2 } from "../../src/cache/l2/l2";
import { createL2Entries } from "../../src/cache/l2/l2Entries";
import { fakeClock, fakeOrigin, testConfig, testFillContext, testOutbox } from "../support/fakes";

const config = testConfig();
const KEY = "pp:v1:p:p-000042";

/**
 * An L2 where another isolate won the lock and has written nothing: each poll
 * finds no value and the lock's holder that `holderAt(poll)` says (null: the
 * lock is free).
 */
function losingL2(holderAt: (poll: number) => string | null, now: () => number) {
  const polls: number[] = [];
  const writes: FillWrite[] = [];
  const l2 = {
    // A claim runs where the lock lives: it wins once the holder has let go.
    claimFills: async (claims: readonly unknown[]) => claims.map((): FillClaim => ({ kind: holderAt(polls.length) === null ? "won" : "lost" })),
    async readMany(keys: string[]) {
      polls.push(now());
      return [null, holderAt(polls.length)].slice(0, keys.length);
    },
    accepts: () => true,
    answered: () => 1,
    shardOf: () => "l2",
    writeFills: async (batch: FillWrite[]) => (writes.push(...batch), batch.map(() => true)),
  } as unknown as L2;
  return { l2, polls, writes };
}

function setup(holderAt: (poll: number) => string | null) {
  const clock = fakeClock();
  const origin = fakeOrigin();
  const originCalledAt: number[] = [];
  const fetchResource = origin.fetchResource.bind(origin);
  origin.fetchResource = (resource, id, priority) => {
    originCalledAt.push(clock.now());
    return fetchResource(resource, id, priority);
  };
  const { l2, polls, writes } = losingL2(holderAt, clock.now);
  const fill = createFill({
    config,
    origin,
    l2,
    outbox: testOutbox(l2, clock, async (ms) => clock.advance(ms)),
    l2Entries: createL2Entries({ config, l2, clock }),
    clock,
    random: () => 0.5,
    // The fill's pauses between polls move the fake clock, and take no real time.
    sleep: async (ms) => clock.advance(ms),
  });
  const { context, settle } = testFillContext("p-000042");
  const started = clock.now();
  return { fill: () => fill(KEY, context), context, origin, originCalledAt, polls, writes, started, settle };
}

describe("a fill that lost the lock and gives up waiting", () => {
  it("polls L2 until lockTtlMs is spent while the winner holds its lock and writes nothing, then fetches from the origin itself, once", async () => {
    const { fill, context, origin, originCalledAt, polls, writes, started, settle } = setup(() => "another-isolate");
    const entry = await fill();
    await settle();

    expect(origin.calls.product).toBe(1);
    expect(context.via).toBe("origin");
    expect(entry.version).toBe(1);
    // It waited: polls all through the wait, the last within lockTtlMs, and
    // no pause longer than the last poll's (160 ms) left unused before the fetch.
    expect(polls.length).toBeGreaterThan(10);
    expect(polls.at(-1)! - started).toBeLessThanOrEqual(config.lockTtlMs);
    expect(originCalledAt).toHaveLength(1);
    expect(originCalledAt[0]! - started).toBeGreaterThan(config.lockTtlMs - 160);
    expect(originCalledAt[0]! - started).toBeLessThanOrEqual(config.lockTtlMs);
    // Its result goes to L2, without a lock of its own to release.
    expect(writes).toHaveLength(1);
    expect(writes[0]).toMatchObject({ key: KEY, version: 1, lockToken: "" });
  });

  it("stops waiting at once, takes the lock and fetches when the winner releases its lock without writing", async () => {
    // The winner holds its lock for two polls, then lets go of it (its origin fetch failed).
    const { fill, context, origin, originCalledAt, polls, writes, started, settle } = setup((poll) => (poll <= 2 ? "another-isolate" : null));
    await fill();
    await settle();

    expect(polls).toHaveLength(3);
    expect(origin.calls.product).toBe(1);
    expect(context.via).toBe("origin");
    // Fetched right after the poll that found the lock free: not at the end of lockTtlMs.
    expect(originCalledAt).toEqual([polls[2]]);
    expect(originCalledAt[0]! - started).toBeLessThan(config.lockTtlMs / 10);
    // It claimed the lock that looked free before fetching: its write releases it.
    expect(writes).toHaveLength(1);
    expect(writes[0]!.lockToken).not.toBe("");
  });
});
