"""Token counts from upstreams: whole numbers from 0 to the bound, or not counts at all.

Every usage reader of every wire API (JSON answers and stream events) reads a count that
is not one as 0 and names it in `invalid`, which bills the request at its ceiling.
"""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rungway.adapters.anthropic.messages import AnthropicMessagesAdapter
from rungway.adapters.codex.adapter import CodexAdapter
from rungway.adapters.gemini.api import GeminiAdapter
from rungway.adapters.openai.chat import OpenAIChatAdapter
from rungway.adapters.openai.responses import OpenAIResponsesAdapter, assemble_response
from rungway.protocol.sse import SseEvent
from rungway.protocol.usage import (
    MAX_REPORTED_COST_USD,
    MAX_TOKEN_COUNT,
    CountReader,
    ReportedUsage,
    reported_cost,
    shown,
    token_count,
    without_bad_counts,
)
from rungway.translate.anthropic_stream import read_usage as read_anthropic
from rungway.translate.gemini_stream import read_usage as read_gemini
from rungway.translate.openai_chat_stream import read_usage as read_chat
from rungway.translate.openai_responses_stream import read_usage as read_responses

NOT_COUNTS: list[Any] = [
    -1,
    -1_000_000,
    MAX_TOKEN_COUNT + 1,
    2**63,
    2**64,
    2**63 - 1,
    1.5,
    -2.0,
    float("nan"),
    float("inf"),
    float("-inf"),
    1e19,
    True,
    False,
    "12",
    "",
    [],
    {},
]


@given(st.integers(0, MAX_TOKEN_COUNT))
def test_a_whole_number_in_range_is_a_count(value: int) -> None:
    assert token_count(value) == value
    assert token_count(float(value)) == value


@given(st.integers().filter(lambda value: not 0 <= value <= MAX_TOKEN_COUNT))
def test_an_integer_out_of_range_is_not_a_count(value: int) -> None:
    assert token_count(value) is None


@given(st.floats().filter(lambda value: not value.is_integer() or not 0 <= value <= 1e9))
def test_a_fraction_or_a_float_out_of_range_is_not_a_count(value: float) -> None:
    assert token_count(value) is None


@given(st.one_of(st.booleans(), st.text(), st.lists(st.integers()), st.none()))
def test_bools_strings_lists_and_null_are_not_counts(value: object) -> None:
    assert token_count(value) is None


@given(st.one_of(st.integers(), st.floats(), st.booleans(), st.text(), st.none()))
def test_a_reader_returns_a_count_or_zero_and_names_what_was_not_one(value: object) -> None:
    count = CountReader()
    read = count.read({"n": value}, "n", absent=7)
    if value is None:
        assert (read, count.invalid) == (7, None)
    elif token_count(value) is None:
        assert read == 0
        assert count.invalid is not None
        assert count.invalid.startswith("n: ")
        assert len(count.invalid) < 100
    else:
        assert (read, count.invalid) == (token_count(value), None)


def test_the_first_field_that_is_not_a_count_is_the_one_named() -> None:
    count = CountReader()
    fields = {"a": 3, "b": -4, "c": "x"}
    assert [count.read(fields, name) for name in fields] == [3, 0, 0]
    assert count.invalid == "b: -4"


def test_a_huge_value_is_quoted_short() -> None:
    assert shown(2**10_000) == "an integer of 10001 bits"
    assert len(shown("x" * 10_000_000)) < 60


@given(st.one_of(st.floats(allow_nan=True), st.integers(), st.booleans(), st.text()))
def test_a_reported_cost_is_a_finite_amount_from_zero_to_the_bound_or_none(
    value: object,
) -> None:
    cost = reported_cost(value)
    if cost is not None:
        assert math.isfinite(cost)
        assert 0 <= cost <= MAX_REPORTED_COST_USD
        assert not isinstance(value, bool)


# Each wire API's usage object with one count replaced by `bad`: (name, JSON reader, where).
def _chat_usage(bad: Any) -> dict[str, Any]:
    return {"prompt_tokens": 10, "completion_tokens": bad, "total_tokens": 10}


def _responses_usage(bad: Any) -> dict[str, Any]:
    details = {"reasoning_tokens": bad}
    return {"input_tokens": 10, "output_tokens": 5, "output_tokens_details": details}


def _anthropic_usage(bad: Any) -> dict[str, Any]:
    return {"input_tokens": 10, "output_tokens": bad}


def _gemini_usage(bad: Any) -> dict[str, Any]:
    return {"promptTokenCount": bad, "candidatesTokenCount": 5}


@pytest.mark.parametrize("bad", NOT_COUNTS, ids=repr)
def test_every_json_reader_marks_a_count_that_is_not_one(bad: Any) -> None:
    read = [
        OpenAIChatAdapter().read_usage({"usage": _chat_usage(bad)}),
        OpenAIResponsesAdapter().read_usage({"usage": _responses_usage(bad)}),
        AnthropicMessagesAdapter().read_usage({"usage": _anthropic_usage(bad)}),
        GeminiAdapter().read_usage({"usageMetadata": _gemini_usage(bad)}),
    ]
    for usage in read:
        assert usage.invalid is not None, usage
        counts = (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            usage.reasoning_tokens,
        )
        assert all(0 <= count <= 3 * MAX_TOKEN_COUNT for count in counts)


@pytest.mark.parametrize("bad", NOT_COUNTS, ids=repr)
def test_every_translation_reader_reads_a_count_that_is_not_one_as_zero(bad: Any) -> None:
    read = [
        read_chat(_chat_usage(bad)),
        read_responses(_responses_usage(bad)),
        read_anthropic(_anthropic_usage(bad)),
        read_gemini(_gemini_usage(bad)),
    ]
    for usage in read:
        assert usage.invalid is not None
        assert min(usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) >= 0


def test_valid_usage_reads_as_it_was_sent() -> None:
    usage = OpenAIChatAdapter().read_usage({"usage": _chat_usage(7)})
    assert usage == ReportedUsage(10, 7)
    assert GeminiAdapter().read_usage({"usageMetadata": _gemini_usage(3.0)}).input_tokens == 3


def _event(name: str | None, data: dict[str, Any]) -> SseEvent:
    raw = orjson.dumps(data)
    head = f"event: {name}\n".encode() if name else b""
    return SseEvent(name, raw, head + b"data: " + raw + b"\n\n")


@pytest.mark.parametrize("bad", [-1_000_000, 2**63, 1.5, True, "9"], ids=repr)
def test_every_stream_watcher_marks_a_final_usage_that_is_not_a_count(bad: Any) -> None:
    chat = OpenAIChatAdapter().watch_stream(strip_usage_chunk=False)
    chat.see(_event(None, {"choices": [], "usage": _chat_usage(bad)}))
    responses = OpenAIResponsesAdapter().watch_stream(strip_usage_chunk=False)
    completed = {"type": "response.completed", "response": {"usage": _responses_usage(bad)}}
    responses.see(_event("response.completed", completed))
    anthropic = AnthropicMessagesAdapter().watch_stream(strip_usage_chunk=False)
    anthropic.see(_event("message_start", {"message": {"usage": _anthropic_usage(1)}}))
    anthropic.see(_event("message_delta", {"usage": _anthropic_usage(bad)}))
    # A later event that leaves the count out keeps the usage invalid.
    anthropic.see(_event("message_delta", {"usage": {"input_tokens": 10}}))
    gemini = GeminiAdapter().watch_stream(strip_usage_chunk=False)
    gemini.see(_event(None, {"candidates": [], "usageMetadata": _gemini_usage(bad)}))
    gemini.see(_event(None, {"candidates": [], "usageMetadata": _gemini_usage(4)}))
    for watcher in (chat, responses, anthropic, gemini):
        assert watcher.usage.invalid is not None, watcher


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["input_tokens", "promptTokenCount", "service_tier", "model", "n"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=20,
)


def _count_fields(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [
            each
            for name, inner in value.items()
            for each in ([inner] if name in ("input_tokens", "promptTokenCount") else [])
            + _count_fields(inner)
        ]
    if isinstance(value, list):
        return [each for inner in value for each in _count_fields(inner)]
    return []


@given(_JSON)
def test_an_answer_without_bad_counts_keeps_its_counts_and_every_other_field(
    value: Any,
) -> None:
    cleaned = without_bad_counts(value)
    for each in _count_fields(cleaned):
        assert each is None or isinstance(each, dict | list) or token_count(each) == each
    if all(
        each is None or isinstance(each, dict | list) or token_count(each) is not None
        for each in _count_fields(value)
    ):
        assert cleaned == value


def test_an_answer_loses_only_the_numbers_that_are_not_counts() -> None:
    usage = {"input_tokens": 10, "output_tokens": -5, "service_tier": "standard"}
    assert without_bad_counts({"id": "m", "usage": usage}) == {
        "id": "m",
        "usage": {"input_tokens": 10, "output_tokens": 0, "service_tier": "standard"},
    }


@pytest.mark.parametrize("bad", [-1, 2**63, 0.5, False, "7"], ids=repr)
def test_a_codex_stream_assembled_for_a_json_client_keeps_its_usage_invalid(bad: Any) -> None:
    completed = {
        "type": "response.completed",
        "response": {"id": "r", "output": [], "usage": _responses_usage(bad)},
    }
    stream = b"event: response.completed\ndata: " + orjson.dumps(completed) + b"\n\n"
    assembled = assemble_response(stream)
    assert isinstance(assembled, dict)
    usage = CodexAdapter().read_usage(assembled)
    assert usage.invalid is not None
    assert without_bad_counts(assembled)["usage"]["output_tokens_details"] == {
        "reasoning_tokens": 0
    }
