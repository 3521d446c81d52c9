"""The prompt cache a simulated upstream keeps per account and model.

A prompt is seen as a chain of *boundaries*: the places (after a tool, a system block, a
message or a content block) where a provider can end a cached prefix. Each boundary
carries a digest of the prompt up to it and the tokens up to it, in the sim's own token
estimate (`sim/wire/prompt_prefix.py` builds them from a request body). The cache is pure:
time comes in as `now`, so the sims run it on their controllable clock and the what-if
replay can run it on trace time.

The rules followed, per provider (docs/provider-signals.md B3 and B4, and the providers'
pages below):

- Anthropic (explicit, https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching):
  only prefixes ending at a `cache_control` breakpoint are written (on tools, system
  blocks and message content blocks, or a top-level `cache_control`, which marks the last
  block). A breakpoint's prefix shorter than the model's minimum is not cached: 4096 tokens
  for Opus 4.5/4.6 and Haiku 4.5, 2048 for Sonnet 4.6 and the Haiku 3 models, 1024 for the
  others. A lookup checks each breakpoint and up to 20 boundaries before it for the longest
  prefix cached; reading it refreshes its life. An entry lives 5 minutes after its last
  use, or 1 hour with `ttl: "1h"`. What lies between the prefix read and the last
  breakpoint is written, each stretch with the TTL of the breakpoint that ends it
  (`cache_creation.ephemeral_5m_input_tokens` / `ephemeral_1h_input_tokens`).
- OpenAI Chat and Responses (automatic, https://platform.openai.com/docs/guides/prompt-caching):
  prompts of 1024 tokens or more are cached; a request reads the longest prefix seen
  before, counted in whole 128-token steps from 1024 up (`cached_tokens` is 0, 1024, 1152,
  ...); entries live 5 minutes idle (the guide says 5 to 10), or 24 hours with
  `prompt_cache_retention: "24h"`.
- Gemini (implicit, https://ai.google.dev/gemini-api/docs/caching): like OpenAI's without
  the 128-token steps, from 1024 tokens on Flash models, 2048 on Flash-Lite and 4096 on Pro
  (the page's table); the page states no lifetime, so 5 minutes is assumed.

Decided where the providers are silent: boundaries are whole blocks or messages (a real
provider matches token by token, so it may read a little more); a cache is keyed by the
credential the request presented and the model, so another account, or another model of
the same account, reads nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ANTHROPIC_LOOKBACK",
    "DEFAULT_TTL_S",
    "ONE_HOUR_S",
    "Boundary",
    "CacheRules",
    "CacheUse",
    "PromptCache",
    "anthropic_rules",
    "conversation_boundaries",
    "gemini_rules",
    "openai_rules",
]

DEFAULT_TTL_S: Final = 300.0
"""A cache entry's life after its last use: 5 minutes for every provider here."""
ONE_HOUR_S: Final = 3600.0
DAY_S: Final = 86400.0
ANTHROPIC_LOOKBACK: Final = 20
"""How many boundaries before a breakpoint Anthropic checks for a cached prefix."""
OPENAI_MIN_TOKENS: Final = 1024
OPENAI_INCREMENT: Final = 128
# A sweep of expired entries runs once an account's cache holds this many more than after
# the last sweep, so a long run keeps a bounded cache without sweeping on every request.
_SWEEP_AFTER: Final = 4096


@dataclass(frozen=True, slots=True)
class Boundary:
    """A place a cached prefix may end: the prompt's digest and tokens up to it, and the
    TTL of the `cache_control` breakpoint there (None: no breakpoint)."""

    digest: int
    tokens: int
    breakpoint_ttl_s: float | None = None


@dataclass(frozen=True, slots=True)
class CacheRules:
    """How one provider caches one model's prompts.

    `explicit`: only breakpoints are written (Anthropic); otherwise every boundary of a
    long enough prompt is (OpenAI, Gemini). `increment`: read counts are whole multiples of
    it. `read_weight`: how much a token read from the cache weighs in the sim's token
    quota windows.
    """

    min_tokens: int
    explicit: bool = False
    increment: int = 1
    ttl_s: float = DEFAULT_TTL_S
    lookback: int = ANTHROPIC_LOOKBACK
    read_weight: float = 1.0


@dataclass(frozen=True, slots=True)
class CacheUse:
    """What one request read from and wrote to the cache, in tokens; `input_tokens` is
    what is left of the prompt, neither read nor written."""

    input_tokens: int
    read_tokens: int = 0
    written_5m_tokens: int = 0
    written_1h_tokens: int = 0
    _keep: tuple[tuple[int, float], ...] = ()
    """The entries (digest, TTL) to store or refresh once the request is admitted."""

    @property
    def written_tokens(self) -> int:
        """Tokens written to the cache, whatever their TTL."""
        return self.written_5m_tokens + self.written_1h_tokens

    def charged_input(self, read_weight: float) -> int:
        """The input a token quota window counts: reads weighed by `read_weight`."""
        return self.input_tokens + self.written_tokens + round(self.read_tokens * read_weight)


def anthropic_rules(model: str, *, plan: bool = False) -> CacheRules:
    """Anthropic's rules for `model`. Cache reads do not count toward an API key's input
    rate limits (provider-signals A1); a plan publishes no such rule, so its token windows
    count them as every other token, as the what-if replay's windows do."""
    name = model.lower()
    if "haiku-4" in name or "opus-4-5" in name or "opus-4-6" in name:
        minimum = 4096
    elif "haiku" in name or "sonnet-4-6" in name:
        minimum = 2048
    else:
        minimum = 1024
    return CacheRules(min_tokens=minimum, explicit=True, read_weight=1.0 if plan else 0.0)


def openai_rules(retention: object = None) -> CacheRules:
    """OpenAI's rules; `retention` is the request's `prompt_cache_retention`. Cached input
    counts whole in token windows, an API key's and a ChatGPT plan's."""
    ttl = DAY_S if retention == "24h" else DEFAULT_TTL_S
    return CacheRules(min_tokens=OPENAI_MIN_TOKENS, increment=OPENAI_INCREMENT, ttl_s=ttl)


def gemini_rules(model: str) -> CacheRules:
    """Gemini's implicit caching for `model`; cached tokens count whole in its quotas."""
    name = model.lower()
    if "pro" in name:
        minimum = 4096
    elif "flash-lite" in name:
        minimum = 2048
    else:
        minimum = 1024
    return CacheRules(min_tokens=minimum)


def conversation_boundaries(
    session: str, context_tokens: Sequence[int], breakpoint_ttl_s: float | None = DEFAULT_TTL_S
) -> tuple[Boundary, ...]:
    """The boundaries of a conversation known only by its size, as a trace without bodies
    knows it: one after each turn, `context_tokens[k]` the prompt's tokens up to turn k.

    Turns of one `session` share their prefix; the last boundary is a breakpoint (a coding
    agent marks its last turn), which Anthropic's rules need and the others ignore.
    """
    last = len(context_tokens) - 1
    return tuple(
        Boundary(hash((session, index)), tokens, breakpoint_ttl_s if index == last else None)
        for index, tokens in enumerate(context_tokens)
    )


class PromptCache:
    """Cached prefixes per (account, model), each with the instant it expires.

    `look` says what a request would read and write, without changing anything; `keep`
    stores what it wrote and refreshes what it read, once the request is served. Safe to
    share between threads.
    """

    __slots__ = ("_entries", "_lock", "_swept_at_size")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], dict[int, float]] = {}
        self._swept_at_size: dict[tuple[str, str], int] = {}

    def look(
        self,
        account: str,
        model: str,
        boundaries: tuple[Boundary, ...],
        input_tokens: int,
        *,
        rules: CacheRules,
        now: float,
    ) -> CacheUse:
        """What a prompt of `input_tokens` with these `boundaries` reads and writes at `now`."""
        if input_tokens < rules.min_tokens or not boundaries:
            return CacheUse(input_tokens)
        with self._lock:
            entries = self._entries.get((account, model), {})
            if rules.explicit:
                return _explicit(boundaries, input_tokens, rules, entries, now)
            return _automatic(boundaries, input_tokens, rules, entries, now)

    def keep(self, account: str, model: str, use: CacheUse, now: float) -> None:
        """Store the entries `use` wrote and refresh the one it read, from `now`."""
        if not use._keep:
            return
        key = (account, model)
        with self._lock:
            entries = self._entries.setdefault(key, {})
            for digest, ttl in use._keep:
                entries[digest] = max(entries.get(digest, 0.0), now + ttl)
            if len(entries) > self._swept_at_size.get(key, 0) + _SWEEP_AFTER:
                for digest in [d for d, until in entries.items() if until <= now]:
                    del entries[digest]
                self._swept_at_size[key] = len(entries)

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()
            self._swept_at_size.clear()

    def size(self, account: str, model: str, now: float) -> int:
        """How many live entries (account, model) holds at `now`."""
        with self._lock:
            entries = self._entries.get((account, model), {})
            return sum(1 for until in entries.values() if until > now)


def _explicit(
    boundaries: tuple[Boundary, ...],
    input_tokens: int,
    rules: CacheRules,
    entries: dict[int, float],
    now: float,
) -> CacheUse:
    marks = [i for i, boundary in enumerate(boundaries) if boundary.breakpoint_ttl_s is not None]
    if not marks:
        return CacheUse(input_tokens)
    read_at = -1
    for mark in marks:
        for index in range(mark, max(-1, mark - rules.lookback - 1), -1):
            if index <= read_at:
                break
            if entries.get(boundaries[index].digest, 0.0) > now:
                read_at = index
                break
    read = min(boundaries[read_at].tokens, input_tokens) if read_at >= 0 else 0
    keep: list[tuple[int, float]] = []
    if read_at >= 0:
        # A read refreshes the entry for its own TTL: the breakpoint there, else the 5 minutes.
        ttl = boundaries[read_at].breakpoint_ttl_s or rules.ttl_s
        keep.append((boundaries[read_at].digest, ttl))
    written = {DEFAULT_TTL_S: 0, ONE_HOUR_S: 0}
    covered = read
    for mark in marks:
        boundary = boundaries[mark]
        tokens = min(boundary.tokens, input_tokens)
        ttl = boundary.breakpoint_ttl_s or rules.ttl_s
        if tokens < rules.min_tokens:
            continue
        keep.append((boundary.digest, ttl))
        if tokens > covered:
            written[ONE_HOUR_S if ttl >= ONE_HOUR_S else DEFAULT_TTL_S] += tokens - covered
            covered = tokens
    write_5m, write_1h = written[DEFAULT_TTL_S], written[ONE_HOUR_S]
    return CacheUse(
        input_tokens=input_tokens - read - write_5m - write_1h,
        read_tokens=read,
        written_5m_tokens=write_5m,
        written_1h_tokens=write_1h,
        _keep=tuple(keep),
    )


def _automatic(
    boundaries: tuple[Boundary, ...],
    input_tokens: int,
    rules: CacheRules,
    entries: dict[int, float],
    now: float,
) -> CacheUse:
    read = 0
    for boundary in reversed(boundaries):
        if entries.get(boundary.digest, 0.0) > now:
            matched = min(boundary.tokens, input_tokens)
            read = matched - matched % rules.increment
            break
    if read < rules.min_tokens:
        read = 0
    # Every boundary long enough to be read later is kept (the ones read are refreshed).
    keep = tuple(
        (boundary.digest, rules.ttl_s)
        for boundary in boundaries
        if boundary.tokens >= rules.min_tokens
    )
    return CacheUse(input_tokens=input_tokens - read, read_tokens=read, _keep=keep)
