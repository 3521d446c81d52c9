"""Tool names across APIs: OpenAI's are at most 64 characters, Anthropic's at most 128.

A name too long for OpenAI is shortened to a 55-character prefix, `_` and 8 hex digits of
its SHA-256, the same way every time, so a reply's short name maps back to the name the
client declared by looking it up among the request's tools.
"""

from __future__ import annotations

import hashlib

from rungway.translate.canonical import Request

OPENAI_MAX_TOOL_NAME = 64
_PREFIX = 55


def short_tool_name(name: str) -> str:
    """`name`, or a stable 64-character stand-in when it is longer than that."""
    if len(name) <= OPENAI_MAX_TOOL_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:_PREFIX]}_{digest}"


def restore_tool_name(name: str, request: Request) -> str:
    """The declared name behind `name`, a possibly shortened name an upstream used."""
    if len(name) < OPENAI_MAX_TOOL_NAME:
        return name
    for tool in request.tools:
        if short_tool_name(tool.name) == name:
            return tool.name
    return name
