"""Running an ASGI app under uvicorn: in the foreground, or in a background thread.

The gateway and the simulated upstreams share this, so the demo, the tests and the
benchmarks start servers the same way: uvloop, httptools, no access log. The protocol
class they serve with joins each reply's head to its body (`joined_head`), and the
gateway's adds its client connection deadlines and caps (`limits`).
"""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType
from typing import Any, Self

import uvicorn

from rungway.runner.joined_head import JoinedHeadProtocol
from rungway.runner.limits import ConnectionLimits, limited_protocol

__all__ = [
    "BackgroundServer",
    "ConnectionLimits",
    "JoinedHeadProtocol",
    "bind",
    "limited_protocol",
    "uvicorn_config",
]


def uvicorn_config(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    limits: ConnectionLimits | None = None,
    **extra: Any,
) -> uvicorn.Config:
    """The server settings every rungway process uses; `limits` cut off slow, oversized
    and too many client connections (see `limited_protocol`)."""
    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "loop": "uvloop",
        "http": JoinedHeadProtocol,
        # No route takes a websocket: an upgrade is answered as plain HTTP, and the
        # websockets library (some 10 ms of every start) is never imported.
        "ws": "none",
        "lifespan": "on",
        "access_log": False,
        # No proxy in front is assumed: the client address is never used, so skip the
        # middleware that would rewrite it on every request.
        "proxy_headers": False,
        "server_header": False,
        "log_level": "warning",
        "timeout_graceful_shutdown": 2,
    }
    if limits is not None:
        options["http"] = limited_protocol(limits)
    options.update(extra)
    return uvicorn.Config(app, **options)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on `host:port` (0 picks a free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


class BackgroundServer:
    """An ASGI app served from a daemon thread; `start()` returns its base URL."""

    def __init__(self, config: uvicorn.Config, name: str) -> None:
        self._config = config
        self._name = name
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def start(self) -> str:
        """Bind, serve, and wait until the server accepts connections."""
        if self._server is not None:
            raise RuntimeError(f"{self._name} is already running")
        sock = bind(self._config.host, self._config.port)
        server = uvicorn.Server(self._config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name=self._name, daemon=True
        )
        thread.start()
        deadline = time.monotonic() + 15
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                sock.close()
                raise RuntimeError(f"{self._name} did not start")
            time.sleep(0.002)
        host, port = sock.getsockname()[:2]
        host = f"[{host}]" if ":" in host else host
        self._server, self._thread, self.url = server, thread, f"http://{host}:{port}"
        return self.url

    def stop(self) -> None:
        """Ask the server to finish and wait for its thread."""
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(timeout=15)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
