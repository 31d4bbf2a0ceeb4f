-- bench/wrk-urls.lua: wrk picks its URLs from a URL list, for bench/run's cross-check.
--
--   WRK_JSON=out.json wrk -t1 -c100 -d10s --latency -s bench/wrk-urls.lua \
--       http://127.0.0.1:PORT -- URL_FILE [random|sequential] [SEED] [MAX]
--
-- URL_FILE holds one URL per line (http://HOST:PORT/path, as bench/mkpool writes them; only the
-- path is used, wrk connects to the address on its command line) or one /path per line.
-- random: every request takes a path uniformly at random from the whole list (hot runs).
-- sequential: requests take the list in order, wrapping (cold runs: distinct files until the list
-- is exhausted; bench/run rotates the list so every run starts at another file).
-- SEED seeds the random picks (default 1).
-- MAX, if given, stops the run once MAX requests were made (the outside harness's regime: a
-- count of requests, not a time; -d is then only an upper bound). The thread stops and sends wrk
-- SIGINT 5 ms later, which ends wrk's wait for -d (its summary then covers the time until then,
-- 5-6 ms more than the requests took); wrk counts the responses that came back before it
-- stopped, up to -c fewer than MAX.
-- At the end, if WRK_JSON is set, the summary is also written there as one JSON object:
-- requests, duration_us, bytes, errors {connect, read, write, status, timeout} and latency
-- {min, mean, max, p50, p90, p99, p999} in microseconds. wrk reads every body into user space:
-- this is the copying client next to loadgen's draining one.

local paths = {}
local sequential = false
local next_index = 0
local made = 0
local max_requests = nil

function init(args)
  local file = args[1]
  if not file then
    error("wrk-urls.lua: pass the URL file after --")
  end
  for line in io.lines(file) do
    local path = line:match("^%s*https?://[^/%s]+(/%S*)") or line:match("^%s*(/%S*)")
    if path then
      paths[#paths + 1] = path
    end
  end
  if #paths == 0 then
    error("wrk-urls.lua: no URL in " .. file)
  end
  local mode = args[2] or "random"
  if mode ~= "random" and mode ~= "sequential" then
    error("wrk-urls.lua: mode must be random or sequential, not " .. mode)
  end
  sequential = mode == "sequential"
  math.randomseed(tonumber(args[3] or "1"))
  if args[4] then
    max_requests = tonumber(args[4])
    if not max_requests or max_requests < 1 then
      error("wrk-urls.lua: MAX must be a positive number, not " .. args[4])
    end
  end
end

function request()
  made = made + 1
  if max_requests and made > max_requests then
    if made == max_requests + 1 then
      -- wrk's main thread sleeps for -d and counts the run's time until it wakes: SIGINT wakes
      -- it. system() ignores SIGINT in wrk until the shell exits, so the signal is sent 5 ms
      -- later from the background (the subshell's $PPID is wrk): the run's time includes those
      -- 5-6 ms, the same for every server.
      os.execute("(sleep 0.005; kill -INT $PPID) &")
    end
    wrk.thread:stop()
  end
  local path
  if sequential then
    path = paths[next_index % #paths + 1]
    next_index = next_index + 1
  else
    path = paths[math.random(#paths)]
  end
  return wrk.format("GET", path)
end

function done(summary, latency, requests)
  local out = os.getenv("WRK_JSON")
  if not out or out == "" then
    return
  end
  local e = summary.errors
  local f = assert(io.open(out, "w"))
  f:write(string.format(
    '{"requests": %d, "duration_us": %d, "bytes": %d, ' ..
    '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, ' ..
    '"latency_us": {"min": %d, "mean": %.1f, "max": %d, "p50": %d, "p90": %d, "p99": %d, ' ..
    '"p999": %d}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.mean, latency.max, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency:percentile(99.9)))
  f:close()
end
