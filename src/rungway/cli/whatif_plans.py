"""`rungway whatif`'s plan flags: which simulated quota each plan connection gets.

`--plan CONN=KNOWN_PLAN` takes a row of the known plans' table. `--window` gives one window
by hand, and may be repeated for a plan's several windows:

    --window CONN:NAME:LENGTH:CAPACITY:UNIT[:ALIGNMENT]

- LENGTH: seconds, or a number with `m`, `h` or `d` (`300m`, `5h`, `7d`);
- CAPACITY: a number of UNIT per window;
- UNIT: `tokens`, `requests` or `cost` (list-price US dollars);
- ALIGNMENT: `first_use` (the default: a window starts at the first request after the
  last one ended), `fixed` or `fixed@EPOCH` (a grid of LENGTH from EPOCH, 0 by default),
  `midnight` or `midnight@ZONE` (daily at midnight in ZONE, UTC by default).

A plan connection named by neither gets its provider's default plan, and the output says
which. `--window` on a connection replaces its `--plan` or default.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from rungway.config import Settings
from rungway.routing.billing import BillingClass
from rungway.routing.snapshot import Roster
from rungway.whatif.plans import KNOWN_PLANS, PlanError, PlanQuota, PlanWindow

__all__ = ["DEFAULT_PLANS", "FlagError", "plan_quotas"]

DEFAULT_PLANS = {
    "anthropic": "claude-pro",
    "codex": "chatgpt-plus",
    "copilot": "copilot-pro",
    "gemini-code-assist": "gemini-code-assist",
    "glm-coding": "glm-lite",
    "glm-coding-anthropic": "glm-lite",
    "minimax-token-plan": "minimax-starter",
}
"""The plan a subscription connection of each provider gets when no flag names one."""

_LENGTH = re.compile(r"^(?P<number>\d+(?:\.\d+)?)(?P<unit>[smhd]?)$")
_SECONDS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_UNITS = ("tokens", "requests", "cost")


def known_plan_names() -> str:
    """The known plans, a vendor's named once: `claude-{pro,max-5x}, copilot-pro, ...`."""
    families: dict[str, list[str]] = {}
    for name in KNOWN_PLANS:
        families.setdefault(name.partition("-")[0], []).append(name)
    return ", ".join(
        names[0]
        if len(names) == 1
        else f"{vendor}-{{{','.join(name[len(vendor) + 1 :] for name in names)}}}"
        for vendor, names in families.items()
    )


class FlagError(ValueError):
    """A plan flag that cannot be used, with the fix in one line."""


def plan_quotas(
    settings: Settings, roster: Roster, plans: Iterable[str], windows: Iterable[str]
) -> tuple[dict[str, PlanQuota], list[str]]:
    """The simulated quota of every plan connection, and a line per one given a default."""
    subscription = {
        c.id: c.provider
        for c in roster.connections.values()
        if c.billing.billing is BillingClass.SUBSCRIPTION
    }
    known_ids = {connection.id for connection in settings.connections}
    chosen: dict[str, PlanQuota] = {}
    for flag in plans:
        connection_id, equals, name = flag.partition("=")
        _check_connection("--plan", flag, connection_id, known_ids)
        if not equals or name not in KNOWN_PLANS:
            raise FlagError(f"--plan {flag}: name a known plan after `=`: {known_plan_names()}")
        chosen[connection_id] = _quota(connection_id, KNOWN_PLANS[name], f"--plan {flag}")
    by_hand: dict[str, list[PlanWindow]] = {}
    for flag in windows:
        connection_id, window = _window(flag, known_ids)
        by_hand.setdefault(connection_id, []).append(window)
    for connection_id, listed in by_hand.items():
        chosen[connection_id] = _quota(connection_id, tuple(listed), f"--window {connection_id}")
    notes = []
    for connection_id, provider in subscription.items():
        if connection_id in chosen:
            continue
        default = DEFAULT_PLANS.get(provider)
        if default is None:
            notes.append(
                f"{connection_id}: no known plan for {provider}; it is replayed without quota"
                f" (give it one with --window {connection_id}:...)"
            )
            continue
        chosen[connection_id] = PlanQuota(connection_id, KNOWN_PLANS[default])
        notes.append(
            f"{connection_id}: {provider} plan taken as {default} (estimated capacities;"
            f" --plan {connection_id}=PLAN or --window {connection_id}:... to change)"
        )
    return chosen, notes


def describe(quotas: Mapping[str, PlanQuota]) -> list[str]:
    """One line per plan window, as the output lists them."""
    return [
        f"{quota.connection_id} {window.name}: {window.capacity:g} {window.unit} per"
        f" {_length(window.length_s)}, {window.alignment}"
        + (f" ({window.zone})" if window.alignment == "midnight" else "")
        + (f", {window.model} only" if window.model else "")
        for quota in quotas.values()
        for window in quota.windows
    ]


def _quota(connection_id: str, windows: tuple[PlanWindow, ...], flag: str) -> PlanQuota:
    try:
        return PlanQuota(connection_id, windows)
    except PlanError as error:
        raise FlagError(f"{flag}: {error}") from None


def _check_connection(option: str, flag: str, connection_id: str, known: set[str]) -> None:
    if connection_id not in known:
        names = ", ".join(sorted(known))
        raise FlagError(f"{option} {flag}: no connection {connection_id!r} in the config ({names})")


def _window(flag: str, known: set[str]) -> tuple[str, PlanWindow]:
    parts = flag.split(":")
    if len(parts) not in (5, 6):
        raise FlagError(
            f"--window {flag}: write CONN:NAME:LENGTH:CAPACITY:UNIT[:ALIGNMENT],"
            " e.g. plan:5h:5h:45:requests:first_use"
        )
    connection_id, name, length, capacity, unit = parts[:5]
    _check_connection("--window", flag, connection_id, known)
    seconds = _seconds(length, flag)
    try:
        amount = float(capacity)
    except ValueError:
        raise FlagError(f"--window {flag}: CAPACITY {capacity!r} is not a number") from None
    if unit not in _UNITS:
        raise FlagError(f"--window {flag}: UNIT must be one of {', '.join(_UNITS)}")
    alignment, _, where = (parts[5] if len(parts) == 6 else "first_use").partition("@")
    anchor, zone = 0.0, "UTC"
    if alignment == "fixed" and where:
        try:
            anchor = float(where)
        except ValueError:
            raise FlagError(f"--window {flag}: fixed@EPOCH needs epoch seconds") from None
    elif alignment == "midnight" and where:
        zone = where
    elif alignment not in ("first_use", "fixed", "midnight") or where:
        raise FlagError(
            f"--window {flag}: ALIGNMENT is first_use, fixed[@EPOCH] or midnight[@ZONE]"
        )
    try:
        window = PlanWindow(name, seconds, amount, unit, alignment, anchor, zone)  # type: ignore[arg-type]
    except PlanError as error:
        raise FlagError(f"--window {flag}: {error}") from None
    return connection_id, window


def _seconds(length: str, flag: str) -> float:
    match = _LENGTH.fullmatch(length.strip().lower())
    if match is None:
        raise FlagError(f"--window {flag}: LENGTH {length!r} is seconds or like 30m, 5h, 7d")
    return float(match["number"]) * _SECONDS[match["unit"]]


def _length(seconds: float) -> str:
    for suffix, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{suffix}"
    return f"{seconds:g}s"
