"""Secrets never reach a log line: known values, bearer headers and key shapes are masked."""

from __future__ import annotations

import logging
from collections.abc import Callable

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rungway.credentials.redaction import (
    _SHAPES,
    MASK,
    _known,
    add_secrets,
    install_redaction,
    redact,
    redact_bytes,
)

log = logging.getLogger("rungway.test.redaction")


def test_known_values_and_credential_shapes_are_masked() -> None:
    add_secrets(["plain-known-secret-value"])
    line = (
        "sent plain-known-secret-value with Authorization: Bearer abc.def-ghi, "
        "x-api-key sk-ant-api03-abcdefghijklmnop and token gho_abcdefghijklmnop1234"
    )
    masked = redact(line)
    for secret in ("plain-known-secret-value", "abc.def-ghi", "sk-ant-api03", "gho_abcdef"):
        assert secret not in masked
    assert masked.count(MASK) == 4
    assert redact("a line about tokens and keys, 5h window") == (
        "a line about tokens and keys, 5h window"
    )


@pytest.mark.parametrize(
    "secret",
    [
        "AIzaSyD-abcdefghijklmnopqrstuvwxyz01234",
        "ya29.a0AfB_byC-abcdefghijklmnop",
        "1//0gAbCdEfGhIjKlMnOpQrStUvWxYz",
    ],
    ids=["api-key", "access-token", "refresh-token"],
)
def test_google_credential_shapes_are_masked(secret: str) -> None:
    echoed = f'{{"error":{{"message":"API key not valid: {secret}","status":"INVALID"}}}}'
    masked = redact(echoed)
    assert secret not in masked
    assert masked == echoed.replace(secret, MASK)


def test_short_values_are_not_masked_by_value() -> None:
    add_secrets(["abc"])
    assert redact("abc abc") == "abc abc"


def test_log_records_are_masked_before_any_handler_sees_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    install_redaction(["rw-admin-secret-for-logs"])
    with caplog.at_level(logging.INFO, logger="rungway.test.redaction"):
        log.info("admin key %s in header %s", "rw-admin-secret-for-logs", "Bearer s3cr3t-value")
        try:
            raise ValueError("Authorization: Bearer from-an-exception-123")
        except ValueError:
            log.exception("upstream failed")
    text = caplog.text
    assert "rw-admin-secret-for-logs" not in text
    assert "s3cr3t-value" not in text
    assert "from-an-exception-123" not in text
    assert MASK in text
    assert "upstream failed" in text


def test_an_upstream_body_is_masked_and_stays_json() -> None:
    add_secrets(["rw-body-known-secret"])
    message = (
        'Incorrect key rw-body-known-secret; sent "Authorization: Bearer abc\\"def" and '
        "sk-proj-abcdefghijklmnop\nnext line, caf\u00e9"
    )
    body = orjson.dumps({"error": {"message": message, "type": "invalid_request_error"}})
    masked = redact_bytes(body)
    parsed = orjson.loads(masked)
    assert parsed["error"]["type"] == "invalid_request_error"
    text = parsed["error"]["message"]
    for secret in ("rw-body-known-secret", "abc", "sk-proj-abcdefghijklmnop"):
        assert secret not in text
    assert text.endswith("next line, caf\u00e9")


def test_a_body_with_nothing_to_mask_is_returned_as_it_is() -> None:
    body = b'{"error":{"message":"Overloaded"}}\xff\xfe'
    assert redact_bytes(body) is body
    assert redact_bytes(b"\xffBearer abcdefgh \xfe") == b"\xffBearer " + MASK.encode() + b" \xfe"


# Text made of credentials of every shape, their opening words alone, key-like characters
# and separators, each piece in any case: most draws hold a shape or part of one.
_CREDENTIALS = [
    "Bearer abc.def",
    "token abcdefghij",
    "sk-ant-api03-abcdefghijklmnop",
    "gho_abcdefghijklmnop",
    "ghp_abcdefghijklmnop",
    "ghr_abcdefghijklmnop",
    "ghs_abcdefghijklmnop",
    "ghu_abcdefghijklmnop",
    "github_pat_abcdefghijklmnop",
    "eyJhbGciOiJIUzI1.eyJzdWIi.sig",
    "AIzaSyD-abcdefghijklmnopqrstuvwxyz01234",
    "ya29.a0AfB_byC-abcdefghijklmnop",
    "1//0gabcdefghijklmnopqrstu",
]
_PIECES = st.sampled_from(
    [
        *_CREDENTIALS,
        "bearer ",
        "token ",
        "sk-",
        "ghp_",
        "eyJ",
        "AIza",
        "ya29.",
        "1//",
        "abcdefghij",
        "0123456789",
        "_-",
        ".",
        "/",
        " ",
        ",",
        '"',
        "\\",
        "\u212a",  # the Kelvin sign, which a case-insensitive `k` matches
        "é",
    ]
)
_CASES: st.SearchStrategy[Callable[[str], str]] = st.sampled_from(
    [str, str.upper, str.lower, str.swapcase]
)
_TEXT = st.lists(st.tuples(_PIECES, _CASES).map(lambda drawn: drawn[1](drawn[0])), max_size=12)


@settings(max_examples=400, deadline=None)
@given(_TEXT.map("".join))
def test_masking_is_the_same_as_the_shapes_pattern_over_the_whole_text(text: str) -> None:
    # `redact` skips the pattern when no shape can start in the text; it must mask exactly
    # what the pattern alone would.
    pattern = _known.pattern  # values other tests made known are masked first
    expected = _SHAPES.sub(MASK, pattern.sub(MASK, text) if pattern is not None else text)
    assert redact(text) == expected


@pytest.mark.parametrize("case", [str.upper, str.lower, str.swapcase])
@pytest.mark.parametrize("credential", _CREDENTIALS)
def test_each_shape_alone_is_masked_in_any_case(
    credential: str, case: Callable[[str], str]
) -> None:
    text = f"key {case(credential)} sent"
    assert redact(text) == _SHAPES.sub(MASK, text) != text


def test_a_shape_behind_a_non_ascii_letter_is_still_masked() -> None:
    assert redact("key \u212aey s\u212a-abcdefghijklmnop") == _SHAPES.sub(
        MASK, "key \u212aey s\u212a-abcdefghijklmnop"
    )
    assert MASK in redact("é Bearer abcdefgh")
