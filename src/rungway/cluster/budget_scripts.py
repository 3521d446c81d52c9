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

And per hold, `budget:hold:<hold id>`: its token, present from the reserve until its settle
or release and for a day past its expiry, so that a settle counts its cost exactly once.
"""

from __future__ import annotations

from typing import Final

NANO: Final = 1_000_000_000
"""Nano-dollars per US dollar."""

HELD: Final = 0
SHORT: Final = 1
MISSING: Final = 2
"""`RESERVE`'s first reply element: held, short of budget, or a spend hash not yet seeded."""

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
    + """
-- KEYS: per account i: spent, holds, reserved (3i-2, 3i-1, 3i); last: the hold's token.
-- ARGV: now, expires_at, amount, member, token ttl (s), then per account its budget or ''.
-- Reply: {HELD, 0, spent_1, reserved_1, ...} | {SHORT, i, spent_1, reserved_1, ...}
--        | {MISSING, i, ...}: account i's spend hash is not seeded (nothing was held).
local n = (#KEYS - 1) / 3
for i = 1, n do
  if redis.call('EXISTS', KEYS[3*i-2]) == 0 then return {2, i} end
end
local amount = tonumber(ARGV[3])
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
return reply
"""
)

APPLY: Final = """
-- One queued change. KEYS: [1] the hold's token (settle, release) or the request's
-- marker (spend); then per account i: spent, holds, reserved (3i-1, 3i, 3i+1).
-- ARGV: kind, member (settle, release) or marker field (recover), marker ttl (s), then
-- per account the cost to add (0 where a seed already holds it).
-- Reply: 1 applied, 0 nothing to do (already applied), -i account i is not seeded.
local kind = ARGV[1]
local n = (#KEYS - 1) / 3
local function unseeded()
  for i = 1, n do
    if tonumber(ARGV[3+i]) > 0 and redis.call('EXISTS', KEYS[3*i-1]) == 0 then return i end
  end
  return 0
end
local function add()
  for i = 1, n do
    if ARGV[3+i] ~= '0' then redis.call('HINCRBY', KEYS[3*i-1], 's', ARGV[3+i]) end
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
    if ARGV[3+i] ~= '0' and redis.call('HSETNX', KEYS[3*i-1], ARGV[2], '1') == 1 then
      redis.call('HINCRBY', KEYS[3*i-1], 's', ARGV[3+i])
      applied = 1
    end
  end
  return applied
end
-- settle or release
local live = redis.call('EXISTS', KEYS[1])
if live == 1 and kind == 'settle' then
  local missing = unseeded()
  if missing > 0 then return -missing end
end
local amount = string.match(ARGV[2], ':(%d+)$')
for i = 1, n do
  if redis.call('ZREM', KEYS[3*i], ARGV[2]) == 1 then
    redis.call('DECRBY', KEYS[3*i+1], amount)
  end
end
if live == 0 then return 0 end
redis.call('DEL', KEYS[1])
if kind == 'settle' then add() end
return 1
"""

SEED: Final = """
-- KEYS: [1] a period's spend hash. ARGV: spend, ttl (s), then the crash rows' marker
-- fields the spend already counts. Sets it only when missing; 1 when this call set it.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 's', ARGV[1])
for i = 3, #ARGV do redis.call('HSET', KEYS[1], ARGV[i], '1') end
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""

TOTALS: Final = (
    _DROP_EXPIRED
    + """
-- KEYS: per account i: spent, holds, reserved. ARGV: now.
-- Reply: per account its spend (-1 when not seeded) and its open holds' sum.
local reply = {}
for i = 1, #KEYS / 3 do
  drop_expired(KEYS[3*i-1], KEYS[3*i], ARGV[1])
  reply[2*i-1] = tonumber(redis.call('HGET', KEYS[3*i-2], 's') or '-1')
  reply[2*i] = tonumber(redis.call('GET', KEYS[3*i]) or '0')
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
