"""What every upstream request shares, in one place: the URL under the connection's base,
the client headers a family passes on, the headers it always sends, and the credential in
the header its `Auth` calls for.

A family states its `RequestShape` once; an adapter for another provider of the same shape
changes only the fields that differ (`dataclasses.replace`), such as a user agent the
provider expects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rungway.adapters.base import UpstreamCall, UpstreamRequest
from rungway.protocol.auth import Auth

JSON = (("content-type", "application/json"),)
"""The one header every family sends as it is: a JSON body."""


@dataclass(frozen=True, slots=True)
class RequestShape:
    """How one API family's requests look on the wire, besides their path and body."""

    forwarded: tuple[str, ...]
    """Prefixes of the client headers passed upstream as sent (the client's identity, its
    beta opt-ins); nothing else of the client's goes upstream."""
    key_header: str = "authorization"
    """Where an API key goes: `authorization` sends it as a bearer token, any other name
    carries the key as its whole value. A login's OAuth token always goes as a bearer."""
    fixed: tuple[tuple[str, str], ...] = JSON
    """Headers every request carries, over whatever the client sent."""
    defaults: tuple[tuple[str, str], ...] = ()
    """Headers sent only when the client sent none of that name (a user agent, a version)."""
    _fixed: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Merged into each request's headers: a dict merges in one step, pairs one by one.
        object.__setattr__(self, "_fixed", dict(self.fixed))

    def request(
        self, call: UpstreamCall, path: str, body: bytes, *, strip_usage_chunk: bool = False
    ) -> UpstreamRequest:
        """A request to `path` under the connection's base URL, through its proxy, with the
        headers: forwarded, fixed, defaulted, then the credential."""
        forwarded = self.forwarded
        headers = {
            name: value for name, value in call.client_headers.items() if name.startswith(forwarded)
        }
        headers.update(self._fixed)
        for name, value in self.defaults:
            headers.setdefault(name, value)
        connection = call.connection
        secret = connection.credential()
        if secret is not None:
            if self.key_header == "authorization" or connection.auth is Auth.OAUTH:
                headers["authorization"] = f"Bearer {secret.get_secret_value()}"
            else:
                headers[self.key_header] = secret.get_secret_value()
        return UpstreamRequest(
            f"{connection.base_url}{path}", headers, body, strip_usage_chunk, connection.proxy
        )

    def headers(self, call: UpstreamCall) -> dict[str, str]:
        """The upstream headers of `call` (those `request` sends)."""
        return self.request(call, "", b"").headers
