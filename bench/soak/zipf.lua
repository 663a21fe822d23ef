-- wrk script of `npm run bench:soak` (bench/soak/run.ts writes its inputs):
--   SOAK_PATHS    a file of "rank path" lines, hottest first (the cold products' ranks left out)
--   SOAK_TARGETS  "host:port,host:port": thread i sends to instance i (mod the count)
--   SOAK_SEED     varies per window, so that windows do not replay one sequence
-- Each request draws a rank from Zipf(s = 1.0) by inverse CDF (binary search
-- over the cumulative weights 1/rank). At the end, one line: "SOAK {json}".

local threads = {}

function setup(thread)
  local targets = {}
  for target in string.gmatch(os.getenv("SOAK_TARGETS"), "[^,]+") do targets[#targets + 1] = target end
  local n = #threads + 1
  local host, port = string.match(targets[(n - 1) % #targets + 1], "^(.+):(%d+)$")
  thread.addr = wrk.lookup(host, port)[1]
  thread:set("id", n)
  threads[n] = thread
end

local paths, cdf = {}, {}

function init()
  local sum = 0
  for line in io.lines(os.getenv("SOAK_PATHS")) do
    local rank, path = string.match(line, "^(%d+) (.+)$")
    sum = sum + 1 / tonumber(rank)
    paths[#paths + 1] = path
    cdf[#cdf + 1] = sum
  end
  for i = 1, #cdf do cdf[i] = cdf[i] / sum end
  math.randomseed(tonumber(os.getenv("SOAK_SEED")) * 1000 + id)
  statuses = {} -- global: done() reads it from each thread
end

function request()
  local u = math.random()
  local lo, hi = 1, #cdf
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if cdf[mid] < u then lo = mid + 1 else hi = mid end
  end
  return wrk.format("GET", paths[lo])
end

function response(status)
  local class = math.floor(status / 100) .. "xx"
  statuses[class] = (statuses[class] or 0) + 1
end

function done(summary, latency)
  local classes = {}
  for _, thread in ipairs(threads) do
    for class, count in pairs(thread:get("statuses")) do classes[class] = (classes[class] or 0) + count end
  end
  local parts = {}
  for class, count in pairs(classes) do parts[#parts + 1] = string.format('"%s":%d', class, count) end
  local e = summary.errors
  io.write(string.format(
    'SOAK {"requests":%d,"durationUs":%d,"p50Us":%d,"p99Us":%d,"maxUs":%d,"statuses":{%s},' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), latency.max,
    table.concat(parts, ","), e.connect, e.read, e.write, e.status, e.timeout))
end
