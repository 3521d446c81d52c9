"""The Lua scripts that keep the cluster's budgets in Redis, each one atomic in Redis.

Money is kept in whole nano-dollars (1e-9 USD) so that sums are exact in Redis's integers
and in Lua's doubles (exact to 2**53 nano-dollars, about $9 million). Per account (a rung
`rung:<label>`, or a client key `key:<name>`):

- `budget:spent:<account>:<period start>`: a hash; field `s` is the settled spend of that
  period, fields `r:<request id>` mark crash rows already counted. It exists only once it
  is seeded from the ledger (`SEED`), so a missing hash means "not known yet", never 0;
- `budget:holds:<account>`: a sorted set of open holds, member `<hold id>:<amount>`,
  scored by the instant the hold expires;
- `budget:reserved:<account>`: the sum of the open holds' amounts.

A spend hash's field `t` is the instant (the budget's clock) its seed began to read the
ledger: a row settled before it is in the seed, one settled after it is not. Field `g`
names the seed, so that a hold can tell whether the hash was seeded again since it was
taken: whether Redis lost everything meanwhile.

And per hold, `budget:hold:<hold id>`: its token, present from the reserve until its settle
or release and for a day past its expiry, so that a settle counts its cost exactly once.
A settle whose token is gone was sent before, unless the hold's rung hash was seeded again
since its reserve (Redis restarted empty): then it adds its cost unless the seed already
counted its row, which the instant it was queued tells, and leaves its token as `done`, so
that it counts once. A release that finds no token leaves `done` too: it may have
overtaken its reserve (one whose reply timed out), which then holds nothing.

Every amount is a whole, non-negative number of nano-dollars; a script refuses any other.
"""

from __future__ import annotations

from typing import Final

NANO: Final = 1_000_000_000
"""Nano-dollars per US dollar."""

HELD: Final = 0
SHORT: Final = 1
MISSING: Final = 2
GIVEN_BACK: Final = 3
"""`RESERVE`'s first reply element: held, short of budget, a spend hash not yet seeded, or
a hold id already given back (its release overtook it)."""
LOST_MARGIN_S: Final = 1.0
"""A settle whose token was lost counts its cost unless it was queued this long before
the seed began: the rows of other processes reach the ledger a moment after they queue
their settle, and a row the seed may have missed is counted rather than lost."""

_AMOUNT = """
local function amount_of(text)
  if not string.match(text, '^%d+$') then
    return nil
  end
  return tonumber(text)
end
"""

_DROP_EXPIRED = """
local function drop_expired(holds, reserved, now)
  local gone = redis.call('ZRANGEBYSCORE', holds, '-inf', now)
  if #gone == 0 then return end
  local sum = 0
  for _, member in ipairs(gone) do
    sum = sum + tonumber(string.match(member, ':(%d+)$'))
  end
  redis.call('ZREMRANGEBYSCORE', holds, '-inf', now)
  redis.call('DECRBY', reserved, string.format('%d', sum))
end
"""

RESERVE: Final = (
    _DROP_EXPIRED
    + _AMOUNT
    + """
-- KEYS: per account i: spent, holds, reserved (3i-2, 3i-1, 3i); last: the hold's token.
-- ARGV: now, expires_at, amount, member, token ttl (s), then per account its budget or ''.
-- Reply: {HELD, 0, spent_1, reserved_1, ..., the rung's seed g}
--        | {SHORT, i, spent_1, reserved_1, ...}
--        | {MISSING, i, ...}: account i's spend hash is not seeded (nothing was held)
--        | {GIVEN_BACK, 0}: the hold's release came first (nothing was held).
local amount = amount_of(ARGV[3])
if not amount then return redis.error_reply('ERR a hold must be whole nano-dollars >= 0') end
local n = (#KEYS - 1) / 3
for i = 1, n do
  if redis.call('EXISTS', KEYS[3*i-2]) == 0 then return {2, i} end
end
if redis.call('EXISTS', KEYS[#KEYS]) == 1 then return {3, 0} end
local reply = {0, 0}
for i = 1, n do
  drop_expired(KEYS[3*i-1], KEYS[3*i], ARGV[1])
  local spent = tonumber(redis.call('HGET', KEYS[3*i-2], 's') or '0')
  local reserved = tonumber(redis.call('GET', KEYS[3*i]) or '0')
  reply[2*i+1] = spent
  reply[2*i+2] = reserved
  local budget = ARGV[5+i]
  if reply[1] == 0 and budget ~= '' and spent + reserved + amount > tonumber(budget) then
    reply[1] = 1
    reply[2] = i
  end
end
if reply[1] == 1 then return reply end
for i = 1, n do
  redis.call('ZADD', KEYS[3*i-1], ARGV[2], ARGV[4])
  redis.call('INCRBY', KEYS[3*i], ARGV[3])
  reply[2*i+2] = reply[2*i+2] + amount
end
redis.call('SET', KEYS[#KEYS], ARGV[4], 'EX', ARGV[5])
reply[#reply + 1] = redis.call('HGET', KEYS[1], 'g') or ''
return reply
"""
)

APPLY: Final = (
    _AMOUNT
    + """
-- One queued change. KEYS: [1] the hold's token (settle, release, rehold) or the request's
-- marker (spend); then per account i: spent, holds, reserved (3i-1, 3i, 3i+1).
-- ARGV: kind, member (settle, release, rehold) or marker field (recover), marker ttl (s),
-- the instant it was queued (rehold: the hold's expiry), the seed its hold was taken in
-- ('' when unknown), then per account the cost to add (0 where a seed already holds it).
-- Reply: 1 applied, 0 nothing to do (already applied), -i account i is not seeded.
local kind = ARGV[1]
local n = (#KEYS - 1) / 3
local costs = {}
for i = 1, n do
  costs[i] = amount_of(ARGV[5+i])
  if not costs[i] then return redis.error_reply('ERR a cost must be whole nano-dollars >= 0') end
end
local function unseeded()
  for i = 1, n do
    if costs[i] > 0 and redis.call('EXISTS', KEYS[3*i-1]) == 0 then return i end
  end
  return 0
end
local function add()
  for i = 1, n do
    if costs[i] > 0 then redis.call('HINCRBY', KEYS[3*i-1], 's', ARGV[5+i]) end
  end
end
if kind == 'spend' then
  if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
  local missing = unseeded()
  if missing > 0 then return -missing end
  redis.call('SET', KEYS[1], '1', 'EX', ARGV[3])
  add()
  return 1
end
if kind == 'recover' then
  local missing = unseeded()
  if missing > 0 then return -missing end
  local applied = 0
  for i = 1, n do
    if costs[i] > 0 and redis.call('HSETNX', KEYS[3*i-1], ARGV[2], '1') == 1 then
      redis.call('HINCRBY', KEYS[3*i-1], 's', ARGV[5+i])
      applied = 1
    end
  end
  return applied
end
local token = redis.call('GET', KEYS[1])
local amount = string.match(ARGV[2], ':(%d+)$')
if not amount then return redis.error_reply('ERR a hold must be whole nano-dollars >= 0') end
if kind == 'rehold' then
  -- A hold still open in its process, lost with a Redis that restarted empty: hold it again.
  if token then return 0 end
  for i = 1, n do
    if redis.call('ZADD', KEYS[3*i], ARGV[4], ARGV[2]) == 1 then
      redis.call('INCRBY', KEYS[3*i+1], amount)
    end
  end
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
  return 1
end
-- settle or release
if token == 'done' then return 0 end
if kind == 'settle' then
  local missing = unseeded()
  if missing > 0 then return -missing end
end
-- Whether the hold was taken in the rung's current seed (unknown: taken to be so).
local same = ARGV[5] == '' or redis.call('HGET', KEYS[2], 'g') == ARGV[5]
if not token and kind == 'settle' and same then return 0 end
for i = 1, n do
  if redis.call('ZREM', KEYS[3*i], ARGV[2]) == 1 then
    redis.call('DECRBY', KEYS[3*i+1], amount)
  end
end
if token and same then
  redis.call('DEL', KEYS[1])
else
  -- Nothing else would tell a second send of this change from the first.
  redis.call('SET', KEYS[1], 'done', 'EX', ARGV[3])
end
if kind == 'release' then return 1 end
if not token then
  -- Lost with Redis: the seed counted the row if it was queued before the seed began.
  for i = 1, n do
    local seeded = tonumber(redis.call('HGET', KEYS[3*i-1], 't') or '-1')
    if tonumber(ARGV[4]) < seeded - LOST_MARGIN then costs[i] = 0 end
  end
end
add()
return 1
""".replace("LOST_MARGIN", repr(LOST_MARGIN_S))
)

SEED: Final = """
-- KEYS: [1] a period's spend hash. ARGV: spend, ttl (s), the instant the ledger's read
-- began, a name for this seed, then the crash rows' marker fields the spend already
-- counts. Sets it only when missing; 1 when this call set it.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if not string.match(ARGV[1], '^%d+$') then
  return redis.error_reply('ERR a spend must be whole nano-dollars >= 0')
end
redis.call('HSET', KEYS[1], 's', ARGV[1], 't', ARGV[3], 'g', ARGV[4])
for i = 5, #ARGV do redis.call('HSET', KEYS[1], ARGV[i], '1') end
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""

TOTALS: Final = (
    _DROP_EXPIRED
    + """
-- KEYS: per account i: spent, holds, reserved. ARGV: now.
-- Reply: per account its spend (-1 when not seeded), its open holds' sum, and its seed's
-- name.
local reply = {}
for i = 1, #KEYS / 3 do
  drop_expired(KEYS[3*i-1], KEYS[3*i], ARGV[1])
  local seed = redis.call('HMGET', KEYS[3*i-2], 's', 'g')
  reply[3*i-2] = tonumber(seed[1] or '-1')
  reply[3*i-1] = tonumber(redis.call('GET', KEYS[3*i]) or '0')
  reply[3*i] = seed[2] or ''
end
return reply
"""
)


def nano(usd: float) -> int:
    """US dollars as whole nano-dollars (a rounding far below any price)."""
    return round(usd * NANO)


def usd(nanos: int | float) -> float:
    """Nano-dollars as US dollars."""
    return nanos / NANO
