"""Token renewals sent by the gateway's own client, so they take the connection's proxy.

A stored login renews its access token (and a Code Assist login finds its project) over
the same client and proxy as the connection's model calls: a gateway behind a proxy
reaches the token endpoints the way it reaches the APIs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from rungway.credentials.grants import TIMEOUT_S, TokenRequest
from rungway.engine.transport import UpstreamTimeout, UpstreamUnreachable
from rungway.transport.http11 import Http11Transport

Send = Callable[[TokenRequest], Awaitable[tuple[int, Mapping[str, str], bytes]]]


def token_sender(client: Http11Transport, proxy: str | None) -> Send:
    """A token endpoint's `Send` over `client` through `proxy` (a connection's `proxy:`
    setting; None lets the environment decide); failures raise `OSError`, as `Send` does."""

    async def send(request: TokenRequest) -> tuple[int, Mapping[str, str], bytes]:
        if (request.method == "GET") != (request.body is None):
            raise ValueError(
                f"a token request is a GET without a body or a POST with one, "
                f"not a {request.method} {'with' if request.body else 'without'} one"
            )
        try:
            return await client.get(request.url, request.headers, TIMEOUT_S, request.body, proxy)
        except TimeoutError:
            raise OSError(f"no answer from the token endpoint within {TIMEOUT_S:g}s") from None
        except (UpstreamTimeout, UpstreamUnreachable) as error:
            raise OSError(f"reaching the token endpoint: {error}") from None

    return send
