-- The sorted-set layout (`Layout::SortedSet`): one member per admission.
-- Its arguments and answer: `SORTED_SET` in script.rs.
local function int(x) return string.format('%d', x) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if ARGV[3] ~= '' then now = tonumber(ARGV[3]) end
local n, P = tonumber(ARGV[1]), tonumber(ARGV[4])
local dry = ARGV[7 + 2 * P] == '1'
local longest = 0
for i = 1, P do
  local w = tonumber(ARGV[6 + 2 * i])
  if w > longest then longest = w end
end
-- The longest window any caller has judged the key by: the member
-- 'w<window>' at score -inf (an admission's member holds a ':'; a key
-- written without it is judged by this caller's windows).
local meta = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '-inf')[1]
local stored = 0
if meta then stored = tonumber(string.sub(meta, 2)) end
local kept = math.max(longest, stored)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '(-inf', int(now - kept))
local m = 0
if meta then m = 1 end
local total = redis.call('ZCARD', KEYS[1]) - m
-- This caller's windows join the key's (an existing key, or one this
-- call creates).
if longest > stored and (m == 1 or total > 0 or (n > 0 and not dry)) then
  if meta then redis.call('ZREM', KEYS[1], meta) end
  redis.call('ZADD', KEYS[1], '-inf', 'w' .. int(longest))
  redis.call('PEXPIRE', KEYS[1], int(math.ceil(kept / 1000) + 1))
  m = 1
end
local wait, wp, rem, rp = -1, 0, -1, 0
local held, left = {}, {}
for i = 1, P do
  local L, W = tonumber(ARGV[5 + 2 * i]), tonumber(ARGV[6 + 2 * i])
  local inw = total
  if W < kept then inw = redis.call('ZCOUNT', KEYS[1], '(' .. int(now - W), '+inf') end
  if n > 0 and inw + n > L then
    local r = m + total + n - L - 1
    local e = redis.call('ZRANGE', KEYS[1], r, r, 'WITHSCORES')
    local w = tonumber(e[2]) + W - now
    if w > wait then wait, wp = w, i - 1 end
  else
    -- (Zero units are always admitted; after a cut the window may hold
    -- more than the new limit: no room, not less.)
    held[i], left[i] = inw + n, math.max(L - inw - n, 0)
    if rem < 0 or left[i] < rem then rem, rp = left[i], i - 1 end
  end
end
-- Every policy's room and growth after the call (`k` units recorded by
-- it), appended to the answer when there are several (what a `RateLimit`
-- field lists per policy); not for a dry run, which recorded nothing to
-- count from.
local function told(answer, k)
  if P == 1 or dry then return answer end
  for i = 1, P do
    local L, W = tonumber(ARGV[5 + 2 * i]), tonumber(ARGV[6 + 2 * i])
    local inw = total + k
    if W < kept then inw = redis.call('ZCOUNT', KEYS[1], '(' .. int(now - W), '+inf') end
    local room, g = math.max(L - inw, 0), 0
    if inw > 0 then
      local e = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. int(now - W), '+inf', 'WITHSCORES', 'LIMIT', inw - (L - room), 1)
      if e[2] then g = tonumber(e[2]) + W - now end
    end
    answer[#answer + 1] = room
    answer[#answer + 1] = g
  end
  return answer
end
if wait >= 0 then return told({0, wait, now, wp, 0}, 0) end
for i = 1, n do
  if dry then break end
  redis.call('ZADD', KEYS[1], int(now), ARGV[2] .. ':' .. int(i))
end
if n > 0 and not dry then
  redis.call('PEXPIRE', KEYS[1], int(math.ceil(kept / 1000) + 1))
end
-- When `rem` grows: each policy with that little room gains a unit once
-- its oldest admission in its window leaves (past the excess a cut left),
-- and the latest of those; never (0) if one holds nothing.
local grows = 0
for i = 1, P do
  if not dry and left[i] == rem and grows >= 0 then
    local L, W = tonumber(ARGV[5 + 2 * i]), tonumber(ARGV[6 + 2 * i])
    local e = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. int(now - W), '+inf', 'WITHSCORES', 'LIMIT', held[i] - (L - rem), 1)
    if e[2] then
      grows = math.max(grows, tonumber(e[2]) + W - now)
    else
      grows = -1
    end
  end
end
return told({1, rem, now, rp, math.max(grows, 0)}, n)
