"""The dashboard files as served: types, caching, errors, and nothing from another origin."""

from __future__ import annotations

import asyncio
import re

import orjson
import pytest

from rungway.dashboard.pages import DashboardPages, load_static
from rungway.server.asgi import Message

Answer = tuple[int, dict[str, str], bytes]


def _get(path: str, method: str = "GET", headers: dict[str, str] | None = None) -> Answer:
    pages = DashboardPages()
    sent: list[Message] = []
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "headers": [(k.encode(), v.encode()) for k, v in (headers or {}).items()],
    }

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(pages(scope, receive, send))
    start, body = sent
    head = {name.decode(): value.decode() for name, value in start["headers"]}
    return start["status"], head, body["body"]


@pytest.mark.parametrize("path", ["/dashboard", "/dashboard/"])
def test_the_page_is_served_with_a_policy_that_allows_only_its_own_origin(path: str) -> None:
    status, headers, body = _get(path)
    assert status == 200
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert "default-src 'none'" in headers["content-security-policy"]
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"
    assert b'<script type="module" src="/dashboard/app.js">' in body


def test_every_file_the_page_and_its_modules_name_is_served_with_its_type() -> None:
    files = load_static()
    named = set()
    for name, found in files.items():
        text = found.body.decode()
        named.update(re.findall(r'(?:src|href)="/dashboard/([\w.]+)"', text))
        if name.endswith(".js"):
            named.update(re.findall(r'from "\./([\w.]+)"', text))
    assert {"app.js", "style.css", "api.js", "ladder.js", "requests.js", "favicon.svg"} <= named
    types = {
        "js": "text/javascript; charset=utf-8",
        "css": "text/css; charset=utf-8",
        "svg": "image/svg+xml",
    }
    for name in named:
        status, headers, _ = _get(f"/dashboard/{name}")
        assert status == 200, name
        assert headers["content-type"] == types[name.rsplit(".", 1)[-1]]


def test_nothing_is_fetched_from_another_origin() -> None:
    for name, found in load_static().items():
        # The SVG namespace is a name, not a fetch.
        text = found.body.decode().replace("http://www.w3.org/2000/svg", "")
        assert "http://" not in text, name
        assert "https://" not in text, name
        assert "@import" not in text, name


def test_a_browser_holding_the_current_version_gets_a_304_without_a_body() -> None:
    _, headers, _ = _get("/dashboard/app.js")
    status, again, body = _get("/dashboard/app.js", headers={"if-none-match": headers["etag"]})
    assert (status, body) == (304, b"")
    assert again["etag"] == headers["etag"]
    status, _, body = _get("/dashboard/app.js", headers={"if-none-match": '"stale"'})
    assert status == 200
    assert body


@pytest.mark.parametrize(
    "path", ["/dashboard/nothing.js", "/dashboard/../pages.py", "/dashboard/static/app.js"]
)
def test_an_unknown_file_gets_a_404_in_the_admin_error_shape(path: str) -> None:
    status, headers, body = _get(path)
    assert status == 404
    assert headers["content-type"] == "application/json"
    assert orjson.loads(body)["error"]["type"] == "not_found"


def test_a_write_gets_a_405_naming_get() -> None:
    status, headers, body = _get("/dashboard", method="POST")
    assert status == 405
    assert headers["allow"] == "GET"
    assert orjson.loads(body)["error"]["message"] == "use GET /dashboard"


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_the_root_sends_a_browser_on_to_the_dashboard(method: str) -> None:
    status, headers, body = _get("/", method=method)
    assert status == 307
    assert headers["location"] == "/dashboard"
    assert body == b""


def test_the_icon_is_an_svg_under_the_same_strict_policy() -> None:
    status, headers, body = _get("/favicon.ico")
    assert status == 200
    assert headers["content-type"] == "image/svg+xml"
    assert "default-src 'none'" in headers["content-security-policy"]
    assert body.startswith(b"<svg ")
    assert body == _get("/dashboard/favicon.svg")[2]
    # Only the page's own origin: the policy lets the page show its icon.
    assert "img-src 'self'" in headers["content-security-policy"]
    _, _, page = _get("/dashboard")
    assert b'<link rel="icon" href="/dashboard/favicon.svg" type="image/svg+xml">' in page


def test_a_write_to_the_root_gets_a_405_not_a_redirect() -> None:
    status, headers, _ = _get("/", method="POST")
    assert status == 405
    assert "location" not in headers
