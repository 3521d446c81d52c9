"""Billing classes come from the curated catalog, in a fixed resolution order, never from auth.

Resolution: no credential -> keyless; an entry for (provider, auth); a provider-wide entry;
otherwise `unknown`, which counts as metered everywhere.
"""

from __future__ import annotations

from collections import Counter
from importlib import resources
from typing import Any

import pytest
import yaml

from rungway import app
from rungway.pricing import Tier
from rungway.routing.billing import (
    KEYLESS,
    LIVE,
    BillingClass,
    BillingVerdict,
    Catalog,
    CatalogEntry,
    Overage,
)
from rungway.routing.rungs import Rung, rung_for

SUB, METERED = BillingClass.SUBSCRIPTION, BillingClass.METERED
HARD, PAID = Overage.HARD_STOP, Overage.METERS_TO_PAID


def builtin_rows() -> list[dict[str, Any]]:
    text = resources.files("rungway.routing").joinpath("billing_catalog.yaml").read_text()
    rows = yaml.safe_load(text)
    assert isinstance(rows, list)
    return rows


def builtin_catalog() -> Catalog:
    return Catalog(app.builtin_catalog())


# --- Resolution order ------------------------------------------------------------------------


def test_auth_specific_entry_beats_a_provider_wide_one_listed_before_it() -> None:
    catalog = Catalog(
        [
            CatalogEntry("vendor", None, METERED, PAID, "keys are metered"),
            CatalogEntry("vendor", "oauth", SUB, HARD, "logins use the plan"),
        ]
    )
    assert catalog.classify("vendor", "oauth").billing is SUB
    assert catalog.classify("vendor", "apikey").billing is METERED


@pytest.mark.parametrize("provider", ["anthropic", "codex", "openai", "never-heard-of-it"])
def test_no_credential_is_keyless_whatever_the_provider_and_its_entries(provider: str) -> None:
    catalog = Catalog([CatalogEntry(provider, "none", METERED, PAID, "would be wrong")])
    verdict = catalog.classify(provider, "none")
    assert verdict is KEYLESS
    assert verdict.overage is HARD
    assert verdict.costs_nothing_extra


def test_uncurated_connection_is_unknown_and_counts_as_metered() -> None:
    verdict = Catalog([]).classify("brand-new", "oauth")
    assert (verdict.billing, verdict.overage, verdict.entry) == (
        BillingClass.UNKNOWN,
        Overage.UNKNOWN,
        "none",
    )
    assert "assumed metered" in verdict.reason
    assert not verdict.costs_nothing_extra
    assert rung_for(verdict, Tier.FREE) is Rung.FREE
    assert rung_for(verdict, Tier.PREMIUM) is Rung.PREMIUM


def test_an_entry_for_another_auth_does_not_classify_this_one() -> None:
    catalog = Catalog([CatalogEntry("vendor", "oauth", SUB, HARD, "logins")])
    assert catalog.classify("vendor", "apikey").billing is BillingClass.UNKNOWN


@pytest.mark.parametrize(
    ("permitted", "overage"),
    [(True, PAID), (False, HARD), (None, Overage.UNKNOWN)],
    ids=["overage-permitted", "overage-refused", "not-read-yet"],
)
def test_live_overage_follows_the_connections_own_flag(
    permitted: bool | None, overage: Overage
) -> None:
    catalog = Catalog([CatalogEntry("seat", None, SUB, LIVE, "per-seat allowance")])
    verdict = catalog.classify("seat", "oauth", overage_permitted=permitted)
    assert verdict.billing is SUB
    assert verdict.overage is overage


def test_fixed_overage_ignores_the_live_flag() -> None:
    catalog = Catalog([CatalogEntry("vendor", None, SUB, HARD, "plan")])
    assert catalog.classify("vendor", "oauth", overage_permitted=True).overage is HARD


def test_overage_written_as_text_becomes_the_enum() -> None:
    catalog = Catalog([CatalogEntry("vendor", None, METERED, "meters-to-paid", "per token")])
    assert catalog.classify("vendor", "apikey").overage is PAID


def test_operator_entries_placed_first_win_over_the_built_in_ones() -> None:
    operator = CatalogEntry(
        "anthropic", "oauth", METERED, PAID, "our org bills extra usage", "config"
    )
    catalog = Catalog([operator, *builtin_catalog().entries])
    verdict = catalog.classify("anthropic", "oauth")
    assert verdict == BillingVerdict(
        METERED, PAID, "our org bills extra usage", "config anthropic+oauth"
    )
    # Everything the operator did not touch still comes from the built-in catalog.
    assert catalog.classify("codex", "oauth").entry == "built-in codex+oauth"


def test_operator_provider_wide_entry_overrides_every_built_in_entry_of_that_provider() -> None:
    # Operator entries form their own tier: once it covers a provider, the built-in
    # entries of that provider, auth-specific ones included, no longer apply.
    operator = CatalogEntry("anthropic", None, METERED, PAID, "all metered here", "config")
    catalog = Catalog([operator, *builtin_catalog().entries])
    assert catalog.classify("anthropic", "oauth").entry == "config anthropic"
    assert catalog.classify("anthropic", "oauth").billing is METERED
    assert catalog.classify("openai", "apikey").entry == "built-in openai"


def test_verdict_names_the_entry_that_decided() -> None:
    catalog = builtin_catalog()
    assert catalog.classify("anthropic", "oauth").entry == "built-in anthropic+oauth"
    assert catalog.classify("openai", "apikey").entry == "built-in openai"


@pytest.mark.parametrize(
    ("billing", "costs_nothing_extra"),
    [(SUB, True), (BillingClass.KEYLESS, True), (METERED, False), (BillingClass.UNKNOWN, False)],
)
def test_costs_nothing_extra_means_subscription_or_keyless(
    billing: BillingClass, costs_nothing_extra: bool
) -> None:
    assert BillingVerdict(billing, HARD, "", "").costs_nothing_extra is costs_nothing_extra


# --- The built-in catalog --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "auth", "billing", "overage"),
    [
        ("anthropic", "oauth", SUB, HARD),
        ("codex", "oauth", SUB, HARD),
        ("gemini-code-assist", "oauth", SUB, HARD),
        ("gemini", "apikey", METERED, PAID),
        ("anthropic", "apikey", METERED, PAID),
        ("openai", "apikey", METERED, PAID),
    ],
)
def test_built_in_catalog_holds_the_curated_plans(
    provider: str, auth: str, billing: BillingClass, overage: Overage
) -> None:
    verdict = builtin_catalog().classify(provider, auth)
    assert (verdict.billing, verdict.overage) == (billing, overage)


@pytest.mark.parametrize(
    ("permitted", "overage"), [(False, HARD), (True, PAID), (None, Overage.UNKNOWN)]
)
def test_built_in_copilot_is_a_subscription_whose_overage_is_read_live(
    permitted: bool | None, overage: Overage
) -> None:
    verdict = builtin_catalog().classify("copilot", "oauth", overage_permitted=permitted)
    assert (verdict.billing, verdict.overage) == (SUB, overage)


def test_built_in_catalog_keeps_unlisted_providers_and_auths_out_of_the_subscription_rung() -> None:
    catalog = builtin_catalog()
    assert catalog.classify("codex", "apikey").billing is BillingClass.UNKNOWN
    assert catalog.classify("openai-compatible", "apikey").billing is BillingClass.UNKNOWN
    assert catalog.classify("ollama", "none").billing is BillingClass.KEYLESS


def test_built_in_rows_are_well_formed_unique_and_justified() -> None:
    rows = builtin_rows()
    for row in rows:
        assert set(row) <= {"provider", "auth", "billing", "overage", "reason", "terms"}, row
        BillingClass(row["billing"])
        assert row["overage"] == LIVE or Overage(row["overage"]) is not None
        assert len(row["reason"].split()) >= 5, row
    keys = Counter((row["provider"], row.get("auth")) for row in rows)
    assert [key for key, count in keys.items() if count > 1] == []
