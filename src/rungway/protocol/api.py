"""The wire APIs rungway speaks, on both sides of the gateway."""

from __future__ import annotations

from enum import StrEnum


class Api(StrEnum):
    """An HTTP API family: what a client calls, or what an upstream serves."""

    OPENAI_CHAT = "openai_chat"
    OPENAI_RESPONSES = "openai_responses"
    ANTHROPIC_MESSAGES = "anthropic_messages"
    GEMINI = "gemini"
