"""A vendor's API served under a path prefix, as coding-plan hosts serve the Anthropic and
OpenAI APIs (`/coding/v1/messages` at Kimi, `/anthropic/v1/messages` at MiniMax)."""

from __future__ import annotations

from dataclasses import replace

from rungway.sim.exchange import RecordedRequest


def unprefixed(request: RecordedRequest, prefix: str) -> RecordedRequest | None:
    """The request as the API under `prefix` sees it, or None when its path is elsewhere."""
    path = request.path
    if path != prefix and not path.startswith(prefix + "/"):
        return None
    return replace(request, path=path[len(prefix) :] or "/")


def bearer_or_api_key(request: RecordedRequest) -> str | None:
    """The key a request carries, as `x-api-key` or `Authorization: Bearer`."""
    key = request.header("x-api-key")
    if key is not None:
        return key.strip()
    scheme, _, token = (request.header("authorization") or "").strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None
