// The filter's Lua scripts. Segments are raw bits in Redis (so that SETBIT
// adds ids atomically), but Upstash's REST API carries JSON text and
// @upstash/redis decodes every reply as UTF-8, which mangles binary: so
// segments cross the wire as base64, encoded and decoded inside Redis.
// The base64 code uses plain arithmetic (no `bit` library) to run on any
// Redis-compatible Lua.
import type { Redis } from "@upstash/redis/cloudflare";

const BASE64 = `
local alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
local chars, values = {}, {}
for i = 1, 64 do
  chars[i - 1] = string.sub(alphabet, i, i)
  values[string.byte(alphabet, i)] = i - 1
end
local floor = math.floor
local function quad(v, n)
  local a, b = chars[floor(v / 262144)], chars[floor(v / 4096) % 64]
  if n == 1 then return a .. b .. '==' end
  if n == 2 then return a .. b .. chars[floor(v / 64) % 64] .. '=' end
  return a .. b .. chars[floor(v / 64) % 64] .. chars[v % 64]
end
local function encode(s)
  local out, n = {}, #s
  for i = 1, n - 2, 3 do
    local a, b, c = string.byte(s, i, i + 2)
    out[#out + 1] = quad(a * 65536 + b * 256 + c, 3)
  end
  local rest = n % 3
  if rest == 1 then out[#out + 1] = quad(string.byte(s, n) * 65536, 1) end
  if rest == 2 then
    local a, b = string.byte(s, n - 1, n)
    out[#out + 1] = quad(a * 65536 + b * 256, 2)
  end
  return table.concat(out)
end
local function decode(s)
  local out = {}
  for i = 1, #s, 4 do
    local a, b, c, d = string.byte(s, i, i + 3)
    local v = values[a] * 262144 + values[b] * 4096 + (values[c] or 0) * 64 + (values[d] or 0)
    if c == 61 then
      out[#out + 1] = string.char(floor(v / 65536))
    elseif d == 61 then
      out[#out + 1] = string.char(floor(v / 65536), floor(v / 256) % 256)
    else
      out[#out + 1] = string.char(floor(v / 65536), floor(v / 256) % 256, v % 256)
    end
  end
  return table.concat(out)
end
`;

/** KEYS: segment keys. Returns each segment as base64, or false (null) for a missing key. */
const READ_SEGMENTS = `${BASE64}
local result = {}
for i = 1, #KEYS do
  local bytes = redis.call('GET', KEYS[i])
  if bytes then result[i] = encode(bytes) else result[i] = false end
end
return result
`;

/** KEYS: segment keys; ARGV[1]: TTL ms; ARGV[2..]: each segment as base64. */
const WRITE_SEGMENTS = `${BASE64}
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], decode(ARGV[i + 1]), 'PX', ARGV[1])
end
return #KEYS
`;

// Reads the meta as a table; nil when missing or not JSON.
const META = `
local function readMeta(key)
  local raw = redis.call('GET', key)
  if not raw then return nil, nil end
  local ok, meta = pcall(cjson.decode, raw)
  if not ok or type(meta) ~= 'table' then return nil, raw end
  return meta, raw
end
local function nextVersion(meta)
  if type(meta.next) == 'table' and type(meta.next.version) == 'string' then return meta.next.version end
  return ''
end
`;

/**
 * Records new ids. KEYS[1] meta, KEYS[2] the current version's log, KEYS[3]
 * the next version's log (either may repeat KEYS[1] when there is none),
 * KEYS[4..] the current version's segment keys. ARGV[1] the "current/next"
 * versions the caller computed for, ARGV[2] TTL ms, ARGV[3] log cap, ARGV[4]
 * n, ARGV[5..4+n] the ids, then pairs (1-based segment key index, bit offset).
 *
 * Returns {1} recorded; {0, meta} the versions changed (recompute and retry);
 * {2} a segment is gone: the meta is marked damaged, so every isolate fails
 * open until the next rebuild; {3} there is no filter to record into.
 */
const ADD = `${META}
local meta, raw = readMeta(KEYS[1])
if not meta then return {3} end
if meta.damaged then return {2} end
local current = type(meta.version) == 'string' and meta.version or ''
local nextv = nextVersion(meta)
if current == '' and nextv == '' then return {3} end
if current .. '/' .. nextv ~= ARGV[1] then return {0, raw} end
local ttl, cap, n = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local function logIds(key)
  local take = math.min(n, cap - redis.call('LLEN', key))
  if take > 0 then
    redis.call('RPUSH', key, unpack(ARGV, 5, 4 + take))
    redis.call('PEXPIRE', key, ttl)
  end
  return take == n
end
if current ~= '' then
  for i = 4, #KEYS do
    if redis.call('EXISTS', KEYS[i]) == 0 then
      meta.damaged = true
      redis.call('SET', KEYS[1], cjson.encode(meta), 'KEEPTTL')
      return {2}
    end
  end
  for j = 5 + n, #ARGV, 2 do
    redis.call('SETBIT', KEYS[3 + tonumber(ARGV[j])], ARGV[j + 1], 1)
  end
  logIds(KEYS[2])
  meta.changedAt = (tonumber(meta.changedAt) or 0) + n
end
if nextv ~= '' and not logIds(KEYS[3]) then meta.next.overflow = true end
redis.call('SET', KEYS[1], cjson.encode(meta), 'KEEPTTL')
return {1}
`;

/**
 * A rebuild announces its version, so that ids added while it lists the
 * catalog are logged for it. KEYS[1] meta; ARGV[1] version, ARGV[2]
 * startedAt, ARGV[3] TTL ms (for a meta that did not exist). A later
 * announce replaces an earlier one: the earlier build then cannot switch.
 */
const ANNOUNCE = `${META}
local meta = readMeta(KEYS[1])
local existed = meta ~= nil
meta = meta or {}
meta.next = { version = ARGV[1], startedAt = tonumber(ARGV[2]) }
if existed then
  redis.call('SET', KEYS[1], cjson.encode(meta), 'KEEPTTL')
else
  redis.call('SET', KEYS[1], cjson.encode(meta), 'PX', ARGV[3])
end
return 1
`;

/**
 * Makes a built version current, in one step. KEYS[1] meta, KEYS[2] the new
 * version's log; ARGV[1] version, ARGV[2] the new meta JSON, ARGV[3] how many
 * logged ids the build merged, ARGV[4] TTL ms.
 *
 * Returns {3, old meta or ''} switched; {0} another build replaced this one;
 * {1} the log overflowed; {2, length} more ids were logged: merge and retry.
 */
const SWITCH = `${META}
local meta, raw = readMeta(KEYS[1])
if not meta or nextVersion(meta) ~= ARGV[1] then return {0} end
if meta.next.overflow then return {1} end
local logged = redis.call('LLEN', KEYS[2])
if logged ~= tonumber(ARGV[3]) then return {2, logged} end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[4])
if logged > 0 then redis.call('PEXPIRE', KEYS[2], ARGV[4]) end
return {3, raw}
`;

/** A failed build withdraws its announce (only its own). KEYS[1] meta; ARGV[1] version. */
const ABANDON = `${META}
local meta = readMeta(KEYS[1])
if not meta or nextVersion(meta) ~= ARGV[1] then return 0 end
meta.next = nil
if meta.version == nil then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], cjson.encode(meta), 'KEEPTTL')
end
return 1
`;

type Reply = (string | number | null)[];

export interface Scripts {
  readSegments(keys: string[]): Promise<(string | null)[]>;
  writeSegments(keys: string[], segments: string[], ttlMs: number): Promise<number>;
  add(keys: string[], args: (string | number)[]): Promise<Reply>;
  announce(metaKey: string, version: string, startedAt: number, ttlMs: number): Promise<number>;
  switchTo(metaKey: string, logKey: string, version: string, metaJson: string, merged: number, ttlMs: number): Promise<Reply>;
  abandon(metaKey: string, version: string): Promise<number>;
}

/** One set of Script objects per client: each hashes its source once, then runs by EVALSHA. */
const cache = new WeakMap<Redis, Scripts>();

export function scriptsFor(redis: Redis): Scripts {
  let scripts = cache.get(redis);
  if (!scripts) {
    const read = redis.createScript<(string | null)[]>(READ_SEGMENTS);
    const write = redis.createScript<number>(WRITE_SEGMENTS);
    const add = redis.createScript<Reply>(ADD);
    const announce = redis.createScript<number>(ANNOUNCE);
    const switchTo = redis.createScript<Reply>(SWITCH);
    const abandon = redis.createScript<number>(ABANDON);
    scripts = {
      readSegments: (keys) => read.exec(keys, []),
      writeSegments: (keys, segments, ttlMs) => write.exec(keys, [String(ttlMs), ...segments]),
      add: (keys, args) => add.exec(keys, args.map(String)),
      announce: (metaKey, version, startedAt, ttlMs) => announce.exec([metaKey], [version, String(startedAt), String(ttlMs)]),
      switchTo: (metaKey, logKey, version, json, merged, ttlMs) => switchTo.exec([metaKey, logKey], [version, json, String(merged), String(ttlMs)]),
      abandon: (metaKey, version) => abandon.exec([metaKey], [version]),
    };
    cache.set(redis, scripts);
  }
  return scripts;
}
