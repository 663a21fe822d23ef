// Filling one entry from the origin, once across isolates: the first to claim the Redis lock fetches and writes, the others wait a bounded
// time for its result (lockWait.ts), as docs/architecture.md#coalescing draws it. The origin call has the service's whole timeout, never
// cut by the wait before it (a busy isolate's delay must not become a 503 the origin would not give).
import type { Config } from "../../config";
import { originCallBoundMs, type OriginClient } from "../../origin/client";
import { DEFAULTS } from "../../config/defaults";
import type { ResourceName } from "../../origin/resources";
import type { Clock } from "../../shared/clock";
import { encodeEntry } from "../l2/codec";
import { answerEntry, type Entry } from "../entry";
import { lockKey, purgeMarkerKey } from "../keys";
import { createFillBatch, type FillCalls } from "../l2/fillBatch";
import { lockToken, type FillWrite, type L2 } from "../l2/l2";
import type { L2Entries } from "../l2/l2Entries";
import { createLockWait, type Reclaimed, type Wanted } from "./lockWait";
import type { Outbox } from "../l2/outbox";
import { departed, type Departures } from "../../overload";
import { OriginError } from "../../origin/failure";

/**
 * The longest one fill can take: its lock claim, then at most the wait for another isolate and the origin call (up to two attempts,
 * origin/client.ts). In-flight fills are leases that end here (readThrough.ts).
 */
export function fillBoundMs(config: Pick<Config, "lockTtlMs" | "policies">, resource: ResourceName): number {
  return DEFAULTS.l2ClaimTimeoutMs + config.lockTtlMs + originCallBoundMs(config.policies[resource].originTimeoutMs);
}

/** What one fill was about, and what it did (read by the caller that started it). */
export interface FillContext extends Wanted {
  /** Copies fetched before this (a hard purge this isolate knows of) are not taken from L2. */
  notBefore: number;
  /**
   * The latest purge of the key this isolate knows of, now: purges learned while the fill runs count too (a refresh's held claim then goes
   * at once: nobodyElseWaits). `freshAfter` is what it said as the fill began.
   */
  purgedAt: () => number;
  /** A refresh of a copy that is still being served: its origin fetch gives way to visitors under load. */
  refresh?: boolean;
  /** The lock claims of the request's other fills, to make together with this one's (l2/fillBatch.ts). */
  batch?: FillCalls;
  /** A visitor's fill: their request's signal, which aborts when they leave; none for refreshes. */
  visitor?: AbortSignal;
  /** Set by the fill: its claim was answered (L2 said what it holds for the key). */
  l2Answered?: boolean;
  /** Redis did not answer the page's read on time (pageSteps.ts, PageRequest.l2Silent): no lock is claimed. */
  l2Silent?: boolean;
  /** Set by flights.ts: whether other requests of this isolate joined the fill (its write then goes at once: see storeInL2). */
  joinedHere?: () => boolean;
  /** Set by the fill: its visitors left while it was at the origin, and it finishes as background work (within the budget). */
  finishingForNobody?: boolean;
  /**
   * Set by the fill: `origin` when this isolate fetched; `l2` when its claim found L2's copy (for a visitor's read, possibly one within its
   * stale window, which the caller serves and refreshes); `winner` when it waited for another isolate's fill and took its result from L2.
   */
  via?: "origin" | "l2" | "winner";
  /** Set by the fill: an older copy found in L2 on the way, to serve if the origin fails. */
  olderCopy?: Entry;
}

export interface FillDeps {
  config: Config;
  origin: OriginClient;
  l2: L2 | null;
  /** The isolate's lock claims and fill writes on their way to L2 (l2/outbox.ts; null without L2). */
  outbox: Outbox | null;
  /** Decodes what L2 holds; invalid values are misses (and deleted). */
  l2Entries: L2Entries;
  clock: Clock;
  random: () => number;
  sleep: (ms: number) => Promise<void>;
  /** What becomes of fills nobody waits for any more (none in unit tests: they go on). */
  departures?: Departures;
  /** Redis left a call about `key` unanswered because it does not answer (readThrough.ts, redisSilence); without it (unit tests), never. */
  redisSilent?: (key: string, answeredBefore: number) => boolean;
}

export function createFill(deps: FillDeps) {
  const { config, origin, l2, outbox, l2Entries, clock, departures } = deps;
  if (l2 && !outbox) throw new Error("fills through L2 need an outbox for their writes");
  const redisSilent = deps.redisSilent ?? (() => false);
  const waitForWinner = createLockWait({ ...deps, redisSilent });

  /** Nobody waits for this fill any more: `step` is not started (a lock this fill may hold is released by the caller). */
  function stopUnlessWanted(context: FillContext, step: string): void {
    if (!context.wanted || context.wanted()) return;
    departures?.fillStopped();
    throw departed(step);
  }

  /**
   * The origin call of a visitor's fill. If the visitor leaves during it and nobody else waits (nobody joined), it goes on as background
   * work if the budget of such fills has room (its answer is what the next visitor needs), else is cut short: its answer would be parsed,
   * checked and dropped for nobody. The listener is on the visitor's own request signal, from that request, removed when the call ends.
   */
  async function fetchWhileWanted(context: FillContext) {
    const priority = context.refresh ? "refresh" : "visitor";
    const { visitor, wanted } = context;
    if (!visitor || !wanted) return origin.fetchResource(context.resource, context.id, priority);
    const stop = new AbortController();
    const onLeave = () => {
      if (wanted()) return;
      if (departures?.mayFinish()) context.finishingForNobody = true;
      else stop.abort();
    };
    visitor.addEventListener("abort", onLeave);
    try {
      return await origin.fetchResource(context.resource, context.id, priority, stop.signal);
    } catch (error) {
      if (error instanceof OriginError && error.failure === "abandoned") throw departed("origin fetch");
      throw error;
    } finally {
      visitor.removeEventListener("abort", onLeave);
    }
  }

  async function fetchFromOrigin(context: FillContext): Promise<Entry> {
    // Data is as old as the request that fetched it: a purge during the request must win over it (see L2.writeFills and the purge watcher).
    const requestedAt = clock.now();
    return answerEntry(await fetchWhileWanted(context), config.policies[context.resource], requestedAt, deps.random);
  }

  /** A write of `key`, with the isolate's other writes (l2/outbox.ts). */
  function send(key: string, write: Omit<FillWrite, "key" | "lock" | "purgeMarker">, context: FillContext): void {
    outbox!.write({ key, lock: lockKey(config.keyPrefix, key), purgeMarker: purgeMarkerKey(config.keyPrefix, key), ...write }, context.background);
  }

  /**
   * Lets go of this fill's lock without storing anything, so that waiters and other isolates stop waiting: as a write with no value, sent
   * with the isolate's other writes (one call for many).
   */
  function releaseLock(key: string, token: string, context: FillContext): void {
    send(key, { value: "", version: 0, fetchedAt: 0, ttlMs: 1, lockToken: token }, context);
  }

  /**
   * Whether a fill's write may wait for a lock claim to carry it (l2/outbox.ts): not when others are likely to wait for it, nor when its
   * lock would not outlive the hold by half its life (docs/architecture.md, "A write somebody may be waiting for is not held").
   */
  function mayWait(context: FillContext, claimedAt: number): boolean {
    return nobodyElseWaits(context, claimedAt) && clock.now() + DEFAULTS.backgroundCallMs <= claimedAt + config.lockTtlMs / 2;
  }

  /**
   * Only this fill's own requests are likely to wait for it, as far as known now: nobody here joined it, and its key was not purged within
   * a poll and a lock's life (why: as for mayWait). Then a refresh's claim may wait to ride a claim call too, until either changes.
   */
  function nobodyElseWaits(context: FillContext, at: number): boolean {
    return context.joinedHere?.() !== true && at - context.purgedAt() > config.purgePollMs + config.lockTtlMs;
  }

  function storeInL2(key: string, entry: Entry, token: string, context: FillContext, claimedAt: number): void {
    const value = encodeEntry(entry, config.compressAboveBytes);
    if (value === undefined) {
      // Not stored: it would not be read back (over the size cap, or a version past 2^53). Waiters stop waiting.
      if (token) releaseLock(key, token, context);
      return;
    }
    const ttlMs = entry.errorUntil - clock.now();
    send(key, { value, version: entry.version, fetchedAt: entry.fetchedAt, ttlMs, lockToken: token, patient: mayWait(context, claimedAt) }, context);
  }

  async function fillThroughL2(l2: L2, calls: FillCalls, key: string, context: FillContext): Promise<Entry> {
    const lock = lockKey(config.keyPrefix, key);
    const claimedAt = clock.now();
    const token = lockToken(claimedAt);
    const claim = () =>
      calls.claimFill(
        key,
        lock,
        {
          token,
          lockTtlMs: config.lockTtlMs,
          freshBeyond: Math.max(clock.now(), context.freshBeyond),
          notBefore: context.notBefore,
          freshAfter: context.freshAfter,
          // A visitor's read takes a copy within its stale window as it is (the page serves and refreshes it); a refresh wants a fresh one.
          staleBeyond: context.refresh ? undefined : clock.now(),
        },
        context.refresh ? () => nobodyElseWaits(context, claimedAt) : undefined,
      );
    const decode = (value: string) => l2Entries.read(key, value, context.resource, context.id, context.background);
    stopUnlessWanted(context, "lock claim");
    // While L2 is not to be counted on (its breaker open, or an outage being confirmed, or Redis silent to this page's read), no claim is
    // waited for: the fill goes to the origin, and its write to the backlog if Redis does not take it.
    const claiming = l2.accepts(key) && !context.l2Silent;
    const answeredBefore = l2.answered(key);
    const first = claiming ? await claim() : undefined;
    if (first !== undefined) context.l2Answered = true;
    const copy = first?.kind === "copy" ? decode(first.value) : undefined;
    if (copy) {
      context.via = "l2";
      return copy;
    }
    if (first && first.kind !== "copy" && first.stale) context.olderCopy = decode(first.stale);
    let won = first?.kind === "won";
    // A claim without an answer while L2's breaker stays closed: unless Redis is silent (redisSilent), most likely a reply read late (a
    // busy isolate), or a fresh isolate's first call, and the lock may be taken, by this fill or another isolate's. Look before fetching,
    // as a loser does: under a herd, fetching at once is a second origin fetch for the product. When Redis is silent (it hangs), waiting
    // for a winner would be waiting for nothing, so it fetches at once, and its write releases the lock if the claim took it after all.
    const unanswered = claiming && first === undefined && l2.accepts(key);
    /** A claim of this fill went unanswered: it may hold the lock, which its write (or its departure) then releases. */
    let mayHold = unanswered;
    if (first?.kind === "lost" || (unanswered && !redisSilent(key, answeredBefore))) {
      const reclaim = async (): Promise<Reclaimed> => {
        const again = await claim();
        if (again === undefined) mayHold = true;
        if (again?.kind === "copy") return decode(again.value);
        return again?.kind === "won" ? "ours" : again?.kind === "lost" ? "held" : undefined;
      };
      const waited = await waitForWinner(l2, calls, key, lock, context, reclaim, unanswered ? token : undefined);
      if (waited === "departed") {
        // An unanswered claim may have taken the lock: released if so (the token says whose it is).
        if (mayHold) releaseLock(key, token, context);
        departures?.fillStopped();
        throw departed("wait for another isolate's fill");
      }
      if (waited === "ours") won = true;
      else if (waited) {
        context.via = "winner";
        return waited;
      }
    }
    let entry: Entry;
    try {
      stopUnlessWanted(context, "origin fetch");
      entry = await fetchFromOrigin(context);
    } catch (error) {
      // Let the waiters know now, rather than at the lock's expiry.
      if (won || mayHold) releaseLock(key, token, context);
      throw error;
    }
    context.via = "origin";
    if (context.wanted && !context.wanted() && !context.finishingForNobody && departures && !departures.mayFinish()) {
      // Its visitors left (a joiner, after the starter) and the budget of background fills is spent: kept in this isolate's L1
      // (flights.ts), not written; the lock goes now.
      if (won) releaseLock(key, token, context);
      return entry;
    }
    // The write releases the lock if it does not land (an unanswered claim's too, if taken); landed, the lock is spent (l2.ts CLAIM_FILLS).
    storeInL2(key, entry, won || mayHold ? token : "", context, claimedAt);
    return entry;
  }

  /** One fill: resolves to a fresh entry or throws the OriginError (or Departed: nobody waited for it any more). */
  async function fill(key: string, context: FillContext): Promise<Entry> {
    if (!l2) {
      stopUnlessWanted(context, "origin fetch");
      context.via = "origin";
      return fetchFromOrigin(context);
    }
    return fillThroughL2(l2, context.batch ?? createFillBatch(l2, deps.sleep, context.background, outbox ?? undefined), key, context);
  }
  return fill;
}
