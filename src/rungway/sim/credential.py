"""Whether a request carries the scenario's credential, and the provider's 401 when not.

The wire APIs and the usage endpoints check the same credential, each answering a refusal
in its own provider's error shape.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rungway.sim.exchange import RecordedRequest, Reply
from rungway.sim.scenario import AuthSpec

Authenticate = Callable[[RecordedRequest], Reply | None]
"""None when the request's credential is accepted, else the refusal to send."""


def credential_check(
    auth: AuthSpec,
    unauthorized: Callable[[str | None], Reply],
    schemes: Iterable[str] = ("bearer",),
) -> Authenticate:
    """Accept the scenario's token as `Authorization: <scheme> <token>` (or `x-api-key`).

    `unauthorized` gets the credential that was sent (None when none was) and renders
    the provider's 401.
    """
    accepted = {scheme.lower() for scheme in schemes}

    def authenticate(request: RecordedRequest) -> Reply | None:
        if auth.kind == "none":
            return None
        if auth.kind == "x-api-key":
            sent = request.header("x-api-key")
        else:
            scheme, _, token = (request.header("authorization") or "").strip().partition(" ")
            sent = token.strip() if scheme.lower() in accepted and token.strip() else None
        return None if sent == auth.token else unauthorized(sent)

    return authenticate


CLAUDE_CODE_ONLY = (
    "This credential is only authorized for use with Claude Code and cannot be used for "
    "other API requests."
)
"""Anthropic's refusal of a plan token sent by another client (provider-signals A2.6)."""


def refuses_client(auth: AuthSpec, request: RecordedRequest) -> bool:
    """True when a Claude plan token (`bearer`) comes from a client that does not send
    what Claude Code sends: its `claude-cli/` user agent, `x-app: cli` and the
    `claude-code-20250219` beta flag (provider-signals A2.2)."""
    if auth.kind != "bearer" or auth.clients == "any":
        return False
    betas = {beta.strip() for beta in (request.header("anthropic-beta") or "").split(",")}
    return not (
        (request.header("user-agent") or "").startswith("claude-cli/")
        and request.header("x-app") == "cli"
        and "claude-code-20250219" in betas
    )
