"""A 404 from an OpenAI-family base URL without its version path names the URL meant."""

from __future__ import annotations

import orjson
import pytest

from rungway.adapters.base import hint_for_base_url
from rungway.adapters.openai.errors import has_version_path
from rungway.adapters.registry import provider_entry

INVALID_URL = orjson.dumps(
    {
        "error": {
            "message": "Invalid URL (POST /chat/completions)",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }
)
MODEL_NOT_FOUND = orjson.dumps(
    {
        "error": {
            "message": "The model `gpt-none` does not exist or you do not have access to it.",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
    }
)


@pytest.mark.parametrize(
    ("url", "versioned"),
    [
        ("https://api.openai.com/v1", True),
        ("https://api.groq.com/openai/v1", True),
        ("https://openrouter.ai/api/v1/", True),
        ("https://generativelanguage.googleapis.com/v1beta/openai", True),
        ("https://open.bigmodel.cn/api/paas/v4", True),
        ("https://api.openai.com", False),
        ("http://127.0.0.1:11434/", False),
        ("https://example.com/version1/openai", False),
    ],
)
def test_a_version_path_is_a_segment_naming_a_version(url: str, versioned: bool) -> None:
    assert has_version_path(url) is versioned


@pytest.mark.parametrize("provider", ["openai-compatible", "openai-responses", "openrouter"])
def test_a_404_without_a_version_path_suggests_v1(provider: str) -> None:
    adapter = provider_entry(provider).adapter
    hint = hint_for_base_url(adapter, "https://api.openai.com", 404, INVALID_URL)
    assert hint == "did you mean https://api.openai.com/v1?"
    assert hint_for_base_url(adapter, "http://127.0.0.1:9/", 404, b"Not Found") == (
        "did you mean http://127.0.0.1:9/v1?"
    )


@pytest.mark.parametrize(
    ("provider", "url", "status", "body"),
    [
        pytest.param("openai", "https://api.openai.com/v1", 404, INVALID_URL, id="has-v1"),
        pytest.param("openai", "https://api.openai.com", 400, INVALID_URL, id="not-404"),
        pytest.param(
            "openai", "https://api.openai.com", 404, MODEL_NOT_FOUND, id="model-not-found"
        ),
        # These families' own base URLs have no version path.
        pytest.param("copilot", "https://api.githubcopilot.com", 404, b"", id="copilot"),
        pytest.param("codex", "https://chatgpt.com/backend-api/codex", 404, b"", id="codex"),
        pytest.param("anthropic", "https://api.anthropic.com", 404, b"", id="anthropic"),
    ],
)
def test_no_hint_where_the_base_url_is_not_the_problem(
    provider: str, url: str, status: int, body: bytes
) -> None:
    assert hint_for_base_url(provider_entry(provider).adapter, url, status, body) is None
