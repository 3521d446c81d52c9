"""The `auto` id grammar: `auto`, `auto/<tier>`, `auto/<category>`, `auto/<category>:<tier>`."""

from __future__ import annotations

import itertools

import pytest

from rungway.routing.autoid import (
    AutoSpec,
    BadAutoId,
    Category,
    Ladder,
    advertised_auto_ids,
    is_auto_id,
    parse_auto_id,
)


@pytest.mark.parametrize(
    ("name", "ladder", "category"),
    [
        ("auto", Ladder.THRIFTY, None),
        ("auto/thrifty", Ladder.THRIFTY, None),
        ("auto/subscription", Ladder.SUBSCRIPTION, None),
        ("auto/coding", Ladder.THRIFTY, Category.CODING),
        ("auto/vision", Ladder.THRIFTY, Category.VISION),
        ("auto/coding:subscription", Ladder.SUBSCRIPTION, Category.CODING),
        ("auto/reasoning:thrifty", Ladder.THRIFTY, Category.REASONING),
        ("auto/chat:subscription", Ladder.SUBSCRIPTION, Category.CHAT),
    ],
)
def test_valid_ids_parse_to_a_ladder_and_an_optional_category(
    name: str, ladder: Ladder, category: Category | None
) -> None:
    assert parse_auto_id(name) == AutoSpec(ladder, category)


def test_every_category_and_tier_combination_parses() -> None:
    for category, ladder in itertools.product(Category, Ladder):
        assert parse_auto_id(f"auto/{category}:{ladder}") == AutoSpec(ladder, category)


def test_bare_auto_and_a_bare_category_default_to_the_thrifty_ladder() -> None:
    assert parse_auto_id("auto").ladder is Ladder.THRIFTY
    assert parse_auto_id("auto/chat").ladder is Ladder.THRIFTY


@pytest.mark.parametrize(
    "name",
    [
        "auto/",
        "auto/premium",
        "auto/cheap",
        "auto/free",
        "auto/best-free",
        "auto/coding:premium",
        "auto/subscription:coding",
        "auto/coding:",
        "auto/:thrifty",
        "auto/Coding",
        "auto/THRIFTY",
        "auto/coding:thrifty:extra",
        "auto/coding/thrifty",
        "auto/ thrifty",
    ],
)
def test_invalid_ids_are_refused_with_the_valid_forms_listed(name: str) -> None:
    with pytest.raises(BadAutoId) as raised:
        parse_auto_id(name)
    message = str(raised.value)
    assert repr(name) in message
    assert "auto/<category>:<tier>" in message
    assert "subscription, thrifty" in message
    assert "coding, reasoning, vision, chat" in message


def test_bad_auto_id_is_a_value_error() -> None:
    assert issubclass(BadAutoId, ValueError)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("auto", True),
        ("auto/thrifty", True),
        ("auto/anything-at-all", True),
        ("autopilot", False),
        ("auto-coder", False),
        ("openai/auto", False),
        ("AUTO", False),
        ("", False),
    ],
)
def test_is_auto_id_claims_auto_and_everything_under_it(name: str, expected: bool) -> None:
    assert is_auto_id(name) is expected


def test_canonical_id_names_the_ladder_and_the_category() -> None:
    assert AutoSpec(Ladder.THRIFTY, None).id == "auto/thrifty"
    assert AutoSpec(Ladder.SUBSCRIPTION, Category.CODING).id == "auto/coding:subscription"
    assert parse_auto_id("auto").id == "auto/thrifty"
    assert parse_auto_id("auto/vision").id == "auto/vision:thrifty"


def test_advertised_ids_include_both_ladders_and_every_category_form() -> None:
    ids = advertised_auto_ids()
    assert {"auto", "auto/subscription", "auto/thrifty"} <= set(ids)
    for category in Category:
        assert f"auto/{category}" in ids
        assert f"auto/{category}:subscription" in ids
        assert f"auto/{category}:thrifty" in ids
    assert len(ids) == len(set(ids)) == 3 + 3 * len(Category)


def test_every_advertised_id_parses_and_none_names_a_paid_tier() -> None:
    for name in advertised_auto_ids():
        spec = parse_auto_id(name)
        assert parse_auto_id(spec.id) == spec
        assert not {"free", "cheap", "premium"} & set(name.replace(":", "/").split("/"))
