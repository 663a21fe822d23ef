-- The wrk script of every Zipf load: `npm run bench:peers` (bench/peers/load.ts),
-- `bench:soak` and `bench:profile` (runZipfWrk in bench/lib/wrk.ts), and the
-- uniform crawler of `bench:soak --flood crawler`.
--   ZIPF_PATHS     a file of "rank path" lines, hottest first: each request
--                  draws a rank from Zipf(s) by inverse CDF (binary search
--                  over the cumulative weights 1/rank^s); one line = that path always
--   ZIPF_S         the exponent s (default 1.0; 0: every line equally likely)
--   ZIPF_TARGETS  "host:port,host:port": thread i sends to target i (mod the count)
--   ZIPF_SEED     thread i draws from math.randomseed(seed * 1000 + i): the
--                  same sequence, per thread, against every system
--   ZIPF_RATE     0: closed loop (each connection sends its next request as
--                  soon as it has read the answer: saturation). N > 0: N requests
--                  a second in all, on a fixed schedule (see delay()), from
--   ZIPF_T0       (CLOCK_MONOTONIC, ms) for
--   ZIPF_SPAN_MS  ms: rate × span requests in all, then none (wrk's -d must
--                  leave room for the start and the last answers)
--   ZIPF_CLIENTS   "A.B.C.": each thread is a client of its own, thread i sending
--                  `CF-Connecting-IP: A.B.C.i` (the address Cloudflare's edge
--                  sets), its answers counted apart ("threads" in the output);
--                  "A.B.C.D" (a whole address): every thread is that one client;
--                  "A.B.*": each request from an address of its own in A.B.0.0/16
--                  (many visitors, as a shop's traffic is)
--   ZIPF_STATUSES  "1": count the answers by status class (a Lua call per
--                  answer, so off where wrk's own ceiling matters); "codes": by
--                  status code ("200", "503"), and count the 429s and 503s that
--                  carry no Retry-After header (noRetryAfter)
-- At the end, one line: "ZIPF {json}".
--
-- The constant rate: each thread has a schedule of send times, one every
-- threads/N seconds from T0 (the threads' schedules interleaved), until
-- T0 + span. A common T0 matters: wrk runs init() for one thread after the
-- other, and the 100,000 paths take a fraction of a second to load, so a
-- schedule starting at each thread's first connection would begin at
-- different times. A connection that is free (at connect,
-- or once it has read an answer) takes the next time of the schedule and
-- waits for it (delay(), in whole ms: up to 1 ms early). So the sends keep
-- to the schedule whatever the answers' latency, as long as a connection is
-- free when a time comes; when none is (every connection waiting on an
-- answer or already holding a later time), the request goes out late, and
-- is counted in "late" with the largest lateness: its latency, measured by
-- wrk from the actual send, then misses the wait before it (coordinated
-- omission). late = 0 means the load was open-loop for the whole run.

local ffi = require("ffi")
ffi.cdef [[
  typedef struct { long tv_sec; long tv_nsec; } peers_timespec;
  int clock_gettime(int clock, peers_timespec *out);
]]
local clock = ffi.new("peers_timespec")
local function nowMs()
  ffi.C.clock_gettime(1, clock) -- CLOCK_MONOTONIC
  return tonumber(clock.tv_sec) * 1000 + tonumber(clock.tv_nsec) / 1e6
end

local threads = {}

function setup(thread)
  local targets = {}
  for target in string.gmatch(os.getenv("ZIPF_TARGETS"), "[^,]+") do targets[#targets + 1] = target end
  local n = #threads + 1
  local host, port = string.match(targets[(n - 1) % #targets + 1], "^(.+):(%d+)$")
  thread.addr = wrk.lookup(host, port)[1]
  thread:set("id", n)
  threads[n] = thread
end

local paths, cdf = {}, {}
local rate = tonumber(os.getenv("ZIPF_RATE") or "0")
local exponent = tonumber(os.getenv("ZIPF_S") or "1")
local byCode = os.getenv("ZIPF_STATUSES") == "codes"
local interval, nextSlot, stopAt

function init()
  local sum = 0
  for line in io.lines(os.getenv("ZIPF_PATHS")) do
    local rank, path = string.match(line, "^(%d+) (.+)$")
    sum = sum + 1 / tonumber(rank) ^ exponent
    paths[#paths + 1] = path
    cdf[#cdf + 1] = sum
  end
  for i = 1, #cdf do cdf[i] = cdf[i] / sum end
  cdf[#cdf] = 1
  math.randomseed(tonumber(os.getenv("ZIPF_SEED")) * 1000 + id)
  -- globals: done() reads them from each thread
  late, lateMaxMs, sent, statuses, noRetryAfter = 0, 0, 0, {}, 0
  local client = os.getenv("ZIPF_CLIENTS")
  if client and string.sub(client, -1) == "*" then
    visitors = string.sub(client, 1, -2)
  elseif client and client ~= "" then
    wrk.headers["CF-Connecting-IP"] = string.sub(client, -1) == "." and client .. id or client
  end
  if rate > 0 then
    local threadCount = tonumber(os.getenv("ZIPF_THREADS"))
    interval = 1000 * threadCount / rate
    nextSlot = tonumber(os.getenv("ZIPF_T0")) + (id - 1) * interval / threadCount
    stopAt = tonumber(os.getenv("ZIPF_T0")) + tonumber(os.getenv("ZIPF_SPAN_MS"))
  end
end

function delay()
  local now = nowMs()
  local slot = nextSlot
  if slot >= stopAt then return 3600000 end -- the schedule is over: idle until wrk stops
  nextSlot = slot + interval
  sent = sent + 1
  local wait = slot - now
  if wait < -1 then
    late = late + 1
    if -wait > lateMaxMs then lateMaxMs = -wait end
  end
  return wait > 0 and math.floor(wait) or 0
end
-- Closed loop: no delay() at all (wrk looks for it before init(), in every Lua state).
if rate <= 0 then delay = nil end

function request()
  if visitors then wrk.headers["CF-Connecting-IP"] = visitors .. math.random(0, 255) .. "." .. math.random(1, 254) end
  if #paths == 1 then return wrk.format("GET", paths[1]) end
  local u = math.random()
  local lo, hi = 1, #cdf
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if cdf[mid] < u then lo = mid + 1 else hi = mid end
  end
  return wrk.format("GET", paths[lo])
end

local function hasRetryAfter(headers)
  for name in pairs(headers) do
    if string.lower(name) == "retry-after" then return true end
  end
  return false
end

function response(status, headers)
  local key = byCode and tostring(status) or math.floor(status / 100) .. "xx"
  statuses[key] = (statuses[key] or 0) + 1
  if byCode and (status == 503 or status == 429) and not hasRetryAfter(headers) then noRetryAfter = noRetryAfter + 1 end
end
-- Not counted: no response() at all (wrk then skips the call).
if os.getenv("ZIPF_STATUSES") ~= "1" and not byCode then response = nil end

function done(summary, latency)
  local lateCount, lateMax, sentCount, classes, bare = 0, 0, 0, {}, 0
  for _, thread in ipairs(threads) do
    lateCount = lateCount + (thread:get("late") or 0)
    bare = bare + (thread:get("noRetryAfter") or 0)
    lateMax = math.max(lateMax, thread:get("lateMaxMs") or 0)
    sentCount = sentCount + (thread:get("sent") or 0)
    for class, count in pairs(thread:get("statuses") or {}) do classes[class] = (classes[class] or 0) + count end
  end
  local function counts(byKey)
    local parts = {}
    for key, count in pairs(byKey) do parts[#parts + 1] = string.format('"%s":%d', key, count) end
    return "{" .. table.concat(parts, ",") .. "}"
  end
  local perThread = {}
  for _, thread in ipairs(threads) do perThread[#perThread + 1] = counts(thread:get("statuses") or {}) end
  local e = summary.errors
  io.write(string.format(
    'ZIPF {"requests":%d,"durationUs":%d,"bytes":%d,"p50Us":%d,"p99Us":%d,"maxUs":%d,"meanUs":%.1f,"statuses":%s,"threads":[%s],' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},"late":%d,"lateMaxMs":%.1f,"sent":%d,"noRetryAfter":%d}\n',
    summary.requests, summary.duration, summary.bytes, latency:percentile(50), latency:percentile(99), latency.max, latency.mean,
    counts(classes), table.concat(perThread, ","), e.connect, e.read, e.write, e.status, e.timeout, lateCount, lateMax, sentCount, bare))
end
