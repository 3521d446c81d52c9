"""List prices come from the bundled genai-prices table, per provider, offline."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import date
from decimal import Decimal

import pytest

from rungway.pricing import ModelPrice, list_price


def _price(
    input_rate: str, output_rate: str, cache_read: str | None = None, cache_write: str | None = None
) -> ModelPrice:
    return ModelPrice(
        input_per_mtok=Decimal(input_rate),
        output_per_mtok=Decimal(output_rate),
        cache_read_per_mtok=None if cache_read is None else Decimal(cache_read),
        cache_write_per_mtok=None if cache_write is None else Decimal(cache_write),
        source="genai-prices",
    )


SONNET_4_5 = _price("3", "15", "0.3", "3.75")


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        ("anthropic", "claude-sonnet-4-5", SONNET_4_5),
        ("anthropic", "claude-haiku-4-5", _price("1", "5", "0.1", "1.25")),
        ("openai", "gpt-4o", _price("2.5", "10", "1.25")),
        ("openai", "gpt-4o-mini", _price("0.15", "0.6", "0.075")),
        ("groq", "llama-3.3-70b-versatile", _price("0.59", "0.79")),
        ("gemini", "gemini-2.5-flash", _price("0.3", "2.5", "0.03")),
    ],
)
def test_provider_list_price_is_read_from_the_bundled_table(
    provider: str, model: str, expected: ModelPrice
) -> None:
    assert list_price(provider, model) == expected


def test_dated_claude_name_resolves_to_its_family_price() -> None:
    assert list_price("anthropic", "claude-sonnet-4-5-20250929") == SONNET_4_5


def test_context_tiered_price_takes_the_smallest_context_rate() -> None:
    # Sonnet 4.5 doubles its input rate past 200K tokens of context; the list price is the base.
    price = list_price("anthropic", "claude-sonnet-4-5")
    assert price is not None
    assert price.input_per_mtok == Decimal("3")


def test_codex_is_priced_as_openai_models() -> None:
    assert list_price("codex", "gpt-5-codex") == _price("1.25", "10", "0.125")
    assert list_price("codex", "gpt-4o") == list_price("openai", "gpt-4o")


def test_deepseek_price_is_the_dearest_hour_of_the_day() -> None:
    # deepseek-chat has an off-peak discount ($0.135 in); the tier must hold at peak hours too.
    assert list_price("deepseek", "deepseek-chat") == _price("0.27", "1.1", "0.07")


def test_compatible_and_unknown_providers_match_by_model_name() -> None:
    assert list_price("openai-compatible", "deepseek-chat") == _price("0.27", "1.1", "0.07")
    assert list_price("anthropic-compatible", "claude-sonnet-4-5-20250929") == SONNET_4_5
    assert list_price("someone-elses-proxy", "gpt-4o-mini") == _price("0.15", "0.6", "0.075")


def test_openrouter_free_variant_has_a_zero_price() -> None:
    price = list_price("openrouter", "meta-llama/llama-3.3-70b-instruct:free")
    assert price == _price("0", "0")
    assert price.is_zero


def test_entry_without_any_price_is_free() -> None:
    # The Gemini API lists Gemma with no rates at all: it costs nothing.
    assert list_price("gemini", "gemma-3") == _price("0", "0")


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("openai", "no-such-model-anywhere"),
        ("openai-compatible", "no-such-model-anywhere"),
        ("ollama", "llama3.1:8b"),
        ("copilot", "gpt-4o"),
        # A provider's own table is authoritative: no borrowing another vendor's price.
        ("groq", "claude-sonnet-4-5"),
    ],
)
def test_unpriced_models_have_no_list_price(provider: str, model: str) -> None:
    assert list_price(provider, model) is None


def test_dated_price_changes_apply_from_their_start_date() -> None:
    before = list_price("gemini", "gemini-3.6-flash", on=date(2026, 12, 31))
    after = list_price("gemini", "gemini-3.6-flash", on=date(2027, 1, 1))
    assert before == _price("0.75", "3.75", "0.075")
    assert after == _price("1.5", "7.5", "0.15")


def test_time_of_day_surcharge_counts_after_a_dated_change() -> None:
    # From 2026-09-10 deepseek-v4-flash lists $0.15 in, with $0.30 at two daily peak windows.
    assert list_price("deepseek", "deepseek-v4-flash", on=date(2026, 9, 10)) == _price(
        "0.3", "1.2", "0.006"
    )


def test_lookups_are_memoised() -> None:
    assert list_price("openai", "gpt-4o") is list_price("openai", "gpt-4o")


def test_lookups_work_with_the_network_refused() -> None:
    # A fresh interpreter whose every socket connect or name lookup raises: importing the package
    # and reading prices must not need either, and must start no price-update thread.
    script = textwrap.dedent(
        """
        import sys, threading

        def refuse(event, args):
            if event in {"socket.connect", "socket.getaddrinfo", "socket.gethostbyname"}:
                raise OSError(f"network refused: {event} {args}")

        sys.addaudithook(refuse)
        import socket

        try:
            socket.create_connection(("127.0.0.1", 9), timeout=1)
        except OSError as refused:
            assert "network refused" in str(refused), refused
        else:
            raise AssertionError("the audit hook let a connection through")

        from rungway.pricing import TierSettings, classify_tier, list_price

        assert list_price("anthropic", "claude-sonnet-4-5") is not None
        assert classify_tier("openai", "gpt-4o-mini", TierSettings()).tier == "cheap"
        assert [t.name for t in threading.enumerate()] == ["MainThread"]
        print("offline ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "offline ok"
