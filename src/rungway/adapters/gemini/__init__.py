"""Google's Gemini family: the Gemini API with a key (`api.py`), the same requests inside
Code Assist's envelope with a Gemini CLI login (`code_assist.py`), and Google's error shape
both share (`errors.py`). Both speak `Api.GEMINI` to the engine.
"""

from __future__ import annotations

from rungway.adapters.base import ProviderEntry
from rungway.adapters.gemini.api import GeminiAdapter
from rungway.adapters.gemini.code_assist import GeminiCodeAssistAdapter

PROVIDERS = {
    "gemini": ProviderEntry(GeminiAdapter(), "https://generativelanguage.googleapis.com/v1beta"),
    "gemini-code-assist": ProviderEntry(
        GeminiCodeAssistAdapter(), "https://cloudcode-pa.googleapis.com/v1internal"
    ),
}
"""The registry rows of Google's Gemini upstreams."""
