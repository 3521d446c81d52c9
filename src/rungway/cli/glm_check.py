"""`rungway doctor`'s check of a GLM Coding Plan connection's endpoint.

A plan key serves only Z.ai's coding endpoint (`.../api/coding/paas/v4`, and
`.../api/anthropic` for Anthropic-shaped tools). The general `.../api/paas/v4` endpoint
bills a platform balance and answers a plan key 429 with code 1113, "Insufficient balance
or no resource package", which reads like an empty account rather than a wrong URL; so a
`glm-coding` connection pointed there is told so before any request is sent. Like doctor's
other questions, this sends no credential.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from rungway.adapters.glm.adapter import DEFAULT_BASE_URL
from rungway.cli.findings import Finding, Level
from rungway.config import ConnectionConfig

_CODING_PATH = "/api/coding/paas/"


def glm_findings(subject: str, connection: ConnectionConfig) -> list[Finding]:
    """A warning when a GLM Coding Plan connection's base URL is not the coding endpoint."""
    if connection.provider != "glm-coding" or connection.base_url is None:
        return []
    path = urlsplit(connection.base_url).path
    if _CODING_PATH in path:
        return []
    message = (
        f"{connection.base_url} is not the GLM Coding Plan's coding endpoint: the general "
        "API there bills a platform balance and refuses a plan key (429, code 1113)"
    )
    fix = (
        f"leave `base_url` out ({DEFAULT_BASE_URL}), or use "
        "https://open.bigmodel.cn/api/coding/paas/v4 for the plan bought in China"
    )
    return [Finding(Level.WARN, subject, message, fix)]
