"""The MiniMax Token Plan's known windows in whatif, and Kimi Code's absence from them."""

from __future__ import annotations

from rungway.cli.whatif_plans import DEFAULT_PLANS, known_plan_names
from rungway.whatif.plans import KNOWN_PLANS, PlanQuota


def test_a_minimax_plan_defaults_to_the_starter_windows() -> None:
    windows = KNOWN_PLANS[DEFAULT_PLANS["minimax-token-plan"]]
    assert [(w.name, w.length_s, w.capacity, w.unit) for w in windows] == [
        ("5h", 18000.0, 1500, "requests"),
        ("7d", 604800.0, 15000, "requests"),
    ]
    assert PlanQuota("minimax", windows).windows == windows
    assert {"minimax-plus", "minimax-max"} <= set(KNOWN_PLANS)


def test_kimi_code_has_no_made_up_capacity() -> None:
    # Its usage endpoint gives percentages of an unpublished allowance.
    assert "kimi-code" not in DEFAULT_PLANS
    assert not any(name.startswith("kimi") for name in KNOWN_PLANS)


def test_the_known_plan_names_read_back_whole_from_their_short_list() -> None:
    named: list[str] = []
    for group in known_plan_names().split(", "):
        vendor, brace, plans = group.partition("-{")
        named += [f"{vendor}-{plan}" for plan in plans.rstrip("}").split(",")] if brace else [group]
    assert named == list(KNOWN_PLANS)
