"""The JSONL trace format: a trace written and read back is the same, and every mistake in a
file is named by its line and field."""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rungway.protocol.api import Api
from rungway.protocol.usage import MAX_TOKEN_COUNT
from rungway.whatif.jsonl import read_jsonl, write_jsonl
from rungway.whatif.trace import LAST_AT, TraceError, TraceRequest

TRACE = (
    TraceRequest(1_767_603_600.0, "claude-sonnet-4-5", "anthropic_messages", 12, 640),
    TraceRequest(
        1_767_603_600.25,
        "auto/thrifty",
        "openai_chat",
        300,
        900,
        cache_read_tokens=48_000,
        cache_write_tokens=2_100,
        reasoning_tokens=512,
        stream=True,
        client_key="ci",
    ),
    TraceRequest(1_767_603_961.5, "gemini-2.5-pro", "gemini", 0, 0, client_key=""),
)
GOOD = {"at": 1.5, "model": "m", "api": "openai_chat", "input_tokens": 1, "output_tokens": 2}


def _file(tmp_path: Path, *lines: object) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_bytes(
        b"".join(
            (line.encode() if isinstance(line, str) else orjson.dumps(line)) + b"\n"
            for line in lines
        )
    )
    return path


def _line(**raw: str) -> str:
    """GOOD as a JSON line with `raw` fields written as they are, even where JSON has no
    such number or orjson would not write it."""
    fields = {key: json.dumps(value) for key, value in GOOD.items()} | raw
    return "{" + ", ".join(f'"{key}": {value}' for key, value in fields.items()) + "}"


def test_a_written_trace_reads_back_the_same(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    write_jsonl(TRACE, path)
    assert read_jsonl(path) == TRACE
    lines = path.read_bytes().splitlines()
    assert len(lines) == 3
    # Optional fields at their defaults are left out; set ones are written.
    assert orjson.loads(lines[0]) == {
        "at": 1_767_603_600.0,
        "model": "claude-sonnet-4-5",
        "api": "anthropic_messages",
        "input_tokens": 12,
        "output_tokens": 640,
    }
    assert orjson.loads(lines[1])["stream"] is True
    assert orjson.loads(lines[2])["client_key"] == ""


_COUNT = st.integers(min_value=0, max_value=MAX_TOKEN_COUNT)


@st.composite
def _requests(draw: st.DrawFn) -> TraceRequest:
    output = draw(_COUNT)
    return TraceRequest(
        at=draw(st.floats(min_value=0, max_value=4e9, allow_nan=False)),
        model=draw(st.text(min_size=1)),
        api=draw(st.sampled_from([api.value for api in Api])),
        input_tokens=draw(_COUNT),
        output_tokens=output,
        cache_read_tokens=draw(_COUNT),
        cache_write_tokens=draw(_COUNT),
        reasoning_tokens=draw(st.integers(min_value=0, max_value=output)),
        stream=draw(st.booleans()),
        client_key=draw(st.none() | st.text()),
    )


@settings(deadline=None, max_examples=60)
@given(st.lists(_requests(), max_size=20))
def test_any_trace_reads_back_as_written_in_time_order(requests: list[TraceRequest]) -> None:
    trace = tuple(sorted(requests, key=lambda request: request.at))
    # A folder of its own per example: hypothesis runs them all in one test's tmp_path.
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.jsonl"
        write_jsonl(requests, path)
        assert read_jsonl(path) == trace


def test_missing_optional_fields_take_their_defaults_and_blank_lines_are_skipped(
    tmp_path: Path,
) -> None:
    path = _file(tmp_path, "", GOOD, "   ", {**GOOD, "at": 2, "client_key": None})
    first, second = read_jsonl(path)
    assert first == TraceRequest(1.5, "m", "openai_chat", 1, 2)
    assert (first.cache_read_tokens, first.stream, first.client_key) == (0, False, None)
    assert second.at == 2.0
    assert isinstance(second.at, float)


def test_requests_out_of_order_are_sorted_keeping_ties_in_file_order(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        {**GOOD, "at": 5, "model": "late"},
        {**GOOD, "at": 1, "model": "tie-first"},
        {**GOOD, "at": 1, "model": "tie-second"},
    )
    assert [request.model for request in read_jsonl(path)] == ["tie-first", "tie-second", "late"]


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ({**GOOD, "tokens": 3}, "3: unknown field 'tokens'"),
        ({key: value for key, value in GOOD.items() if key != "api"}, "3: field 'api' is missing"),
        ({**GOOD, "at": "noon"}, "3: field 'at' must be a number"),
        ({**GOOD, "at": True}, "3: field 'at' must be a number"),
        ({**GOOD, "at": 1e15}, "3: field 'at' must be a number of epoch seconds from 0 to 25337"),
        ({**GOOD, "at": -1}, "3: field 'at' must be a number of epoch seconds from 0"),
        ({**GOOD, "at": 2**64 - 1}, "3: field 'at' must be a number of epoch seconds from 0"),
        (_line(at="NaN"), "3: field 'at' must be a number of epoch seconds from 0 to"),
        (_line(at="-Infinity"), "3: field 'at' must be a number of epoch seconds from 0 to"),
        (_line(at="1e400"), "3: field 'at' must be a number of epoch seconds from 0 to"),
        (_line(at="1" + "0" * 30), "3: field 'at' must be a number of epoch seconds from 0 to"),
        (_line(input_tokens="1" + "0" * 30), "3: field 'input_tokens' must be a whole number"),
        ({**GOOD, "output_tokens": 2**63}, "3: field 'output_tokens' must be a whole number"),
        (
            {**GOOD, "cache_write_tokens": MAX_TOKEN_COUNT + 1},
            f"3: field 'cache_write_tokens' must be a whole number from 0 to {MAX_TOKEN_COUNT}",
        ),
        ({**GOOD, "model": ["x" * 1000]}, "3: field 'model' must be a string, not ['xxx"),
        (_line(at="[" * 5000 + "]" * 5000), "3: not a JSON object"),
        ({**GOOD, "model": 7}, "3: field 'model' must be a string"),
        ({**GOOD, "input_tokens": 1.5}, "3: field 'input_tokens' must be a whole number"),
        ({**GOOD, "cache_read_tokens": -1}, "3: field 'cache_read_tokens' must be a whole"),
        ({**GOOD, "stream": "yes"}, "3: field 'stream' must be true or false"),
        ({**GOOD, "client_key": 4}, "3: field 'client_key' must be a string or null"),
        ({**GOOD, "api": "soap"}, "3: api must be one of"),
        ({**GOOD, "reasoning_tokens": 3}, "3: reasoning_tokens (3) are part of output_tokens"),
        ([1, 2], "3: a line holds one JSON object, not list"),
        ("{not json", "3: not a JSON object"),
    ],
)
def test_a_bad_request_is_named_by_file_line_and_field(
    tmp_path: Path, line: object, said: str
) -> None:
    path = _file(tmp_path, GOOD, "", line, GOOD)
    with pytest.raises(TraceError) as raised:
        read_jsonl(path)
    assert str(raised.value).startswith(f"{path}:{said}")


_JSON: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats()  # NaN and the infinities are written as NaN, Infinity and -Infinity
    | st.sampled_from([LAST_AT, LAST_AT + 1, MAX_TOKEN_COUNT, MAX_TOKEN_COUNT + 1, 2**63])
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)


@settings(deadline=None, max_examples=150)
@given(st.dictionaries(st.sampled_from([*sorted(GOOD), "stream", "client_key"]), _JSON, min_size=1))
def test_any_json_in_any_field_gives_a_request_or_an_error_naming_its_line_and_field(
    changed: dict[str, Any],
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.jsonl"
        path.write_text(json.dumps({**GOOD, **changed}) + "\n")
        try:
            (request,) = read_jsonl(path)
        except TraceError as error:
            message = str(error)
            assert message.startswith(f"{path}:1: ")
            assert any(name in message for name in changed), message
            assert len(message) < 400
            return
    # A request taken can be replayed: its time and the calendar a month past it exist.
    assert 0 <= request.at <= LAST_AT
    assert datetime.fromtimestamp(request.at, UTC) + timedelta(days=31)
    assert request.tokens <= 4 * MAX_TOKEN_COUNT


def test_a_missing_file_is_a_trace_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"nothing\.jsonl: No such file"):
        read_jsonl(tmp_path / "nothing.jsonl")
