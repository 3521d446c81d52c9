"""Loading the config: the YAML file read and validated once, a bad file as a `ConfigError`
naming the file, the key and the problem, and the check that a bind beyond this machine
has client keys."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from rungway.config.settings import Settings


class ConfigError(Exception):
    """The configuration cannot be used; the message names the file, the key and the problem."""


def load_settings(path: Path) -> Settings:
    """Read and validate the YAML file at `path`."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the config file: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    return parse_settings(raw, source=str(path))


def parse_settings(raw: Any, source: str = "<config>") -> Settings:
    """Validate an already-parsed config document."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping with a `connections` list")
    try:
        return Settings.model_validate(raw)
    except ValidationError as error:
        problems = "\n".join(
            f"  {_dotted(issue['loc']) or '(top level)'}: {_clean(issue['msg'])}"
            for issue in error.errors()
        )
        raise ConfigError(f"{source}: invalid configuration\n{problems}") from None


def check_bind(host: str, settings: Settings) -> None:
    """Refuse a non-loopback bind address when no client keys protect the gateway."""
    if settings.client_keys or is_loopback(host):
        return
    raise ConfigError(
        f"server.host {host!r}: refusing to listen beyond this machine without client keys; "
        "add `client_keys` to the config or bind to 127.0.0.1"
    )


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _dotted(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in {
            "function-after[_exactly_one()]",
            "function-after[_credential_matches_auth()]",
        }:
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


def _clean(message: str) -> str:
    return message.removeprefix("Value error, ")
