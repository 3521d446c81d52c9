"""The provider axis: the registry, `config.Provider`, the billing catalog and pricing agree.

Adding a provider touches each of them; these tests name the one that was forgotten.
"""

from __future__ import annotations

from typing import get_args

import pytest

from rungway.adapters.registry import PROVIDERS, WITHOUT_CATALOG_ENTRY, WITHOUT_PRICE_ID
from rungway.app import builtin_catalog
from rungway.config import Provider
from rungway.pricing.prices import KNOWN_PROVIDERS, genai_prices_provider


def test_config_accepts_exactly_the_registry_providers() -> None:
    # `Provider` stays a Literal so mypy checks provider names and a wrong one in the config
    # file is refused with the list of valid ones; this keeps it equal to the registry.
    assert sorted(get_args(Provider)) == sorted(PROVIDERS)


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_each_provider_has_a_catalog_entry_or_a_reason(provider: str) -> None:
    catalogued = {entry.provider for entry in builtin_catalog()}
    assert (provider in catalogued) != (provider in WITHOUT_CATALOG_ENTRY), (
        f"{provider}: add a billing catalog entry, or say in WITHOUT_CATALOG_ENTRY why it has"
        " none (and not both)"
    )


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_each_provider_has_a_price_source_or_a_reason(provider: str) -> None:
    priced = genai_prices_provider(provider) is not None
    assert priced != (provider in WITHOUT_PRICE_ID), (
        f"{provider}: add its genai-prices id to pricing/prices.py, or say in WITHOUT_PRICE_ID"
        " why it has none (and not both)"
    )


def test_the_reason_tables_name_only_registry_providers() -> None:
    assert set(WITHOUT_CATALOG_ENTRY) <= set(PROVIDERS)
    assert set(WITHOUT_PRICE_ID) <= set(PROVIDERS)
    assert all(reason.strip() for reason in WITHOUT_CATALOG_ENTRY.values())
    assert all(reason.strip() for reason in WITHOUT_PRICE_ID.values())


def test_price_overrides_recognise_every_provider() -> None:
    # `prices:` keys of the form provider/glob are told apart from bare globs by this set.
    assert set(PROVIDERS) <= KNOWN_PROVIDERS
