"""The adapter contract: what the engine asks of each upstream API family.

An adapter builds the upstream request, reads usage from the response, watches a stream
event by event, and classifies every failure once, into `FailureClass`. It does no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol, cast, runtime_checkable

import orjson
from pydantic import SecretStr

from rungway.protocol.api import Api
from rungway.protocol.auth import Auth
from rungway.protocol.failures import Failure, FailureClass
from rungway.protocol.sse import SseEvent
from rungway.protocol.usage import ReportedUsage
from rungway.quota.headers import OverageReading
from rungway.quota.poller import PollTarget
from rungway.routing.snapshot import QuotaWindow


class SecretSource(Protocol):
    """A credential that can change while the gateway runs (a renewed OAuth token)."""

    def current(self) -> SecretStr | None:
        """The secret to send now; never waits."""
        ...

    async def refresh_after_unauthorized(self, rejected: SecretStr | None) -> str | None:
        """Renew after the upstream refused `rejected`: None when a retry may go out,
        otherwise why not, in words for the operator."""
        ...


class ProjectSource(Protocol):
    """The Google Cloud project a Gemini Code Assist login works in, found by asking the
    upstream once (`loadCodeAssist`, then `onboardUser` when it names none)."""

    def current(self) -> str | None:
        """The project id, or None while it is not known; never waits."""
        ...

    async def discover(self) -> str | None:
        """The project id, asked for first when not yet known; None when it cannot be
        found now, with `problem` saying why."""
        ...

    @property
    def problem(self) -> str | None:
        """Why the last discovery found no project (None when it did, or never ran)."""
        ...


@dataclass(frozen=True, slots=True)
class Connection:
    """A configured connection, ready to use: its credential is read and its URL resolved.

    `secret` is the credential as read at start; a `source` (a stored login that renews
    itself) supplies the one to send at request time instead.
    """

    id: str
    provider: str
    auth: Auth
    secret: SecretStr | None
    base_url: str
    models: frozenset[str]
    usage_base_url: str | None = None
    source: SecretSource | None = None
    project: ProjectSource | None = None
    """The Code Assist project the requests name (Gemini Code Assist logins only)."""
    proxy: str | None = None
    """The connection's `proxy:` setting: a proxy URL, or `direct`; None leaves the choice
    to the environment's proxy variables."""

    def credential(self) -> SecretStr | None:
        """The secret to send upstream now."""
        return self.source.current() if self.source is not None else self.secret


class CredentialHeaders(Mapping[str, str]):
    """Request headers whose `authorization` is read from the connection at each use.

    A usage endpoint is polled for as long as the gateway runs, so its headers must carry
    the token that is current at each poll, not the one read at start.
    """

    __slots__ = ("_connection", "_fixed", "_scheme")

    def __init__(self, connection: Connection, scheme: str, fixed: Mapping[str, str]) -> None:
        self._connection = connection
        self._scheme = scheme
        self._fixed = dict(fixed)

    def _now(self) -> dict[str, str]:
        secret = self._connection.credential()
        if secret is None:
            return self._fixed
        return {"authorization": f"{self._scheme} {secret.get_secret_value()}", **self._fixed}

    def __getitem__(self, name: str) -> str:
        return self._now()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._now())

    def __len__(self) -> int:
        return len(self._now())


@dataclass(frozen=True, slots=True)
class UpstreamRequest:
    """An HTTP request ready to send upstream."""

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

    def build_request(
        self,
        connection: Connection,
        *,
        body: dict[str, Any],
        raw_body: bytes,
        upstream_model: str,
        client_headers: Mapping[str, str],
        query: str,
    ) -> UpstreamRequest:
        """The upstream request for a client request that speaks this adapter's API.

        `raw_body` is forwarded unchanged when nothing in it needs rewriting, so fields the
        gateway does not know survive byte for byte.
        """
        ...

    def count_tokens_request(
        self,
        connection: Connection,
        *,
        raw_body: bytes,
        body: dict[str, Any],
        upstream_model: str,
        client_headers: Mapping[str, str],
    ) -> UpstreamRequest | None:
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
