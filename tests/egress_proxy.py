"""A real egress proxy for tests: pproxy serving HTTP (with CONNECT) and SOCKS5 on one
loopback port, in a subprocess, logging where each connection it carried went."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Self

# pproxy's command line installs uvloop and then asks for an event loop that uvloop's
# policy does not make; hidden, pproxy runs on asyncio's own loop, set beforehand.
_SERVE = (
    "import asyncio, sys; sys.modules['uvloop'] = None; sys.argv = ['pproxy', *sys.argv[1:]];"
    "asyncio.set_event_loop(asyncio.new_event_loop());"
    "from pproxy.server import main; main()"
)


class EgressProxy:
    """pproxy on `127.0.0.1:<port>`, asking for `user:password` when given; `routes()` lists
    the `host:port` of every connection it opened for a client."""

    def __init__(self, folder: Path, *, user: str | None = None, password: str | None = None):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.user, self.password = user, password
        self._log = folder / f"pproxy-{self.port}.log"
        self._process: subprocess.Popen[bytes] | None = None

    def url(self, scheme: str = "http", *, password: str | None = None) -> str:
        """The proxy's URL with its credentials (or `password` in place of the right one)."""
        secret = password if password is not None else self.password
        user = f"{self.user}:{secret}@" if self.user is not None else ""
        return f"{scheme}://{user}127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start pproxy and wait until it accepts connections."""
        listen = f"http+socks5://127.0.0.1:{self.port}"
        if self.user is not None:
            listen += f"#{self.user}:{self.password}"
        # `--auth 0`: ask every connection for the credentials, not once per client address.
        args = [sys.executable, "-u", "-c", _SERVE, "-l", listen, "-v", "--auth", "0"]
        with self._log.open("wb") as log:
            self._process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"pproxy did not start: {self._log.read_text()}")

    def routes(self) -> list[str]:
        """`host:port` of each connection the proxy carried, oldest first."""
        lines = self._log.read_text().splitlines()
        return [line.rpartition(" -> ")[2] for line in lines if " -> " in line]

    def refusals(self) -> int:
        """How many clients the proxy turned away for their credentials."""
        return sum(line.startswith("Unauthorized") for line in self._log.read_text().splitlines())

    def stop(self) -> None:
        """Stop pproxy."""
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)
            self._process = None

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
