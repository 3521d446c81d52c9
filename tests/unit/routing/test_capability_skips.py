"""The ladder skips, with a reason, a model that lacks what the request needs; unknown
capabilities never skip; and inside a rung the score weighs no category fit."""

from __future__ import annotations

import pytest

from rungway.models.capabilities import ModelCapabilities, Structured
from rungway.pricing import Tier
from rungway.routing.autoid import Category
from rungway.routing.needs import RequestNeeds, StructuredNeed
from rungway.routing.plan import SkipReason
from rungway.routing.scoring import WEIGHTS
from rungway.routing.snapshot import RosterConnection

from .builders import FRESH, connection, route

TEXT_ONLY = ModelCapabilities(vision=False, tools=False, context_window=64_000)
ABLE = ModelCapabilities(
    vision=True, tools=True, structured=Structured.SCHEMA, context_window=200_000
)


def roster(small: ModelCapabilities, large: ModelCapabilities = ABLE) -> list[RosterConnection]:
    # The lacking model is the cheaper one, so thrifty would pick it first.
    return [
        connection(
            "key",
            "metered-co",
            "apikey",
            {"small": Tier.CHEAP, "large": Tier.CHEAP},
            prices={"small": 0.1, "large": 0.9},
            capabilities={"small": small, "large": large},
        )
    ]


@pytest.mark.parametrize(
    ("needs", "reason", "detail"),
    [
        (RequestNeeds(vision=True), SkipReason.NO_VISION, "small does not read images"),
        (RequestNeeds(tools=True), SkipReason.NO_TOOL_USE, "small does not call tools"),
        (
            RequestNeeds(prompt_tokens=150_000),
            SkipReason.CONTEXT_TOO_SMALL,
            "small takes 64000 tokens, fewer than the prompt's estimated size",
        ),
    ],
)
def test_a_model_lacking_what_the_request_needs_is_skipped_with_the_reason(
    needs: RequestNeeds, reason: SkipReason, detail: str
) -> None:
    plan = route("auto/thrifty", roster(TEXT_ONLY), needs=needs)
    assert [c.model for c in plan.candidates] == ["large"]
    (skip,) = [s for s in plan.skipped if s.model == "metered-co/small"]
    assert (skip.reason, skip.detail, skip.connection_id) == (reason, detail, None)
    assert plan.to_json()["skipped"][-1]["reason"] == reason.value


def test_a_request_the_model_can_serve_keeps_it_first() -> None:
    plan = route("auto/thrifty", roster(TEXT_ONLY), needs=RequestNeeds(prompt_tokens=64_000))
    assert [c.model for c in plan.candidates] == ["small", "large"]
    assert plan.skipped == ()


def test_unknown_capabilities_never_skip() -> None:
    needs = RequestNeeds(vision=True, tools=True, structured="schema", prompt_tokens=10**7)
    plan = route("auto/thrifty", roster(ModelCapabilities(), ModelCapabilities()), needs=needs)
    assert [c.model for c in plan.candidates] == ["small", "large"]


@pytest.mark.parametrize(
    ("structured", "need", "kept"),
    [
        (Structured.SCHEMA, "schema", True),
        (Structured.TOOL, "schema", True),  # a forced tool stands in
        (Structured.JSON, "schema", False),  # a JSON mode cannot hold it to a schema
        (Structured.JSON, "json", True),
        (Structured.TOOL, "json", True),
        (Structured.NONE, "json", False),
        (Structured.NONE, "schema", False),
    ],
)
def test_structured_output_goes_where_it_is_expressed_or_emulated(
    structured: Structured, need: StructuredNeed, kept: bool
) -> None:
    plan = route(
        "auto/thrifty",
        roster(ModelCapabilities(structured=structured)),
        needs=RequestNeeds(structured=need),
    )
    assert ("small" in [c.model for c in plan.candidates]) is kept
    reasons = [s.reason for s in plan.skipped if s.model == "metered-co/small"]
    assert reasons == ([] if kept else [SkipReason.NO_STRUCTURED_OUTPUT])


def test_the_subscription_ladder_skips_the_same_way() -> None:
    roster = [
        connection("plan", models=["small", "large"], capabilities={"small": TEXT_ONLY}),
    ]
    plan = route("auto/subscription", roster, {"plan": FRESH}, needs=RequestNeeds(vision=True))
    assert [c.model for c in plan.candidates] == ["large"]
    assert [s.reason for s in plan.skipped] == [SkipReason.NO_VISION]


def test_a_model_outside_the_category_is_skipped_before_its_capabilities_are_read() -> None:
    roster = [
        connection(
            "key",
            "metered-co",
            "apikey",
            ["small", "large"],
            categories={"small": frozenset({Category.CHAT}), "large": frozenset(Category)},
            capabilities={"small": TEXT_ONLY},
        )
    ]
    plan = route("auto/coding", roster, needs=RequestNeeds(vision=True))
    assert [s.reason for s in plan.skipped] == [SkipReason.CATEGORY_MISMATCH]


def test_the_score_weighs_no_category_fit() -> None:
    # Fit is a filter (category, capabilities), not a weight: a chat-only model and one of
    # every category, equal in all else, score alike.
    roster = [
        connection(
            "key",
            "metered-co",
            "apikey",
            ["narrow", "broad"],
            prices={"narrow": 0.5, "broad": 0.5},
            categories={"narrow": frozenset({Category.CHAT}), "broad": frozenset(Category)},
        )
    ]
    plan = route("auto/thrifty", roster)
    assert plan.candidates[0].score == plan.candidates[1].score
    assert [c.model for c in plan.candidates] == ["narrow", "broad"]  # the roster's order
    for weights in WEIGHTS.values():
        assert len(weights) == 3
        assert sum(weights) == pytest.approx(1)
