"""Gemini's paths split once into model and method, and its client keys in the query."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from rungway.server.auth import ClientKeys, query_key, without_key
from rungway.server.gemini_routes import gemini_hint, split


@pytest.mark.parametrize(
    ("path", "parts"),
    [
        ("/v1beta/models", ("", "")),
        ("/v1/models", ("", "")),
        ("/v1beta/models/gemini-2.5-pro", ("gemini-2.5-pro", "/")),
        ("/v1beta/models/gemini-2.5-pro:generateContent", ("gemini-2.5-pro", ":generateContent")),
        (
            "/v1/models/auto/thrifty:streamGenerateContent",
            ("auto/thrifty", ":streamGenerateContent"),
        ),
        # A model id with a colon of its own keeps it: the method is after the last one.
        ("/v1beta/models/deepseek/r1:free:countTokens", ("deepseek/r1:free", ":countTokens")),
        ("/v1beta/modelsx", None),
        ("/v1beta/tunedModels/x:generateContent", None),
        ("/v1/chat/completions", None),
    ],
)
def test_a_path_splits_into_model_and_method(path: str, parts: tuple[str, str] | None) -> None:
    assert split(path) == parts


def test_a_client_key_is_read_from_google_header_or_query_and_kept_out_of_the_query() -> None:
    keys = ClientKeys({"gem": SecretStr("rk-1")})
    assert keys.identify({"x-goog-api-key": "rk-1"}) == "gem"
    assert keys.identify({}, "alt=sse&key=rk-1") == "gem"
    assert keys.identify({}, "key=rk-2") is None
    assert keys.identify({}, "alt=sse") is None
    assert query_key("alt=sse&key=a%2Bb") == "a+b"
    assert without_key("alt=sse&key=rk-1") == "alt=sse"
    assert without_key("key=rk-1") == ""
    assert without_key("beta=true") == "beta=true"


def test_a_missed_gemini_method_path_gets_a_base_url_hint() -> None:
    assert gemini_hint("/v1beta/v1beta/models/m:generateContent") is not None
    assert gemini_hint("/gemini/models/m:streamGenerateContent") is not None
    assert gemini_hint("/v1beta/v1beta/models/m:embedContent") is None
    assert gemini_hint("/v2/chat/completions") is None
