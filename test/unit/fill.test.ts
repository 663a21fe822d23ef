// A fill that lost the lock to another isolate waits for its result in L2
// (src/cache/fill/fill.ts): a poll that fails while L2's breaker stays closed is
// one poll lost, not an outage; a skipped poll (breaker open) ends the wait.
// A claim that got no answer looks at the lock before fetching.
import { describe, expect, it } from "vitest";
import { encodeEntry } from "../../src/cache/l2/codec";
import { createFill } from "../../src/cache/fill/fill";
import type { FillClaim, L2 } from "../../src/cache/l2/l2";
import { createL2Entries } from "../../src/cache/l2/l2Entries";
import type { Outbox } from "../../src/cache/l2/outbox";
import { DEFAULTS } from "../../src/config/defaults";
import { createFlights } from "../../src/cache/fill/flights";
import { createL1 } from "../../src/cache/l1";
import { createRejections } from "../../src/cache/fill/rejections";
import { fakeOrigin, sampleProduct, testConfig, testFillContext, testOutbox } from "../support/fakes";
import { systemClock } from "../../src/shared/clock";

const config = testConfig();
const KEY = "pp:v1:p:p-000042";

/**
 * An L2 where another isolate holds the lock, and the polls answer `polls` in
 * turn (undefined: the read failed or was skipped); claims after the first
 * are answered "lost" too, or, `silentAfterClaim`, not at all.
 */
function losingL2(polls: (string | null | undefined)[], accepts: boolean, silentAfterClaim = false) {
  let reads = 0;
  let claimed = 0;
  const writes: { lockToken: string }[] = [];
  const l2 = {
    claimFills: async (claims: readonly unknown[]) =>
      claims.map((): FillClaim | undefined => (claimed++ > 0 && silentAfterClaim ? undefined : { kind: "lost" })),
    async readMany(keys: string[]) {
      const value = polls[Math.min(reads++, polls.length - 1)];
      return value === undefined ? keys.map(() => undefined) : [value, "someone-else"];
    },
    accepts: () => accepts,
    answered: () => 1,
    writeFills: async (batch: { lockToken: string }[]) => (writes.push(...batch), batch.map(() => undefined)),
    shardOf: () => "l2",
  } as unknown as L2;
  return { l2, reads: () => reads, claims: () => claimed, writes };
}

function winnersValue(): string {
  return productValue(Date.now());
}

/** The product as L2 would hold it, fetched at `fetchedAt` (fresh for a minute). */
function productValue(fetchedAt: number): string {
  const now = fetchedAt;
  const product = sampleProduct("p-000042", 3);
  return encodeEntry({ data: product, version: 3, fetchedAt: now, freshUntil: now + 60_000, staleUntil: now + 120_000, errorUntil: now + 600_000 }, 1024)!;
}

async function fillOnce(l2: L2, l2Entries = createL2Entries({ config, l2, clock: { now: () => Date.now() } }), redisSilent = () => false) {
  const origin = fakeOrigin();
  const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
  const fill = createFill({
    config,
    origin,
    l2,
    outbox: testOutbox(l2, systemClock, sleep),
    l2Entries,
    clock: { now: () => Date.now() },
    random: Math.random,
    sleep,
    redisSilent,
  });
  const { context, settle } = testFillContext("p-000042");
  const entry = await fill(KEY, context);
  await settle(); // its write goes out with the isolate's others, a moment later
  return { entry, context, originCalls: origin.calls.product };
}

describe("a fill that lost the lock", () => {
  it("keeps waiting past a failed poll while L2's breaker is closed, and takes the winner's result", async () => {
    const { l2, reads } = losingL2([undefined, null, winnersValue()], true);
    const { entry, context, originCalls } = await fillOnce(l2);
    expect(originCalls).toBe(0);
    expect(context.via).toBe("winner");
    expect(entry.version).toBe(3);
    expect(reads()).toBe(3);
  });

  it("decodes only the winner's copy: the stale copy that its polls find until then is judged by its header", async () => {
    const staleCopy = productValue(Date.now() - 120_000); // fresh until a minute ago
    const { l2, reads } = losingL2([staleCopy, staleCopy, winnersValue()], true);
    const decoded: string[] = [];
    const entries = createL2Entries({ config, l2, clock: { now: () => Date.now() } });
    const counting = {
      ...entries,
      read: ((...args: Parameters<typeof entries.read>) => (decoded.push(args[1]), entries.read(...args))) as typeof entries.read,
    };
    const { entry, context, originCalls } = await fillOnce(l2, counting);
    expect(originCalls).toBe(0);
    expect(context.via).toBe("winner");
    expect(entry.version).toBe(3);
    expect(reads()).toBe(3);
    expect(decoded).toHaveLength(1);
    expect(decoded[0]).not.toBe(staleCopy);
  });

  it("claims nothing and waits for nothing while L2 is skipped (its breaker opened): fetches at once", async () => {
    const { l2, reads } = losingL2([undefined], false);
    const { context, originCalls } = await fillOnce(l2);
    expect(originCalls).toBe(1);
    expect(context.via).toBe("origin");
    expect(reads()).toBe(0);
  });

  it("stops waiting when Redis is silent (it hangs): a failed poll, and the claim again unanswered too; no winner's result will come", async () => {
    const { l2, reads, claims, writes } = losingL2([undefined, null, winnersValue()], true, true);
    const { context, originCalls } = await fillOnce(l2, undefined, () => true);
    expect(originCalls).toBe(1);
    expect(context.via).toBe("origin");
    expect(reads()).toBe(1);
    expect(claims()).toBe(2);
    // The unanswered claim may have taken the lock once Redis woke: the write carries its token, which releases it.
    expect(writes[0]!.lockToken).not.toBe("");
  });

  it("keeps waiting past a poll that looked like a silent Redis (a busy machine reads a reply late) when the claim again finds the lock held: one origin fetch in all, the winner's", async () => {
    const { l2, reads, claims } = losingL2([undefined, null, winnersValue()], true);
    let silentOnce = true;
    const { entry, context, originCalls } = await fillOnce(l2, undefined, () => {
      const silent = silentOnce;
      silentOnce = false;
      return silent;
    });
    expect(originCalls).toBe(0);
    expect(context.via).toBe("winner");
    expect(entry.version).toBe(3);
    expect(claims()).toBe(2);
    expect(reads()).toBe(3);
  });
});

/** An L2 whose claim gets no answer (the isolate read the reply too late), and whose lock then holds `holder(token)`. */
function unansweredL2(holder: (ownToken: string) => string | null, value: () => string | null = () => null) {
  let token = "";
  let reads = 0;
  const writes: { lockToken: string }[] = [];
  const l2 = {
    async claimFills(claims: readonly { claim: { token: string } }[]) {
      token = claims[0]!.claim.token;
      return claims.map(() => undefined);
    },
    async readMany() {
      reads++;
      return [value(), holder(token)];
    },
    accepts: () => true,
    answered: () => 1,
    writeFills: async (batch: { lockToken: string }[]) => (writes.push(...batch), batch.map(() => true)),
    shardOf: () => "l2",
  } as unknown as L2;
  return { l2, writes, reads: () => reads };
}

describe("a fill whose lock claim got no answer", () => {
  it("finds its own token on the lock: fetches once, as the winner, and its write releases the lock", async () => {
    const { l2, writes, reads } = unansweredL2((own) => own);
    const { context, originCalls } = await fillOnce(l2);
    expect(originCalls).toBe(1);
    expect(context.via).toBe("origin");
    expect(reads()).toBe(1);
    expect(writes).toHaveLength(1);
    expect(writes[0]!.lockToken).not.toBe("");
  });

  it("finds another isolate's token: waits for its result instead of fetching", async () => {
    let polls = 0;
    const { l2 } = unansweredL2(
      () => "another-isolate",
      () => (++polls >= 3 ? winnersValue() : null),
    );
    const { entry, context, originCalls } = await fillOnce(l2);
    expect(originCalls).toBe(0);
    expect(context.via).toBe("winner");
    expect(entry.version).toBe(3);
  });

  it("finds the lock free: fetches at once; its write carries its token, which releases the lock only if the claim took it after all", async () => {
    const { l2, writes, reads } = unansweredL2(() => null);
    const { originCalls } = await fillOnce(l2);
    expect(originCalls).toBe(1);
    expect(reads()).toBe(1);
    expect(writes[0]!.lockToken).not.toBe("");
  });

  it("when Redis is silent (it hangs), fetches at once, polls nothing", async () => {
    const { l2, writes, reads } = unansweredL2(() => "another-isolate");
    const { context, originCalls } = await fillOnce(l2, undefined, () => true);
    expect(originCalls).toBe(1);
    expect(context.via).toBe("origin");
    expect(reads()).toBe(0);
    expect(writes[0]!.lockToken).not.toBe("");
  });
});

describe("a loser whose poll finds the lock free and no fresh copy", () => {
  /** The lock's holder as the claims see it (the primary), and the polls' answers (a replica): [value, holder] each. */
  function l2With(claims: FillClaim[], polls: [string | null, string | null][]) {
    let claimed = 0;
    let reads = 0;
    const l2 = {
      claimFills: async (batch: readonly unknown[]) => batch.map(() => claims[Math.min(claimed++, claims.length - 1)]!),
      readMany: async () => polls[Math.min(reads++, polls.length - 1)],
      accepts: () => true,
      answered: () => 1,
      writeFills: async (batch: unknown[]) => batch.map(() => undefined),
      shardOf: () => "l2",
    } as unknown as L2;
    return { l2, claims: () => claimed };
  }

  it("asks the primary before fetching: a replica the lock has not reached yet (Upstash Global) costs no second origin fetch", async () => {
    // The winner holds the lock on the primary; the first poll reads a lagging replica that has neither its lock nor its copy.
    const { l2, claims } = l2With(
      [{ kind: "lost" }, { kind: "lost" }],
      [
        [null, null],
        [winnersValue(), null],
      ],
    );
    const { entry, context, originCalls } = await fillOnce(l2);
    expect(claims()).toBe(2);
    expect(originCalls).toBe(0);
    expect(context.via).toBe("winner");
    expect(entry.version).toBe(3);
  });

  it("takes the lock itself when the winner let go without a copy, so that the other losers keep waiting on one fetch", async () => {
    const { l2, claims } = l2With([{ kind: "lost" }, { kind: "won" }], [[null, null]]);
    const { context, originCalls } = await fillOnce(l2);
    expect(claims()).toBe(2);
    expect(originCalls).toBe(1);
    expect(context.via).toBe("origin");
  });
});

describe("a won fill's write", () => {
  /** A won fill of the product, its origin fetch taking `originMs` on a clock of its own, and the write it hands the queue. */
  const START = 1_764_000_000_000;
  async function wonFill(options: { originMs?: number; joined?: boolean; refresh?: boolean; purgedAt?: number; purgeLearnedWhileClaiming?: boolean } = {}) {
    let now = START;
    /** The latest purge of the key this isolate knows of, as the fill asks for it (FillContext.purgedAt). */
    let purgedAt = options.purgedAt ?? 0;
    /** Whether the claim could wait for a claim call to carry it, asked as the outbox would: when it came, and again later. */
    const claimPatience: (boolean | undefined)[] = [];
    const clock = { now: () => now };
    const origin = fakeOrigin();
    const fetch = origin.fetchResource.bind(origin);
    origin.fetchResource = (async (...args: Parameters<typeof fetch>) => {
      now += options.originMs ?? 20;
      return fetch(...args);
    }) as typeof origin.fetchResource;
    const l2 = {
      claimFills: async (claims: readonly unknown[]) => claims.map((): FillClaim => ({ kind: "won" })),
      accepts: () => true,
      answered: () => 1,
      shardOf: () => "l2",
    } as unknown as L2;
    const sent: { patient?: boolean; lockToken: string }[] = [];
    const outbox = {
      claim: (requests: Parameters<L2["claimFills"]>[0]) => {
        claimPatience.push(requests[0]!.patient?.());
        if (options.purgeLearnedWhileClaiming) purgedAt = now;
        claimPatience.push(requests[0]!.patient?.());
        return l2.claimFills(requests);
      },
      write: (write: { patient?: boolean; lockToken: string }) => void sent.push(write),
    } as unknown as Outbox;
    const sleep = async () => undefined;
    const fill = createFill({ config, origin, l2, outbox, l2Entries: createL2Entries({ config, l2, clock }), clock, random: Math.random, sleep });
    const { context } = testFillContext("p-000042");
    if (options.joined !== undefined) context.joinedHere = () => options.joined!;
    context.refresh = options.refresh;
    context.freshAfter = purgedAt;
    context.purgedAt = () => purgedAt;
    await fill(KEY, context);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.lockToken).not.toBe("");
    return { ...sent[0]!, claimPatience };
  }

  it(`may wait up to a write's budget (${DEFAULTS.backgroundCallMs} ms) for a claim call to carry it when nobody else here waits for it: a first view, or a refresh`, async () => {
    expect((await wonFill({ joined: false })).patient).toBe(true);
    expect((await wonFill({ refresh: true })).patient).toBe(true);
  });

  it("as a refresh, its claim may wait for a claim call too, until this isolate learns of a purge of its key: then it goes at once", async () => {
    expect((await wonFill({ refresh: true })).claimPatience).toEqual([true, true]);
    expect((await wonFill({ refresh: true, purgeLearnedWhileClaiming: true })).claimPatience).toEqual([true, false]);
    // A visitor's claim is never held.
    expect((await wonFill({})).claimPatience).toEqual([undefined, undefined]);
  });

  it("goes at once when other requests here joined the fill (a herd: likely awaited in other isolates too)", async () => {
    expect((await wonFill({ joined: true })).patient).toBe(false);
  });

  it("goes at once when the key was purged within a poll and a lock's life: the isolates that held a copy come back for it now", async () => {
    const lately = config.purgePollMs + config.lockTtlMs;
    expect((await wonFill({ purgedAt: START - lately })).patient).toBe(false);
    expect((await wonFill({ purgedAt: START - lately - 1 })).patient).toBe(true);
  });

  it("goes at once when its lock would not outlive the hold by half its life (a slow origin): another isolate would take the lock over", async () => {
    const slowest = config.lockTtlMs / 2 - DEFAULTS.backgroundCallMs;
    expect((await wonFill({ originMs: slowest })).patient).toBe(true);
    expect((await wonFill({ originMs: slowest + 1 })).patient).toBe(false);
  });
});

describe("a fill that other requests of the isolate joined", () => {
  it("says so to the fill before it writes (its write then goes at once), and a fill nobody joined says not", async () => {
    const clock = systemClock;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const joinedAtLanding: boolean[] = [];
    const flights = createFlights({
      config,
      clock,
      l1: createL1({ maxBytes: 1 << 20, clock }),
      rejections: createRejections({ config, clock, random: Math.random }),
      async fill(_key, context) {
        await gate;
        joinedAtLanding.push(context.joinedHere?.() ?? false);
        return {
          data: sampleProduct("p-000042", 1),
          version: 1,
          fetchedAt: Date.now(),
          freshUntil: Date.now() + 60_000,
          staleUntil: Date.now() + 90_000,
          errorUntil: Date.now() + 600_000,
        };
      },
    });
    const herd = Array.from({ length: 3 }, () => flights.await(KEY, testFillContext("p-000042").context));
    const alone = flights.await("pp:v1:p:p-000043", testFillContext("p-000043").context);
    release();
    await Promise.all([...herd, alone]);
    expect(joinedAtLanding.sort()).toEqual([false, true]);
  });
});
