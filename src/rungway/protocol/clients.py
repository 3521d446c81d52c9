"""Which client sent a request, recognised from the headers it sends.

A plan's terms name the clients that may use it (`routing/billing_catalog.yaml`,
`terms.clients`); this module names the client of each request so the ladder can keep a
plan to them. It reads headers only, never the body, and only when some connection's terms
restrict its clients.

What is matched, and why:

- `claude-code` (Claude Code, Anthropic's CLI) needs all three of what the CLI sends on
  every Messages request (its 2.1 releases, captured through the gateway in
  tests/clients/test_claude_code.py; docs/provider-signals.md A2.2):
  - `user-agent: claude-cli/<version> (external, <entrypoint>[, ...])`, with an entrypoint
    other than the Agent SDK's (`sdk-ts`, `sdk-py`). Interactive use sends `cli`, `claude -p`
    sends `sdk-cli`, the editor extensions send their own. Anthropic's legal page for
    Claude Code (read 2026-12-04) names the Agent SDK among the tools plan logins may not
    be used with, so a request the Agent SDK drives is not Claude Code's here;
  - `x-app: cli`;
  - `claude-code-20250219` among its `anthropic-beta` flags.
  A client that sends one of these (an SDK with a copied user agent) is not recognised:
  each alone is easy to send by mistake, the three together are a choice.
- `gemini-cli` (Google's Gemini CLI): a user agent starting `GeminiCLI` (0.61 sends
  `GeminiCLI-tui/0.61.0/<model> (linux; x64; terminal)`, captured the same way through
  tests/clients/test_gemini_cli.py).
- `antigravity` (Google's Antigravity CLI `agy` and editor): a user agent starting
  `antigravity/` (`antigravity/cli/<version> (aidev_client; ...)` for the CLI,
  `antigravity/ide/<version> <os>/<arch>` for the editor, as two open gateways send them;
  the CLI takes no base URL, so it reaches a gateway only through an interception proxy).

A plan whose terms let any client use it (`clients: any`) needs no recogniser; a client
added to a plan's terms is added here, with what it sends and where that was seen.

Recognition is not authentication: a client can send any header. It keeps honest clients
of other kinds off a plan whose terms exclude them, and the upstream's own check (a Claude
plan refuses other clients; docs/provider-signals.md A2.6) stays the last word.
"""

from __future__ import annotations

from collections.abc import Mapping

CLAUDE_CODE = "claude-code"
GEMINI_CLI = "gemini-cli"
ANTIGRAVITY = "antigravity"

KNOWN_CLIENTS: Mapping[str, str] = {
    CLAUDE_CODE: "Claude Code",
    GEMINI_CLI: "the Gemini CLI",
    ANTIGRAVITY: "Google's Antigravity clients",
}
"""Every client id a plan's terms may name, with its name in words."""

_CLAUDE_CODE_BETA = "claude-code-20250219"
_AGENT_SDK_ENTRYPOINTS = frozenset({"sdk-ts", "sdk-py"})


def recognise_client(headers: Mapping[str, str]) -> str | None:
    """The id of the client that sent `headers` (lower-case names), or None when unknown."""
    agent = headers.get("user-agent", "")
    if agent.startswith("claude-cli/"):
        return CLAUDE_CODE if _is_claude_code(agent, headers) else None
    if agent.startswith("GeminiCLI"):
        return GEMINI_CLI
    if agent.startswith("antigravity/"):
        return ANTIGRAVITY
    return None


def _is_claude_code(agent: str, headers: Mapping[str, str]) -> bool:
    if headers.get("x-app") != "cli":
        return False
    betas = headers.get("anthropic-beta", "")
    if _CLAUDE_CODE_BETA not in (beta.strip() for beta in betas.split(",")):
        return False
    # `claude-cli/2.1.332 (external, sdk-cli)`: the entrypoint follows the first comma.
    _, _, detail = agent.partition("(")
    parts = [part.strip() for part in detail.rstrip(")").split(",")]
    entrypoint = parts[1] if len(parts) > 1 else ""
    return bool(entrypoint) and entrypoint not in _AGENT_SDK_ENTRYPOINTS
