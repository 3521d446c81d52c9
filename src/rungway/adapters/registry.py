"""The one table from provider to adapter and default base URL.

A new OpenAI-compatible vendor is one row here, the same name in `config.Provider`, an entry
in the billing catalog (`routing/billing_catalog.yaml`) and its genai-prices id in
`pricing/prices.py`; a provider that lacks either says why in the tables below.
`tests/unit/adapters/test_registry.py` keeps all of them in step.
"""

from __future__ import annotations

from dataclasses import dataclass

from rungway.adapters.anthropic_messages import AnthropicMessagesAdapter
from rungway.adapters.base import Adapter
from rungway.adapters.codex import CodexAdapter
from rungway.adapters.copilot import CopilotAdapter
from rungway.adapters.gemini import GeminiAdapter
from rungway.adapters.gemini_code_assist import GeminiCodeAssistAdapter
from rungway.adapters.openai_chat import OpenAIChatAdapter
from rungway.adapters.openai_responses import OpenAIResponsesAdapter
from rungway.adapters.openrouter import OpenRouterAdapter


@dataclass(frozen=True, slots=True)
class ProviderEntry:
    """How to reach one provider."""

    adapter: Adapter
    default_base_url: str | None


_OPENAI = OpenAIChatAdapter()
_ANTHROPIC = AnthropicMessagesAdapter()

PROVIDERS: dict[str, ProviderEntry] = {
    "anthropic": ProviderEntry(_ANTHROPIC, "https://api.anthropic.com"),
    "anthropic-compatible": ProviderEntry(_ANTHROPIC, None),
    "codex": ProviderEntry(CodexAdapter(), "https://chatgpt.com/backend-api/codex"),
    "openai": ProviderEntry(_OPENAI, "https://api.openai.com/v1"),
    "openai-compatible": ProviderEntry(_OPENAI, None),
    "openai-responses": ProviderEntry(OpenAIResponsesAdapter(), "https://api.openai.com/v1"),
    "copilot": ProviderEntry(CopilotAdapter(), "https://api.githubcopilot.com"),
    "deepseek": ProviderEntry(_OPENAI, "https://api.deepseek.com/v1"),
    "gemini": ProviderEntry(GeminiAdapter(), "https://generativelanguage.googleapis.com/v1beta"),
    "gemini-code-assist": ProviderEntry(
        GeminiCodeAssistAdapter(), "https://cloudcode-pa.googleapis.com/v1internal"
    ),
    "groq": ProviderEntry(_OPENAI, "https://api.groq.com/openai/v1"),
    "openrouter": ProviderEntry(OpenRouterAdapter(), "https://openrouter.ai/api/v1"),
    "ollama": ProviderEntry(_OPENAI, "http://127.0.0.1:11434/v1"),
}

_ANY_VENDOR = "any vendor's endpoint, whose terms rungway cannot know"

WITHOUT_CATALOG_ENTRY: dict[str, str] = {
    "anthropic-compatible": f"{_ANY_VENDOR}: `unknown`, counted as metered, unless `billing:` says",
    "openai-compatible": f"{_ANY_VENDOR}: `unknown`, counted as metered, unless `billing:` says",
    "ollama": "a local server, normally keyless, and keyless connections never read the catalog",
}
"""Providers with no billing catalog entry, and why none is curated."""

WITHOUT_PRICE_ID: dict[str, str] = {
    "anthropic-compatible": f"{_ANY_VENDOR}: priced by model name alone",
    "openai-compatible": f"{_ANY_VENDOR}: priced by model name alone",
    "copilot": "billed by seat and premium requests, never per token",
    "ollama": "runs models locally, at no per-token price",
}
"""Providers with no genai-prices provider id, and why."""


def provider_entry(provider: str) -> ProviderEntry:
    """The entry for `provider`; config validation guarantees it exists."""
    return PROVIDERS[provider]
