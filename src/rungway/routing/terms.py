"""A plan's terms as data, and the gate that keeps a plan connection to them.

The billing catalog states each plan's terms (`terms:` of its entry): the page and the date
it was read, which clients may use the plan, whether it is for one person, and the rule in
words. A new plan states its terms there and nowhere else.

By default a connection serves only the clients its plan's terms allow
(`RequestClient.client`, recognised by `protocol.clients`). An operator widens that with
the connection's `clients: any`; a connection bound to a client key (`client_key:`)
serves only requests made with that key. Both are skips with their own reason
(`terms`, `client_key`), judged per request right after an operator's disable.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rungway.routing.billing import BillingClass
from rungway.routing.plan import Skip, SkipReason
from rungway.routing.rungs import Rung

if TYPE_CHECKING:
    # The roster holds each connection's terms: snapshot.py imports this module.
    from rungway.routing.snapshot import RosterConnection

ANY_CLIENT = "any"
"""`terms.clients` of a plan whose terms let any client use it."""


@dataclass(frozen=True, slots=True)
class PlanTerms:
    """What a plan's terms say about who may use it, and where that is written."""

    page: str
    """The terms page (a URL)."""
    read: str
    """The date the page was read, `YYYY-MM-DD`."""
    clients: frozenset[str] | None
    """The client ids (`protocol.clients.KNOWN_CLIENTS`) that may use the plan; None: any."""
    says: str
    """What the page says, quoted or in short, with the reading behind `clients`."""
    one_person: bool
    """The plan is for one person: serving several people from it breaches its terms."""
    rule: str
    """The client rule in words, as a skip's detail says it after `terms: `."""


@dataclass(frozen=True, slots=True)
class RequestClient:
    """Who a request comes from: the client recognised from its headers, and its key."""

    client: str | None = None
    """A `protocol.clients` id, or None when the client is not one the terms name."""
    key: str | None = None
    """The name of the client key the request was made with; None without client keys."""


@dataclass(frozen=True, slots=True)
class ConnectionTerms:
    """What one connection's terms and its config allow, fixed at start-up."""

    terms: PlanTerms | None = None
    widened: bool = False
    """The operator set `clients: any`: any client may use it, whatever its terms say."""
    client_key: str | None = None
    """The one client key the config binds it to; None serves every key."""

    @property
    def restricted(self) -> bool:
        """True when some request could be kept off this connection."""
        return self.client_key is not None or (
            not self.widened and self.terms is not None and self.terms.clients is not None
        )

    def shared_warning(self, client_keys: int) -> str | None:
        """Why this connection may breach its plan's terms by serving several people: a plan
        for one person, not bound to one client key, behind `client_keys` keys (None if not)."""
        terms = self.terms
        if terms is None or not terms.one_person or self.client_key is not None:
            return None
        if client_keys < 2:
            return None
        return (
            f"a plan for one person, served to {client_keys} client keys; its terms "
            f"({terms.page}) give it to one person: bind it with `client_key: NAME`"
        )

    def note(self, names: Mapping[str, str]) -> str:
        """Which clients the connection serves, in words (`names`: client ids to names)."""
        terms = self.terms
        if self.widened:
            said = f"; its terms: {terms.rule}" if terms is not None else ""
            shown = f"any client, widened by the operator (clients: any){said}"
        elif terms is None or terms.clients is None:
            shown = "any client"
        else:
            clients = " and ".join(names.get(c, c) for c in sorted(terms.clients))
            shown = f"{clients} only, as its terms say ({terms.page}, read {terms.read})"
        if self.client_key is not None:
            shown += f"; bound to client key {self.client_key}"
        return shown

    def to_json(self, names: Mapping[str, str], client_keys: int) -> dict[str, object] | None:
        """The admin API's view; None for a connection with no terms and no choice made."""
        terms = self.terms
        if terms is None and not self.widened and self.client_key is None:
            return None
        return {
            "clients": sorted(terms.clients) if terms and terms.clients else ANY_CLIENT,
            "widened": self.widened,
            "client_key": self.client_key,
            "one_person": terms.one_person if terms else False,
            "page": terms.page if terms else None,
            "read": terms.read if terms else None,
            "rule": terms.rule if terms else None,
            "note": self.note(names),
            "warning": self.shared_warning(client_keys),
        }

    def skip_of(self, client: RequestClient) -> tuple[SkipReason, str] | None:
        """The reason and detail to keep `client`'s request off, or None when it may pass."""
        if self.client_key is not None and client.key != self.client_key:
            return (
                SkipReason.CLIENT_KEY,
                "client_key: bound by the config to one client key, not this request's",
            )
        terms = self.terms
        if self.widened or terms is None or terms.clients is None:
            return None
        if client.client in terms.clients:
            return None
        return SkipReason.TERMS, f"terms: {terms.rule}"


UNRESTRICTED = ConnectionTerms()
_NO_SKIPS: Mapping[str, Skip] = {}


class TermsGate:
    """The connections a request's client is kept off, by connection id, kept per client:
    the clients a gateway sees are few (a recognised client or none, times its keys)."""

    def __init__(self, connections: Iterable[RosterConnection]) -> None:
        self._restricted = [c for c in connections if c.terms.restricted]
        self._skips: dict[RequestClient, Mapping[str, Skip]] = {}

    @property
    def restricts(self) -> bool:
        """True when some connection may keep some client off: only then is a request's
        client worth recognising."""
        return bool(self._restricted)

    def skips(self, client: RequestClient | None) -> Mapping[str, Skip]:
        """Each connection `client` may not use, with its skip; empty for None (no check)."""
        if client is None or not self._restricted:
            return _NO_SKIPS
        found = self._skips.get(client)
        if found is None:
            found = {}
            for connection in self._restricted:
                kept_off = connection.terms.skip_of(client)
                if kept_off is not None:
                    reason, detail = kept_off
                    subscription = connection.billing.billing is BillingClass.SUBSCRIPTION
                    rung = Rung.SUBSCRIPTION if subscription else None
                    found[connection.id] = Skip(reason, detail, connection.id, None, rung)
            self._skips[client] = found
        return found


_FIELDS = ("page", "read", "clients", "says", "one_person", "rule")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def parse_terms(raw: object, known_clients: Collection[str]) -> PlanTerms:
    """A catalog entry's `terms:` mapping, checked field by field; `ValueError` names the
    field that is missing or wrong."""
    if not isinstance(raw, Mapping):
        raise ValueError("terms: a mapping of " + ", ".join(_FIELDS))
    missing = [name for name in _FIELDS if name not in raw]
    extra = sorted(str(name) for name in raw if name not in _FIELDS)
    if missing or extra:
        raise ValueError(f"terms: missing {missing}, unknown {extra}")
    for name in ("page", "says", "rule"):
        if not isinstance(raw[name], str) or not raw[name].strip():
            raise ValueError(f"terms.{name}: a non-empty text")
    if not str(raw["page"]).startswith("https://"):
        raise ValueError("terms.page: an https:// address")
    if not isinstance(raw["read"], str) or not _DATE.match(raw["read"]):
        raise ValueError("terms.read: a date written YYYY-MM-DD, quoted")
    if not isinstance(raw["one_person"], bool):
        raise ValueError("terms.one_person: true or false")
    clients = raw["clients"]
    allowed: frozenset[str] | None
    if clients == ANY_CLIENT:
        allowed = None
    elif isinstance(clients, list) and clients and all(c in known_clients for c in clients):
        allowed = frozenset(clients)
    else:
        raise ValueError(
            f"terms.clients: `any` or a list of {', '.join(sorted(known_clients))}; got {clients!r}"
        )
    return PlanTerms(
        page=raw["page"],
        read=raw["read"],
        clients=allowed,
        says=" ".join(raw["says"].split()),
        one_person=raw["one_person"],
        rule=raw["rule"].strip(),
    )
