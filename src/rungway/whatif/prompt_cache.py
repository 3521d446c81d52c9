"""The prompt cache a replay keeps per session: which account holds a conversation's context.

A trace records each turn's tokens as they were when served, most often with the session's
context read from the provider's prompt cache. A cache lives on one account: the replay
keeps, per session and connection, how much of the session's context that connection has
cached and when it last used it. A turn served there within `ttl_s` of that use
(Anthropic's default cache lives 5 minutes, refreshed by each read:
https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching) reads what is cached
there, up to what the turn reads as recorded; the rest of its context (all of it on a
connection that holds none, or after the TTL) is written to the cache instead, at the
cache-write price and against a plan's cost window, as the agent's marked prefix is
written on a miss. So a session back on its account after a turn elsewhere (a paid turn
while the pool was spent) reads the prefix it left there, and writes what was added since.

Decided where the issue is silent:
- A connection's copy is the session's context as of its last turn there: the prefix
  grows, so what it holds is a prefix of what the turn reads (a compaction, which the
  trace shows as a turn reading less, reads at most what it reads).
- A turn that uses no cache at all (a side request to a small model, which shares no
  prefix with the conversation) is served as recorded wherever it goes, and leaves the
  session's cache where it was. A session's first turn reads nothing and writes its
  context: its cache starts where it is served.
- A request without a session is served as recorded: nothing says where its cache is.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from rungway.whatif.trace import Trace, TraceRequest

__all__ = ["CACHE_TTL_S", "PromptCache", "settled"]

CACHE_TTL_S: Final = 300.0
"""How long a prompt cache lives after its last use: Anthropic's default 5 minutes."""


def settled(trace: Trace, ttl_s: float = CACHE_TTL_S) -> Trace:
    """`trace` as one account would serve it: a turn more than `ttl_s` after its session's
    previous cached turn finds its cache expired, wherever it goes, and writes again.

    What no placement can change: the oracle, which reads every turn as recorded, is given
    this trace so that its bound counts these misses as every replay does."""
    cache = PromptCache(ttl_s)
    served = []
    for request in trace:
        as_served = cache.as_served(request, "", request.at)
        cache.served(as_served, "", request.at)
        served.append(as_served)
    return tuple(served)


class PromptCache:
    """How much of each session's context each connection has cached, and since when."""

    __slots__ = ("_held", "ttl_s")

    def __init__(self, ttl_s: float = CACHE_TTL_S) -> None:
        if not ttl_s >= 0:
            raise ValueError(f"a cache TTL is at least 0 s, not {ttl_s}")
        self.ttl_s = ttl_s
        self._held: dict[str, dict[str, tuple[int, float]]] = {}
        """Per session, per connection: the tokens cached there and when last used."""

    def cached(self, request: TraceRequest, connection_id: str, at: float) -> int:
        """How many of `request`'s cache reads `connection_id` holds at `at` (all of them
        for a request without a session: nothing says where its cache is)."""
        reads = request.cache_read_tokens
        if request.session is None:
            return reads
        held = self._held.get(request.session, {}).get(connection_id)
        if held is None or at - held[1] > self.ttl_s:
            return 0
        return min(reads, held[0])

    def holds(self, request: TraceRequest, connection_id: str, at: float) -> bool:
        """Whether `connection_id` holds all `request` reads from the cache at `at`."""
        return self.cached(request, connection_id, at) == request.cache_read_tokens

    def as_served(self, request: TraceRequest, connection_id: str, at: float) -> TraceRequest:
        """`request`'s tokens if `connection_id` serves it at `at`: what is cached there
        read, the rest of its context written again."""
        reads = request.cache_read_tokens
        if not reads:
            return request
        hit = self.cached(request, connection_id, at)
        if hit == reads:
            return request
        return replace(
            request,
            cache_read_tokens=hit,
            cache_write_tokens=request.cache_write_tokens + reads - hit,
        )

    def served(self, request: TraceRequest, connection_id: str, at: float) -> None:
        """Note that `connection_id` served `request` (as served) at `at`: it now holds
        the context the turn read and wrote, from now."""
        used = request.cache_read_tokens + request.cache_write_tokens
        if request.session is None or not used:
            return
        self._held.setdefault(request.session, {})[connection_id] = (used, at)
