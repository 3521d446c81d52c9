"""How a connection authenticates upstream."""

from __future__ import annotations

from enum import StrEnum


class Auth(StrEnum):
    """How a connection authenticates upstream."""

    APIKEY = "apikey"
    OAUTH = "oauth"
    NONE = "none"
