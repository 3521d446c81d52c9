"""A redis-server of a test's own, which the test may stop, restart empty, slow down or
serve over TLS or a unix socket, without touching the shared one on 6379.

It keeps nothing on disk (`--save ''`, no append-only file), so a restart is a Redis that
comes back empty, as a managed Redis without persistence does.
"""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

import redis
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


@dataclass(frozen=True, slots=True)
class Certificates:
    """A self-signed CA and a server certificate it signed for 127.0.0.1 and localhost."""

    ca: Path
    cert: Path
    key: Path


def make_certificates(folder: Path) -> Certificates:
    """Write a CA and a server certificate (for 127.0.0.1 and localhost) into `folder`."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rungway test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    found = Certificates(folder / "ca.pem", folder / "redis.pem", folder / "redis.key")
    found.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    found.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    found.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return found


def free_port() -> int:
    """A loopback port nothing listens on (as of now)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PrivateRedis:
    """A redis-server on a free loopback port (over TLS with `tls`), or on a unix socket
    in `folder` (`unix`); `restart()` brings it back empty on the same address."""

    def __init__(self, folder: Path, *, tls: Certificates | None = None, unix: bool = False):
        self.folder = folder
        self.port = free_port()
        self.tls = tls
        self.socket = folder / "redis.sock" if unix else None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The URL a gateway would be configured with."""
        if self.socket is not None:
            return f"unix://{self.socket}"
        if self.tls is not None:
            return f"rediss://127.0.0.1:{self.port}/0?ssl_ca_certs={self.tls.ca}"
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        """A plain redis-py client to it, for the test's own looks."""
        return redis.Redis.from_url(self.url)

    def start(self) -> None:
        """Start it empty and wait until it answers."""
        args = [SERVER, "--save", "", "--appendonly", "no", "--dir", str(self.folder)]
        args += ["--bind", "127.0.0.1", "--enable-debug-command", "local"]
        if self.socket is not None:
            args += ["--port", "0", "--unixsocket", str(self.socket), "--unixsocketperm", "700"]
        elif self.tls is not None:
            args += ["--port", "0", "--tls-port", str(self.port), "--tls-auth-clients", "no"]
            args += ["--tls-cert-file", str(self.tls.cert), "--tls-key-file", str(self.tls.key)]
            args += ["--tls-ca-cert-file", str(self.tls.ca)]
        else:
            args += ["--port", str(self.port)]
        self._process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            client = self.client()
            try:
                if client.ping():
                    return
            except (redis.RedisError, OSError):
                assert self._process.poll() is None, "redis-server exited at start"
                assert time.monotonic() < deadline, "redis-server never answered"
                time.sleep(0.02)
            finally:
                client.close()

    def stop(self) -> None:
        """Kill it: whatever it held is gone."""
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.wait(timeout=10)
        if self.socket is not None:
            self.socket.unlink(missing_ok=True)

    def restart(self) -> None:
        """Kill it and start it again, empty, on the same address."""
        self.stop()
        self.start()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
