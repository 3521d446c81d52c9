"""The gateway's root and icon, as a browser meets them before it reaches the dashboard."""

from __future__ import annotations

import httpx

from .conftest import StartGateway


def test_the_root_redirects_to_the_dashboard_and_the_icon_is_served(
    start_gateway: StartGateway,
) -> None:
    gateway = start_gateway()
    root = httpx.get(f"{gateway.url}/")
    assert root.status_code == 307
    assert root.headers["location"] == "/dashboard"
    landed = httpx.get(f"{gateway.url}/", follow_redirects=True)
    assert landed.status_code == 200
    assert str(landed.url) == f"{gateway.url}/dashboard"
    assert "<title>rungway dashboard</title>" in landed.text

    icon = httpx.get(f"{gateway.url}/favicon.ico")
    assert icon.status_code == 200
    assert icon.headers["content-type"] == "image/svg+xml"
    assert icon.headers["content-security-policy"].startswith("default-src 'none'")
    assert icon.content == httpx.get(f"{gateway.url}/dashboard/favicon.svg").content


def test_the_api_paths_near_the_root_still_answer_in_their_own_shape(
    start_gateway: StartGateway,
) -> None:
    gateway = start_gateway()
    assert httpx.get(f"{gateway.url}/healthz").json() == {"status": "ok"}
    missing = httpx.get(f"{gateway.url}/favicon.png")
    assert missing.status_code == 404
    assert "no such endpoint" in missing.json()["error"]["message"]
