"""A small what-if world: a Claude plan, an Anthropic key and a cheap DeepSeek key."""

from __future__ import annotations

from typing import Any

from rungway.config import parse_settings
from rungway.pricing import PriceBook
from rungway.whatif.outcome import World
from rungway.whatif.plans import PlanQuota, PlanWindow
from rungway.whatif.trace import Trace, TraceRequest

T0 = 1_790_000_000.0
HOUR = 3600.0


def world(
    *,
    capacity: float = 10,
    ladder: dict[str, Any] | None = None,
    client_keys: list[dict[str, Any]] | None = None,
    windows: tuple[PlanWindow, ...] | None = None,
) -> World:
    """The three connections, the plan's 5 h window holding `capacity` requests."""
    settings = parse_settings(
        {
            "ladder": ladder or {"rung_budget_usd": {"cheap": None, "premium": None}},
            "client_keys": client_keys or [],
            "connections": [
                _connection("plan", "anthropic", "oauth", "claude-sonnet-4-5"),
                _connection("api", "anthropic", "apikey", "claude-sonnet-4-5"),
                _connection("cheap", "deepseek", "apikey", "deepseek-chat"),
            ],
        }
    )
    plan = windows or (PlanWindow("5h", 5 * HOUR, capacity, "requests", "first_use"),)
    return World(settings, {"plan": PlanQuota("plan", plan)}, PriceBook(settings.prices))


def _connection(connection_id: str, provider: str, auth: str, model: str) -> dict[str, Any]:
    return {
        "id": connection_id,
        "provider": provider,
        "auth": auth,
        "credential": {"env": f"WHATIF_{connection_id.upper()}"},
        "models": [model],
    }


def steady(count: int, every_s: float, model: str = "auto/thrifty", **fields: Any) -> Trace:
    """`count` requests `every_s` apart from T0, 2,000 tokens in and 500 out."""
    return tuple(
        TraceRequest(T0 + every_s * i, model, "anthropic_messages", 2000, 500, **fields)
        for i in range(count)
    )
