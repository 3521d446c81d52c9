"""What every codec does alike, checked once for all three wire APIs.

The per-API modules test each codec's own wire shapes against golden bodies and the
official SDKs; what is the same for every codec is checked here, once per codec.
"""

from __future__ import annotations

import pytest

from rungway.protocol.api import Api
from rungway.translate.codecs import CODECS, codec_for


@pytest.mark.parametrize("api", list(Api), ids=lambda api: api.value)
def test_each_codec_speaks_the_api_it_is_filed_under(api: Api) -> None:
    assert codec_for(api) is CODECS[api]
    assert codec_for(api).api is api
