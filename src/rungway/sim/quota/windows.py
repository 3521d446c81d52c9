"""Quota windows of a simulated upstream, and the rate-limit headers that report them.

Windows reset at fixed instants read from the injected Clock: the first one length after
the start, or sooner for a window that began `started_ago_s` before it (a pool's
accounts are staggered so); once "now" passes a window's reset its usage drops to 0 and
the next reset is one length later (skipping whole lengths if the clock jumped); a
window with a `reset_zone` resets at each midnight in that zone instead (Gemini's daily
quotas). A request is admitted unless a window that applies to its model is already at
or over capacity; admission charges every applicable window with the request's full,
deterministic usage (real providers likewise charge an estimate when the request
starts). A "soft" window never refuses: it keeps counting past its capacity, as a
Copilot seat with overage permitted does (docs/provider-signals.md A5.3), and a Claude
plan with extra usage or a ChatGPT plan with credits (A2.3, A4.3); a request admitted on
a soft window that was already spent is overage, billed past the plan.

Header formats follow docs/provider-signals.md: the Claude-plan "unified" family (A2.3,
epoch-second resets, fractional utilization), the Anthropic API-key family (A1, RFC 3339
resets) and the OpenAI family (A3, Go-style durations); the Codex family lives in
codex.py and header_families.py picks a scenario's writer.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from rungway.clock import Clock
from rungway.sim.exchange import Header
from rungway.sim.scenario import ExtraUsageSpec, WindowSpec

# Claude plans start reporting `allowed_warning` once a window passes this share.
WARNING_THRESHOLD = 0.75

HeaderWriter = Callable[["Admission"], list[Header]]


@dataclass(frozen=True, slots=True)
class WindowReading:
    """One window's state at one instant."""

    spec: WindowSpec
    used: int
    reset_at: float
    soft: bool = False

    @property
    def capacity(self) -> int:
        """Units the window allows per length."""
        return self.spec.capacity

    @property
    def remaining(self) -> int:
        """Units left before the window rejects (never negative)."""
        return max(0, self.spec.capacity - self.used)

    @property
    def utilization(self) -> float:
        """Used share of capacity, 0..1."""
        return min(1.0, self.used / self.spec.capacity)

    @property
    def spent(self) -> bool:
        """Whether the window's capacity is used up (a soft window goes on serving)."""
        return self.used >= self.spec.capacity

    @property
    def exhausted(self) -> bool:
        """Whether the window rejects new requests (a soft window never does)."""
        return not self.soft and self.spent

    @property
    def overage(self) -> int:
        """Units used past capacity (only a soft window gets there)."""
        return max(0, self.used - self.spec.capacity)


@dataclass(frozen=True, slots=True)
class Admission:
    """The verdict on one request and the windows that applied to it."""

    admitted: bool
    readings: tuple[WindowReading, ...]
    now: float
    overage: bool = False
    """Admitted on a soft window already spent: served past the plan, and billed."""

    @property
    def rejected(self) -> tuple[WindowReading, ...]:
        """The exhausted windows (empty when admitted)."""
        return tuple(reading for reading in self.readings if reading.exhausted)

    def retry_after_s(self) -> int:
        """Whole seconds until every exhausted window has reset (at least 1)."""
        blocking = self.rejected or self.readings
        if not blocking:
            return 1
        latest = max(reading.reset_at for reading in blocking)
        return max(1, math.ceil(latest - self.now))


def next_midnight(now: float, zone: str) -> float:
    """The first midnight in `zone` after `now` (a day is 23 or 25 hours across DST)."""
    local = ZoneInfo(zone)
    today = datetime.fromtimestamp(now, local).date()
    # Midnight never falls in a DST gap in the zones that matter (changes are at 02:00).
    return datetime.combine(today + timedelta(days=1), time(0), tzinfo=local).timestamp()


def _first_reset(spec: WindowSpec, now: float) -> float:
    if spec.reset_zone is not None:
        return next_midnight(now, spec.reset_zone)
    if spec.first_reset_at is not None:
        return spec.first_reset_at
    # A window that began before the sim did (an account of a staggered pool) resets sooner.
    return now + spec.length_s - spec.started_ago_s


@dataclass(slots=True)
class _Window:
    spec: WindowSpec
    used: int
    reset_at: float
    soft: bool

    @property
    def admits(self) -> bool:
        return self.soft or self.used < self.spec.capacity


def _charge(spec: WindowSpec, input_tokens: int, output_tokens: int) -> int:
    if spec.unit == "requests":
        return 1
    if spec.unit == "input_tokens":
        return input_tokens
    if spec.unit == "output_tokens":
        return output_tokens
    return input_tokens + output_tokens


class QuotaBook:
    """Usage of every window, rolled forward lazily against the clock.

    Windows named in `soft` keep admitting past their capacity.
    """

    __slots__ = ("_clock", "_lock", "_soft", "_specs", "_windows")

    def __init__(
        self, windows: Sequence[WindowSpec], clock: Clock, soft: Collection[str] = ()
    ) -> None:
        self._clock = clock
        self._specs = tuple(windows)
        self._soft = frozenset(soft)
        self._lock = threading.Lock()
        self._windows: list[_Window] = []
        self.reset()

    def reset(self) -> None:
        """Empty every window; resets restart from the scenario (or one length from now)."""
        now = self._clock.now()
        with self._lock:
            self._windows = [
                _Window(spec, 0, _first_reset(spec, now), spec.name in self._soft)
                for spec in self._specs
            ]
            self._roll(now)

    def _roll(self, now: float) -> None:
        for window in self._windows:
            if now >= window.reset_at and window.spec.reset_zone is not None:
                window.reset_at = next_midnight(now, window.spec.reset_zone)
                window.used = 0
            elif now >= window.reset_at:
                lengths = math.floor((now - window.reset_at) / window.spec.length_s) + 1
                window.reset_at += lengths * window.spec.length_s
                window.used = 0

    def _applicable(self, model: str) -> list[_Window]:
        return [w for w in self._windows if w.spec.model is None or w.spec.model == model]

    @staticmethod
    def _read(window: _Window) -> WindowReading:
        return WindowReading(window.spec, window.used, window.reset_at, window.soft)

    def admit(self, model: str, input_tokens: int, output_tokens: int) -> Admission:
        """Admit (and charge) a request for `model`, or reject it on an exhausted window."""
        now = self._clock.now()
        with self._lock:
            self._roll(now)
            windows = self._applicable(model)
            admitted = all(w.admits for w in windows)
            overage = admitted and any(w.used >= w.spec.capacity for w in windows)
            if admitted:
                for window in windows:
                    window.used += _charge(window.spec, input_tokens, output_tokens)
            return Admission(admitted, tuple(self._read(w) for w in windows), now, overage)

    def peek(self, model: str) -> Admission:
        """The windows applying to `model` now, without charging anything."""
        now = self._clock.now()
        with self._lock:
            self._roll(now)
            windows = self._applicable(model)
            admitted = all(w.admits for w in windows)
            return Admission(admitted, tuple(self._read(w) for w in windows), now)

    def exhaust(self, model: str, window_name: str | None = None) -> bool:
        """Fill a window to capacity (the named one, or the first applying to `model`)."""
        now = self._clock.now()
        with self._lock:
            self._roll(now)
            for window in self._applicable(model) if window_name is None else self._windows:
                if window_name is None or window.spec.name == window_name:
                    window.used = max(window.used, window.spec.capacity)
                    return True
        return False

    def set_used(self, window_name: str, used: int) -> bool:
        """Set how much of the named window is used; False when no window has that name."""
        now = self._clock.now()
        with self._lock:
            self._roll(now)
            for window in self._windows:
                if window.spec.name == window_name:
                    window.used = used
                    return True
        return False

    @property
    def clock(self) -> Clock:
        """The clock the windows run on."""
        return self._clock

    def readings(self) -> list[WindowReading]:
        """Every window's state now."""
        now = self._clock.now()
        with self._lock:
            self._roll(now)
            return [self._read(w) for w in self._windows]


# --- header writers -------------------------------------------------------------------


def _status(reading: WindowReading) -> str:
    # A spent window reads rejected even while extra usage serves past it (A2.3).
    if reading.spent:
        return "rejected"
    if reading.utilization >= WARNING_THRESHOLD:
        return "allowed_warning"
    return "allowed"


def _fraction(value: float) -> str:
    return repr(round(value, 2))


def _representative(admission: Admission) -> WindowReading:
    spent = [reading for reading in admission.readings if reading.spent]
    if spent:
        # The binding window is the one the request has to wait longest for.
        return max(spent, key=lambda reading: reading.reset_at)
    return max(admission.readings, key=lambda reading: reading.utilization)


def unified_headers(admission: Admission, extra: ExtraUsageSpec | None = None) -> list[Header]:
    """`anthropic-ratelimit-unified-*`: overall and per-window status, reset, utilization,
    and, for a plan with `extra` usage settings, its `overage-*` headers."""
    if not admission.readings:
        return []
    statuses = [_status(reading) for reading in admission.readings]
    if "rejected" in statuses:
        overall = "rejected"
    elif "allowed_warning" in statuses:
        overall = "allowed_warning"
    else:
        overall = "allowed"
    binding = _representative(admission)
    prefix = "anthropic-ratelimit-unified-"
    headers = [
        (f"{prefix}status", overall),
        (f"{prefix}reset", str(math.ceil(binding.reset_at))),
        (f"{prefix}representative-claim", binding.spec.claim_name),
    ]
    for reading, status in zip(admission.readings, statuses, strict=True):
        name = f"{prefix}{reading.spec.name}-"
        headers.append((f"{name}status", status))
        headers.append((f"{name}reset", str(math.ceil(reading.reset_at))))
        headers.append((f"{name}utilization", _fraction(reading.utilization)))
        if reading.utilization >= WARNING_THRESHOLD:
            headers.append((f"{name}surpassed-threshold", _fraction(WARNING_THRESHOLD)))
    if extra is not None:
        headers.extend(_overage_headers(admission, extra))
    return [(key.encode(), value.encode()) for key, value in headers]


def _overage_headers(admission: Admission, extra: ExtraUsageSpec) -> list[tuple[str, str]]:
    # A2.3: extra usage is billing state, not a window: a status, the monthly limit's
    # reset and utilization, the reason it is off, and whether this request used it.
    prefix = "anthropic-ratelimit-unified-overage-"
    limit = extra.monthly_limit
    share = min(1.0, extra.used_credits / limit) if limit else 1.0
    if extra.serving:
        status = "allowed_warning" if share >= WARNING_THRESHOLD else "allowed"
        headers = [(f"{prefix}status", status)]
    else:
        reason = "out_of_credits" if extra.enabled else "org_level_disabled"
        headers = [(f"{prefix}status", "rejected"), (f"{prefix}disabled-reason", reason)]
    headers.append((f"{prefix}reset", str(math.ceil(_next_month(admission.now)))))
    headers.append((f"{prefix}utilization", _fraction(share)))
    headers.append((f"{prefix}in-use", "true" if admission.overage else "false"))
    return headers


def _next_month(now: float) -> float:
    # The monthly limit starts over on the first of the month, UTC.
    today = datetime.fromtimestamp(now, UTC)
    start = datetime(today.year + today.month // 12, today.month % 12 + 1, 1, tzinfo=UTC)
    return start.timestamp()


def rfc3339(epoch_seconds: float) -> str:
    """Format an instant the way the Anthropic API-key headers do (`2025-08-21T12:40:59Z`)."""
    moment = datetime.fromtimestamp(math.ceil(epoch_seconds), tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def apikey_headers(admission: Admission) -> list[Header]:
    """`anthropic-ratelimit-<window>-{limit,remaining,reset}` with RFC 3339 resets."""
    headers: list[Header] = []
    for reading in admission.readings:
        name = f"anthropic-ratelimit-{reading.spec.name}-"
        headers.append((f"{name}limit".encode(), str(reading.capacity).encode()))
        headers.append((f"{name}remaining".encode(), str(reading.remaining).encode()))
        headers.append((f"{name}reset".encode(), rfc3339(reading.reset_at).encode()))
    return headers


def go_duration(seconds: float) -> str:
    """Format a duration the way Go prints one (`6m0s`, `1s`, `12ms`, `1h2m3.5s`)."""
    millis = max(0, round(seconds * 1000))
    if millis == 0:
        return "0s"
    if millis < 1000:
        return f"{millis}ms"
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs = f"{rest / 1000:.3f}".rstrip("0").rstrip(".")
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def openai_headers(admission: Admission) -> list[Header]:
    """`x-ratelimit-{limit,remaining,reset}-<window>` with Go-duration resets."""
    headers: list[Header] = []
    for reading in admission.readings:
        name = reading.spec.name
        reset = go_duration(reading.reset_at - admission.now)
        headers.append((f"x-ratelimit-limit-{name}".encode(), str(reading.capacity).encode()))
        headers.append((f"x-ratelimit-remaining-{name}".encode(), str(reading.remaining).encode()))
        headers.append((f"x-ratelimit-reset-{name}".encode(), reset.encode()))
    return headers
