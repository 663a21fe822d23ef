// The isolate's lock claims and fill writes on their way to Redis, one outbox per shard (docs/architecture.md, "Claims and writes share
// calls": Nagle's algorithm for claims, write-behind for writes, and what the hold costs). A call takes claims first, then the oldest
// writes, `maxItems` in all and, past the first write, `maxBytes` of values; the rest go with the next. Plain data only, every wait a lease
// (the Workers rules): a claim whose call left no answer by its lease's end counts as unanswered, like a call of its own that timed out.
import { gatePlaceMs, type Background } from "../../shared/subrequests";
import { DEFAULTS } from "../../config/defaults";
import type { Clock } from "../../shared/clock";
import { pollPauses } from "../../shared/leases";
import { CALL_MAX_BYTES, CALL_MAX_ITEMS, type FillClaim, type FillClaimRequest, type FillWrite, type L2, type ReadAlong } from "./l2";
import { perGroup } from "./shardedL2";

export interface OutboxOptions {
  clock: Clock;
  sleep: (ms: number) => Promise<void>;
  /** How long a write nobody is known to wait for waits for a claim call to carry it (unit tests: other than the default, see createOutbox). */
  holdMs?: number;
  /** Claims and writes in one call at most (l2.ts, CALL_MAX_ITEMS). */
  maxItems?: number;
  /** The writes' values' characters in one call at most, one larger write still going alone (l2.ts, CALL_MAX_BYTES). */
  maxBytes?: number;
  /** A write that waited this long is dropped: its lock has lapsed, and another isolate has likely filled the key since. */
  maxWaitMs: number;
  /** What a claim call reads along, asked as it goes out (null: nothing this time). */
  readAlong?: () => ReadAlong | null;
}

export interface Outbox {
  /** `requests`' answers, in their order, from a call of this request or one that took them; undefined for each when L2 did not answer. */
  claim(requests: readonly FillClaimRequest[], background: Background): Promise<(FillClaim | undefined)[]>;
  /** Queues a fill's write; `background` is this request's `waitUntil`, in case it must make or schedule a call. */
  write(write: FillWrite, background: Background): void;
  stats(): OutboxStats;
}

/** For the status page: what waits now, and what the calls carried. */
export interface OutboxStats {
  /** Writes waiting now. */
  queued: number;
  /** Calls with claims, and the claims in them; of those, claims that waited for a call out and went in another request's call. */
  claimCalls: number;
  claims: number;
  joined: number;
  /** Claims whose call left no answer within its lease. */
  lapsed: number;
  /** Writes sent with claims, and calls of writes alone. */
  carried: number;
  writeCalls: number;
  /** Writes dropped after `maxWaitMs`. */
  expired: number;
}

/** A request's claims of one shard, waiting, then sent: plain data, answered by whichever request's call took them. */
interface Claims {
  requests: FillClaimRequest[];
  since: number;
  /** When the call that took them stops counting as out (0: not taken yet). */
  sentUntil: number;
  answers?: (FillClaim | undefined)[];
}

interface Waiting {
  write: FillWrite;
  since: number;
}

/** One shard's outbox. */
interface Lane {
  claims: Claims[];
  writes: Map<string, Waiting>;
  /** The claim call out: counts as out until this (0: none). */
  outUntil: number;
  /** The held items' scheduled send: due then (0: none), for the items that came up to `sendFor`. */
  sendAt: number;
  sendFor: number;
}

export function createOutbox(l2: L2, given: OutboxOptions): Outbox {
  // The hold is a write's own budget (backgroundCallMs): holding a write at most doubles the time it may take to land, and the lock, which
  // outlives both, keeps other isolates from fetching it again meanwhile (fill.ts, mayWait).
  const options = { holdMs: DEFAULTS.backgroundCallMs, maxItems: CALL_MAX_ITEMS, maxBytes: CALL_MAX_BYTES, ...given };
  const { clock } = options;
  const lanes = new Map<string, Lane>();
  const stats: Omit<OutboxStats, "queued"> = { claimCalls: 0, claims: 0, joined: 0, lapsed: 0, carried: 0, writeCalls: 0, expired: 0 };
  /** How long a claim call counts as out: as long as its place in the request's connection gate is held. */
  const claimLeaseMs = gatePlaceMs(DEFAULTS.l2ClaimTimeoutMs);

  function laneOf(key: string): Lane {
    const name = l2.shardOf(key);
    let lane = lanes.get(name);
    if (!lane) lanes.set(name, (lane = { claims: [], writes: new Map(), outUntil: 0, sendAt: 0, sendFor: 0 }));
    return lane;
  }

  const isOut = (lane: Lane) => lane.outUntil > clock.now();

  /** The oldest writes that fit after `taken` items, out of the lane; those past maxWaitMs dropped on the way. */
  function takeWrites(lane: Lane, taken: number): FillWrite[] {
    const writes: FillWrite[] = [];
    let bytes = 0;
    for (const [key, { write, since }] of lane.writes) {
      if (clock.now() - since > options.maxWaitMs) {
        lane.writes.delete(key);
        stats.expired++;
        continue;
      }
      if (taken + writes.length >= options.maxItems) break;
      if (writes.length > 0 && bytes + write.value.length > options.maxBytes) break;
      bytes += write.value.length;
      lane.writes.delete(key);
      writes.push(write);
    }
    return writes;
  }

  /** A claim call of the waiting claims (whole requests' worth, `maxItems` at most) and the writes that fit, by this request. */
  function sendClaims(lane: Lane, background: Background): Promise<void> {
    const sending: Claims[] = [];
    let count = 0;
    while (lane.claims.length > 0 && (sending.length === 0 || count + lane.claims[0]!.requests.length <= options.maxItems)) {
      const claims = lane.claims.shift()!;
      sending.push(claims);
      count += claims.requests.length;
    }
    const writes = takeWrites(lane, count);
    const out = clock.now() + claimLeaseMs;
    lane.outUntil = out;
    for (const claims of sending) claims.sentUntil = out;
    stats.claimCalls++;
    stats.carried += writes.length;
    const requests = sending.flatMap((claims) => claims.requests);
    const call = l2
      .claimFills(requests, { background, writes, readAlong: options.readAlong?.() ?? undefined })
      .catch(() => requests.map(() => undefined))
      .then((answers) => {
        let from = 0;
        for (const claims of sending) {
          claims.answers = answers.slice(from, from + claims.requests.length);
          from += claims.requests.length;
        }
        if (lane.outUntil === out) lane.outUntil = 0;
        // Writes that may be waited for, come while the call was out: they go now, unless claims that somebody waits for (whose requests
        // send them next) take them.
        const claimsSentNext = lane.claims.some((claims) => !isPatient(claims));
        if (!claimsSentNext && [...lane.writes.values()].some(({ write }) => write.patient !== true)) sendWrites(lane, background);
      });
    background(call);
    return call;
  }

  /** A call of the waiting writes alone (a call's worth at most), by this request. */
  function sendWrites(lane: Lane, background: Background): void {
    const writes = takeWrites(lane, 0);
    if (writes.length === 0) return;
    stats.writeCalls++;
    background(l2.writeFills(writes));
  }

  /** When the oldest of what waits came, and whether it is held (a held write, or claims nobody waits for). */
  function oldestWaiting(lane: Lane): { since: number; held: boolean } | undefined {
    const write = lane.writes.values().next().value;
    const claims = lane.claims[0];
    if (claims && (!write || claims.since <= write.since)) return { since: claims.since, held: isPatient(claims) };
    return write && { since: write.since, held: write.write.patient === true };
  }

  /** The held items' send, `delayMs` from now, as this request's background work (a lease: due at lane.sendAt). */
  function scheduleSend(lane: Lane, delayMs: number, background: Background): void {
    const due = clock.now() + delayMs;
    lane.sendAt = due;
    lane.sendFor = clock.now();
    background(
      options.sleep(delayMs).then(async () => {
        if (lane.sendAt !== due) return;
        lane.sendAt = 0;
        const oldest = oldestWaiting(lane);
        if (!oldest) return;
        // A claim call carried what this send was for: the items that came since wait out their own hold (only those: on a clock that does
        // not move, nothing is put off twice).
        const left = oldest.since + options.holdMs - clock.now();
        if (oldest.held && oldest.since > lane.sendFor && left > 0) return scheduleSend(lane, left, background);
        if (lane.claims.length > 0) {
          // Claims wait for the claim call out (Nagle), then go, with the writes that fit.
          for (const pause of pollPauses(lane.outUntil, clock.now)) {
            if (!isOut(lane)) break;
            await options.sleep(pause);
          }
          if (lane.claims.length > 0 && !isOut(lane)) sendClaims(lane, background);
        } else sendWrites(lane, background);
        if (lane.writes.size > 0 || lane.claims.length > 0) scheduleSend(lane, options.holdMs, background);
      }),
    );
  }

  /** Claims nobody waits for (a refresh nobody here joined): they wait to ride with a call, as held writes do. */
  function isPatient(claims: Claims): boolean {
    return claims.requests.every((request) => request.patient?.() === true);
  }

  /** A send of the held items is scheduled, unless one is (or its request vanished: past its due time and a hold). */
  function ensureSend(lane: Lane, background: Background): void {
    if (lane.sendAt === 0 || clock.now() > lane.sendAt + options.holdMs) scheduleSend(lane, options.holdMs, background);
  }

  async function claimOn(lane: Lane, requests: FillClaimRequest[], background: Background): Promise<(FillClaim | undefined)[]> {
    const claims: Claims = { requests, since: clock.now(), sentUntil: 0 };
    lane.claims.push(claims);
    stats.claims += requests.length;
    /** Not taken yet, no call out, and somebody waits for them: this request sends now. */
    const mustSend = () => claims.sentUntil === 0 && !isOut(lane) && !isPatient(claims);
    for (;;) {
      // This request sends what waits, oldest first; if its own claims did not fit, they wait for that call to come back like the others.
      if (mustSend()) {
        const call = sendClaims(lane, background);
        if (claims.sentUntil > 0) {
          await call;
          return claims.answers ?? requests.map(() => undefined);
        }
      }
      if (claims.sentUntil === 0 && !isOut(lane)) ensureSend(lane, background);
      // Watch for the call that takes these claims, or for the one out to come back, until its lease ends; claims nobody waits for, until
      // the held items' send is due past its lease.
      const until = claims.sentUntil || (isOut(lane) ? lane.outUntil : lane.sendAt + options.holdMs);
      for (const pause of pollPauses(until, clock.now)) {
        await options.sleep(pause);
        if (claims.answers || mustSend()) break;
      }
      if (claims.answers) {
        stats.joined += requests.length;
        return claims.answers;
      }
      if (claims.sentUntil > 0 && claims.sentUntil <= clock.now()) {
        stats.lapsed++;
        return requests.map(() => undefined);
      }
    }
  }

  return {
    async claim(requests, background) {
      // A page's keys share a shard (l2/shardedL2.ts: by product id); a request filling several products may span shards.
      return perGroup(
        requests,
        (request) => laneOf(request.key),
        (lane, ofLane) => claimOn(lane, ofLane, background),
      );
    },
    write(write, background) {
      const lane = laneOf(write.key);
      // Two fills of one key (a refresh, and a fill after a purge) write with their own lock tokens: both go.
      const key = `${write.key} ${write.lockToken}`;
      if (!lane.writes.has(key)) lane.writes.set(key, { write, since: clock.now() });
      let bytes = 0;
      for (const waiting of lane.writes.values()) bytes += waiting.write.value.length;
      // A call's worth goes at once: under load the hold is for riding along, not for holding a queue back.
      if (lane.writes.size >= options.maxItems || bytes >= options.maxBytes) return sendWrites(lane, background);
      // Not held: sent at once, unless a claim call is out (its return sends it, or the next claim takes it; at the latest, its lease end).
      if (write.patient !== true) {
        if (!isOut(lane)) sendWrites(lane, background);
        else if (lane.sendAt === 0 || lane.sendAt > lane.outUntil) scheduleSend(lane, lane.outUntil - clock.now(), background);
        return;
      }
      ensureSend(lane, background);
    },
    stats() {
      let queued = 0;
      for (const lane of lanes.values()) queued += lane.writes.size;
      return { queued, ...stats };
    },
  };
}
