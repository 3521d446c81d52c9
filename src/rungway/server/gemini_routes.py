"""The Gemini API's routes: `/{version}/models/{model}:{method}` and the model listing.

Gemini puts the model and the method in the path, so these routes cannot sit in the
gateway's table of exact paths. The app looks here only for a path that missed that table
and starts with one of `PREFIXES`; a path is split once, with string operations. Served
under `/v1beta` and `/v1` alike (google-genai calls either, by its `api_version`).
https://ai.google.dev/api/generate-content
"""

from __future__ import annotations

from typing import Any, Final, Protocol
from urllib.parse import parse_qs

import orjson

from rungway.engine.call import Refusal
from rungway.engine.planning import Planner
from rungway.protocol import gemini
from rungway.protocol.api import Api
from rungway.protocol.asgi import Message
from rungway.protocol.sse import SseSplitter
from rungway.server.asgi import Receive, Scope, Send, request_headers, send_reply
from rungway.server.auth import ClientKeys

PREFIXES: Final = ("/v1beta/models", "/v1/models/")
"""Paths that may be Gemini's (the exact `/v1/models` listing is in the app's table)."""
_VERSIONS: Final = ("/v1beta/models", "/v1/models")
_METHODS: Final = ("generateContent", "streamGenerateContent", "countTokens")
_EVENT_STREAM: Final = b"text/event-stream"
_JSON: Final = b"application/json; charset=utf-8"

UrlFields = dict[str, Any]


class GeminiHost(Protocol):
    """What the routes need of the app: its handling of requests and refusals."""

    async def complete_for(
        self, api: Api, scope: Scope, receive: Receive, send: Send, url: UrlFields | None = None
    ) -> None:
        """Answer a model request whose model (and stream flag) came in the URL."""
        ...

    async def count_for(
        self, api: Api, scope: Scope, receive: Receive, send: Send, url: UrlFields | None = None
    ) -> None:
        """Answer a token count whose model came in the URL."""
        ...

    async def refuse_for(self, api: Api, scope: Scope, send: Send, refusal: Refusal) -> None:
        """Answer with a refusal in `api`'s shape."""
        ...


def is_gemini_client(headers: dict[str, str], query: bytes) -> bool:
    """A request from one of Google's clients: its key header, its `?key=`, or the SDK's
    own client header."""
    return "x-goog-api-key" in headers or "x-goog-api-client" in headers or b"key=" in query


def split(path: str) -> tuple[str, str] | None:
    """(model, rest) of a Gemini path: `rest` is `""` for the listing, `:method` for a
    method, `/name` for a model; None when the path is not Gemini's."""
    for prefix in _VERSIONS:
        if path.startswith(prefix):
            tail = path[len(prefix) :]
            if not tail:
                return "", ""
            if tail[0] != "/":
                return None
            model, colon, method = tail[1:].rpartition(":")
            return (model, colon + method) if colon else (tail[1:], "/")
    return None


def gemini_hint(path: str) -> str | None:
    """What to fix when a Gemini method's path missed (a base URL with a version path of
    its own, which the SDK doubles), or None when the path is not a Gemini method's."""
    if "/models/" not in path or path.rpartition(":")[2] not in _METHODS:
        return None
    return (
        "; a Gemini client's base URL for this gateway is its root (http://host:port), "
        "and its API version v1beta or v1"
    )


class GeminiRoutes:
    """Dispatches the Gemini paths to the app's handling, in Gemini's shapes."""

    def __init__(self, host: GeminiHost, keys: ClientKeys, planner: Planner) -> None:
        self._host = host
        self._keys = keys
        self._planner = planner

    async def __call__(self, scope: Scope, receive: Receive, send: Send, path: str) -> bool:
        """Answer `path` if it is a Gemini path; False (nothing sent) when it is not."""
        found = split(path)
        if found is None:
            return False
        model, rest = found
        method = scope["method"]
        if path.startswith("/v1/models/") and rest == "/" and not listing_headers(scope):
            return False  # another API's client asking after a model: not Gemini's to answer
        if rest in ("", "/"):
            if method != "GET":
                await self._refuse(scope, send, 405, f"{method} is not allowed on {path}; use GET")
            else:
                await self._models(scope, send, gemini.bare_model(model) if rest else None)
            return True
        name = rest[1:]
        if name not in _METHODS:
            message = f"this gateway does not serve the Gemini method {name!r} ({path})"
            await self._refuse(scope, send, 404, message)
            return True
        if method != "POST":
            await self._refuse(scope, send, 405, f"{method} is not allowed on {path}; use POST")
            return True
        model = gemini.bare_model(model)
        if not model:
            await self._refuse(scope, send, 400, f"no model named in {path}")
            return True
        if name == "countTokens":
            await self._host.count_for(Api.GEMINI, scope, receive, send, {"model": model})
            return True
        stream = name == "streamGenerateContent"
        if stream and "sse" not in parse_qs(scope.get("query_string", b"").decode()).get("alt", []):
            send = JsonArrayStream(send)  # Google's default stream, without `alt=sse`
        url_fields = {"model": model, "stream": stream}
        await self._host.complete_for(Api.GEMINI, scope, receive, send, url_fields)
        return True

    async def _models(self, scope: Scope, send: Send, model: str | None) -> None:
        query = scope.get("query_string", b"").decode("latin-1")
        if self._keys.required and self._keys.identify(request_headers(scope), query) is None:
            message = "send a valid client key as `x-goog-api-key: <key>` or `?key=<key>`"
            await self._refuse(scope, send, 401, message)
            return
        known = [name for name, _ in self._planner.table.models()]
        if model is None:
            body = gemini.model_list(known)
        elif model in known:
            body = orjson.dumps(gemini.model_info(model))
        else:
            await self._refuse(scope, send, 404, f"models/{model} is not found on this gateway")
            return
        await send_reply(send, 200, [("content-type", "application/json")], body)

    async def _refuse(self, scope: Scope, send: Send, status: int, message: str) -> None:
        await self._host.refuse_for(Api.GEMINI, scope, send, Refusal(status, message))


def listing_headers(scope: Scope) -> bool:
    """A `GET /v1/models` from one of Google's clients, answered in Gemini's shape."""
    return is_gemini_client(request_headers(scope), scope.get("query_string", b""))


class JsonArrayStream:
    """Sends a Gemini SSE stream as Google's JSON-array stream: `[`, each event's JSON
    object, separated by `,` and a line break, then `]`; an error event is one more object.

    Wraps the ASGI `send` of one response; a reply that is not a 200 stream (a refusal, an
    error body) goes out unchanged.
    """

    def __init__(self, send: Send) -> None:
        self._send = send
        self._active = False
        self._splitter = SseSplitter()
        self._sent = 0

    async def __call__(self, message: Message) -> None:
        """Send `message`, its SSE frames rewritten as array items."""
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            streams = [
                number
                for number, (name, value) in enumerate(headers)
                if name == b"content-type" and value.startswith(_EVENT_STREAM)
            ]
            self._active = message["status"] == 200 and bool(streams)
            for number in streams:
                headers[number] = (b"content-type", _JSON)
            await self._send({**message, "headers": headers})
            return
        if message["type"] != "http.response.body" or not self._active:
            await self._send(message)
            return
        out = []
        for event in self._splitter.feed(message.get("body", b"")):
            out.append((b",\r\n" if self._sent else b"[") + event.data)
            self._sent += 1
        if not message.get("more_body", False):
            out.append(b"]" if self._sent else b"[]")
        await self._send({**message, "body": b"".join(out)})
