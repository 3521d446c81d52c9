"""The tunnel through an egress proxy, opened by python-socks for the upstream client.

Which proxy a request takes, and how a proxy URL reads, is `rungway.egress`'s.
"""

from __future__ import annotations

import asyncio
import os
import socket

from rungway.egress import Proxy
from rungway.engine.transport import UpstreamTimeout, UpstreamUnreachable


async def open_tunnel(proxy: Proxy, host: str, port: int, timeout_s: float) -> socket.socket:
    """A socket connected through `proxy` to `host:port`, ready for TLS or plain HTTP;
    raises the transport port's `UpstreamTimeout` or `UpstreamUnreachable`, naming the proxy
    (its password masked) and what failed."""
    # Deferred: only a gateway that has a proxy loads python-socks.
    from python_socks import (  # noqa: PLC0415
        ProxyConnectionError,
        ProxyError,
        ProxyTimeoutError,
        ProxyType,
    )
    from python_socks.async_.asyncio import Proxy as Tunnel  # noqa: PLC0415

    kind = ProxyType.HTTP if proxy.kind == "http" else ProxyType.SOCKS5
    tunnel = Tunnel(
        kind,
        proxy.host,
        proxy.port,
        username=proxy.username,
        password=proxy.password,
        # socks5h:// lets the proxy resolve the name, socks5:// resolves it here (curl's rule).
        rdns=proxy.kind != "socks5",
        loop=asyncio.get_running_loop(),
    )
    where = f"{host}:{port}"
    try:
        return await tunnel.connect(host, port, timeout=timeout_s)
    except ProxyTimeoutError:
        raise UpstreamTimeout(
            f"the proxy {proxy} did not connect to {where} within {timeout_s:g}s"
        ) from None
    except ProxyConnectionError as error:
        # The library's message repeats the address; the socket's error number is the news.
        reason = os.strerror(error.errno) if error.errno else str(error)
        raise UpstreamUnreachable(
            f"cannot connect to the proxy {proxy} ({reason})", reached=False
        ) from None
    except ProxyError as error:
        raise UpstreamUnreachable(
            f"the proxy {proxy} refused to connect to {where}: {_refusal(error)}", reached=False
        ) from None
    except OSError as error:
        reason = error.strerror or str(error) or type(error).__name__
        raise UpstreamUnreachable(
            f"cannot reach {where} through the proxy {proxy} ({reason})", reached=False
        ) from None


def _refusal(error: Exception) -> str:
    code = getattr(error, "error_code", None)
    text = str(error) or type(error).__name__
    if code == 407:
        return f"{text} (the proxy's user name or password is wrong or missing)"
    return text
