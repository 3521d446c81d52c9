"""Quota state: readers of upstream signals, and the store, cooldowns and breakers.

The readers exported here are pure: each takes what the upstream sent and `now`, the
instant the response was received, and returns `QuotaWindow` readings for the store (the
usage-endpoint readers exported here wrap theirs in a `PolledReading`).
"""

from rungway.quota.errors import (
    NO_SIGNAL,
    ErrorSignal,
    read_anthropic_unified_error,
    read_codex_error,
    read_gemini_error,
    read_gemini_minute_window,
    read_openrouter_error,
    refuses_client,
)
from rungway.quota.headers import (
    NO_OVERAGE,
    OverageReading,
    codex_window_name,
    fold_headers,
    read_anthropic_api_key,
    read_anthropic_overage,
    read_anthropic_unified,
    read_codex,
    read_codex_credits,
    read_x_ratelimit,
)
from rungway.quota.resets import parse_duration, parse_reset
from rungway.quota.usage import (
    PolledReading,
    read_codex_usage,
    read_copilot_user,
    read_gemini_quota,
    read_openrouter_key,
)

__all__ = [
    "NO_OVERAGE",
    "NO_SIGNAL",
    "ErrorSignal",
    "OverageReading",
    "PolledReading",
    "codex_window_name",
    "fold_headers",
    "parse_duration",
    "parse_reset",
    "read_anthropic_api_key",
    "read_anthropic_overage",
    "read_anthropic_unified",
    "read_anthropic_unified_error",
    "read_codex",
    "read_codex_credits",
    "read_codex_error",
    "read_codex_usage",
    "read_copilot_user",
    "read_gemini_error",
    "read_gemini_minute_window",
    "read_gemini_quota",
    "read_openrouter_error",
    "read_openrouter_key",
    "read_x_ratelimit",
    "refuses_client",
]
