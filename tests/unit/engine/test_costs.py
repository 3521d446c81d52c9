"""Request costs from recorded responses of each upstream API, to the micro-dollar.

Each case in `tests/fixtures/costs/` is one response as the upstream sends it (a JSON body,
or a stream's raw SSE frames). It goes through the adapter the gateway uses for its
provider, and then through `price`, exactly as a request is recorded. The token counts must
match the case's exactly, and both costs must match its hand-computed values within a
micro-dollar.

`price` reads the list rates in force today. Every model here has a single undated entry in
the pinned price table, so today's rates are the rates of any date; a test below fails if a
table update ever dates one of them.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from rungway.adapters.base import Connection, EventKind
from rungway.adapters.registry import provider_entry
from rungway.engine.planning import Route
from rungway.engine.spending import price
from rungway.pricing import rates_for
from rungway.protocol.auth import Auth
from rungway.protocol.sse import SseSplitter
from rungway.protocol.usage import ReportedUsage
from rungway.routing.resolve import Target
from rungway.routing.rungs import Rung
from tests.unit.adapters.calls import call_of

FIXTURES = Path(__file__).parents[2] / "fixtures" / "costs"
MICRO_DOLLAR = 1e-6
# Feeding the stream in small pieces splits events (and lines) across reads, as sockets do.
READ_SIZE = 37


def _cases() -> list[Any]:
    params = []
    for file in sorted(FIXTURES.glob("*.json")):
        for case in json.loads(file.read_text()):
            params.append(pytest.param(case, id=f"{file.stem}: {case['name']}"))
    return params


CASES = _cases()


def _route(case: dict[str, Any]) -> Route:
    """The route a request for the case's model takes on the case's rung."""
    provider: str = case["provider"]
    model: str = case["model"]
    rung = Rung[case["rung"].upper()]
    entry = provider_entry(provider)
    connection = Connection(
        id=f"{provider}-{rung.label}",
        provider=provider,
        auth=Auth.OAUTH if rung is Rung.SUBSCRIPTION else Auth.APIKEY,
        secret=SecretStr("test-credential"),
        base_url=entry.default_base_url or "http://upstream.test",
        models=frozenset({model}),
    )
    return Route(Target(connection.id, model), connection, entry.adapter, rung)


def _stream_usage(route: Route, case: dict[str, Any]) -> ReportedUsage:
    """Watch the case's stream as the dispatcher does; check which events the client loses."""
    body: dict[str, Any] = case["client_request"]
    request = route.adapter.build_request(call_of(route.connection, body, model=route.target.model))
    watcher = route.adapter.watch_stream(strip_usage_chunk=request.strip_usage_chunk)
    raw = "".join(case["stream"]).encode()
    splitter = SseSplitter()
    kinds: list[EventKind] = []
    for start in range(0, len(raw), READ_SIZE):
        for event in splitter.feed(raw[start : start + READ_SIZE]):
            kinds.append(watcher.see(event))
    assert splitter.pending == b""
    assert watcher.failure is None
    assert watcher.finished
    dropped = [index for index, kind in enumerate(kinds) if kind is EventKind.DROP]
    assert dropped == case["dropped"]
    return watcher.usage


def _usage(route: Route, case: dict[str, Any]) -> ReportedUsage:
    if "stream" in case:
        return _stream_usage(route, case)
    return route.adapter.read_usage(case["response"])


@pytest.mark.parametrize("case", CASES)
def test_usage_and_costs_match_the_hand_computed_values(case: dict[str, Any]) -> None:
    route = _route(case)
    usage = _usage(route, case)
    # Every count in the recorded answers is one: none reads as invalid.
    assert asdict(usage) == {**case["expected_usage"], "invalid": None}

    costs = price(route, usage)

    assert costs.incremental == pytest.approx(case["expected_incremental_usd"], abs=MICRO_DOLLAR)
    if case["expected_list_price_usd"] is None:
        assert costs.list_price is None
    else:
        assert costs.list_price == pytest.approx(case["expected_list_price_usd"], abs=MICRO_DOLLAR)


@pytest.mark.parametrize("case", CASES)
def test_the_hand_computation_uses_the_tables_rates(case: dict[str, Any]) -> None:
    """The rates each case's arithmetic names are the table's, on any date."""
    stated: dict[str, float] | None = case["rates_per_mtok"]
    rates = rates_for(case["provider"], case["model"])
    if stated is None:
        assert rates is None
        assert case["expected_list_price_usd"] is None
        return
    assert rates is not None
    assert {
        "input": rates.input[0],
        "output": rates.output[0],
        "cache_read": rates.cache_read[0],
        "cache_write": rates.cache_write[0],
    } == pytest.approx(stated, abs=1e-12)
    # No dated entry: the rates `price` finds today are the rates of every other day.
    for day in (date(2023, 1, 1), date(2099, 12, 31)):
        assert rates_for(case["provider"], case["model"], on=day) == rates
    # The stated rates times the expected counts give the stated list price: the fixture's
    # arithmetic holds together.
    tokens = case["expected_usage"]
    whole_input = (
        tokens["input_tokens"] + tokens["cache_read_tokens"] + tokens["cache_write_tokens"]
    )
    assert all(whole_input <= start for start, _ in rates.input[1]), "past a long-context step"
    by_hand = (
        tokens["input_tokens"] * stated["input"]
        + tokens["output_tokens"] * stated["output"]
        + tokens["cache_read_tokens"] * stated["cache_read"]
        + tokens["cache_write_tokens"] * stated["cache_write"]
    ) / 1_000_000
    assert by_hand == pytest.approx(case["expected_list_price_usd"], abs=1e-12)


def test_every_upstream_api_is_covered_streaming_and_not() -> None:
    """Costs are proven for each upstream family, for complete responses and for streams."""
    seen = {(case.values[0]["provider"], "stream" in case.values[0]) for case in CASES}
    for provider in ("openai", "anthropic", "openrouter"):
        assert (provider, True) in seen
        assert (provider, False) in seen
