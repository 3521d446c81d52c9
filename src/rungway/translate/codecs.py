"""The codec of each wire API."""

from __future__ import annotations

from rungway.protocol.api import Api
from rungway.translate.anthropic import ANTHROPIC
from rungway.translate.codec import Codec
from rungway.translate.gemini import GEMINI
from rungway.translate.openai_chat import OPENAI_CHAT
from rungway.translate.openai_responses import OPENAI_RESPONSES

CODECS: dict[Api, Codec] = {
    Api.ANTHROPIC_MESSAGES: ANTHROPIC,
    Api.OPENAI_CHAT: OPENAI_CHAT,
    Api.OPENAI_RESPONSES: OPENAI_RESPONSES,
    Api.GEMINI: GEMINI,
}


def codec_for(api: Api) -> Codec:
    """The codec that reads and writes `api`."""
    return CODECS[api]
