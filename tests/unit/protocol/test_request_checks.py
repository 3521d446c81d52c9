"""The limits every request is held to."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from rungway.protocol import request_checks as checks


def _nested(depth: int) -> dict[str, Any]:
    """An object nested `depth` levels deep, itself the first."""
    body: dict[str, Any] = {"a": 1}
    for _ in range(depth - 1):
        body = {"a": body}
    return body


def test_the_encoder_refuses_exactly_past_the_depth_the_padding_assumes() -> None:
    orjson.dumps(_nested(checks.ENCODER_DEPTH))
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps(_nested(checks.ENCODER_DEPTH + 1))


def test_a_body_at_the_limit_is_encoded_and_one_past_it_is_not() -> None:
    at_limit = _nested(checks.MAX_DEPTH)
    assert checks.encode_within_depth(at_limit) == orjson.dumps(at_limit)
    assert checks.encode_within_depth(_nested(checks.MAX_DEPTH + 1)) is None
    assert checks.encode_within_depth({"a": [[[[]]]]}) == b'{"a":[[[[]]]]}'


def test_a_key_sent_twice_is_encoded_once_with_the_value_read() -> None:
    body = orjson.loads(b'{"max_tokens": 1, "model": "m", "max_tokens": 9}')
    assert checks.encode_within_depth(body) == b'{"max_tokens":9,"model":"m"}'


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("m" * checks.MAX_MODEL_CHARS, None),
        ("m" * (checks.MAX_MODEL_CHARS + 1), "is 257 characters long"),
        ("", "non-empty string, not a string"),
        (7, "not a number"),
    ],
)
def test_model_names(value: object, problem: str | None) -> None:
    found = checks.model_name(value)
    assert found == problem if problem is None else problem in (found or "")


@pytest.mark.parametrize(
    ("value", "ok"),
    [(1, True), (2**31 - 1, True), (2**31, False), (0, False), (True, False), (1.0, False)],
)
def test_output_limits(value: object, *, ok: bool) -> None:
    assert (checks.output_limit(value) is None) is ok
