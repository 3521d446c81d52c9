"""Upstream failure text with every secret masked, before anything keeps or shows it.

An upstream's error can quote the credential it was sent: OpenAI's 401 echoes the key with
its middle starred, and a misbehaving upstream may echo it whole. Each failure is masked
as it leaves its attempt, so its message and body reach the client, the ledger's
attempts, the admin API and a cooldown's reason without the secret.
"""

from __future__ import annotations

from dataclasses import replace

from rungway.credentials.redaction import redact, redact_bytes
from rungway.protocol.failures import Failure


def masked(failure: Failure) -> Failure:
    """`failure` with every known secret and credential-shaped string in its message and
    body masked; `failure` itself when there is nothing to mask."""
    message = redact(failure.message)
    body = failure.body if failure.body is None else redact_bytes(failure.body)
    if message == failure.message and body is failure.body:
        return failure
    return replace(failure, message=message, body=body)
