"""Egress proxies as settings: a proxy URL, the environment's proxy variables, masking.

A connection's `proxy:` setting names its proxy (`http://`, `socks5://` or `socks5h://`,
with `user:password@` if the proxy asks for one), or `direct` (also `none`) for no proxy
at all. Without the setting the environment decides, as curl and Python's `urllib` read it:
`http_proxy` for `http://` upstreams, `https_proxy` for `https://` ones, `all_proxy` for
either when its own is unset, each in lower case first (a lower-case variable, even empty,
wins over its upper-case twin), and `no_proxy` for the hosts that go direct. `no_proxy`
holds host names (each also matching its subdomains; a leading dot is the same), `*` for
every host, IP addresses, CIDR ranges and `host:port` entries. As with curl, loopback is
not exempt by itself: a `localhost` upstream behind a proxy variable needs `no_proxy`.
A proxy variable without a scheme is an HTTP proxy, as curl reads it. A connection's own
`proxy:` carries every request of that connection: `no_proxy` applies to the environment's
proxies only.

Through an HTTP proxy an `https://` upstream is reached by a `CONNECT` tunnel and TLS
inside it; an `http://` upstream gets the request itself with an absolute URL and
`Proxy-Authorization`, as curl sends it, so the proxy's keep-alive connection carries
many requests. SOCKS5 reaches either kind: `socks5://` resolves the upstream's name here,
`socks5h://` lets the proxy resolve it. The tunnels are `rungway.transport.proxy`'s. A
proxy reached over TLS (`https://` as the proxy's own scheme) is not supported: the tunnel
to an `https://` upstream is encrypted end to end in any case.

A proxy's password is never shown: `Proxy` prints as `http://user:***@host:port`, and
every failure names the proxy that way.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

_DIRECT = frozenset({"direct", "none"})
SCHEMES = ("http", "socks5", "socks5h")
"""The proxy kinds a `proxy:` URL or a proxy variable may name."""
VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
"""The environment's proxy variables, in lower case; each is also read in upper case."""

ProxyKind = Literal["http", "socks5", "socks5h"]
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def is_direct(setting: str) -> bool:
    """Whether a `proxy:` setting says no proxy: `direct` or `none`, in any case."""
    return setting.strip().lower() in _DIRECT


class BadProxy(ValueError):
    """A proxy URL that cannot be used; the message says why, its password masked."""


@dataclass(frozen=True, slots=True, repr=False)
class Proxy:
    """One proxy: its kind, address and credentials; printed with its password masked."""

    kind: ProxyKind
    host: str
    port: int
    username: str | None = None
    password: str | None = None

    def __str__(self) -> str:
        user = ""
        if self.username is not None:
            user = f"{self.username}:***@" if self.password is not None else f"{self.username}@"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.kind}://{user}{host}:{self.port}"

    def __repr__(self) -> str:
        return f"Proxy({self})"

    @property
    def identity(self) -> str:
        """What tells this proxy's connections from another's in the pool: the address, and
        a digest of the credentials (a tunnel is authenticated once, at its opening)."""
        secret = f"{self.username}\0{self.password}".encode()
        return f"{self}#{hashlib.sha256(secret).hexdigest()[:16]}"

    def authorization(self) -> str | None:
        """The `Proxy-Authorization` header's value for an HTTP proxy that asks for one."""
        if self.username is None:
            return None
        pair = f"{self.username}:{self.password or ''}".encode()
        return f"Basic {base64.b64encode(pair).decode('ascii')}"


def masked_url(url: str) -> str:
    """`url` with the password of its `user:password@` part starred; for any URL."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    authority, slash, path = rest.partition("/")
    user, at, host = authority.rpartition("@")
    if not at or ":" not in user:
        return url
    name = user.partition(":")[0]
    return f"{scheme}{sep}{name}:***@{host}{slash}{path}"


def parse_proxy(url: str) -> Proxy:
    """The proxy `url` names (`http://`, `socks5://`, `socks5h://`; no scheme means HTTP);
    raises `BadProxy` saying what is wrong, never echoing a password."""
    text = url.strip()
    if "://" not in text:
        text = f"http://{text}"
    shown = masked_url(text)
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as error:
        raise BadProxy(f"{shown} is not a proxy URL ({error})") from None
    scheme = parts.scheme.lower()
    if scheme == "https":
        raise BadProxy(
            f"{shown}: a proxy reached over TLS is not supported; name it `http://` "
            "(requests to an https upstream are encrypted through the tunnel end to end)"
        )
    if scheme not in SCHEMES:
        raise BadProxy(f"{shown}: the scheme must be one of {', '.join(SCHEMES)}")
    if not parts.hostname:
        raise BadProxy(f"{shown}: the proxy URL names no host")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise BadProxy(f"{shown}: a proxy URL is scheme://[user:password@]host:port alone")
    default = 1080 if scheme.startswith("socks") else 80
    kind: ProxyKind = scheme  # type: ignore[assignment]  # checked against SCHEMES above
    return Proxy(
        kind,
        parts.hostname,
        port if port is not None else default,
        unquote(parts.username) if parts.username is not None else None,
        unquote(parts.password) if parts.password is not None else None,
    )


@dataclass(frozen=True, slots=True)
class ProxyEnvironment:
    """The proxy variables as they stood when read: which upstreams go through which proxy."""

    http: Proxy | None = None
    https: Proxy | None = None
    bypass: NoProxy | None = None

    @classmethod
    def read(cls, environ: Mapping[str, str]) -> ProxyEnvironment:
        """The proxies `environ` names; raises `BadProxy` naming the variable at fault."""
        values = _variables(environ)
        fallback = values.get("all_proxy")
        found: dict[str, Proxy | None] = {}
        for scheme in ("http", "https"):
            value = values.get(f"{scheme}_proxy") or fallback
            if not value:
                found[scheme] = None
                continue
            try:
                found[scheme] = parse_proxy(value)
            except BadProxy as error:
                source = f"{scheme}_proxy" if values.get(f"{scheme}_proxy") else "all_proxy"
                raise BadProxy(f"the environment's {source}: {error}") from None
        no_proxy = values.get("no_proxy")
        return cls(found["http"], found["https"], NoProxy(no_proxy) if no_proxy else None)

    def passwords(self, settings: Iterable[str | None]) -> list[str]:
        """The passwords of these proxies and of the connections' `proxy:` `settings`."""
        proxies = [self.http, self.https]
        proxies += [parse_proxy(s) for s in settings if s is not None and not is_direct(s)]
        return [proxy.password for proxy in proxies if proxy is not None and proxy.password]

    def choose(self, scheme: str, host: str, port: int) -> Proxy | None:
        """The proxy for an upstream at `scheme://host:port`, or None to go direct."""
        proxy = self.https if scheme == "https" else self.http
        if proxy is None or (self.bypass is not None and self.bypass.matches(host, port)):
            return None
        return proxy


class NoProxy:
    """The hosts a `no_proxy` value sends direct."""

    def __init__(self, value: str) -> None:
        self.value = value
        """The variable as written."""
        self.everything = False
        self._names: list[tuple[str, int | None]] = []
        self._networks: list[tuple[_Network, int | None]] = []
        for raw in value.replace(" ", ",").split(","):
            entry = raw.strip().lower()
            if not entry:
                continue
            if entry == "*":
                self.everything = True
                continue
            name, port = _split_port(entry)
            try:
                self._networks.append((ipaddress.ip_network(name.strip("[]"), strict=False), port))
            except ValueError:
                self._names.append((name.lstrip("."), port))

    def matches(self, host: str, port: int) -> bool:
        """Whether `host:port` goes direct."""
        if self.everything:
            return True
        host = host.lower().strip("[]").rstrip(".")
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return any(
                (host == name or host.endswith(f".{name}")) and (wanted in (None, port))
                for name, wanted in self._names
            )
        return any(
            address in network and wanted in (None, port) for network, wanted in self._networks
        ) or any(host == name and wanted in (None, port) for name, wanted in self._names)


def _variables(environ: Mapping[str, str]) -> dict[str, str]:
    """Each proxy variable's value, the lower-case spelling winning even when empty."""
    found: dict[str, str] = {}
    for name in VARIABLES:
        if name in environ:
            found[name] = environ[name].strip()
        elif name.upper() in environ:
            found[name] = environ[name.upper()].strip()
    return found


def _split_port(entry: str) -> tuple[str, int | None]:
    """`host:port` (or `[v6]:port`) into its parts; a bare IPv6 address or CIDR is kept whole."""
    if entry.startswith("["):
        address, _, rest = entry[1:].partition("]")
        port = rest.removeprefix(":")
        return address, int(port) if port.isdigit() else None
    name, colon, port = entry.rpartition(":")
    if colon and port.isdigit() and ":" not in name:
        return name, int(port)
    return entry, None
