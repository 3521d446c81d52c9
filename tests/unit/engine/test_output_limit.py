"""An output limit the upstream refuses is found in its words and asked for again within
it, wherever the request's API keeps that limit (Gemini's sits inside generationConfig)."""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

import orjson
import pytest
from pydantic import SecretStr

from rungway.adapters.base import Connection
from rungway.adapters.registry import provider_entry
from rungway.engine.call import Call, Reply
from rungway.engine.output_limit import output_limit_in, within_output_limit
from rungway.engine.planning import Route
from rungway.protocol.api import Api
from rungway.protocol.auth import Auth
from rungway.routing.resolve import Target
from rungway.routing.rungs import Rung
from rungway.sim import Scenario, SimUpstream
from tests.unit.engine.world import gateway_of, plan_with

GEMINI_REFUSAL = (
    "Unable to submit request because it has a maxOutputTokens value of 100000 but the "
    "supported range is from 1 (inclusive) to 65537 (exclusive). Update the value and try again."
)


@pytest.mark.parametrize(
    ("message", "limit"),
    [
        ("This model supports at most 8192 completion tokens, whereas you provided 9000", 8192),
        ("max_tokens: 32000 > 8192, which is the maximum allowed number of output tokens", 8192),
        ("Invalid max_tokens value, the valid range of max_tokens is [1, 8192]", 8192),
        (GEMINI_REFUSAL, 65536),
        ("Request contains an invalid argument.", None),
    ],
)
def test_the_limit_is_read_from_each_upstreams_words(message: str, limit: int | None) -> None:
    assert output_limit_in(message) == limit


def _call(api: Api, body: dict[str, Any]) -> Call:
    return Call(
        request_id="req-1",
        api=api,
        body=body,
        raw_body=orjson.dumps(body),
        stream=False,
        headers={},
        query="",
        client_key=None,
        started_at=time.time(),
        started=time.perf_counter(),
    )


GEMINI_BODY = {
    "model": "gemini-2.5-flash",
    "stream": False,
    "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
    "generationConfig": {"temperature": 0.5, "maxOutputTokens": 100000},
}


CONTENTS = GEMINI_BODY["contents"]


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        # The limit the client asked for is lowered; the rest of its config stays.
        (
            {"generationConfig": {"temperature": 0.5, "maxOutputTokens": 100000}},
            {"generationConfig": {"temperature": 0.5, "maxOutputTokens": 65536}},
        ),
        # No limit asked for: one is added beside what the config holds.
        (
            {"generationConfig": {"temperature": 0.5}},
            {"generationConfig": {"temperature": 0.5, "maxOutputTokens": 65536}},
        ),
        # The snake_case spelling Google also takes is changed in place, not doubled.
        (
            {"generation_config": {"max_output_tokens": 100000}},
            {"generation_config": {"max_output_tokens": 65536}},
        ),
    ],
)
def test_a_gemini_limit_is_set_inside_its_generation_config(
    config: dict[str, Any], expected: dict[str, Any]
) -> None:
    body = {"model": "gemini-2.5-flash", "stream": False, "contents": CONTENTS, **config}
    before = copy.deepcopy(body)
    smaller = within_output_limit(_call(Api.GEMINI, body), 65536)
    assert smaller is not None
    assert smaller.body == {**before, **expected}
    assert orjson.loads(smaller.raw_body) == smaller.body
    assert body == before  # the client's own body is left as it was


def test_a_gemini_request_within_its_limit_is_not_asked_again() -> None:
    body = {**GEMINI_BODY, "generationConfig": {"maxOutputTokens": 100}}
    assert within_output_limit(_call(Api.GEMINI, body), 65536) is None


def test_a_gemini_upstream_refusing_the_limit_is_asked_again_within_it() -> None:
    scenario = Scenario.model_validate(
        {
            "name": "gemini",
            "api": "gemini",
            "auth": {"kind": "x-api-key", "token": "AIza-test"},
            "models": [{"id": "gemini-2.5-flash", "max_output_tokens": 65536}],
        }
    )
    gateway = gateway_of(g=SimUpstream(scenario))
    connection = Connection(
        id="g",
        provider="gemini",
        auth=Auth.APIKEY,
        secret=SecretStr("AIza-test"),
        base_url="http://g.test/v1beta",
        models=frozenset({"gemini-2.5-flash"}),
    )
    route = Route(
        Target("g", "gemini-2.5-flash"), connection, provider_entry("gemini").adapter, Rung.FREE
    )
    outcome = asyncio.run(gateway.engine.complete(_call(Api.GEMINI, GEMINI_BODY), plan_with(route)))
    assert isinstance(outcome, Reply)
    assert outcome.status == 200
    first, second = (orjson.loads(request.body) for request in gateway.transport.sent)
    assert first["generationConfig"]["maxOutputTokens"] == 100000
    assert second["generationConfig"]["maxOutputTokens"] == 65536
    [row] = gateway.ledger.rows
    assert (row.connection_id, row.outcome) == ("g", "ok")
    assert gateway.nothing_held()
