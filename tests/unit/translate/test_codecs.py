"""What every codec does alike, checked once for all three wire APIs.

The per-API modules test each codec's own wire shapes against golden bodies and the
official SDKs; what is the same for every codec is checked here, once per codec.
"""

from __future__ import annotations

import pytest

from rungway.protocol.api import Api
from rungway.translate.canonical import Message, Request, Text, Tool, ToolNamed
from rungway.translate.codecs import CODECS, codec_for


@pytest.mark.parametrize("api", list(Api), ids=lambda api: api.value)
def test_each_codec_speaks_the_api_it_is_filed_under(api: Api) -> None:
    assert codec_for(api) is CODECS[api]
    assert codec_for(api).api is api


@pytest.mark.parametrize("name", ["auto", "none", "required"])
@pytest.mark.parametrize("api", list(Api), ids=lambda api: api.value)
def test_a_tool_named_like_a_mode_is_still_the_named_tool(api: Api, name: str) -> None:
    codec = codec_for(api)
    request = Request(
        model="m",
        messages=(Message("user", (Text("hi"),)),),
        tools=(Tool(name, None, {"type": "object", "properties": {}}),),
        tool_choice=ToolNamed(name),
    )
    assert codec.read_request(codec.write_request(request, model="m")).tool_choice == ToolNamed(
        name
    )
