"""Structured output crosses every pair of wire APIs: the schema a client asked for is the
schema the upstream is asked for, whatever each side calls it.

Written over what `OutputFormat` means (JSON conforming to a schema), not over any wire's
shape, so that every codec in `CODECS` joins by being there.
"""

from __future__ import annotations

import itertools

import pytest

from rungway.protocol.api import Api
from rungway.translate.canonical import Message, OutputFormat, Reply, Request, Stop, Text
from rungway.translate.codecs import codec_for

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["city", "tags"],
    "additionalProperties": False,
}
ANSWER = '{"city":"Oslo","tags":["cold"]}'


def asking(output: OutputFormat | None) -> Request:
    return Request(model="m", messages=(Message("user", (Text("Oslo?"),)),), output_format=output)


@pytest.mark.parametrize(
    ("client", "upstream"),
    list(itertools.product(Api, repeat=2)),
    ids=lambda api: api.value,
)
def test_the_schema_survives_every_pair_of_apis(client: Api, upstream: Api) -> None:
    # The client's body, read as the gateway reads it, written for the upstream and read
    # back as the upstream would understand it.
    body = codec_for(client).write_request(asking(OutputFormat(SCHEMA, "place", True)), model="m")
    read = codec_for(client).read_request(body)
    sent = codec_for(upstream).write_request(read, model="m")
    understood = codec_for(upstream).read_request(sent).output_format
    assert understood is not None
    assert understood.schema == SCHEMA


@pytest.mark.parametrize(
    ("client", "upstream"),
    list(itertools.product(Api, repeat=2)),
    ids=lambda api: api.value,
)
def test_the_json_answer_comes_back_as_the_clients_text(client: Api, upstream: Api) -> None:
    request = codec_for(client).read_request(
        codec_for(client).write_request(asking(OutputFormat(SCHEMA)), model="m")
    )
    answer = Reply(id="r", model="m", parts=(Text(ANSWER),), stop=Stop.END)
    upstream_body = codec_for(upstream).write_reply(answer, request)
    client_body = codec_for(client).write_reply(
        codec_for(upstream).read_reply(upstream_body, request), request
    )
    back = codec_for(client).read_reply(client_body, request)
    assert back.parts == (Text(ANSWER),)
    assert back.stop is Stop.END


@pytest.mark.parametrize("api", list(Api), ids=lambda api: api.value)
def test_no_output_format_is_written_when_none_was_asked_for(api: Api) -> None:
    codec = codec_for(api)
    assert codec.read_request(codec.write_request(asking(None), model="m")).output_format is None
