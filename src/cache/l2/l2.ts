// L2: Redis through @upstash/redis. Each call has a time budget and passes the isolate's circuit breaker (l2Guard.ts); a failed or skipped
// call answers `undefined` ("L2 unavailable"), never throws or deletes: a Redis outage must not become errors or an origin stampede.
import { gatePlaceMs, type Background } from "../../shared/subrequests";
import { Redis } from "@upstash/redis/cloudflare";
import { LRUCache } from "lru-cache";
import type { Breaker } from "../../shared/breaker";
import { createL2Guard, type CallTiming, type L2CallOptions, type L2CallStats } from "./l2Guard";

export type FillClaim =
  /**
   * This isolate holds the lock: fetch from the origin, then `writeFills`. `stale`: L2's older copy, to fall back on if the origin fails.
   */
  | { kind: "won"; stale?: string }
  /** Another isolate is filling: wait for its result in L2 (bounded). */
  | { kind: "lost"; stale?: string }
  /** Someone filled it meanwhile: here is the fresh value (or, with `staleBeyond`, a copy within its stale window). */
  | { kind: "copy"; value: string };

/** A fill's lock token: when it was claimed (ms), then a random part. The time lets another claimer judge the lock spent (CLAIM_FILLS). */
export function lockToken(claimedAt: number): string {
  return `${Math.floor(claimedAt)}.${crypto.randomUUID()}`;
}

/** One fill's claim in a batch (see `claimFills`). */
export interface FillClaimRequest {
  key: string;
  lock: string;
  claim: ClaimOptions;
  /** Whether nobody waits for the claim still (a refresh nobody here joined): it may wait for a claim call to carry it (outbox.ts). */
  patient?: () => boolean;
}

export interface ClaimOptions {
  /** The lock's value (lockToken): only its holder may release it, and it says when it was claimed. */
  token: string;
  lockTtlMs: number;
  freshBeyond: number;
  notBefore: number;
  freshAfter: number;
  /**
   * Set for a visitor's read: a copy within its stale window past this comes back as the value (no lock), for the caller to serve at once
   * and refresh, as a stale copy an L2 read found. Unset for refreshes, which want a fresh copy or the lock.
   */
  staleBeyond?: number;
}

export interface FillWrite {
  key: string;
  lock: string;
  purgeMarker: string;
  /** "": nothing to store, only the lock to release (a fill that stopped, or whose value is not stored). */
  value: string;
  version: number;
  /** When the origin request began: data older than a purge never lands after it. */
  fetchedAt: number;
  ttlMs: number;
  /** The lock token, or "" when this fill does not hold the lock. */
  lockToken: string;
  /** A write nobody is known to wait for: it waits for a claim call to carry it (outbox.ts; fill.ts, mayWait). */
  patient?: boolean;
}

export interface ClaimCallOptions extends Pick<L2ReadOptions, "background"> {
  /** Fill writes the claim call carries (outbox.ts), written before the claims in the same script run. */
  writes?: readonly FillWrite[];
  /** Keys another part of the tier reads in the same script run (the purge log's position: invalidation/watcher.ts). */
  readAlong?: ReadAlong;
}

/** Keys a claim call reads along and what is done with their values: a read that would be its own call rides with a claim sent anyway. */
export interface ReadAlong {
  keys: readonly string[];
  /** Their values as the call read them (null: no such key, or not a string); not called when the call failed. */
  read(values: readonly (string | null)[]): void;
}

/** `force`: the last resort before a 503, when the origin failed too. */
type L2ReadOptions = Pick<L2CallOptions, "force" | "background">;

export interface L2Stats extends L2CallStats {
  /** Writes of the backlog that reached L2 once it came back. */
  replayedWrites: number;
}

export interface L2 {
  /**
   * All keys in one round trip (one per shard): `null` for a missing key, `undefined` where L2 is unavailable. Each call is its own read
   * (in Workers, awaiting another request's I/O is unsafe: the runtime may cancel it with that request); the fill coalesces bursts.
   */
  readMany(keys: string[], options?: L2ReadOptions): Promise<(string | null | undefined)[]>;
  /**
   * Claims the fills of several keys in one call (one script run: CLAIM_FILLS says what each answer means), after the writes it carries;
   * `undefined` for all when L2 is unavailable.
   */
  claimFills(claims: readonly FillClaimRequest[], options?: ClaimCallOptions): Promise<(FillClaim | undefined)[]>;
  /**
   * The writes in one call (one script run: WRITE_FILLS says which land); a write L2 cannot take now (breaker open, failure) waits in a
   * bounded backlog for `flushBacklog`.
   */
  writeFills(writes: readonly FillWrite[]): Promise<(boolean | undefined)[]>;
  /**
   * Writes a call's worth of what the backlog holds (the newest, each write guarded as above), if L2 takes calls again; one flush at a
   * time. Called by every page read while the backlog waits, under `waitUntil`.
   */
  flushBacklog(): Promise<void>;
  backlogSize(): number;
  /**
   * While the breaker is open, sends Redis a PING under `background` now and then (breaker.ts, `recoveryProbeDue`): its answer closes the
   * breaker and sends the backlog. Every page read calls it; cheap when nothing is due.
   */
  recoverIfDue(background: Background): void;
  /** Any other Redis work (purge log, known-ids filter), under the same time budget and breaker: `undefined` when L2 is unavailable. */
  run<T>(call: (redis: Redis) => Promise<T>, options?: L2CallOptions): Promise<T | undefined>;
  /**
   * Work on keys that live with entries (purge markers and the like): `call` runs once per shard holding some of `keys`, with those keys;
   * `undefined` unless every shard did its part.
   */
  runOnKeys<T>(keys: string[], call: (redis: Redis, keys: string[]) => Promise<T>, options?: L2CallOptions): Promise<T[] | undefined>;
  /**
   * Whether L2 can be counted on for `key` now: false while the breaker of its shard is open, or while a probe confirms an outage (calls
   * are still made; nothing should wait for them, as a lock's loser would).
   */
  accepts(key: string): boolean;
  /**
   * Calls the shard of `key` has answered so far (its breaker's successes): read before a call and after it, it says whether Redis answered
   * anything meanwhile (see readThrough.ts, redisSilent).
   */
  answered(key: string): number;
  /** Each shard's name and breaker (one, for a single Redis). */
  readonly shards: readonly { name: string; breaker: Breaker }[];
  shardOf(key: string): string;
  readonly breaker: Breaker;
  readonly stats: L2Stats;
}

export interface L2Options {
  /** For logs and the status page; the ring places keys by it. */
  name?: string;
  url: string;
  token: string;
  /** Budget per call on the visitor's path (reads, fill claims), ms. */
  timeoutMs: number;
  /** Budget per background write (fills, purges, reports), ms: off the visitor's path, so longer, and dropped less under load. */
  writeTimeoutMs?: number;
  /**
   * Budget of a fill's lock claim, ms: only misses claim, and they go on to the origin anyway, so a claim may take longer than a read; a
   * claim that times out makes this isolate fetch on its own, duplicating the fill.
   */
  claimTimeoutMs?: number;
  /** Budget of the probe that confirms an outage before time-outs open the breaker (breaker.ts: `confirmTimeouts`), ms. */
  probeTimeoutMs?: number;
  breaker: Breaker;
  /** Told what the calls say of how late this isolate runs (shared/lag.ts). */
  timing?: CallTiming;
}

// The scripts read what they did not write as absent, never as an error (docs/architecture.md#keys-and-values-in-redis).
//
// Each part reads everything it needs in one MGET, then writes: every call a script makes is a command Redis runs (and bills, on Upstash),
// and on Upstash a script holds the database for its whole run. A claim of a page's four parts runs 1 + 4 calls (8 with a GET each), a
// write of them 1 + 4 (20 with a GET each and the locks deleted); a claim that carries writes runs both, in one command sent.

/**
 * Claims and writes in one Redis call at most (outbox.ts's calls, the backlog's replays), and the bytes one call carries: the writes'
 * values' characters (one larger value still goes, alone), a page of the purge log (invalidation/log.ts), the known-ids filter's segments.
 * A visitor may wait for such a call (a claim, a sync): this size is a script run or reply of a few ms, well within budget.
 */
export const CALL_MAX_ITEMS = 32;
export const CALL_MAX_BYTES = 256 * 1024;

/**
 * The backlog of writes L2 could not take (design: a double fault must not lose what the fleet fetched): the newest, at most this many
 * bytes of values (each counted at least 200 bytes, so the bound holds their count too), replayed a call's worth (one script run) per page
 * read once L2 answers again. Replays are version- and purge-guarded like any fill's write: a late one never wins over newer data.
 */
export const BACKLOG_MAX_BYTES = 2 * 1024 * 1024;

// Writes of fills: KEYS triples (value, lock and purge marker keys), five ARGV each (value, version, TTL, lock token, fetchedAt). Each
// value is written unless the stored version (first field) is newer, or a purge (the marker holds its time) came after the fill began
// (fetchedAt); its lock is released only for its holder's token. An absent entry (version 0: a 404) is the origin's latest word, always
// written: a deleted product must not linger as a stale page. A written value leaves its lock to its TTL (claimFills takes a spent lock
// over); one not written, or empty (a stopped fill: see FillWrite), releases it now, for the next claim. Returns 1 or 0 per write.
const WRITE_FILLS_FUNCTION = `
local function writeFills(K, A)
  local read = redis.call('MGET', unpack(K))
  -- What this run wrote or deleted, by key: a key may come twice in one run.
  local now = {}
  local function current(i)
    local value = now[K[i]]
    if value == nil then value = read[i] end
    return value
  end
  local written = {}
  for i = 1, #K / 3 do
    local key, lock, at = K[3 * i - 2], K[3 * i - 1], 5 * i - 4
    written[i] = 0
    local purgedAt = tonumber(current(3 * i)) or -1
    if A[at] ~= '' and purgedAt < tonumber(A[at + 4]) then
      local stored = current(3 * i - 2)
      local storedVersion = type(stored) == 'string' and tonumber(string.match(stored, '^(%d+)|'))
      if A[at + 1] == '0' or not storedVersion or storedVersion <= tonumber(A[at + 1]) then
        redis.call('SET', key, A[at], 'PX', A[at + 2])
        now[key] = A[at]
        written[i] = 1
      end
    end
    if written[i] == 0 and A[at + 3] ~= '' and current(3 * i - 1) == A[at + 3] then
      redis.call('DEL', lock)
      now[lock] = false
    end
  end
  return written
end
`;

const WRITE_FILLS = `${WRITE_FILLS_FUNCTION}
return writeFills(KEYS, ARGV)
`;

// Claims of fills, after the writes the call carries (ClaimCallOptions.writes): KEYS are the writes' triples, the claims' pairs (value key,
// lock key), then the keys read along (ReadAlong); ARGV[1] the locks' TTL, ARGV[2] the number of writes, ARGV[3] of keys read along, then
// five per write (as above), then five per claim (token, freshBeyond, notBefore, freshAfter, staleBeyond). Returns {answers, written,
// along}: `along` the values read along (false: none, or not a string), `written` as above, and per claim the value when it is fresh
// (freshUntil, third field, after freshBeyond) and fetched after the last purge, soft or hard (fetchedAt, second field, at or after
// freshAfter); or, when staleBeyond is given (a visitor's read, which serves a stale copy at once), when it is not hard-purged and still
// within its stale window (staleUntil, fourth field, after staleBeyond): the caller judges and refreshes it, so no lock is taken; else {1
// or 0, older copy or ''}: 1 when the lock was taken, 0 when somebody else holds it, with the older copy (not hard-purged: fetched at or
// after notBefore) to fall back on if the origin fails. Writes go first: a claim of a key whose write rides along finds its value.
//
// A lock held is taken over when its fill is spent: it began before the last purge the claimer knows of (freshAfter), or its value, or a
// newer one, is stored (fetched at or after the lock was claimed, which its lockToken says): so a write that lands leaves its lock to its
// TTL (writeFills), for the next claim to judge. A lock is a fill's only if it holds a token (digits, a dot, a UUID) and lives no longer
// than a lock's TTL: anything else was never a fill's and is taken over at once (docs/architecture.md#coalescing). A claimer whose lock
// lives shorter than the holder's (a rollout that changed it) takes a real lock over early: one fetch more, never a wait.
const CLAIM_FILLS = `${WRITE_FILLS_FUNCTION}
local writes, alongCount = tonumber(ARGV[2]), tonumber(ARGV[3])
local written = {}
if writes > 0 then
  local wk, wa = {}, {}
  for i = 1, 3 * writes do wk[i] = KEYS[i] end
  for i = 1, 5 * writes do wa[i] = ARGV[3 + i] end
  written = writeFills(wk, wa)
end
local k0, a0 = 3 * writes, 3 + 5 * writes
local n = (#KEYS - k0 - alongCount) / 2
local valueKeys = {}
for i = 1, n do valueKeys[i] = KEYS[k0 + 2 * i - 1] end
local values = redis.call('MGET', unpack(valueKeys))
local answers = {}
for i = 1, n do
  local lock, at = KEYS[k0 + 2 * i], a0 + 5 * i - 4
  local token, freshBeyond, notBefore, freshAfter = ARGV[at], tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3])
  local staleBeyond = tonumber(ARGV[at + 4])
  local value = values[i]
  local older = ''
  local answer = nil
  local storedAt = nil
  if type(value) == 'string' then
    local fetchedAt, freshUntil, staleUntil = string.match(value, '^%d+|(%d+)|(%d+)|(%d+)|')
    storedAt = tonumber(fetchedAt)
    if fetchedAt and tonumber(fetchedAt) >= notBefore then
      if tonumber(freshUntil) > freshBeyond and tonumber(fetchedAt) >= freshAfter then answer = value
      elseif staleBeyond and tonumber(staleUntil) > staleBeyond then answer = value
      else older = value end
    end
  end
  if not answer then
    if redis.call('SET', lock, token, 'NX', 'PX', ARGV[1]) then answer = {1, older}
    else
      local held = redis.pcall('GET', lock)
      local claimedAt = type(held) == 'string' and tonumber(string.match(held, '^(%d+)%.%x+%-%x+%-%x+%-%x+%-%x+$'))
      local spent = true
      if claimedAt then
        local ttl = redis.call('PTTL', lock)
        spent = claimedAt < freshAfter or (storedAt ~= nil and storedAt >= claimedAt) or ttl < 0 or ttl > tonumber(ARGV[1])
      end
      if spent then
        redis.call('SET', lock, token, 'PX', ARGV[1])
        answer = {1, older}
      else answer = {0, older} end
    end
  end
  answers[i] = answer
end
local along = {}
for i = 1, alongCount do
  local value = redis.pcall('GET', KEYS[k0 + 2 * n + i])
  along[i] = type(value) == 'string' and value or false
end
return {answers, written, along}
`;

interface Pending {
  write: FillWrite;
  /** When the entry stops being worth storing (its stale-if-error end). */
  expiresAt: number;
}

function client(url: string, token: string, timeoutMs: number): Redis {
  return new Redis({
    url,
    token,
    // Values are our own strings (see codec.ts): no JSON guessing.
    automaticDeserialization: false,
    // The breaker decides about retrying; the client must not retry behind its back.
    retry: false,
    enableTelemetry: false,
    // One call, one round trip: the page path batches its reads itself (MGET).
    enableAutoPipelining: false,
    // Every value the tier stores is text (codec.ts: JSON, or gzip as base64; the known-ids segments are ASCII): JSON carries it as is. The
    // default base64 of every reply costs an atob and a UTF-8 decode per value read, on top of the codec's; a value that is not valid UTF-8
    // (not the tier's) still arrives as a string, and fails validation.
    responseEncoding: false,
    // A fresh deadline per request: a hung Redis costs at most `timeoutMs`.
    signal: () => AbortSignal.timeout(timeoutMs),
  });
}

export function emptyStats(): L2Stats {
  return { skipped: 0, failures: 0, droppedWrites: 0, isolateErrors: 0, replayedWrites: 0, countedTimeouts: 0, countedErrors: 0, outagesDismissed: 0 };
}

/** The write part's keys and arguments for `writes` (writeFills, in either script). */
function writeArgs(writes: readonly FillWrite[]) {
  return {
    keys: writes.flatMap((write) => [write.key, write.lock, write.purgeMarker]),
    args: writes.flatMap((write) => [
      write.value,
      String(write.version),
      String(Math.max(1, Math.round(write.ttlMs))),
      write.lockToken,
      String(write.fetchedAt),
    ]),
  };
}

export function createL2({
  name = "l2",
  url,
  token,
  timeoutMs,
  writeTimeoutMs = timeoutMs,
  claimTimeoutMs = timeoutMs,
  probeTimeoutMs = writeTimeoutMs,
  breaker,
  timing,
}: L2Options): L2 {
  const reader = client(url, token, timeoutMs);
  const prober = client(url, token, probeTimeoutMs);
  const writer = client(url, token, writeTimeoutMs);
  const claimer = client(url, token, claimTimeoutMs);
  const claimScript = claimer.createScript<[(string | [number, string])[], number[], (string | null)[]]>(CLAIM_FILLS);
  const writeScript = writer.createScript<number[]>(WRITE_FILLS);
  const stats = emptyStats();
  const { guarded, recoverIfDue } = createL2Guard({
    breaker,
    stats,
    prober,
    timeoutMs,
    writeTimeoutMs,
    probeTimeoutMs,
    timing,
    onRecovered: () => flushBacklog(),
  });
  // Newest kept: lru-cache evicts the least recently set first. Plain data only: it is replayed from other requests. Each counted 200 bytes
  // more than its value (the Pending, its write's keys, lru-cache's slots): the byte bound holds the count too.
  const backlog = new LRUCache<string, Pending>({ maxSize: BACKLOG_MAX_BYTES, sizeCalculation: (pending) => pending.write.value.length + 200 });
  /** The flush under way, as a lease (shared/leases.ts): a flush whose request vanished lapses at its budget. */
  let flushingUntil = 0;

  /** Keeps writes L2 did not take for `flushBacklog`, without their locks (lapsed by the time they are replayed); a release alone is not replayed. */
  function keepForReplay(writes: readonly FillWrite[]): void {
    for (const write of writes) {
      if (write.value !== "") backlog.set(write.key, { write: { ...write, lockToken: "" }, expiresAt: Date.now() + write.ttlMs });
    }
  }

  async function claimFills(claims: readonly FillClaimRequest[], options?: ClaimCallOptions): Promise<(FillClaim | undefined)[]> {
    if (claims.length === 0) return [];
    const lockTtlMs = Math.max(...claims.map(({ claim }) => claim.lockTtlMs));
    const carried = options?.writes ?? [];
    const writes = writeArgs(carried);
    const along = options?.readAlong;
    const reply = await guarded(
      () =>
        claimScript.exec(
          [...writes.keys, ...claims.flatMap(({ key, lock }) => [key, lock]), ...(along?.keys ?? [])],
          [
            String(lockTtlMs),
            String(carried.length),
            String(along?.keys.length ?? 0),
            ...writes.args,
            ...claims.flatMap(({ claim }) => [
              claim.token,
              String(claim.freshBeyond),
              String(claim.notBefore),
              String(claim.freshAfter),
              String(claim.staleBeyond ?? ""),
            ]),
          ],
        ),
      { budgetMs: claimTimeoutMs, background: options?.background },
    );
    if (reply === undefined && carried.length > 0) {
      stats.droppedWrites++;
      keepForReplay(carried);
    }
    if (reply !== undefined && along) along.read(along.keys.map((_, i) => (typeof reply[2]?.[i] === "string" ? reply[2][i] : null)));
    const answers = reply?.[0];
    return claims.map((_, i): FillClaim | undefined => {
      const answer = answers?.[i];
      if (answer === undefined) return undefined;
      if (typeof answer === "string") return { kind: "copy", value: answer };
      const [won, older] = answer;
      return { kind: won === 1 ? "won" : "lost", ...(older ? { stale: older } : {}) };
    });
  }

  async function writeFills(writes: readonly FillWrite[]): Promise<(boolean | undefined)[]> {
    if (writes.length === 0) return [];
    const { keys, args } = writeArgs(writes);
    const written = await guarded(() => writeScript.exec(keys, args), { isWrite: true });
    if (written === undefined) keepForReplay(writes);
    return writes.map((_, i) => (written === undefined ? undefined : written[i] === 1));
  }

  /** One call's worth of the backlog: every page read while it waits calls this, so it drains at the traffic's pace, a subrequest a page. */
  async function flushBacklog(): Promise<void> {
    if (backlog.size === 0 || flushingUntil > Date.now() || !breaker.allow()) return;
    flushingUntil = Date.now() + gatePlaceMs(writeTimeoutMs);
    try {
      const now = Date.now();
      // Entries past their end are not worth a write; the rest go newest first (lru-cache's order).
      for (const [key, pending] of [...backlog.entries()]) if (pending.expiresAt <= now) backlog.delete(key);
      // A call's worth, as the outbox sends them (outbox.ts).
      const batch = [...backlog.entries()].slice(0, CALL_MAX_ITEMS);
      if (batch.length === 0) return;
      // Replayed with what is left of their life.
      const { keys, args } = writeArgs(batch.map(([, pending]) => ({ ...pending.write, ttlMs: pending.expiresAt - now })));
      const done = await guarded(() => writeScript.exec(keys, args), { isWrite: true, force: true });
      if (done === undefined) return;
      for (const [key, pending] of batch) {
        // A newer write for the key may have joined the backlog meanwhile: it stays.
        if (backlog.peek(key) === pending) backlog.delete(key);
      }
      stats.replayedWrites += batch.length;
    } finally {
      flushingUntil = 0;
    }
  }

  return {
    breaker,
    stats,
    recoverIfDue,
    async readMany(keys, options) {
      if (keys.length === 0) return [];
      const values = await guarded(() => reader.mget<(string | null)[]>(...keys), options);
      return keys.map((_, index) => (values === undefined ? undefined : (values[index] ?? null)));
    },
    claimFills,
    writeFills,
    backlogSize: () => backlog.size,
    flushBacklog,
    run(call, options) {
      // Writes and passive reads have the background budget (l2Guard.ts): the client whose own deadline is that budget.
      return guarded(() => call(options?.isWrite || options?.passive ? writer : reader), options);
    },
    async runOnKeys(keys, call, options) {
      const result = await guarded(() => call(options?.isWrite ? writer : reader, keys), options);
      return result === undefined ? undefined : [result];
    },
    accepts: () => breaker.state() !== "open" && !breaker.confirming(),
    answered: () => breaker.successes,
    shards: [{ name, breaker }],
    shardOf: () => name,
  };
}
