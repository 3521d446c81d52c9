"""The adapter contract: what the engine asks of each upstream API family.

An adapter builds the upstream request, reads usage from the response, watches a stream
event by event, and classifies every failure once, into `FailureClass`. It does no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol, cast, runtime_checkable

import orjson

from rungway.adapters.connection import (
    Connection,
    CredentialHeaders,
    ProjectSource,
    SecretSource,
)
from rungway.protocol.api import Api
from rungway.protocol.failures import Failure, FailureClass
from rungway.protocol.sse import SseEvent
from rungway.protocol.usage import ReportedUsage
from rungway.quota.headers import OverageReading
from rungway.quota.poller import PollTarget
from rungway.routing.snapshot import QuotaWindow

# The connection's types are part of the contract: importers take them from here.
__all__ = [
    "Adapter",
    "BaseUrlHint",
    "Connection",
    "CredentialHeaders",
    "Enveloped",
    "ErrorQuota",
    "EventKind",
    "HasUsageEndpoint",
    "OverageHeaders",
    "ProjectSource",
    "ProviderEntry",
    "SecretSource",
    "StreamOnly",
    "StreamWatcher",
    "UpstreamCall",
    "UpstreamRequest",
    "any_vendor",
    "envelope_of",
    "hint_for_base_url",
    "reads_error_quota",
    "reads_overage",
    "retry_after_seconds",
    "streams_only",
    "whole_reply",
    "with_model",
]


@dataclass(slots=True)
class UpstreamCall:
    """What an adapter builds one upstream request from: one attempt of one client request
    on one connection.

    Not frozen, like `UpstreamRequest`: one is made per attempt on the request path, and a
    frozen dataclass costs about four times a plain one to make. Nothing changes it after.
    """

    connection: Connection
    model: str
    """The model's name at this upstream."""
    body: dict[str, Any]
    """The request in the adapter's API (translated when the client spoke another)."""
    raw_body: bytes
    """`body` as bytes, forwarded unchanged when nothing in it needs rewriting, so fields
    the gateway does not know survive byte for byte."""
    client_headers: Mapping[str, str]
    """The client's request headers, lower-cased; each family forwards its own few."""
    stream: bool
    """Whether the client asked for a stream."""
    query: str = ""
    """The client's query string (`beta=true` on Claude Code's Messages requests)."""


@dataclass(slots=True)
class UpstreamRequest:
    """An HTTP request ready to send upstream.

    Not frozen: one is made per attempt, and a frozen dataclass costs several times a plain
    one to make. Its adapter finishes the headers the shape made; nothing changes it after
    the engine has it.
    """

    url: str
    headers: dict[str, str]
    body: bytes
    strip_usage_chunk: bool = False
    proxy: str | None = None
    """The connection's `proxy:` setting (None: the environment's proxy variables decide)."""


class EventKind(Enum):
    """What one stream event means to the dispatcher."""

    PREAMBLE = "preamble"
    """Carries no content yet; may be held back while fall-through is still possible."""
    CONTENT = "content"
    """Content (or the end of the stream); from here on the stream belongs to the client."""
    ERROR = "error"
    """An error inside a 200 stream; the watcher's `failure` says which."""
    DROP = "drop"
    """Forward nothing: an event the gateway added for itself (the injected usage chunk)."""


class StreamWatcher(Protocol):
    """Sees each event of one upstream stream as it passes through the gateway."""

    usage: ReportedUsage
    failure: Failure | None
    finished: bool
    """True once the stream's own terminator (`[DONE]`, `message_stop`, ...) has passed."""

    def see(self, event: SseEvent) -> EventKind:
        """Classify `event`, noting usage and any in-stream error."""
        ...


class Adapter(Protocol):
    """One upstream API family."""

    api: Api

    def build_request(self, call: UpstreamCall) -> UpstreamRequest:
        """The upstream request for a client request that speaks this adapter's API."""
        ...

    def count_tokens_request(self, call: UpstreamCall) -> UpstreamRequest | None:
        """The upstream token-count request, or None when this API has no such endpoint."""
        ...

    def classify_failure(self, status: int, headers: Mapping[str, str], body: bytes) -> Failure:
        """Classify a non-2xx response."""
        ...

    def read_usage(self, response: dict[str, Any]) -> ReportedUsage:
        """Token counts of a complete (non-streaming) response."""
        ...

    def read_quota(
        self, connection: Connection, *, model: str, headers: Mapping[str, str], now: float
    ) -> tuple[QuotaWindow, ...]:
        """The quota windows a response's headers report (none when it reports none)."""
        ...

    def watch_stream(self, *, strip_usage_chunk: bool) -> StreamWatcher:
        """A fresh watcher for one stream."""
        ...


@dataclass(frozen=True, slots=True)
class ProviderEntry:
    """One provider's row in the registry: its adapter, where it is by default, and why it
    lacks a billing catalog entry or a genai-prices id when it does."""

    adapter: Adapter
    default_base_url: str | None
    without_catalog_entry: str | None = None
    """Why the billing catalog has no entry for it (None: it has one)."""
    without_price_id: str | None = None
    """Why genai-prices has no provider id for it (None: it has one)."""


_ANY_VENDOR = "any vendor's endpoint, whose terms rungway cannot know"


def any_vendor(adapter: Adapter) -> ProviderEntry:
    """The row of a `*-compatible` provider: any endpoint that speaks `adapter`'s API, at a
    base URL the connection must give, with neither a catalog entry nor a price id."""
    return ProviderEntry(
        adapter,
        None,
        without_catalog_entry=(
            f"{_ANY_VENDOR}: `unknown`, counted as metered, unless `billing:` says"
        ),
        without_price_id=f"{_ANY_VENDOR}: priced by model name alone",
    )


def with_model(body: dict[str, Any], raw_body: bytes, model: str) -> bytes:
    """The body to send when the upstream knows the model as `model`.

    The client's bytes go out untouched when the name is unchanged; otherwise the body is
    re-encoded with only `model` replaced, keeping every other field and value.
    """
    if body.get("model") == model:
        return raw_body
    return orjson.dumps({**body, "model": model})


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The `retry-after` header as seconds, when it is a number."""
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


@runtime_checkable
class HasUsageEndpoint(Protocol):
    """An adapter whose plan logins have a usage endpoint the gateway can poll."""

    def usage_target(self, connection: Connection) -> PollTarget | None:
        """The connection's usage endpoint, or None when it has none."""
        ...


@runtime_checkable
class ErrorQuota(Protocol):
    """An adapter whose error bodies (not only headers) say which quota window ran out."""

    def error_windows(
        self,
        connection: Connection,
        *,
        status: int,
        headers: Mapping[str, str],
        body: bytes,
        model: str,
        now: float,
    ) -> tuple[QuotaWindow, ...]:
        """The windows a failed response shows exhausted, with their resets."""
        ...


@runtime_checkable
class OverageHeaders(Protocol):
    """An adapter whose plan logins say on every response whether the account bills past
    its quota, and whether that response was billed so (Claude's extra usage, Codex
    credits)."""

    def read_overage(self, connection: Connection, headers: Mapping[str, str]) -> OverageReading:
        """What the response's headers say about billing past the quota."""
        ...


@runtime_checkable
class StreamOnly(Protocol):
    """An adapter whose upstream always streams: a client that asked for no stream gets the
    stream assembled into one reply."""

    def assemble_stream(self, body: bytes) -> dict[str, Any] | Failure:
        """The complete reply a whole stream adds up to, or the failure it ended in."""
        ...


@runtime_checkable
class Enveloped(Protocol):
    """An adapter whose upstream wraps every reply in an envelope (Gemini Code Assist's
    `{"response": {...}}`): the engine unwraps whole replies and each stream event before
    anything else reads them, so watchers, translation and the client see the API's own
    shape."""

    def unwrap_reply(self, reply: dict[str, Any]) -> dict[str, Any]:
        """The reply inside a complete upstream reply."""
        ...

    def unwrap_event(self, event: SseEvent) -> SseEvent:
        """The event inside one upstream stream event, framed as the API frames it."""
        ...


@runtime_checkable
class BaseUrlHint(Protocol):
    """An adapter that can tell from a failed answer that the connection's base URL is
    wrong, and how to correct it."""

    def base_url_hint(self, base_url: str, status: int, body: bytes) -> str | None:
        """The correction ("did you mean ...?") this answer calls for, or None."""
        ...


_CONFORMS: dict[tuple[type, type], bool] = {}


def _conforms(adapter: object, capability: type) -> bool:
    # Asked once per adapter class: a runtime protocol check walks the protocol's members
    # each time, which on the request path costs more than the work it guards.
    key = (type(adapter), capability)
    known = _CONFORMS.get(key)
    if known is None:
        known = _CONFORMS[key] = isinstance(adapter, capability)
    return known


def reads_error_quota(adapter: object) -> bool:
    """True when the adapter is `ErrorQuota`: its error bodies name quota windows."""
    return _conforms(adapter, ErrorQuota)


def reads_overage(adapter: object) -> bool:
    """True when the adapter is `OverageHeaders`: its responses say whether they bill past
    the plan."""
    return _conforms(adapter, OverageHeaders)


def streams_only(adapter: object) -> bool:
    """True when the adapter is `StreamOnly`: its upstream always streams."""
    return _conforms(adapter, StreamOnly)


def envelope_of(adapter: object) -> Enveloped | None:
    """The adapter as `Enveloped` when its upstream wraps replies, else None."""
    return cast(Enveloped, adapter) if _conforms(adapter, Enveloped) else None


def hint_for_base_url(adapter: object, base_url: str, status: int, body: bytes) -> str | None:
    """How to correct `base_url` when the adapter reads this answer as a wrong one."""
    if not _conforms(adapter, BaseUrlHint):
        return None
    return cast(BaseUrlHint, adapter).base_url_hint(base_url, status, body)


def whole_reply(adapter: object, body: bytes) -> dict[str, Any] | Failure:
    """An upstream's complete reply as a JSON object, or why it is not one."""
    if streams_only(adapter):
        # The upstream streamed although the client asked for one reply.
        return cast(StreamOnly, adapter).assemble_stream(body)
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return Failure(FailureClass.SERVER, "the upstream sent a body that is not JSON")
    if not isinstance(parsed, dict):
        return Failure(FailureClass.SERVER, "the upstream sent JSON that is not an object")
    envelope = envelope_of(adapter)
    return parsed if envelope is None else envelope.unwrap_reply(parsed)
