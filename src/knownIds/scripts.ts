// The filter's Lua scripts: the steps that must be atomic (record an add, announce a build, switch versions). Segments themselves move with
// plain MGET and SET (see bloom.ts for why their bytes are ASCII). The meta is edited with cjson, which Redis and Upstash both provide.
import type { Redis } from "@upstash/redis/cloudflare";

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
 * Records new ids. KEYS[1] meta, KEYS[2] the current version's log, KEYS[3] the next version's log (either may repeat KEYS[1]
 * when there is none), KEYS[4..] the current version's segment keys. ARGV[1] the "current/next" versions the caller computed
 * for, ARGV[2] TTL ms, ARGV[3] log cap, ARGV[4] n, ARGV[5..4+n] the ids, then pairs (1-based segment key index, bit offset).
 *
 * The current version's log keeps the last `cap` ids added (a window: add number changedAt − LLEN is its first), so that
 * isolates a few adds behind catch up from it however many adds the version has had; the next version's log keeps the first
 * `cap` (a rebuild must hold every one of them, or it overflows and fails).
 *
 * Returns {1} recorded; {0, meta} the versions changed (recompute and retry); {2} a segment is gone: the meta is marked
 * damaged, so every isolate fails open until the next rebuild; {3} there is no filter to record into.
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
  redis.call('RPUSH', KEYS[2], unpack(ARGV, 5, 4 + n))
  redis.call('LTRIM', KEYS[2], -cap, -1)
  redis.call('PEXPIRE', KEYS[2], ttl)
  meta.changedAt = (tonumber(meta.changedAt) or 0) + n
end
if nextv ~= '' and not logIds(KEYS[3]) then meta.next.overflow = true end
redis.call('SET', KEYS[1], cjson.encode(meta), 'KEEPTTL')
return {1}
`;

/**
 * A rebuild announces its version, so that ids added while it lists the catalog are logged for
 * it. KEYS[1] meta; ARGV[1] version, ARGV[2] startedAt, ARGV[3] TTL ms (for a meta that did
 * not exist). A later announce replaces an earlier one: the earlier build then cannot switch.
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
 * Makes a built version current, in one step. KEYS[1] meta, KEYS[2] the new version's log; ARGV[1]
 * version, ARGV[2] the new meta JSON, ARGV[3] how many logged ids the build merged, ARGV[4] TTL ms.
 *
 * Returns {3, old meta or ''} switched; {0} another build replaced this one; {1} the log
 * overflowed; {2, length} more ids were logged: merge and retry.
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

/**
 * The ids added to the current version from add number ARGV[2] on. KEYS[1] meta, KEYS[2] its
 * log; ARGV[1] the version. Returns {0} when the version is no longer current, {1} when the log
 * no longer reaches back that far, {2, changedAt, ids} otherwise (meta and log read together).
 */
const READ_TAIL = `${META}
local meta = readMeta(KEYS[1])
if not meta or meta.version ~= ARGV[1] then return {0} end
local changedAt = tonumber(meta.changedAt) or 0
local first = changedAt - redis.call('LLEN', KEYS[2])
local from = tonumber(ARGV[2])
if from < first then return {1} end
return {2, changedAt, redis.call('LRANGE', KEYS[2], from - first, -1)}
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
type TailReply = [0] | [1] | [2, number, string[]];

/** The scripts on one client: each Script object hashes its source once, then runs by EVALSHA. */
function createScripts(redis: Redis) {
  const add = redis.createScript<Reply>(ADD);
  const announce = redis.createScript<number>(ANNOUNCE);
  const switchTo = redis.createScript<Reply>(SWITCH);
  const abandon = redis.createScript<number>(ABANDON);
  // Read-only (EVALSHA_RO): a replica may answer it (Upstash Global reads from the nearest).
  const readTail = redis.createScript<TailReply, true>(READ_TAIL, { readonly: true });
  return {
    add: (keys: string[], args: (string | number)[]) => add.exec(keys, args.map(String)),
    announce: (metaKey: string, version: string, startedAt: number, ttlMs: number) => announce.exec([metaKey], [version, String(startedAt), String(ttlMs)]),
    switchTo: (metaKey: string, logKey: string, version: string, metaJson: string, merged: number, ttlMs: number) =>
      switchTo.exec([metaKey, logKey], [version, metaJson, String(merged), String(ttlMs)]),
    abandon: (metaKey: string, version: string) => abandon.exec([metaKey], [version]),
    readTail: (metaKey: string, logKey: string, version: string, from: number) => readTail.exec([metaKey, logKey], [version, String(from)]),
  };
}

const cache = new WeakMap<Redis, ReturnType<typeof createScripts>>();

export function scriptsFor(redis: Redis): ReturnType<typeof createScripts> {
  let scripts = cache.get(redis);
  if (!scripts) cache.set(redis, (scripts = createScripts(redis)));
  return scripts;
}
