"""What `rungway init` finds on this machine: plan logins, API keys and a local Ollama.

Nothing here stores or prints a secret: a login is read only to check that it can be
used, and an API key only to check that its variable is set.
"""

from __future__ import annotations

import http.client
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from rungway.config import Provider
from rungway.credentials import antigravity
from rungway.credentials.logins import DEFAULT_SOURCES, LoginError, read_login
from rungway.credentials.store import LoginKind

KEY_VARIABLES: tuple[tuple[str, Provider], ...] = (
    ("ANTHROPIC_API_KEY", "anthropic"),
    ("OPENAI_API_KEY", "openai"),
    ("DEEPSEEK_API_KEY", "deepseek"),
    ("OPENROUTER_API_KEY", "openrouter"),
    ("GROQ_API_KEY", "groq"),
    ("GEMINI_API_KEY", "gemini"),
    # A GLM Coding Plan key, under the names Z.ai's SDKs (zai-sdk, zhipuai) and coding tools
    # read it from; the starter uses the first one set.
    ("ZAI_API_KEY", "glm-coding"),
    ("ZHIPUAI_API_KEY", "glm-coding"),
    ("GLM_API_KEY", "glm-coding"),
    # A Kimi Code console key, under the name the Kimi CLI reads it from (a Moonshot
    # platform key is another account, which the coding endpoint refuses).
    ("KIMI_API_KEY", "kimi-code"),
    # A MiniMax Token Plan key (sk-cp-...), under the name MiniMax's own tools read it from.
    ("MINIMAX_API_KEY", "minimax-token-plan"),
)
"""The environment variables each provider's own tools read an API key from."""

LOGIN_NAMES: dict[LoginKind, str] = {
    "claude": "Claude Code",
    "codex": "Codex",
    "copilot": "GitHub Copilot",
    "gemini": "Gemini CLI",
    "antigravity": "Antigravity CLI",
}

SUBSCRIPTION_LOGINS: tuple[LoginKind, ...] = ("claude", "codex", "antigravity")
"""The plan logins looked for; a Copilot token is imported with `rungway connections import`.
A Gemini CLI login is noted, not offered: Code Assist no longer serves consumer plans."""
CODE_ASSIST_RETIRED = (
    "Gemini CLI login at {path} is not offered: Google stopped serving the Gemini CLI and "
    "Code Assist to consumer plans on 2026-06-18 and moved them to Antigravity; sign in "
    "with the Antigravity CLI (agy) and run init again, or `rungway connections import "
    "antigravity --from FILE`"
)

OLLAMA_HOST_VAR = "OLLAMA_HOST"
OLLAMA_DEFAULT_URL = "http://127.0.0.1:11434"
OLLAMA_TIMEOUT_S = 1.5
"""Long enough for a local server to answer, short enough that a missing one is not felt."""

_LOGIN_FOLDERS: dict[LoginKind, tuple[str, str]] = {
    # (the variable that moves the tool's folder, the login's file name in it)
    "claude": ("CLAUDE_CONFIG_DIR", ".credentials.json"),
    "codex": ("CODEX_HOME", "auth.json"),
}


@dataclass(frozen=True, slots=True)
class LoginFound:
    """A plan login file that parses."""

    kind: LoginKind
    path: Path


@dataclass(frozen=True, slots=True)
class KeyFound:
    """An API key's environment variable, set and not empty."""

    variable: str
    provider: Provider


@dataclass(frozen=True, slots=True)
class OllamaFound:
    """A local Ollama that answered, and the models it has."""

    base_url: str
    models: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Discovery:
    """Everything found, plus one line for each thing seen that cannot be used."""

    logins: tuple[LoginFound, ...]
    keys: tuple[KeyFound, ...]
    ollama: OllamaFound | None
    notes: tuple[str, ...]
    ollama_url: str
    """Where Ollama was looked for, found or not."""

    @property
    def usable(self) -> bool:
        """True when at least one connection can be made from what was found."""
        return bool(self.logins or self.keys or (self.ollama and self.ollama.models))


def discover() -> Discovery:
    """Look for logins, API keys and a local Ollama."""
    notes: list[str] = []
    logins: list[LoginFound] = []
    for kind in SUBSCRIPTION_LOGINS:
        path = login_path(kind)
        if not path.is_file():
            continue
        try:
            read_login(kind, str(path))
        except LoginError as error:
            notes.append(f"{LOGIN_NAMES[kind]} login cannot be used: {error}")
            continue
        logins.append(LoginFound(kind, path))
    retired = login_path("gemini")
    if retired.is_file():
        notes.append(CODE_ASSIST_RETIRED.format(path=retired))
    keys = tuple(
        KeyFound(variable, provider)
        for variable, provider in KEY_VARIABLES
        if os.environ.get(variable, "").strip()
    )
    ollama_url = ollama_base_url(os.environ.get(OLLAMA_HOST_VAR))
    models = probe_ollama(ollama_url)
    ollama = None if models is None else OllamaFound(ollama_url, models)
    if ollama is not None and not ollama.models:
        notes.append(f"Ollama at {ollama_url} has no models yet; pull one and run init again")
    return Discovery(tuple(logins), keys, ollama, tuple(notes), ollama_url)


def login_path(kind: LoginKind) -> Path:
    """Where the tool keeps its login: its own config-directory variable, else the default."""
    # Both tools move their whole folder when told to, and the login moves with it.
    if kind == "antigravity":
        return Path(antigravity.default_source()).expanduser()
    moved = _LOGIN_FOLDERS.get(kind)
    if moved is not None:
        folder = os.environ.get(moved[0], "").strip()
        if folder:
            return Path(folder).expanduser() / moved[1]
    return Path(DEFAULT_SOURCES[kind]).expanduser()


def ollama_base_url(host: str | None) -> str:
    """The URL an Ollama client reaches for `OLLAMA_HOST` (`host`, `host:port` or a URL)."""
    value = (host or "").strip()
    if not value:
        return OLLAMA_DEFAULT_URL
    # As Ollama reads the variable: without a scheme the port defaults to 11434, with one
    # to the scheme's own port.
    scheme, has_scheme, rest = value.partition("://")
    if not has_scheme:
        scheme, rest = "http", value
    default_port = 11434 if not has_scheme else (443 if scheme == "https" else 80)
    parsed = urllib.parse.urlsplit(f"{scheme}://{rest}")
    try:
        port = parsed.port or default_port
    except ValueError:
        port = default_port
    hostname = parsed.hostname or "127.0.0.1"
    # A server bound to every address is reached on loopback.
    if hostname in {"0.0.0.0", "::"}:
        hostname = "127.0.0.1"
    if ":" in hostname:
        hostname = f"[{hostname}]"
    path = parsed.path.rstrip("/")
    return f"{scheme}://{hostname}:{port}{path}"


def probe_ollama(base_url: str, timeout_s: float = OLLAMA_TIMEOUT_S) -> tuple[str, ...] | None:
    """The models a local Ollama lists, or None when nothing answers there."""
    # Its OpenAI-compatible listing first; servers older than it list at /api/tags.
    for path, listing, field in (("/v1/models", "data", "id"), ("/api/tags", "models", "name")):
        try:
            document = _get_json(f"{base_url}{path}", timeout_s)
        except urllib.error.HTTPError:
            continue
        except (OSError, ValueError, http.client.HTTPException):
            # Refused, timed out, or something that is not an HTTP JSON server.
            return None
        entries = document.get(listing) if isinstance(document, dict) else None
        if isinstance(entries, list):
            names = (entry.get(field) for entry in entries if isinstance(entry, dict))
            return tuple(sorted({name for name in names if isinstance(name, str) and name}))
    return None


def _get_json(url: str, timeout_s: float) -> Any:
    # A proxy set for the internet must not carry a request to this machine's own server.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with opener.open(request, timeout=timeout_s) as response:
        return orjson.loads(response.read())
