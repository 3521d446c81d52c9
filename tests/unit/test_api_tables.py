"""The wire-API axis: every table keyed by `Api` covers every member.

Each table sits in its own layer (protocol's error shapes, translate's codecs, engine's
output-limit fields, server's request checks), so one descriptor per API would have to reach
up through all of them. Instead, adding an `Api` member fails here, once per table to fill.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from rungway.adapters.registry import PROVIDERS
from rungway.engine import output_limit
from rungway.protocol.api import Api
from rungway.protocol.errors import ERROR_BODIES, STREAM_ERROR_EVENTS
from rungway.routing import needs
from rungway.server import app as server_app
from rungway.translate.codecs import CODECS

TABLES: dict[str, Mapping[Api, object]] = {
    "protocol.errors.ERROR_BODIES": ERROR_BODIES,
    "protocol.errors.STREAM_ERROR_EVENTS": STREAM_ERROR_EVENTS,
    "translate.codecs.CODECS": CODECS,
    "engine.output_limit._OUTPUT_FIELDS": output_limit._OUTPUT_FIELDS,
    "server.app._CHECKS": server_app._CHECKS,
    "routing.needs._IMAGES": needs._IMAGES,
    "routing.needs._IMAGE_MARKERS": needs._IMAGE_MARKERS,
    "routing.needs._WANTS": needs._WANTS,
}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_table_covers_every_api(name: str) -> None:
    missing = set(Api) - set(TABLES[name])
    assert not missing, f"{name} has no entry for {sorted(missing)}"


def test_every_api_has_an_adapter() -> None:
    assert {entry.adapter.api for entry in PROVIDERS.values()} == set(Api)
