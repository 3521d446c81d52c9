"""The OpenAI API family: Chat Completions and Responses with an API key, and the vendors
that speak it at their own base URL (a row here each).

- `chat.py`: Chat Completions (`/chat/completions`) and its stream;
- `responses.py`: the Responses API (`/responses`) and its stream;
- `errors.py`: OpenAI's error bodies, shared by both and by the families built on them.
"""

from __future__ import annotations

from rungway.adapters.base import ProviderEntry, any_vendor
from rungway.adapters.openai.chat import OpenAIChatAdapter
from rungway.adapters.openai.responses import OpenAIResponsesAdapter

_CHAT = OpenAIChatAdapter()

PROVIDERS = {
    "openai": ProviderEntry(_CHAT, "https://api.openai.com/v1"),
    "openai-compatible": any_vendor(_CHAT),
    "openai-responses": ProviderEntry(OpenAIResponsesAdapter(), "https://api.openai.com/v1"),
    "deepseek": ProviderEntry(_CHAT, "https://api.deepseek.com/v1"),
    "groq": ProviderEntry(_CHAT, "https://api.groq.com/openai/v1"),
    "ollama": ProviderEntry(
        _CHAT,
        "http://127.0.0.1:11434/v1",
        without_catalog_entry=(
            "a local server, normally keyless, and keyless connections never read the catalog"
        ),
        without_price_id="runs models locally, at no per-token price",
    ),
}
"""The registry rows of the providers that speak the OpenAI API as OpenAI does."""
