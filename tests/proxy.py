"""A loopback TCP proxy a test can cut and restore: a network fault between the gateway and
a real Redis or PostgreSQL, without stopping the shared server or mocking it."""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
from types import TracebackType
from typing import Self


class CuttableProxy:
    """Forwards `127.0.0.1:<port>` to `target` while up; `cut()` refuses new connections and
    resets the open ones, `restore()` listens again on the same port."""

    def __init__(self, target: tuple[str, int], *, up: bool = True) -> None:
        self.target = target
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        if up:
            self.restore()

    @property
    def address(self) -> str:
        """`127.0.0.1:<port>`."""
        return f"127.0.0.1:{self.port}"

    def restore(self) -> None:
        """Listen again and forward new connections."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Stop listening and reset every open connection."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            sockets, self._open = self._open, set()
        for each in sockets:
            with contextlib.suppress(OSError):
                # An abortive close: the peer sees a reset, as when a server dies.
                each.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                each.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.cut()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    upstream.close()
                    return
                self._open.update((client, upstream))
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()

    def _pipe(self, client: socket.socket, upstream: socket.socket) -> None:
        pair = {client: upstream, upstream: client}
        try:
            while True:
                readable, _, _ = select.select(list(pair), [], [], 1.0)
                for each in readable:
                    data = each.recv(65536)
                    if not data:
                        return
                    pair[each].sendall(data)
        except (OSError, ValueError):
            return
        finally:
            for each in pair:
                with contextlib.suppress(OSError):
                    each.close()
            with self._lock:
                self._open.difference_update(pair)
