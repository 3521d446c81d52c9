"""The prompt cache a replay keeps per session: which account holds a conversation's context.

A trace records each turn's tokens as they were when served, most often with the session's
context read from the provider's prompt cache. A cache lives on one account: the replay
keeps, per session, the connection that served its last turn and when. A turn served there
within `ttl_s` of that turn (Anthropic's default cache lives 5 minutes, refreshed by each
read: https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching) reads its
context as recorded. A turn served on another connection, or after the TTL, finds nothing
cached: the tokens it would have read are written to the cache instead, at the cache-write
price and against a plan's cost window, as the agent's marked prefix is written on a miss.

Decided where the issue is silent:
- The cache follows the session's last turn only: an account that held the context two
  turns ago, before the session moved, is taken to hold nothing (its copy is shorter than
  the context now, and a miss is the conservative reading).
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

__all__ = ["CACHE_TTL_S", "PromptCache", "missed", "settled"]

CACHE_TTL_S: Final = 300.0
"""How long a prompt cache lives after its last use: Anthropic's default 5 minutes."""


def missed(request: TraceRequest) -> TraceRequest:
    """`request` as served when its context was not cached: its reads become writes."""
    if not request.cache_read_tokens:
        return request
    return replace(
        request,
        cache_read_tokens=0,
        cache_write_tokens=request.cache_write_tokens + request.cache_read_tokens,
    )


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
    """Where each session's cached context is, and until when."""

    __slots__ = ("_held", "ttl_s")

    def __init__(self, ttl_s: float = CACHE_TTL_S) -> None:
        if not ttl_s >= 0:
            raise ValueError(f"a cache TTL is at least 0 s, not {ttl_s}")
        self.ttl_s = ttl_s
        self._held: dict[str, tuple[str, float]] = {}

    def holds(self, request: TraceRequest, connection_id: str, at: float) -> bool:
        """Whether `connection_id` holds `request`'s session's context at `at`."""
        if request.session is None:
            return True
        held = self._held.get(request.session)
        return held is not None and held[0] == connection_id and at - held[1] <= self.ttl_s

    def as_served(self, request: TraceRequest, connection_id: str, at: float) -> TraceRequest:
        """`request`'s tokens if `connection_id` serves it at `at`: as recorded on a hit,
        its reads written again on a miss."""
        if not request.cache_read_tokens or self.holds(request, connection_id, at):
            return request
        return missed(request)

    def served(self, request: TraceRequest, connection_id: str, at: float) -> None:
        """Note that `connection_id` served `request` at `at`: its session's context (when
        the turn used the cache) now lives there."""
        if request.session is None or not (request.cache_read_tokens or request.cache_write_tokens):
            return
        self._held[request.session] = (connection_id, at)
