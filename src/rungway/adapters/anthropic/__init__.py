"""The Anthropic Messages family: API keys, Claude plan logins, and any endpoint that
speaks Messages (a row here each). The adapter is `rungway.adapters.anthropic.messages`.
"""

from __future__ import annotations

from rungway.adapters.anthropic.messages import AnthropicMessagesAdapter
from rungway.adapters.base import ProviderEntry, any_vendor

_MESSAGES = AnthropicMessagesAdapter()

PROVIDERS = {
    "anthropic": ProviderEntry(_MESSAGES, "https://api.anthropic.com"),
    "anthropic-compatible": any_vendor(_MESSAGES),
}
"""The registry rows of the providers that speak Anthropic's Messages API."""
