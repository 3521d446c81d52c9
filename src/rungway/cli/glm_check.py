"""`rungway doctor`'s check of a GLM Coding Plan connection's endpoint.

A plan key serves only Z.ai's plan endpoints: `.../api/coding/paas/v4` (Chat Completions,
`glm-coding`) and `.../api/anthropic` (Messages, `glm-coding-anthropic`). The general
`.../api/paas/v4` endpoint bills a platform balance and answers a plan key 429 with code
1113, "Insufficient balance or no resource package", which reads like an empty account
rather than a wrong URL; so a connection pointed elsewhere is told so before any request
is sent. Like doctor's other questions, this sends no credential.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from rungway.adapters.glm.adapter import ANTHROPIC_BASE_URL, DEFAULT_BASE_URL
from rungway.cli.findings import Finding, Level
from rungway.config import ConnectionConfig

_ENDPOINTS = {
    # provider: (what its path holds, its endpoint in words, its own URL)
    "glm-coding": ("/api/coding/paas/", "coding endpoint", DEFAULT_BASE_URL),
    "glm-coding-anthropic": ("/api/anthropic", "Anthropic endpoint", ANTHROPIC_BASE_URL),
}


def glm_findings(subject: str, connection: ConnectionConfig) -> list[Finding]:
    """A warning when a GLM Coding Plan connection's base URL is not its plan endpoint."""
    endpoint = _ENDPOINTS.get(connection.provider)
    if endpoint is None or connection.base_url is None:
        return []
    marker, name, own = endpoint
    if marker in urlsplit(connection.base_url).path:
        return []
    message = (
        f"{connection.base_url} is not the GLM Coding Plan's {name}: a plan key is refused "
        "elsewhere, the general API answering 429 with code 1113 as if the balance were empty"
    )
    china = own.replace("api.z.ai", "open.bigmodel.cn")
    fix = f"leave `base_url` out ({own}), or use {china} for the plan bought in China"
    return [Finding(Level.WARN, subject, message, fix)]
