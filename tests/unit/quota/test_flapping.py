"""Usage hovering at the cut-off never makes the ladder flap between rungs."""

from __future__ import annotations

import itertools
import random

from rungway.pricing import Tier
from rungway.quota.board import QuotaBoard
from rungway.routing.rungs import Rung
from tests.unit.routing.builders import DEFAULTS, NOW, connection, route, window

ROSTER = [
    connection("plan", models=["m1"]),
    connection("key", "metered-co", "apikey", {"m1": Tier.PREMIUM}),
]


def _subscription_leads(board: QuotaBoard, now: float) -> bool:
    plan = route("auto/thrifty", ROSTER, board.connection_states(now), now=now)
    return plan.candidates[0].rung is Rung.SUBSCRIPTION


def test_no_flapping_while_usage_hovers_around_the_cut_off() -> None:
    board = QuotaBoard(DEFAULTS)  # exit at 2% left, re-entry above 5%
    rng = random.Random(5)
    leads: list[bool] = []
    now = NOW
    # In play, then a long stretch hovering between 1.2% and 4.8% left.
    for remaining in [40.0, 10.0, 3.0] + [rng.uniform(1.2, 4.8) for _ in range(400)]:
        now += 1
        board.observe("plan", [window(remaining, resets_in=3600, now=now, age=0)], now)
        leads.append(_subscription_leads(board, now))
    changes = sum(1 for before, after in itertools.pairwise(leads) if before != after)
    assert changes == 1, "the plan leaves once, at the first reading at or below the cut-off"
    assert not leads[-1]
    # Back above the re-entry level: the plan leads again, once.
    now += 1
    board.observe("plan", [window(6.0, resets_in=3600, now=now, age=0)], now)
    assert _subscription_leads(board, now)
