"""Single-flight usage polls across the processes of a cluster.

A plan's usage endpoint is itself rate limited (about 30 reads an hour for a Claude
plan), so one process polls it per interval and the others read the result through the
shared board. A claim is a key `<prefix>:poll:<connection id>` holding the instant it was
claimed and the claiming process, with a TTL. It is taken with a script rather than a
plain `SET NX`, because the poller asks "has anyone polled since this instant?", not
"is anyone polling?": after a window resets every process wants the new reading at once,
and a claim taken before the reset must not stop the one poll that reads it.

Redis unreachable: every process polls for itself (as a lone gateway would), which the
endpoints' own rate limits bound; the store shows degraded meanwhile.
"""

from __future__ import annotations

import math
import secrets

from rungway.cluster.link import UNREACHABLE, RedisLink

CLAIM_SCRIPT = """
-- KEYS[1] the poll's key; ARGV: now, since, hold in ms, owner.
local held = redis.call('GET', KEYS[1])
if held then
  local at = tonumber(string.match(held, '^%S+'))
  if at and at > tonumber(ARGV[2]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. ARGV[4], 'PX', ARGV[3])
return 1
"""


class RedisPollClaim:
    """Claims usage polls in Redis, so one process of a cluster polls each at a time."""

    def __init__(self, link: RedisLink, *, owner: str | None = None) -> None:
        self._link = link
        self._owner = owner or secrets.token_hex(6)
        self._script = link.client.register_script(CLAIM_SCRIPT)

    async def claim(self, connection_id: str, now: float, since: float, hold_s: float) -> bool:
        """True when no process claimed a poll of the connection after `since`;
        also True while Redis does not answer (each process then polls for itself)."""
        if not self._link.up:
            return True
        hold_ms = max(1, math.ceil(hold_s * 1000))
        try:
            granted = await self._script(
                keys=[self._link.key("poll", connection_id)],
                args=[repr(now), repr(since), hold_ms, self._owner],
            )
        except UNREACHABLE as error:
            self._link.lost(error)
            return True
        return bool(granted)
