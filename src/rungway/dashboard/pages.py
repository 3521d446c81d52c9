"""The ASGI handler that serves the dashboard's static files under `/dashboard`.

The files ship in the package (`static/`) and are read once, when the handler is built.
`GET /dashboard` answers the page; `GET /dashboard/<file>` its scripts, style sheet and icon.
`GET /` sends a browser on to the page, and `GET /favicon.ico` answers the icon (an SVG) for
the gateway's other answers a browser shows, such as the admin API's JSON.
Every answer forbids framing and any script, style or request from another origin.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

import orjson

from rungway.server.asgi import Headers, Receive, Scope, Send, request_headers, send_reply

PREFIX = "/dashboard"
ROOT = "/"
FAVICON = "/favicon.ico"
_INDEX = "index.html"
_ICON = "favicon.svg"
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
# The page needs nothing from another origin (no fonts, no CDN), so nothing is allowed.
_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)
_SECURITY: Headers = [
    ("content-security-policy", _POLICY),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("x-frame-options", "DENY"),
]


@dataclass(frozen=True, slots=True)
class StaticFile:
    """One file of the page, ready to send."""

    body: bytes
    content_type: str
    etag: str


def load_static() -> dict[str, StaticFile]:
    """Every servable file shipped in `rungway.dashboard/static`, by file name."""
    files: dict[str, StaticFile] = {}
    for entry in resources.files("rungway.dashboard").joinpath("static").iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1]
        if not entry.is_file() or suffix not in _TYPES:
            continue
        body = entry.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
        files[entry.name] = StaticFile(body, _TYPES[suffix], etag)
    return files


class DashboardPages:
    """Serve the dashboard's page and assets; anything else under `/dashboard` is a 404."""

    def __init__(self, files: dict[str, StaticFile] | None = None) -> None:
        self._files = load_static() if files is None else files

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request for `/`, `/favicon.ico`, `/dashboard` or a file under it."""
        path = scope["path"].rstrip("/") or ROOT
        found = None if path == ROOT else self._files.get(_file_name(path))
        if path != ROOT and found is None:
            await _error(send, 404, "not_found", f"no dashboard file {scope['path']}")
            return
        method = scope["method"]
        if method not in ("GET", "HEAD"):
            await _error(
                send, 405, "method_not_allowed", f"use GET {scope['path']}", [("allow", "GET")]
            )
            return
        if found is None:
            # Temporary, not permanent: a browser must not remember it if the root ever
            # answers something else.
            headers = [("location", PREFIX), ("cache-control", "no-cache"), *_SECURITY]
            await send_reply(send, 307, headers, b"")
            return
        # Revalidate every time (the files change with the package), but skip the body
        # when the browser already holds this version.
        headers = [
            ("content-type", found.content_type),
            ("cache-control", "no-cache"),
            ("etag", found.etag),
            *_SECURITY,
        ]
        if request_headers(scope).get("if-none-match") == found.etag:
            await send_reply(send, 304, headers, b"")
            return
        # For HEAD the server drops the body and keeps its length.
        await send_reply(send, 200, headers, found.body)


def _file_name(path: str) -> str:
    """The static file a path names: the page for `/dashboard`, the icon for `/favicon.ico`."""
    if path == PREFIX:
        return _INDEX
    if path == FAVICON:
        return _ICON
    return path.removeprefix(PREFIX + "/")


async def _error(
    send: Send, status: int, kind: str, message: str, extra: Headers | None = None
) -> None:
    body = orjson.dumps({"error": {"type": kind, "message": message}})
    headers = [("content-type", "application/json"), *_SECURITY, *(extra or [])]
    await send_reply(send, status, headers, body)
