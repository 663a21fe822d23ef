// The purge log in Redis (docs/architecture.md#invalidation):
//
//   pp:v1:purge:seq    a counter: each purge takes the next number
//   pp:v1:purge:log    recent purges by number (the last LOG_MAX_PURGES), for isolates catching up;
//                      kept, as the marks and the wide log, as long as an entry lives (wideRetentionMs)
//                      after the last purge: an isolate that read none for longer holds nothing they concern
//   pp:v1:purge:marks  per resource and tag (or "all"), the latest hard and soft purge
//                      times: what a new isolate needs to judge entries, whatever the
//                      number of purges (a hash of at most PURGES_REMEMBERED fields)
//   pp:v1:purge:wide-log  the same numbers as the log, each with its record if it is a tag
//                      or all purge, else with its number alone: a reader a page of a bulk
//                      re-price behind takes the tag and all purges ahead of its page in the
//                      same read, and knows by their count that none is missing
//   pp:v1:purge:era    when the counter (re)started: a sequence number means
//                      something only within its era (location copies carry both).
//                      An era stands only beside its counter and is never empty; a
//                      log without one gets one from its first reader (START_ERA)
//   pp:v1:x:<r>:<id>   per purged entry: when, so that an older fill cannot write it back
//
// Recording costs O(ids) for id purges (each key deleted or marked stale, on the shard holding it), O(1) for tag and all purges whatever
// the number of products they touch (isolates judge entries against them by fetch time). No KEYS, no SCAN, no FLUSHALL.
import type { Redis } from "@upstash/redis/cloudflare";
import { CALL_MAX_BYTES, type L2 } from "../cache/l2/l2";
import { entryKey, purgeLogKeys, purgeMarkerKey } from "../cache/keys";
import { systemClock, type Clock } from "../shared/clock";
import { DEFAULTS } from "../config/defaults";
import { createRateLimitedLog } from "../shared/log";
import { RESOURCE_NAMES, type ResourceName } from "../origin/resources";
import { isWide, storedRecord, type PurgeRecord } from "./record";
import { PURGES_REMEMBERED, type WideMark } from "./knownPurges";

const FLOOR_FIELD = "~floor";

/** Purges the log keeps for isolates catching up (one further behind starts over): what Redis holds for it stays bounded. */
const LOG_MAX_PURGES = 1000;

/**
 * One read of the log, a page: at most a Redis call's bytes of purges (= CALL_MAX_BYTES; at least one purge) and this many purges, those
 * the script takes before trimming to the bytes. What a visitor due for a sync waits for at most, within the read's budget however many
 * purges were recorded meanwhile (1,000 ids are about 11 KB); an isolate further behind reads on in the background.
 */
export const PAGE_MAX_BYTES = CALL_MAX_BYTES;
export const PAGE_MAX_PURGES = 100;

/**
 * How long a purge marker refuses writes of fills that began before it: longer than a fill's fetch and write (seconds), and than a write
 * L2's backlog kept while Redis was out waits for it to answer (cache/l2/l2.ts).
 */
const MARKER_TTL_MS = 60_000;

/** The counter and its era outlive quiet periods (one that expires starts a new era: every isolate starts over once), not forever: every key has a TTL. */
export const SEQ_TTL_MS = 30 * 86_400_000;

// Appends a purge to the log (on the home shard) and returns its number. A tag or all purge also raises its marks: field "<resource>|<tag>"
// (or "<resource>" for all) holds "<latest hard>|<latest soft>" purge times. A counter that is not a count, or a log or marks hash of
// another type, was not written by a purge and would refuse every purge from now on: the log starts over (readers take a sequence that went
// back as a reset).
const APPEND_LOG = `
local counter = redis.pcall('GET', KEYS[1])
local foreign = counter and not (type(counter) == 'string' and string.match(counter, '^%d+$'))
for i, expected in pairs({[2] = 'zset', [3] = 'hash', [5] = 'zset'}) do
  local kind = redis.call('TYPE', KEYS[i]).ok
  if kind ~= expected and kind ~= 'none' then foreign = true end
end
if foreign then redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[5]) end
local seq = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[7])
-- A counter that starts again starts a new era: its numbers name other purges than the last era's.
-- One a reader started at 0 (START_ERA) goes on in its era.
local era = redis.pcall('GET', KEYS[4])
if foreign or not counter or type(era) ~= 'string' or era == '' then redis.call('SET', KEYS[4], ARGV[2]) end
redis.call('PEXPIRE', KEYS[4], ARGV[7])
local record = '{"seq":' .. seq .. ',' .. string.sub(ARGV[1], 2)
redis.call('ZADD', KEYS[2], seq, record)
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[5]) + 1))
redis.call('PEXPIRE', KEYS[2], ARGV[4])
redis.call('ZADD', KEYS[5], seq, ARGV[3] == '1' and record or tostring(seq))
redis.call('ZREMRANGEBYRANK', KEYS[5], 0, -(tonumber(ARGV[5]) + 1))
redis.call('PEXPIRE', KEYS[5], ARGV[4])
if ARGV[3] == '1' then
  local purge = cjson.decode(ARGV[1])
  local at = tonumber(ARGV[2])
  local function marks(field)
    local text = redis.call('HGET', KEYS[3], field)
    if not text then return 0, 0 end
    local hard, soft = string.match(text, '^(%d+)|(%d+)$')
    return tonumber(hard) or 0, tonumber(soft) or 0
  end
  local function raise(field)
    local hard, soft = marks(field)
    if purge.mode == 'hard' then hard = math.max(hard, at) else soft = math.max(soft, at) end
    redis.call('HSET', KEYS[3], field, string.format('%.0f|%.0f', hard, soft))
  end
  for _, resource in ipairs(purge.resources) do
    if purge.all then raise(resource) end
    for _, tag in ipairs(purge.tags) do raise(resource .. '|' .. tag) end
  end
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
  local max = tonumber(ARGV[6])
  if redis.call('HLEN', KEYS[3]) > max then
    -- Past the bound: drop marks older than the retention, then the oldest into the floor.
    local horizon = at - tonumber(ARGV[4])
    local fields = redis.call('HGETALL', KEYS[3])
    local kept = {}
    for i = 1, #fields, 2 do
      if fields[i] ~= '${FLOOR_FIELD}' then
        local hard, soft = string.match(fields[i + 1], '^(%d+)|(%d+)$')
        local latest = math.max(tonumber(hard) or 0, tonumber(soft) or 0)
        if latest < horizon then redis.call('HDEL', KEYS[3], fields[i]) else kept[#kept + 1] = {fields[i], latest} end
      end
    end
    if #kept > max then
      table.sort(kept, function(a, b) return a[2] < b[2] end)
      local floor = marks('${FLOOR_FIELD}')
      for i = 1, #kept - math.floor(max * 0.9) do
        redis.call('HDEL', KEYS[3], kept[i][1])
        floor = math.max(floor, kept[i][2])
      end
      redis.call('HSET', KEYS[3], '${FLOOR_FIELD}', string.format('%.0f|0', floor))
    end
  end
end
return seq
`;

// Purges entries by id (on their shard): KEYS are pairs of (entry, purge marker). Hard: delete. Soft: rewrite the entry's freshUntil to now
// and give it a grace period to be served while it refreshes (a key holding anything but an entry, another type included, is left to the
// next fill: read with pcall, so it cannot fail the purge). Either way the marker refuses later writes of fills begun before now.
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

// Answers {seq, follows, records, marks, era, upTo, wideAhead, wideAheadKnown}. A reader of the log's era (ARGV[4]) that the log still
// holds the next record for follows it (1): it gets the records after its position ARGV[1] in order, one page of at most ARGV[2] records or
// ARGV[3] bytes (at least one record), and `upTo`, the number of the last one: less than `seq` when there is more to read (a bulk re-price:
// hundreds of purges of 1,000 ids), which the reader asks for next, page by page, in the background. Then it also gets the tag and all
// purges after its page (within the same bytes), and whether those are all of them (1: the wide log holds every number after the page):
// with them, and Redis's copies (which a purge's ids are applied to before it is logged), it can judge any copy before it has read the rest
// (watcher.ts). Any other reader (new, of another era: the counter started again, or behind what the log still holds) starts over (0): it
// gets the tag/all marks (HGETALL: field, value, ...) instead of the records it missed, and the log's latest records, newest first, within
// the same bounds: how far back its knowledge of id purges reaches from now on (see KnownPurges.vouches).
const READ_PURGES = `
local counter = redis.pcall('GET', KEYS[1])
local seq = type(counter) == 'string' and tonumber(counter) or 0
local era = redis.pcall('GET', KEYS[4])
-- An era stands only beside its counter (START_ERA).
if type(counter) ~= 'string' or type(era) ~= 'string' then era = '' end
local seen = tonumber(ARGV[1])
-- Numbers of another era name other purges: a reader of another era starts over.
local sameEra = era == ARGV[4]
if seq == seen and sameEra then return {seq, 1, {}, {}, era, seq} end
local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if sameEra and seq > seen and oldest[2] ~= nil and tonumber(oldest[2]) <= seen + 1 then
  local found = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. seen, '+inf', 'WITHSCORES', 'LIMIT', 0, ARGV[2])
  local page, upTo, bytes = {}, seen, 0
  for i = 1, #found, 2 do
    bytes = bytes + string.len(found[i])
    if #page > 0 and bytes > tonumber(ARGV[3]) then break end
    page[#page + 1] = found[i]
    upTo = tonumber(found[i + 1])
  end
  if #page > 0 then
    local ahead, aheadKnown = {}, 0
    if upTo < seq and redis.call('ZCOUNT', KEYS[5], '(' .. upTo, seq) == seq - upTo then
      aheadKnown = 1
      local aheadBytes = 0
      for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5], '(' .. upTo, seq)) do
        if string.sub(member, 1, 1) == '{' then
          aheadBytes = aheadBytes + string.len(member)
          if aheadBytes > tonumber(ARGV[3]) then ahead, aheadKnown = {}, 0 break end
          ahead[#ahead + 1] = member
        end
      end
    end
    return {seq, 1, page, {}, era, math.min(upTo, seq), ahead, aheadKnown}
  end
end
local latest = {}
local bytes = 0
for _, record in ipairs(redis.call('ZREVRANGEBYSCORE', KEYS[2], seq, '-inf', 'LIMIT', 0, ARGV[2])) do
  bytes = bytes + string.len(record)
  if bytes > tonumber(ARGV[3]) then break end
  latest[#latest + 1] = record
end
return {seq, 0, latest, redis.call('HGETALL', KEYS[3]), era, seq}
`;

// Gives a log without an era (none, an empty one, or one whose counter is gone) one: its counter at 0 (unless it has one) and an era of
// ARGV[1] (the time), both kept ARGV[2] ms like an append's. Answers {seq, era} as they stand after it (another reader's era, if it came
// first): no two logs share an empty era (docs/architecture.md#the-location-tier).
const START_ERA = `
local counter = redis.pcall('GET', KEYS[1])
local era = redis.pcall('GET', KEYS[2])
if type(counter) ~= 'string' or type(era) ~= 'string' or era == '' then
  if type(counter) ~= 'string' then counter = '0' end
  redis.call('SET', KEYS[1], counter, 'PX', ARGV[2])
  era = ARGV[1]
  redis.call('SET', KEYS[2], era, 'PX', ARGV[2])
end
return {tonumber(counter) or 0, era}
`;

type PurgesReply = [number, number, string[], string[], string, number, string[]?, number?];

/**
 * READ_PURGES per client, hashed once and run by its SHA, read-only (EVALSHA_RO): every isolate runs it about once a second while it
 * serves, so it is sent as 40 bytes rather than its source, and a replica may answer it (Upstash Global reads from the nearest).
 */
const readPurgesScripts = new WeakMap<Redis, { exec(keys: string[], args: string[]): Promise<PurgesReply> }>();

function readPurgesScript(redis: Redis): { exec(keys: string[], args: string[]): Promise<PurgesReply> } {
  let script = readPurgesScripts.get(redis);
  if (!script) readPurgesScripts.set(redis, (script = redis.createScript<PurgesReply, true>(READ_PURGES, { readonly: true })));
  return script;
}

interface PurgeLogDeps {
  l2: L2;
  keyPrefix: string;
  /** How long a tag/all purge must be remembered: the longest an entry can live. */
  wideRetentionMs: number;
  clock?: Clock;
}

export interface PurgesSince {
  seq: number;
  /** When the sequence (re)started: its numbers name purges only within it. */
  era: string;
  /** True: the records follow on from the reader's position. False: the reader missed purges it cannot get back one by one and must start over. */
  follows: boolean;
  /**
   * Following: the records after the reader's, in order, up to number `upTo` (`seq` unless more are left to read: one page of a bulk
   * re-price). Not: the log's latest ones (up to the same bounds), newest first, for what they tell of id purges.
   */
  records: PurgeRecord[];
  /** The last number these records reach, whether or not each could be read (`seq` when not following). */
  upTo: number;
  /**
   * Following, with more to read after `upTo`: every tag and all purge after it, up to `seq` (null: none is left to read, or they could not
   * all be read within a page's bounds; absent: the same).
   */
  wideAhead?: PurgeRecord[] | null;
  /** When not following: the tag/all marks, and the floor (everything fetched before it is gone). */
  marks: WideMark[];
  floor: number;
  /** Following: the page as Redis holds it, one log member a record (what the data center's isolates share: sharedReads.ts). */
  members?: string[];
}

export function createPurgeLog({ l2, keyPrefix, wideRetentionMs, clock = systemClock }: PurgeLogDeps) {
  const keys = purgeLogKeys(keyPrefix);
  /** The KEYS of APPEND_LOG and READ_PURGES, in their order. */
  const scriptKeys = [keys.seq, keys.log, keys.wide, keys.era, keys.wideLog];
  const logInvalid = createRateLimitedLog({ intervalMs: DEFAULTS.logEveryMs, clock });
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
     * Applies the purge's id part where the entries live, then appends it to the log: its sequence number, or undefined when any shard
     * could not do its part (the caller answers 503 and the purge is retried whole).
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
          (redis, keys) => redis.eval<string[], number>(PURGE_KEYS, keys, [purge.mode, purge.at, DEFAULTS.softPurgeGraceMs, MARKER_TTL_MS].map(String)),
          { isWrite: true, force: true },
        );
        if (applied === undefined) return undefined;
      }
      const bounds = [wideRetentionMs, LOG_MAX_PURGES, PURGES_REMEMBERED, SEQ_TTL_MS];
      const args = [JSON.stringify(purge), purge.at, isWide(purge) ? 1 : 0, ...bounds].map(String);
      return l2.run((redis) => redis.eval<string[], number>(APPEND_LOG, scriptKeys, args), { isWrite: true, force: true });
    },

    /**
     * Purges after `seen` of `era` (the reader's; null: none yet), in one round trip of bounded size (a page of
     * them: see READ_PURGES). Off the page path's breaker: a slow sync read must not make every page skip L2.
     * With the background budget, not the page path's: a visitor waits for a sync at most its own bound
     * (watcher.ts), and a Redis slower than the page path's budget must still tell the isolate of purges.
     * `maxRecords`: a page of at most that many (a reader that needs only those before a page another isolate shared: watcher.ts).
     */
    async readSince(seen: number, readerEra: string | null, maxRecords: number = PAGE_MAX_PURGES): Promise<PurgesSince | undefined> {
      // "-" is no era (eras are times or ''): a reader that has read none starts over.
      const args = [String(seen), String(Math.max(1, Math.min(maxRecords, PAGE_MAX_PURGES))), String(PAGE_MAX_BYTES), readerEra ?? "-"];
      const answer = await l2.run((redis) => readPurgesScript(redis).exec(scriptKeys, args), { passive: true });
      if (!answer) return undefined;
      const [seq, follows, records, fields, era, upTo, ahead, aheadKnown] = answer;
      // A wide purge ahead that cannot be read is one the reader cannot judge copies by: then none is known.
      const wideAhead = aheadKnown === 1 && ahead ? readable(ahead, keys.wideLog) : [];
      return {
        seq,
        era: String(era ?? ""),
        follows: follows === 1,
        records: readable(records, keys.log),
        upTo: Number(upTo ?? seq),
        wideAhead: aheadKnown === 1 && wideAhead.length === ahead?.length ? wideAhead : null,
        ...parseMarks(fields, clock.now()),
        ...(follows === 1 ? { members: records } : {}),
      };
    },

    /** Gives the log an era if it has none (START_ERA): where the log stands then; undefined when Redis did not answer. */
    async startEra(): Promise<{ seq: number; era: string } | undefined> {
      const answer = await l2.run(
        (redis) => redis.eval<string[], [number, string]>(START_ERA, [keys.seq, keys.era], [String(clock.now()), String(SEQ_TTL_MS)]),
        { isWrite: true, passive: true },
      );
      return answer && { seq: Number(answer[0]), era: String(answer[1]) };
    },
  };
}

export type PurgeLog = ReturnType<typeof createPurgeLog>;

/** The keys that say where the log stands, its sequence and era: what a lock claim reads along for the watcher (watcher.ts). */
export function logPositionKeys(keyPrefix: string): readonly [string, string] {
  const keys = purgeLogKeys(keyPrefix);
  return [keys.seq, keys.era];
}

/**
 * Where the log stands, from the values of logPositionKeys (null: no such key), as READ_PURGES reads them: no counter is 0 and has no era,
 * no era is ''. A counter that is not a count says nothing (undefined): the next sync reads it.
 */
export function logPosition([seq, era]: readonly (string | null)[]): { seq: number; era: string } | undefined {
  if (seq != null && !/^\d{1,15}$/.test(seq)) return undefined;
  return seq == null ? { seq: 0, era: "" } : { seq: Number(seq), era: era ?? "" };
}

/**
 * HGETALL's field, value, field, value… of the marks hash. Fields that are not ours are skipped, and so are times in the future:
 * "everything fetched before next year is gone" would send every page to the origin.
 */
function parseMarks(fields: string[], now: number): { marks: WideMark[]; floor: number } {
  const marks: WideMark[] = [];
  let floor = 0;
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const [field, value] = [fields[i]!, fields[i + 1]!];
    const times = /^(\d{1,15})\|(\d{1,15})$/.exec(value);
    if (!times) continue;
    const [hard, soft] = [Number(times[1]), Number(times[2])];
    if (Math.max(hard, soft) > now + DEFAULTS.l2MaxClockSkewMs) continue;
    if (field === FLOOR_FIELD) {
      floor = hard;
      continue;
    }
    const bar = field.indexOf("|");
    const resource = (bar < 0 ? field : field.slice(0, bar)) as ResourceName;
    if (!(RESOURCE_NAMES as readonly string[]).includes(resource)) continue;
    marks.push({ resource, tag: bar < 0 ? null : field.slice(bar + 1), hard, soft });
  }
  return { marks, floor };
}
