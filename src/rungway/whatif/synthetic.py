"""Synthetic traces of a coding agent's use, for tests, demos and the decision-quality table.

A trace is made of sessions: an agent's run of turns on one task, each turn one request
whose context grows as the session goes on. What differs between profiles is the rhythm,
when sessions start and how fast their turns come (`Rhythm`); the token shape of a turn is
the same (`Shape`):

- `steady`: a working day's even flow. Monday to Friday, 09:00 to 17:00, a request about
  every 2.4 minutes (some 200 a day) at random, with no idle spells. No window of a
  `claude-max-5x` plan binds.
- `bursty`: sessions of rapid agent turns, some 6 s apart, with idle gaps of about two
  hours between them; Monday to Friday, 09:00 to 19:00, some 300 requests a day. A busy
  afternoon can fill a 5-hour window; the week's total stays under `claude-max-5x`'s 7-day
  capacity.
- `weekly-cap`: heavy use every day, 08:00 to 22:00, about 40 requests an hour in sessions
  15 s a turn apart with short breaks: nearly 600 a day, so a `claude-max-5x` plan's 7-day
  window fills around its fourth day, days before it resets.

A turn's tokens follow how coding agents use a prompt cache: the session's context (the
system prompt and tools, then every earlier turn) is read from the cache; what the turn
adds (tool results, the user's words, the last answer) is written to it; only a few tokens
are uncached input; the answer is modest. Each request names its session (`s1`, `s2`,
...), which session affinity and the replay's prompt cache follow. When the context passes
`compact_at` the agent compacts it to a summary and rewrites the cache. A share of turns
(`side_share`) are small side requests to a cheaper model (a title, a summary) that use no
cache. Sizes are log-normal around the medians in `Shape`, capped at its maximums.

Times are in `zone` (UTC unless told), starting at `start` (by default Monday 2026-01-05
00:00 UTC), and a session that would run past the day's end stops there. The same seed
gives the same trace. `requests` is how many requests the trace holds; it spans as many
days as its profile takes to make them (100,000 `weekly-cap` requests take about six
months).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final
from zoneinfo import ZoneInfo

from rungway.protocol.api import Api
from rungway.whatif.trace import Trace, TraceError, TraceRequest

__all__ = ["DEFAULT_START", "PROFILES", "Profile", "Rhythm", "Shape", "generate"]

DEFAULT_START: Final = 1_767_571_200.0
"""Monday 2026-01-05 00:00 UTC."""
_WEEKDAYS: Final = frozenset(range(5))
_EVERY_DAY: Final = frozenset(range(7))


@dataclass(frozen=True, slots=True)
class Rhythm:
    """When requests come: the working days and hours, and how sessions and turns space."""

    days: frozenset[int]
    """The days of the week there is work, 0 for Monday."""
    day_start_h: float
    day_end_h: float
    """Work starts and ends at these hours of the day, in the trace's zone."""
    session_turns: float
    """The mean number of turns in a session (geometric: many short, a few long)."""
    turn_gap_s: float
    """The mean seconds between a session's turns (exponential)."""
    idle_gap_s: float
    """The mean seconds between one session's end and the next one's start (exponential)."""


@dataclass(frozen=True, slots=True)
class Shape:
    """The token shape of a coding agent's turns; sizes are medians of log-normals."""

    base_context: int = 16_000
    """The system prompt and tools every session starts with, cached after the first turn."""
    added: int = 1_200
    """Tokens a turn adds to the context (tool results, the user's words): a cache write."""
    added_max: int = 40_000
    uncached: int = 30
    """Input outside the cache: a few tokens at the end of the prompt."""
    output: int = 350
    output_max: int = 16_000
    reasoning_share: float = 0.0
    """The share of output that is reasoning (0 for Claude models without thinking)."""
    compact_at: int = 160_000
    """Context size at which the agent compacts the conversation to a summary."""
    summary: int = 9_000
    side_share: float = 0.15
    """The share of turns that are side requests to the small model."""
    side_input: int = 1_500
    side_output: int = 60
    spread: float = 0.9
    """The sigma of every log-normal: how far sizes stray from their medians."""


@dataclass(frozen=True, slots=True)
class Profile:
    """A named way of working: a rhythm and a token shape."""

    name: str
    rhythm: Rhythm
    shape: Shape = field(default_factory=Shape)


PROFILES: Final[dict[str, Profile]] = {
    "steady": Profile(
        "steady",
        # 8 h x 3600 s / 144 s = 200 requests a working day, Poisson-spread.
        Rhythm(_WEEKDAYS, 9, 17, session_turns=40, turn_gap_s=144, idle_gap_s=144),
    ),
    "bursty": Profile(
        "bursty",
        # A session of ~50 turns takes ~5 minutes; with ~2 h between them, ~5 a day.
        Rhythm(_WEEKDAYS, 9, 19, session_turns=50, turn_gap_s=6, idle_gap_s=7_200),
    ),
    "weekly-cap": Profile(
        "weekly-cap",
        # ~40 turns in ~10 minutes, then ~50 minutes away: ~40 requests an hour, 14 h a day.
        Rhythm(_EVERY_DAY, 8, 22, session_turns=40, turn_gap_s=15, idle_gap_s=3_000),
    ),
}
"""The profiles by name, as `--profile` takes them."""


def generate(
    profile: str | Profile,
    *,
    requests: int,
    seed: int = 0,
    start: float = DEFAULT_START,
    zone: str = "UTC",
    model: str = "claude-sonnet-4-5",
    side_model: str = "claude-haiku-4-5",
    api: str = Api.ANTHROPIC_MESSAGES.value,
    stream: bool = True,
) -> Trace:
    """`requests` requests of `profile` from `start`, as a client calling `model` (and
    `side_model` for side requests) over `api` would send them; the same `seed`, the same
    trace."""
    if isinstance(profile, str):
        if profile not in PROFILES:
            raise TraceError(f"no profile {profile!r}: choose one of {', '.join(PROFILES)}")
        profile = PROFILES[profile]
    if requests < 0:
        raise TraceError(f"requests must be at least 0, not {requests}")
    rhythm, shape = profile.rhythm, profile.shape
    if not rhythm.days or not 0 <= rhythm.day_start_h < rhythm.day_end_h <= 24:
        raise TraceError(f"profile {profile.name!r}: its working days or hours are empty")
    rng = random.Random(seed)
    clock = _WorkClock(rhythm, ZoneInfo(zone))
    made: list[TraceRequest] = []
    at = clock.open_at(start)
    sessions = 0
    while len(made) < requests:
        sessions += 1
        session = _Session(shape, rng, f"s{sessions}")
        closes = clock.closes_after(at)
        for _ in range(_geometric(rng, rhythm.session_turns)):
            if at >= closes or len(made) == requests:
                break
            side = rng.random() < shape.side_share
            made.append(session.turn(at, side_model if side else model, api, stream, side=side))
            at += rng.expovariate(1 / rhythm.turn_gap_s)
        at = clock.open_at(at + rng.expovariate(1 / rhythm.idle_gap_s))
    return tuple(made)


class _Session:
    """One agent session: the context it has built so far, and the turns that build it."""

    def __init__(self, shape: Shape, rng: random.Random, name: str) -> None:
        self._shape, self._rng, self._name = shape, rng, name
        self._cached = 0
        """Tokens already in the cache, read by the next turn."""
        self._pending = shape.base_context
        """Tokens the next turn writes to the cache: at first, the system prompt and tools."""

    def turn(self, at: float, model: str, api: str, stream: bool, *, side: bool) -> TraceRequest:
        shape = self._shape
        if side:
            output = self._size(shape.side_output, shape.output_max)
            size = self._size(shape.side_input, shape.added_max)
            return TraceRequest(at, model, api, size, output, stream=stream, session=self._name)
        read, write = self._cached, self._pending
        output = self._size(shape.output, shape.output_max)
        reasoning = int(output * shape.reasoning_share)
        added = self._size(shape.added, shape.added_max)
        if read + write + output + added > shape.compact_at:
            # Compaction: the next turn starts over from the tools and a summary.
            self._cached, self._pending = shape.base_context, shape.summary + added
        else:
            self._cached, self._pending = read + write, output + added
        uncached = self._size(shape.uncached, shape.added_max)
        return TraceRequest(
            at,
            model,
            api,
            uncached,
            output,
            cache_read_tokens=read,
            cache_write_tokens=write,
            reasoning_tokens=reasoning,
            stream=stream,
            session=self._name,
        )

    def _size(self, median: int, cap: int) -> int:
        return max(1, min(cap, round(median * math.exp(self._rng.gauss(0, self._shape.spread)))))


class _WorkClock:
    """The working hours of a rhythm, in a zone."""

    def __init__(self, rhythm: Rhythm, zone: ZoneInfo) -> None:
        self._rhythm, self._zone = rhythm, zone

    def open_at(self, at: float) -> float:
        """`at` when it falls in working hours, else when work next starts."""
        rhythm = self._rhythm
        local = datetime.fromtimestamp(at, self._zone)
        day = local.replace(hour=0, minute=0, second=0, microsecond=0)
        for _ in range(8):
            opens = day + timedelta(hours=rhythm.day_start_h)
            closes = day + timedelta(hours=rhythm.day_end_h)
            if day.weekday() in rhythm.days and local < closes:
                return max(at, opens.timestamp())
            day += timedelta(days=1)
        raise AssertionError("a rhythm with working days opens within a week")

    def closes_after(self, at: float) -> float:
        """When the working day holding `at` ends."""
        local = datetime.fromtimestamp(at, self._zone)
        day = local.replace(hour=0, minute=0, second=0, microsecond=0)
        return (day + timedelta(hours=self._rhythm.day_end_h)).timestamp()


def _geometric(rng: random.Random, mean: float) -> int:
    """A whole number of at least 1 with mean `mean`: many small, a few large."""
    if mean <= 1:
        return 1
    return 1 + int(math.log(1 - rng.random()) / math.log(1 - 1 / mean))
