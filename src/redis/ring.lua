-- The ring layout (`Layout::Ring`): the ring in one string.
-- Its arguments, answer and string layout: `SORTED_SET` and `RING` in
-- script.rs.
local function int(x) return string.format('%d', x) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if ARGV[3] ~= '' then now = tonumber(ARGV[3]) end
local n, P = tonumber(ARGV[1]), tonumber(ARGV[4])
local L, W = 0, 0
for i = 1, P do
  local Li, Wi = tonumber(ARGV[5 + 2 * i]), tonumber(ARGV[6 + 2 * i])
  if Li > L then L = Li end
  if Wi > W then W = Wi end
end
-- The steady state reads only what a decision needs: the header, then
-- each slot it asks for once (`GETRANGE`, kept in `read`), never the whole
-- ring. A missing key reads as an empty string: a ring with no admissions.
local key = KEYS[1]
local raw = redis.call('GETRANGE', key, 0, 23)
if raw == '' then raw = nil end
local function num(off)
  if (not raw) or #raw < off + 8 then return 0 end
  return (struct.unpack('>d', raw, off + 1))
end
local head, Ls, Ws, base = num(0), L, W, 24
if raw then
  if num(8) < 0 then
    Ws, Ls = -num(8), num(16)
  else
    Ls, Ws, base = tonumber(ARGV[5]), tonumber(ARGV[6]), 8
  end
  if Ls > L then L = Ls end
  if Ws > W then W = Ws end
end
if raw and (base ~= 24 or Ls ~= L or Ws ~= W) then
  -- Grown (or given its header): every admission kept, in order. This
  -- rare path reads (and rewrites) the whole ring.
  raw = redis.call('GET', key)
  local kept = {}
  local from = head - Ls
  if from < 0 then from = 0 end
  for i = from, head - 1 do
    local d = num(base + 8 * (i % Ls))
    if d ~= 0 then kept[#kept + 1] = d - Ws end
  end
  head = #kept
  local parts = {struct.pack('>d', head), struct.pack('>d', -W), struct.pack('>d', L)}
  for j = 1, #kept do parts[#parts + 1] = struct.pack('>d', kept[j] + W) end
  raw = table.concat(parts)
  redis.call('SET', key, raw)
  redis.call('PEXPIRE', key, int(math.ceil(W / 1000) + 1))
end
-- Slot `i % L`, read from Redis at most once per call: alone, or with
-- the run of slots a search ends in (`runs`: first slot, count, bytes).
local read, runs = {}, {}
local function slot(i)
  local j = i % L
  local d = read[j]
  if d == nil then
    d = 0
    if raw then
      local s, at = nil, 0
      for r = 1, #runs do
        local run = runs[r]
        if j >= run[1] and j < run[1] + run[2] then s, at = run[3], 8 * (j - run[1]) end
      end
      if not s then
        local off = 24 + 8 * j
        s = redis.call('GETRANGE', key, int(off), int(off + 7))
      end
      if #s >= at + 8 then d = (struct.unpack('>d', s, at + 1)) end
    end
    read[j] = d
  end
  return d
end
-- Slots `i` to `i + m - 1` (m <= L): one `GETRANGE`, two if they wrap.
local function fetch(i, m)
  local j = i % L
  while raw and m > 0 do
    local here = math.min(m, L - j)
    local off = 24 + 8 * j
    runs[#runs + 1] = {j, here, redis.call('GETRANGE', key, int(off), int(off + 8 * here - 1))}
    j, m = 0, m - here
  end
end
local teff = now
local prev = slot(head + L - 1)
if prev - W > teff then teff = prev - W end
-- Each policy's units left once `k` more are admitted now, and when that
-- room grows: the oldest admission in its window after them leaves it,
-- the first live candidate, else (all expired) ours; never (-1) for an
-- empty window and no units.
local function states(k)
  local left, grow = {}, {}
  for i = 1, P do
    local Li, Wi = tonumber(ARGV[5 + 2 * i]), tonumber(ARGV[6 + 2 * i])
    local function alive(d) return d ~= 0 and d - W + Wi > teff end
    -- The first live candidate, by binary search: none if the newest
    -- (the slot before the head, read already) has left; the oldest if it
    -- lives; the last 128 candidates or fewer in one read (1 KiB).
    local at, lo, hi = head + k + L - Li, 0, Li - k
    if hi > 0 then
      if not alive(slot(at + hi - 1)) then
        lo = hi
      elseif alive(slot(at)) then
        hi = 0
      else
        lo, hi = 1, hi - 1
      end
    end
    local few = false
    while lo < hi do
      if not few and hi - lo <= 128 then
        fetch(at + lo, hi - lo)
        few = true
      end
      local mid = math.floor((lo + hi) / 2)
      if alive(slot(at + mid)) then hi = mid else lo = mid + 1 end
    end
    local g = -1
    if lo < Li - k then
      g = slot(head + k + L - Li + lo) - W + Wi - now
    elseif k > 0 then
      g = teff + Wi - now
    end
    left[i], grow[i] = lo, g
  end
  return left, grow
end
-- Every policy's room and growth after the call, appended to the answer
-- when there are several (what a `RateLimit` field lists per policy).
local function told(answer, left, grow)
  if P > 1 then
    for i = 1, P do
      answer[#answer + 1] = left[i]
      answer[#answer + 1] = math.max(grow[i], 0)
    end
  end
  return answer
end
local wait, wp = -1, 0
for i = 1, P do
  local Li, Wi = tonumber(ARGV[5 + 2 * i]), tonumber(ARGV[6 + 2 * i])
  if n > 0 then
    local d = slot(head + n - 1 + L - Li)
    if d ~= 0 and d - W + Wi > teff and d - W + Wi - now > wait then wait, wp = d - W + Wi - now, i - 1 end
  end
end
if wait >= 0 then
  local left, grow = states(0)
  return told({0, wait, now, wp, 0}, left, grow)
end
local left, grow = states(n)
-- The fewest units left grows at the latest growth among the policies
-- with that few, never if one of them never does.
local rem, rp, grows = -1, 0, 0
for i = 1, P do
  if rem < 0 or left[i] < rem then
    rem, rp, grows = left[i], i - 1, grow[i]
  elseif left[i] == rem and grows >= 0 and (grow[i] < 0 or grow[i] > grows) then
    grows = grow[i]
  end
end
if grows < 0 then grows = 0 end
if n > 0 and ARGV[7 + 2 * P] ~= '1' then
  -- The `n` slots from the head, one run that wraps at most once: two
  -- `SETRANGE`s, the header riding with the run's part at slot 0.
  local d = struct.pack('>d', teff + W)
  local header = struct.pack('>d', head + n) .. struct.pack('>d', -W) .. struct.pack('>d', L)
  local s = head % L
  local first = math.min(n, L - s)
  local wrapped = math.min(n - first, s)
  if s == 0 then
    redis.call('SETRANGE', key, 0, header .. string.rep(d, first))
  else
    redis.call('SETRANGE', key, int(24 + 8 * s), string.rep(d, first))
    redis.call('SETRANGE', key, 0, header .. string.rep(d, wrapped))
  end
  redis.call('PEXPIRE', key, int(math.ceil(W / 1000) + 1))
end
return told({1, rem, teff, rp, grows}, left, grow)
