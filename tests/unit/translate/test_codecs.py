"""What every codec promises alike, checked once for every wire API.

Each promise is canonical: a request or reply written by a codec and read back by the same
codec means what it meant before. Where a wire cannot carry something, the codec declares it
in its `DROPPED_FIELDS` (see `declared.py`), and the promise allows exactly that loss. The
per-API modules test each codec's own wire shapes against golden bodies and the official
SDKs.
"""

from __future__ import annotations

import dataclasses

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rungway.protocol.api import Api
from rungway.protocol.usage import MAX_TOKEN_COUNT
from rungway.translate.canonical import (
    CanonicalUsage,
    Image,
    Message,
    OutputFormat,
    Reply,
    Request,
    Stop,
    Text,
    Thinking,
    Tool,
    ToolCall,
    ToolChoice,
    ToolNamed,
    ToolResult,
)
from rungway.translate.codec import Codec
from rungway.translate.codecs import CODECS, codec_for
from rungway.translate.names import short_tool_name
from tests.unit.translate.declared import carried_usage, declared_drops, joined_turns

APIS = pytest.mark.parametrize("api", list(Api), ids=lambda api: api.value)
PNG = "iVBORw0KGgoAAAANSUhEUg=="
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}
EMPTY_SCHEMA = {"type": "object", "properties": {}}
LONG_NAME = "mcp__workspace_server__" + "search_every_document_in_the_shared_drive_" * 2

# A conversation made only of what every wire carries: system text, user text and images
# (inline and by URL), assistant text with tool calls, and the calls' results.
REQUEST = Request(
    model="client-model",
    system=(Text("Be brief."),),
    messages=(
        Message(
            "user", (Text("Look:"), Image("image/png", PNG), Image(url="https://x.test/a.png"))
        ),
        Message(
            "assistant",
            (
                Text("Checking."),
                ToolCall("call_1", "get", '{"q":"x"}'),
                ToolCall("call_2", "now", "{}"),
            ),
        ),
        Message(
            "user",
            (
                ToolResult("call_1", (Text("found"),)),
                ToolResult("call_2", (Text("12:00"),)),
                Text("Thanks."),
            ),
        ),
    ),
    tools=(Tool("get", "Search.", SCHEMA), Tool("now", None, EMPTY_SCHEMA)),
    tool_choice="auto",
    parallel_tool_calls=False,
    max_tokens=1000,
    temperature=0.5,
    top_p=0.9,
    stream=True,
    user="u-1",
)

USAGE = CanonicalUsage(
    input_tokens=10,
    output_tokens=20,
    cache_read_tokens=30,
    cache_write_tokens=5,
    reasoning_tokens=7,
)
REPLY = Reply(
    id="r-1",
    model="upstream-model",
    parts=(
        Thinking("Let me see."),
        Text("Hello."),
        ToolCall("call_1", "get", '{"q":"x"}'),
        ToolCall("call_2", "now", "{}"),
    ),
    stop=Stop.TOOL_USE,
    usage=USAGE,
    created=1700000000,
)


def round_trip(codec: Codec, request: Request) -> Request:
    """`request` written by `codec` and read back by it."""
    return codec.read_request(codec.write_request(request, model=request.model))


def reply_round_trip(codec: Codec, reply: Reply, request: Request = REQUEST) -> Reply:
    """`reply` written by `codec` for a client and read back by it."""
    return codec.read_reply(codec.write_reply(reply, request), request)


def as_read_back(codec: Codec, request: Request, back: Request) -> Request:
    """`request` as `codec`'s wire carries it: with the reading wire's own temperature scale
    (the value clamped to it) and request options, turns of one role joined, a URL image's
    media type as the wire may infer it, and the options the codec declares dropped unset."""
    drops = declared_drops(codec)
    temperature = request.temperature
    if temperature is not None:
        temperature = min(temperature, back.temperature_max)
    return dataclasses.replace(
        request,
        messages=with_url_media_types(joined_turns(request.messages), back.messages),
        temperature=temperature,
        temperature_max=back.temperature_max,
        include_usage=back.include_usage,
        parallel_tool_calls=None if "parallel_tool_calls" in drops else request.parallel_tool_calls,
        user=None if "user" in drops else request.user,
        dropped=back.dropped,
    )


def with_url_media_types(
    sent: tuple[Message, ...], back: tuple[Message, ...]
) -> tuple[Message, ...]:
    """`sent` with each URL image taking the media type its read-back counterpart has."""
    inferred = {
        part.url: part.media_type
        for message in back
        for part in message.parts
        if isinstance(part, Image) and part.url
    }
    return tuple(
        Message(
            message.role,
            tuple(
                dataclasses.replace(part, media_type=inferred.get(part.url, part.media_type))
                if isinstance(part, Image) and part.url
                else part
                for part in message.parts
            ),
        )
        for message in sent
    )


# Identity


@APIS
def test_each_codec_speaks_the_api_it_is_filed_under(api: Api) -> None:
    assert codec_for(api) is CODECS[api]
    assert codec_for(api).api is api


@APIS
def test_each_codec_declares_what_it_drops(api: Api) -> None:
    drops = declared_drops(codec_for(api))
    assert drops, "a codec that drops nothing would carry every canonical field"
    assert all(isinstance(name, str) and name for name in drops)


# Requests


@APIS
def test_a_request_round_trips(api: Api) -> None:
    codec = codec_for(api)
    back = round_trip(codec, REQUEST)
    assert dataclasses.replace(back, messages=joined_turns(back.messages)) == as_read_back(
        codec, REQUEST, back
    )
    # Whatever the reader names as dropped from its own writer's body, the codec declares.
    assert set(back.dropped) <= declared_drops(codec)


@APIS
@given(text=st.text(min_size=1).filter(str.strip))
def test_any_user_text_survives_a_round_trip(api: Api, text: str) -> None:
    request = Request(model="m", messages=(Message("user", (Text(text),)),))
    assert round_trip(codec_for(api), request).messages == request.messages


JSON_VALUE = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@APIS
@given(arguments=st.dictionaries(st.text(), JSON_VALUE, max_size=4))
def test_any_tool_arguments_object_survives_a_round_trip(
    api: Api, arguments: dict[str, object]
) -> None:
    text = orjson.dumps(arguments).decode()
    request = dataclasses.replace(
        REQUEST,
        messages=(
            Message("user", (Text("go"),)),
            Message("assistant", (ToolCall("call_1", "get", text),)),
            Message("user", (ToolResult("call_1", (Text("done"),)),)),
        ),
    )
    (_, answer, _) = round_trip(codec_for(api), request).messages
    assert answer.parts == (ToolCall("call_1", "get", text),)


@APIS
def test_a_call_without_arguments_reads_back_as_an_empty_object(api: Api) -> None:
    request = dataclasses.replace(
        REQUEST,
        messages=(
            Message("user", (Text("go"),)),
            Message("assistant", (ToolCall("call_1", "now", ""),)),
            Message("user", (ToolResult("call_1", (Text("12:00"),)),)),
        ),
    )
    assert round_trip(codec_for(api), request).messages[1].parts == (
        ToolCall("call_1", "now", "{}"),
    )


@APIS
@pytest.mark.parametrize("choice", ["auto", "none", "required", ToolNamed("get")], ids=str)
@pytest.mark.parametrize("parallel", [None, False, True])
def test_tool_choice_and_parallel_calls_round_trip(
    api: Api, choice: ToolChoice, parallel: bool | None
) -> None:
    request = dataclasses.replace(REQUEST, tool_choice=choice, parallel_tool_calls=parallel)
    codec = codec_for(api)
    back = round_trip(codec, request)
    assert back.tool_choice == choice
    if "parallel_tool_calls" in declared_drops(codec):
        assert back.parallel_tool_calls is None
    elif choice != "none":  # with no call allowed, whether calls may run in parallel is moot
        assert back.parallel_tool_calls in (parallel, None if parallel is True else parallel)


@pytest.mark.parametrize("name", ["auto", "none", "required"])
@APIS
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


@APIS
@pytest.mark.parametrize(
    ("temperature", "scale"),
    [(0.0, 2.0), (0.5, 2.0), (1.0, 2.0), (1.5, 2.0), (2.0, 2.0), (0.7, 1.0)],
)
def test_temperature_keeps_its_value_clamped_to_the_wires_scale(
    api: Api, temperature: float, scale: float
) -> None:
    request = dataclasses.replace(REQUEST, temperature=temperature, temperature_max=scale)
    back = round_trip(codec_for(api), request)
    assert back.temperature == min(temperature, back.temperature_max)
    assert back.temperature_max in (1.0, 2.0)


@APIS
def test_a_long_tool_name_comes_back_whole_or_as_its_stable_short_form(api: Api) -> None:
    codec = codec_for(api)
    request = dataclasses.replace(
        REQUEST,
        messages=(
            Message("user", (Text("go"),)),
            Message("assistant", (ToolCall("call_1", LONG_NAME, "{}"),)),
            Message("user", (ToolResult("call_1", (Text("done"),)),)),
        ),
        tools=(Tool(LONG_NAME, "Search.", SCHEMA),),
        tool_choice=ToolNamed(LONG_NAME),
    )
    back = round_trip(codec, request)
    name = back.tools[0].name
    assert name in (LONG_NAME, short_tool_name(LONG_NAME))
    assert back.messages[1].parts == (ToolCall("call_1", name, "{}"),)
    assert back.tool_choice == ToolNamed(name)
    # An upstream's reply calls the tool by the name the writer sent it; the reader gives the
    # call back the name the client declared.
    answer = dataclasses.replace(REPLY, parts=(ToolCall("call_9", name, "{}"),))
    body = codec.write_reply(answer, dataclasses.replace(request, tools=back.tools))
    assert codec.read_reply(body, request).parts == (ToolCall("call_9", LONG_NAME, "{}"),)


@APIS
def test_an_error_result_stays_an_error(api: Api) -> None:
    request = dataclasses.replace(
        REQUEST,
        messages=(
            Message("user", (Text("go"),)),
            Message("assistant", (ToolCall("call_1", "get", "{}"),)),
            Message("user", (ToolResult("call_1", (Text("boom"),), is_error=True),)),
        ),
    )
    (result,) = round_trip(codec_for(api), request).messages[2].parts
    assert isinstance(result, ToolResult)
    assert result.call_id == "call_1"
    text = "".join(part.text for part in result.content if isinstance(part, Text))
    # A wire without an error flag says so in the text the model reads.
    assert (result.is_error and text == "boom") or (text.startswith("Error") and "boom" in text)


SIGNED = (
    Thinking("anthropic's", signature="sig-a", origin="anthropic"),
    Thinking("", redacted="opaque", origin="anthropic"),
    Thinking("openai's", signature="enc-o", origin="openai"),
    Thinking("gemini's", signature="sig-g", origin="gemini"),
    Thinking("unsigned"),
)


@APIS
def test_thinking_comes_back_exactly_as_sent_or_not_at_all(api: Api) -> None:
    codec = codec_for(api)
    request = dataclasses.replace(
        REQUEST,
        messages=(
            Message("user", (Text("q"),)),
            Message("assistant", (*SIGNED, Text("answer"))),
            Message("user", (Text("more"),)),
        ),
    )
    parts = round_trip(codec, request).messages[1].parts
    assert parts[-1] == Text("answer")
    kept = [part for part in parts if isinstance(part, Thinking)]
    assert all(part in SIGNED for part in kept)
    # A signature is valid for one provider family only: no writer sends two families'.
    assert len({part.origin for part in kept if part.signature or part.redacted}) <= 1
    if len(kept) < len(SIGNED):
        assert any(name.startswith(("thinking", "redacted")) for name in declared_drops(codec))


@APIS
@pytest.mark.parametrize(("name", "strict"), [(None, None), ("answer", True)])
def test_an_output_schema_round_trips(api: Api, name: str | None, strict: bool | None) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    output = OutputFormat(schema, name, strict)
    back = round_trip(codec_for(api), dataclasses.replace(REQUEST, output_format=output))
    assert back.output_format is not None
    assert back.output_format.schema == schema


# Replies


@APIS
def test_a_reply_round_trips(api: Api) -> None:
    codec = codec_for(api)
    back = reply_round_trip(codec, REPLY)
    assert back.id.endswith(REPLY.id)
    assert back.model == REPLY.model
    assert back.parts[1:] == REPLY.parts[1:]
    thinking = back.parts[0]
    assert isinstance(thinking, Thinking)
    assert thinking.text == "Let me see."
    assert (thinking.signature, thinking.redacted) == (None, None)
    assert back.stop is Stop.TOOL_USE
    assert back.usage == carried_usage(USAGE, codec)
    assert back.created == (0 if "created" in declared_drops(codec) else REPLY.created)
    # Written again, the reply reads back unchanged: a writer's own id is not prefixed twice.
    assert reply_round_trip(codec, back) == back


@APIS
def test_signed_thinking_in_a_reply_keeps_its_signature_or_loses_it_whole(api: Api) -> None:
    codec = codec_for(api)
    for thinking in SIGNED:
        reply = Reply(id="r", model="m", parts=(thinking, Text("a")), stop=Stop.END)
        back = reply_round_trip(codec, reply)
        kept = [part for part in back.parts if isinstance(part, Thinking)]
        if not kept:  # only redacted thinking has no text to show without its data
            assert thinking.redacted is not None
            continue
        (got,) = kept
        if got.signature or got.redacted:
            assert got == thinking
        else:
            assert got.text == thinking.text


@APIS
@given(text=st.text(min_size=1).filter(str.strip))
def test_any_reply_text_survives_a_round_trip(api: Api, text: str) -> None:
    reply = Reply(id="r", model="m", parts=(Text(text),), stop=Stop.END)
    assert reply_round_trip(codec_for(api), reply).parts == (Text(text),)


@APIS
@pytest.mark.parametrize("stop", list(Stop), ids=str)
def test_each_stop_comes_back_itself_or_as_a_plain_end(api: Api, stop: Stop) -> None:
    parts: tuple[Text | ToolCall, ...] = (Text("t"),)
    if stop is Stop.TOOL_USE:
        parts = (ToolCall("call_1", "get", "{}"),)
    sequence = "###" if stop is Stop.STOP_SEQUENCE else None
    reply = Reply(id="r", model="m", parts=parts, stop=stop, stop_sequence=sequence)
    back = reply_round_trip(codec_for(api), reply)
    if stop in (Stop.STOP_SEQUENCE, Stop.PAUSED):
        # Wires without these stops report the model as simply done.
        assert (back.stop, back.stop_sequence) in ((stop, sequence), (Stop.END, None))
    else:
        assert (back.stop, back.stop_sequence) == (stop, None)


USAGES = st.builds(
    lambda inp, out, read, write, reasoning: CanonicalUsage(
        inp, out, read, write, min(reasoning, out)
    ),
    # A wire's prompt count is the sum of three of these, and must itself be a count.
    *[st.integers(0, MAX_TOKEN_COUNT // 3)] * 5,
)


@APIS
@given(usage=USAGES)
def test_usage_keeps_the_canonical_conventions(api: Api, usage: CanonicalUsage) -> None:
    codec = codec_for(api)
    back = reply_round_trip(codec, dataclasses.replace(REPLY, usage=usage)).usage
    assert back == carried_usage(usage, codec)
    # Whatever a wire drops, no token is lost from the prompt or counted twice.
    prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    assert back.input_tokens + back.cache_read_tokens + back.cache_write_tokens == prompt
    assert back.reasoning_tokens <= back.output_tokens == usage.output_tokens
