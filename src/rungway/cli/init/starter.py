"""The starter config `rungway init` writes: YAML with comments, and no secret in it.

An API key becomes `credential: {env: VARIABLE}`; a plan login becomes
`credential: {store: NAME}` and is imported into the encrypted store when the file is
written. Plan connections come first and the local model next, so the ladder reads top down.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import orjson
import yaml

from rungway.cli.import_login import LOGIN_CONNECTION
from rungway.cli.init.discovery import Discovery
from rungway.config import Provider
from rungway.credentials.store import LoginKind
from rungway.pricing import TierSettings, classify_tier

_SUBSCRIPTION: dict[LoginKind, tuple[str, tuple[str, ...], str]] = {
    # (connection id and store name, models, what the subscription is)
    "claude": ("claude-plan", ("claude-sonnet-4-5", "claude-haiku-4-5"), "Claude plan"),
    "codex": ("codex-plan", ("gpt-5-codex", "gpt-5"), "ChatGPT plan"),
    "gemini": ("gemini-plan", ("gemini-2.5-pro", "gemini-2.5-flash"), "Gemini Code Assist plan"),
    "antigravity": (
        "antigravity-plan",
        ("gemini-3-flash", "claude-sonnet-4-6"),
        # Its terms allow Google's own clients only, and those take no base URL.
        "Antigravity plan (its terms: Antigravity's own clients only; `clients: any` widens it)",
    ),
}

_KEYED: dict[Provider, tuple[str, tuple[str, ...]]] = {
    # (connection id, models: a cheap one first, then a stronger one)
    "anthropic": ("claude-api", ("claude-haiku-4-5", "claude-sonnet-4-5")),
    "openai": ("openai-api", ("gpt-5-mini", "gpt-5")),
    "deepseek": ("deepseek", ("deepseek-chat", "deepseek-reasoner")),
    "openrouter": ("openrouter", ("deepseek/deepseek-chat-v3.1", "openai/gpt-5-mini")),
    "groq": ("groq", ("openai/gpt-oss-120b", "llama-3.3-70b-versatile")),
    "gemini": ("gemini-api", ("gemini-2.5-flash", "gemini-2.5-pro")),
    "glm-coding": ("glm-plan", ("glm-4.7", "glm-5.2")),
    "kimi-code": ("kimi-plan", ("kimi-for-coding", "k3")),
    "minimax-token-plan": ("minimax-plan", ("MiniMax-M2.7", "MiniMax-M3")),
}

_PLAN_KEYS: dict[Provider, tuple[str, str]] = {
    # A plan's own key: a subscription on rung 0, not a per-token bill; and what becomes of
    # a key of the same vendor that is not the plan's.
    "glm-coding": (
        "GLM Coding Plan",
        "A platform key without the plan is refused (429, 1113). Z.ai's terms keep the plan"
        " to its coding tools: Claude Code here, others with `clients: any`.",
    ),
    "kimi-code": ("Kimi Code", "Only a Kimi Code console key serves; a Moonshot key is refused."),
    "minimax-token-plan": (
        "MiniMax Token Plan",
        "Only its sk-cp- key serves; a pay-as-you-go sk-api- key is refused (401).",
    ),
}

# Every connection above serves something below premium (a plan, a local model or a cheap
# model), so closing premium never leaves the starter config with nothing to serve.
_LADDER = """
# The ladder's tuning. rung_budget_usd caps spend per paid rung each budget_period, in
# US dollars: 0 closes a rung, and a rung left out has no limit. premium: 0 keeps every
# request off premium-priced models (the tier of each is noted above) until you raise it.
# `rungway spend` shows what each rung has used.
ladder:
  rung_budget_usd:
    cheap: 5
    premium: 0
  budget_period: month
"""

_HEADER = """\
# rungway config, written by `rungway init`.
#
# Check it with `rungway doctor` (credentials, upstreams, the clock), then start the
# gateway with `rungway serve`; it listens on http://127.0.0.1:4141. Ask for the model
# `auto/thrifty` to use the ladder: plan logins first, then local models, then paid
# models one rung at a time (free, cheap, premium); `auto/subscription` never pays.
#
# No secret is written here. `credential: {env: VAR}` reads an API key from the
# environment when the gateway starts; `credential: {store: NAME}` names a login kept
# encrypted in the credential store, which the gateway renews before it expires
# (`rungway connections import` replaces it from the tool's login file).
"""

_CONNECTIONS = """
# Each connection is one account at a provider: `id` (used in the ledger and in
# `id/model` requests), `provider`, `auth` (oauth, apikey or none), `credential`,
# an optional `base_url`, and the `models` it serves.
connections:
"""

_ALIASES = """
# Map the model names clients send to others, e.g. every Claude model to the ladder:
# aliases:
#   "claude-*": auto/thrifty
"""

EXAMPLE = """\
connections:
  # An API key read from an environment variable:
  - id: claude-api
    provider: anthropic
    auth: apikey
    credential: {env: ANTHROPIC_API_KEY}
    models: [claude-haiku-4-5, claude-sonnet-4-5]
  # A local model server, no key:
  - id: ollama
    provider: ollama
    auth: none
    base_url: http://127.0.0.1:11434/v1
    models: [llama3.2]
"""
"""A commented example for when nothing was found; it is shown, not written."""


@dataclass(frozen=True, slots=True)
class LoginImport:
    """A login to import into the credential store when the file is written."""

    kind: LoginKind
    name: str
    source: str


@dataclass(frozen=True, slots=True)
class Starter:
    """The config text and the logins it refers to by store name."""

    text: str
    imports: tuple[LoginImport, ...]


def build_starter(found: Discovery) -> Starter:
    """The starter config for what was found."""
    blocks: list[str] = []
    imports: list[LoginImport] = []
    tiers = TierSettings()
    for login in found.logins:
        name, models, subscription = _SUBSCRIPTION[login.kind]
        provider = LOGIN_CONNECTION[login.kind][0]
        comment = f"{subscription} (rung 0, subscription): tried first, never billed per token."
        credential = f"{{store: {name}}}"
        blocks.append(
            _connection(comment, name, provider, auth="oauth", credential=credential, models=models)
        )
        imports.append(LoginImport(login.kind, name, str(login.path)))
    if found.ollama is not None and found.ollama.models:
        comment = "Local Ollama (rung 1, keyless): no key, no bill."
        base_url = f"{found.ollama.base_url}/v1"
        models = found.ollama.models
        blocks.append(
            _connection(comment, "ollama", "ollama", auth="none", base_url=base_url, models=models)
        )
    keyed: set[Provider] = set()
    for key in found.keys:
        if key.provider in keyed:
            # Several variables can hold one provider's key (GLM's): the first one set wins.
            continue
        keyed.add(key.provider)
        name, models = _KEYED[key.provider]
        verdicts = [classify_tier(key.provider, model, tiers).tier for model in models]
        rungs = ", ".join(f"{model} {tier}" for model, tier in zip(models, verdicts, strict=True))
        comment = f"API key from ${key.variable}, billed per token: {rungs}."
        plan = _PLAN_KEYS.get(key.provider)
        if plan is not None:
            comment = (
                f"{plan[0]} key from ${key.variable} (rung 0, subscription): tried first, never"
                f" billed per token. {plan[1]}"
            )
        credential = f"{{env: {key.variable}}}"
        blocks.append(
            _connection(
                comment, name, key.provider, auth="apikey", credential=credential, models=models
            )
        )
    text = _HEADER + _CONNECTIONS + "\n".join(blocks) + _LADDER
    return Starter(text + _ALIASES, tuple(imports))


def _connection(
    comment: str,
    connection_id: str,
    provider: str,
    *,
    auth: str,
    credential: str | None = None,
    base_url: str | None = None,
    models: tuple[str, ...],
) -> str:
    lines = [f"  # {line}" for line in textwrap.wrap(comment, width=84)]
    lines += [f"  - id: {connection_id}", f"    provider: {provider}", f"    auth: {auth}"]
    if credential is not None:
        lines.append(f"    credential: {credential}")
    if base_url is not None:
        lines.append(f"    base_url: {_scalar(base_url, flow=False)}")
    lines.append(f"    models: [{', '.join(_scalar(model, flow=True) for model in models)}]")
    return "\n".join(lines) + "\n"


def _scalar(value: str, *, flow: bool) -> str:
    """`value` as a YAML scalar: plain when it reads back as the same string, else quoted."""
    # A model named `1.5` or `yes` would otherwise read back as a number or a boolean.
    document, expected = (f"[{value}]", [value]) if flow else (f"k: {value}", {"k": value})
    try:
        if value and yaml.safe_load(document) == expected:
            return value
    except yaml.YAMLError:
        pass
    # A JSON string is a valid double-quoted YAML scalar.
    return orjson.dumps(value).decode()
