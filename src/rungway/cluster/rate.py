"""Client keys' request-rate windows in Redis, shared by every process of a cluster.

Each limited key's window is a sorted set `<prefix>:rate:<key name>` of request start
instants. One script call per limited request drops the starts older than the window,
counts the rest, and either adds this start or answers how long until the oldest leaves:
the same sliding window as `server.rate`, in one round trip. The set expires a
window after its last start, so an idle key leaves nothing behind.

Instants are the processes' clocks, which replicas are expected to keep in step.
"""

from __future__ import annotations

import itertools
import secrets

from rungway.cluster.channel import ChannelScript
from rungway.cluster.link import UNREACHABLE, RedisLink

ADMIT_SCRIPT = """
-- KEYS[1] the key's window; ARGV: now, window in s, limit, a member for this start.
local now, window = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return tostring(tonumber(oldest[2]) + window - now)
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], math.ceil(window * 1000))
return false
"""


class RedisRateWindows:
    """Sliding request-rate windows in Redis (`server.rate.SharedWindows`)."""

    def __init__(self, link: RedisLink, *, origin: str | None = None) -> None:
        self._link = link
        self._origin = origin or secrets.token_hex(6)
        self._count = itertools.count()
        # The request path's pipelined channel: one script call, no pool or retry wrapper.
        self._script = ChannelScript(link.channel, ADMIT_SCRIPT)

    @property
    def up(self) -> bool:
        """Whether Redis answers, as the link last found."""
        return self._link.up

    async def admit(self, client_key: str, limit: int, now: float, window_s: float) -> float | None:
        """Count one start, or return the seconds until a slot frees; raises
        `ConnectionError` (and marks the link lost) when Redis does not answer."""
        # Each start is its own member, even two at one instant from two processes.
        member = f"{now!r}:{self._origin}:{next(self._count)}"
        try:
            # The channel gives up after one timeout: a request waits that long at most.
            wait = await self._script(
                [self._link.key("rate", client_key)], [repr(now), repr(window_s), limit, member]
            )
        except UNREACHABLE as error:
            self._link.lost(error)
            raise ConnectionError(f"redis at {self._link.address} did not answer") from error
        return None if wait is None else float(wait)
