"""Models a plan serves under its own names are priced as the list names them."""

from __future__ import annotations

import pytest

from rungway.pricing.prices import list_price


@pytest.mark.parametrize(
    ("served", "listed"),
    [
        ("kimi-for-coding", "kimi-k2.7-code"),
        ("kimi-for-coding-highspeed", "kimi-k2.7-code-highspeed"),
        ("k3", "kimi-k3"),
    ],
)
def test_kimi_code_names_are_priced_as_moonshots(served: str, listed: str) -> None:
    price = list_price("kimi-code", served)
    assert price is not None
    assert price == list_price("kimi-code", listed)
