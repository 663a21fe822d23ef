// The purge log in Redis (design.md, "Invalidation"):
//
//   pp:v1:purge:seq    a counter: each purge takes the next number
//   pp:v1:purge:log    recent purges by number (the last LOG_MAX), for isolates catching up
//   pp:v1:purge:wide   tag and all purges by time, for as long as an entry they purge can live
//   pp:v1:x:<r>:<id>   per purged entry: when, so that an older fill cannot write it back
//
// Recording costs O(ids) for id purges (each key deleted or marked stale, on
// the shard holding it), O(1) for tag and all purges whatever the number of
// products they touch (isolates judge entries against them by fetch time).
// No KEYS, no SCAN, no FLUSHALL.
import type { L2 } from "../cache/l2";
import { entryKey, purgeLogKeys, purgeMarkerKey } from "../cache/keys";
import { systemClock, type Clock } from "../cache/clock";
import { createRateLimitedLog } from "../observability/log";
import { isWide, storedRecord, type PurgeRecord } from "./record";

/** Purges kept in the log for isolates catching up. */
const LOG_MAX = 1000;
/**
 * What one sync may read of the log: an isolate further behind (a bulk
 * re-price of hundreds of purges of 1,000 ids each) starts over instead: it
 * drops its L1 and takes the tag/all purges, since id purges are already
 * applied in Redis, which is where its next reads go. One read stays small
 * enough for its L2 budget however many purges were recorded meanwhile.
 */
export const SYNC_MAX_RECORDS = 100;
export const SYNC_MAX_BYTES = 256 * 1024;
/** Tag/all purges kept at most; beyond, the oldest is folded into a floor (see watcher). */
export const WIDE_MAX = 5000;
/** A soft-purged entry is served stale at least this long while it refreshes. */
export const SOFT_PURGE_GRACE_MS = 60_000;
/** How long a purge marker blocks older fills: longer than any fill can take. */
const MARKER_TTL_MS = 60_000;
/** The counter and log outlive quiet periods; they are rewritten with every purge. */
const SEQ_TTL_MS = 30 * 86_400_000;
const LOG_TTL_MS = 2 * 86_400_000;

// Appends a purge to the log (on the home shard) and returns its number. A
// counter that is not a count, or a log or wide set of another type, was not
// written by a purge and would refuse every purge from now on: the log
// starts over (readers take a sequence that went back as a reset).
const APPEND_LOG = `
local counter = redis.pcall('GET', KEYS[1])
local foreign = counter and not (type(counter) == 'string' and string.match(counter, '^%d+$'))
for i = 2, 3 do
  local kind = redis.call('TYPE', KEYS[i]).ok
  if kind ~= 'zset' and kind ~= 'none' then foreign = true end
end
if foreign then redis.call('DEL', KEYS[1], KEYS[2], KEYS[3]) end
local seq = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[7])
local record = '{"seq":' .. seq .. ',' .. string.sub(ARGV[1], 2)
redis.call('ZADD', KEYS[2], seq, record)
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[5]) + 1))
redis.call('PEXPIRE', KEYS[2], ARGV[8])
if ARGV[3] == '1' then
  redis.call('ZADD', KEYS[3], ARGV[2], record)
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', tonumber(ARGV[2]) - tonumber(ARGV[4]))
  redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -(tonumber(ARGV[6]) + 1))
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
end
return seq
`;

// Purges entries by id (on the shard holding them): KEYS are pairs of
// (entry, purge marker). Hard: delete. Soft: rewrite the entry's freshUntil
// to now and give it a grace period to be served while it refreshes (a key
// holding anything but an entry, another type included, is left to the next
// fill: read with pcall, so that it cannot fail the purge). Either way the
// marker refuses later writes from fills that began before now.
const PURGE_KEYS = `
local now = ARGV[2]
for i = 1, #KEYS, 2 do
  if ARGV[1] == 'hard' then
    redis.call('DEL', KEYS[i])
  else
    local value = redis.pcall('GET', KEYS[i])
    local version, fetched, fresh, stale, rest
    if type(value) == 'string' then version, fetched, fresh, stale, rest = string.match(value, '^(%d+)|(%d+)|(%d+)|(%d+)|(.*)$') end
    if version and tonumber(fresh) > tonumber(now) then
      local grace = string.format('%.0f', math.max(tonumber(stale), tonumber(now) + tonumber(ARGV[3])))
      redis.call('SET', KEYS[i], version .. '|' .. fetched .. '|' .. now .. '|' .. grace .. '|' .. rest, 'KEEPTTL')
    end
  end
  redis.call('SET', KEYS[i + 1], now, 'PX', ARGV[4])
end
return #KEYS / 2
`;

// Answers {seq, caughtUp, records, wideRecords}: `caughtUp` 0 means the
// reader is too far behind (new, the counter was reset, or more than
// ARGV[2] records or ARGV[3] bytes behind) and gets the wide set instead of
// its missing log records.
const READ_PURGES = `
local seq = tonumber(redis.pcall('GET', KEYS[1])) or 0
local seen = tonumber(ARGV[1])
if seq == seen then return {seq, 1, {}, {}} end
local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local caughtUp = seen > 0 and seq > seen and seq - seen <= tonumber(ARGV[2]) and (oldest[2] == nil or tonumber(oldest[2]) <= seen + 1)
if caughtUp then
  local records = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. seen, '+inf', 'LIMIT', 0, ARGV[2])
  local bytes = 0
  for _, record in ipairs(records) do bytes = bytes + string.len(record) end
  if bytes <= tonumber(ARGV[3]) then return {seq, 1, records, {}} end
end
return {seq, 0, {}, redis.call('ZRANGE', KEYS[3], 0, -1)}
`;

export interface PurgeLogDeps {
  l2: L2;
  keyPrefix: string;
  /** How long a tag/all purge must be remembered: the longest an entry can live. */
  wideRetentionMs: number;
  clock?: Clock;
}

/** Records of the log that are not purges (storedRecord) are logged at most once per this interval. */
const INVALID_RECORD_LOG_INTERVAL_MS = 10_000;

export interface PurgesSince {
  seq: number;
  /** False: the reader missed purges it cannot get back one by one and must start over. */
  caughtUp: boolean;
  records: PurgeRecord[];
  /** Every tag/all purge still relevant, when not caught up. */
  wideRecords: PurgeRecord[];
}

export function createPurgeLog({ l2, keyPrefix, wideRetentionMs, clock = systemClock }: PurgeLogDeps) {
  const keys = purgeLogKeys(keyPrefix);
  const logInvalid = createRateLimitedLog({ intervalMs: INVALID_RECORD_LOG_INTERVAL_MS, clock });
  /** The purges `members` (of `key`) hold; members that are not purges are skipped, and logged: an isolate cannot apply what it cannot read. */
  function readable(members: string[], key: string): PurgeRecord[] {
    const now = clock.now();
    const records: PurgeRecord[] = [];
    for (const member of members) {
      const record = storedRecord(member, now);
      if (record) records.push(record);
      else logInvalid(key, "purge_record_invalid", { key, chars: member.length }, "warn");
    }
    return records;
  }
  return {
    /**
     * Applies the purge's id part where the entries live, then appends it
     * to the log: its sequence number, or undefined when any shard could not
     * do its part (the caller answers 503 and the purge is retried whole).
     */
    async record(purge: Omit<PurgeRecord, "seq">): Promise<number | undefined> {
      const entryKeys: string[] = [];
      for (const id of purge.ids) {
        for (const resource of purge.resources) {
          const key = entryKey(keyPrefix, resource, id);
          entryKeys.push(key, purgeMarkerKey(keyPrefix, key));
        }
      }
      if (entryKeys.length > 0) {
        const applied = await l2.runOnKeys(
          entryKeys,
          (redis, keys) => redis.eval<string[], number>(PURGE_KEYS, keys, [purge.mode, String(purge.at), String(SOFT_PURGE_GRACE_MS), String(MARKER_TTL_MS)]),
          { isWrite: true, force: true },
        );
        if (applied === undefined) return undefined;
      }
      const args = [
        JSON.stringify(purge),
        String(purge.at),
        isWide(purge) ? "1" : "0",
        String(wideRetentionMs),
        String(LOG_MAX),
        String(WIDE_MAX),
        String(SEQ_TTL_MS),
        String(LOG_TTL_MS),
      ];
      return l2.run((redis) => redis.eval<string[], number>(APPEND_LOG, [keys.seq, keys.log, keys.wide], args), { isWrite: true, force: true });
    },

    /**
     * Purges after `seen`, in one round trip of bounded size. Off the page
     * path's breaker: a slow sync read must not make every page skip L2.
     */
    async readSince(seen: number): Promise<PurgesSince | undefined> {
      const answer = await l2.run(
        (redis) =>
          redis.eval<string[], [number, number, string[], string[]]>(READ_PURGES, [keys.seq, keys.log, keys.wide], [
            String(seen),
            String(SYNC_MAX_RECORDS),
            String(SYNC_MAX_BYTES),
          ]),
        { passive: true },
      );
      if (!answer) return undefined;
      const [seq, caughtUp, records, wideRecords] = answer;
      return { seq, caughtUp: caughtUp === 1, records: readable(records, keys.log), wideRecords: readable(wideRecords, keys.wide) };
    },
  };
}

export type PurgeLog = ReturnType<typeof createPurgeLog>;
