"""Recorded wire bodies and streams, shared by the translation tests.

Each wire API's recordings live in tests/fixtures/translate/<api value>/, so a test that
holds every codec to one promise finds each API's recording by the same name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rungway.protocol.api import Api

FIXTURES = Path(__file__).parents[2] / "fixtures" / "translate"
UPSTREAM_STREAM = "upstream_stream.sse"
"""An upstream's stream as recorded: SSE bytes, exactly as they came."""


def recorded(api: Api, name: str) -> bytes:
    """The bytes of `api`'s recording `name`."""
    return (FIXTURES / api.value / name).read_bytes()


def recorded_json(api: Api, name: str) -> dict[str, Any]:
    """`api`'s recorded JSON body `name`."""
    body: dict[str, Any] = json.loads(recorded(api, name))
    return body


def apis_with(name: str) -> list[Api]:
    """The wire APIs that have a recording `name`."""
    return [api for api in Api if (FIXTURES / api.value / name).is_file()]
