"""Real clients against a real gateway on loopback, in front of simulated upstreams.

The Claude Code, Codex and Gemini CLIs come from npm, installed by `.ci/run` into `.ci/node/`;
without them these tests skip, or fail when RUNGWAY_REQUIRE_ALL_TESTS=1 (tests/installs.py).
Each test gets its own world: simulated upstreams (in-process `SimUpstream`s), a gateway
whose rung 0 is the simulated plan and whose cheap rung is a simulated OpenAI-compatible
provider, and a temporary HOME and config folder for the CLI, so nothing of the machine's
user reaches the CLI and nothing the CLI writes outlives the test.

No real provider is ever contacted: the CLIs get a fresh environment (not this process's),
their base URL is the gateway, and every proxy variable points at a closed loopback port
with only loopback exempt, so a request for any other host fails at once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rungway.app import Gateway, build_gateway
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.ledger.sqlite import read_rows
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.sim import RecordedRequest, Scenario, SimUpstream, builtin_scenario, load_scenario
from tests.installs import ci_step, not_installed

REPO_ROOT = Path(__file__).resolve().parents[2]
NODE_BIN = REPO_ROOT / ".ci" / "node" / "node_modules" / ".bin"
INSTALL_STEP = f"from the repository root, run: {ci_step('npm install --prefix .ci/node')}"

LADDER = "auto/thrifty"
CLAUDE_CLIENT_KEY = "sk-rungway-clients-claude-code"
CODEX_CLIENT_KEY = "sk-rungway-clients-codex"
CODEX_KEY_ENV = "RUNGWAY_CODEX_KEY"
GEMINI_CLIENT_KEY = "sk-rungway-clients-gemini-cli"

SUBSCRIPTION_REPLY = "rungway-plan-reply: the simulated Claude plan answered."
CODEX_REPLY = "rungway-codex-reply: the simulated Codex plan answered."
CHEAP_REPLY = "rungway-cheap-reply: the simulated cheap provider answered."
GEMINI_PLAN_REPLY = "rungway-gemini-plan-reply: the simulated Antigravity plan answered."
FREE_REPLY = "rungway-free-reply: the simulated free-tier Gemini API key answered."
TOOL_MARKER = "rungway-tool-ok"

# Plenty for a handful of Claude Code or Codex turns (each sends 7k to 13k input tokens);
# a test that wants a plan spent sets its window's use to the capacity.
SUBSCRIPTION_WINDOW_CAPACITY = 5_000_000
CLI_TIMEOUT_S = 90.0
# A port nothing listens on (the discard service): any proxied request fails at once.
DEAD_PROXY = "http://127.0.0.1:9"


def _find_cli(name: str, home: Path) -> Path:
    path = NODE_BIN / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        not_installed(f"the {name} CLI is not installed at {path}", INSTALL_STEP)
    probe = subprocess.run(
        [str(path), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)},
    )
    if probe.returncode != 0:
        pytest.fail(
            f"{path} --version failed ({probe.returncode}): {probe.stdout}{probe.stderr}\n"
            f"The install looks incomplete: {INSTALL_STEP}",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="session")
def claude_cli(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The installed `claude` (Claude Code); skips the test when it is missing."""
    return _find_cli("claude", tmp_path_factory.mktemp("claude-probe"))


@pytest.fixture(scope="session")
def codex_cli(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The installed `codex` (the Codex CLI); skips the test when it is missing."""
    return _find_cli("codex", tmp_path_factory.mktemp("codex-probe"))


@pytest.fixture(scope="session")
def gemini_cli(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The installed `gemini` (the Gemini CLI); skips the test when it is missing."""
    return _find_cli("gemini", tmp_path_factory.mktemp("gemini-probe"))


# --- the gateway ------------------------------------------------------------------------


@dataclass(frozen=True)
class GatewayCall:
    """One request the gateway received, with the status it answered."""

    method: str
    path: str
    status: int


@dataclass
class RecordingApp:
    """ASGI middleware that notes each HTTP request to the gateway and its status."""

    app: ASGIApp
    calls: list[GatewayCall] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 0

        async def noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, noting_status)
        finally:
            self.calls.append(GatewayCall(scope["method"], scope["path"], status))


@dataclass
class World:
    """A running gateway, its simulated upstreams and a scratch folder for one CLI."""

    url: str
    gateway: Gateway
    ledger_path: Path
    recorder: RecordingApp
    subscription: SimUpstream
    cheap: SimUpstream
    folder: Path
    free: SimUpstream | None = None
    """The free rung, in the Gemini world only: a Gemini API key on the free tier."""

    def rows(self) -> list[dict[str, Any]]:
        """Every ledger row, newest first, once all queued rows are written."""
        self.gateway.ledger.flush()
        return read_rows(self.ledger_path)

    def endpoints(self) -> list[tuple[str, str, int]]:
        """(method, path, status) of every request the gateway received, in order."""
        return [(call.method, call.path, call.status) for call in self.recorder.calls]

    def exhaust_subscription(self) -> None:
        """Spend every window of the simulated plan (as if its users had used it up)."""
        for window in self.subscription.scenario.windows:
            self.subscription.set_window_used(window.name, window.capacity)


def _scenario(
    name: str,
    reply: str,
    tool_calls: Sequence[Mapping[str, Any]] = (),
    subscription: bool = False,
    widened: bool = False,
) -> Scenario:
    """A built-in scenario with a known reply (and tools), and roomy windows for a plan;
    `widened`, a plan that does not check its client."""
    raw = load_scenario(builtin_scenario(name)).model_dump(mode="json")
    raw["response"] = {**raw["response"], "text": reply, "tool_calls": list(tool_calls)}
    if subscription:
        raw["windows"] = [{**w, "capacity": SUBSCRIPTION_WINDOW_CAPACITY} for w in raw["windows"]]
    if widened:
        raw["auth"] = {**raw["auth"], "clients": "any"}
        if raw.get("antigravity") is not None:
            raw["antigravity"] = {**raw["antigravity"], "clients": "any"}
    return Scenario.model_validate(raw)


def _connection(
    connection_id: str, provider: str, auth: str, *, url: str, sim: SimUpstream, folder: Path
) -> dict[str, Any]:
    secret = folder / f"{connection_id}.secret"
    secret.write_text(sim.scenario.auth.token or "")
    return {
        "id": connection_id,
        "provider": provider,
        "auth": auth,
        "credential": {"file": str(secret)},
        "base_url": url,
        "models": [model.id for model in sim.scenario.models],
    }


def _client_key(name: str, key: str, folder: Path) -> dict[str, Any]:
    path = folder / f"client-{name}.key"
    path.write_text(key)
    return {"name": name, "key": {"file": str(path)}}


StartWorld = Callable[..., World]


@dataclass(frozen=True)
class _Subscription:
    """A simulated plan: its scenario, reply, connection id, provider and API path."""

    scenario: str
    reply: str
    connection_id: str
    provider: str
    path: str = ""


_SUBSCRIPTIONS = {
    "claude": _Subscription("claude-plan", SUBSCRIPTION_REPLY, "claude-plan", "anthropic"),
    "codex": _Subscription(
        "codex-plan", CODEX_REPLY, "codex-plan", "codex", path="/backend-api/codex"
    ),
    # Google's plan of today: Code Assist stopped serving consumer plans on 2026-06-18.
    "gemini": _Subscription(
        "antigravity", GEMINI_PLAN_REPLY, "gemini-plan", "antigravity", path="/v1internal"
    ),
}


@pytest.fixture
def start_world(tmp_path: Path) -> Iterator[StartWorld]:
    """Start a world whose plan is `claude` (Claude plan), `codex` (Codex plan) or `gemini`
    (an Antigravity login, with a free-tier Gemini API key as the free rung).

    `tool_calls` lists the tools the simulated plan asks for when a request offers them.
    `widened` serves any client from the plan (its connection's `clients: any`), and its
    simulator does not check the client: for a CLI that its plan's terms do not name.
    """
    stops: list[Callable[[], None]] = []

    def start(
        subscription: str, *, tool_calls: Sequence[Mapping[str, Any]] = (), widened: bool = False
    ) -> World:
        if subscription not in _SUBSCRIPTIONS:
            raise ValueError(f"unknown subscription {subscription!r}")
        plan = _SUBSCRIPTIONS[subscription]
        folder = tmp_path / "world"
        folder.mkdir()
        sim = SimUpstream(
            _scenario(plan.scenario, plan.reply, tool_calls, subscription=True, widened=widened)
        )
        free = (
            SimUpstream(_scenario("gemini-api", FREE_REPLY)) if subscription == "gemini" else None
        )
        cheap = SimUpstream(_scenario("cheap-openai", CHEAP_REPLY))
        for upstream in (sim, free, cheap):
            if upstream is not None:
                upstream.start()
                stops.append(upstream.stop)
        connections = [
            _connection(
                plan.connection_id,
                plan.provider,
                "oauth",
                url=sim.url + plan.path,
                sim=sim,
                folder=folder,
            )
            | ({"clients": "any"} if widened else {})
        ]
        if free is not None:
            connections.append(
                _connection(
                    "gemini-free",
                    "gemini",
                    "apikey",
                    url=free.url + "/v1beta",
                    sim=free,
                    folder=folder,
                )
            )
        connections.append(
            _connection(
                "cheap", "deepseek", "apikey", url=cheap.url + "/v1", sim=cheap, folder=folder
            )
        )
        ledger_path = folder / "ledger.sqlite3"
        settings = parse_settings(
            {
                "ledger": {"path": str(ledger_path)},
                # No background polls: the tests read every request the upstreams receive.
                "quota": {"poll_interval_s": 0},
                "connections": connections,
                # A free-tier Gemini API key costs nothing: its models sit on the free rung.
                "tiers": {"providers": {"gemini": "free"}},
                # Whatever Claude or Gemini model name a CLI sends climbs the ladder.
                "aliases": {"claude-*": LADDER, "gemini-*": LADDER},
                "client_keys": [
                    _client_key("claude-code", CLAUDE_CLIENT_KEY, folder),
                    _client_key("codex", CODEX_CLIENT_KEY, folder),
                    _client_key("gemini-cli", GEMINI_CLIENT_KEY, folder),
                ],
            }
        )
        gateway = build_gateway(settings, read_secrets(settings))
        recorder = RecordingApp(gateway.app)
        server = BackgroundServer(uvicorn_config(recorder), name="gateway-for-clients")
        url = server.start()
        stops.append(server.stop)
        return World(url, gateway, ledger_path, recorder, sim, cheap, folder, free)

    yield start
    for stop in reversed(stops):
        stop()


# --- running the CLIs -------------------------------------------------------------------


@dataclass(frozen=True)
class CliRun:
    """What a CLI run printed and how it ended."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        """The run, for an assertion message."""
        return (
            f"$ {' '.join(self.args)}\nexit code {self.returncode}\n"
            f"--- stdout ---\n{self.stdout}\n--- stderr ---\n{self.stderr}"
        )


def _base_env(home: Path) -> dict[str, str]:
    """A fresh environment: no variable of this process except PATH, no way off loopback."""
    tmp = home / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
    }
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = DEAD_PROXY
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    shell = shutil.which("bash")
    if shell is not None:
        env["SHELL"] = shell
    return env


def _run(args: list[str], env: Mapping[str, str], cwd: Path) -> CliRun:
    try:
        done = subprocess.run(
            args,
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout.decode() if isinstance(expired.stdout, bytes) else expired.stdout
        err = expired.stderr.decode() if isinstance(expired.stderr, bytes) else expired.stderr
        pytest.fail(
            f"{args[0]} did not finish in {CLI_TIMEOUT_S} s\n"
            f"--- stdout ---\n{out or ''}\n--- stderr ---\n{err or ''}"
        )
    return CliRun(args, done.returncode, done.stdout, done.stderr)


@dataclass
class ClaudeCode:
    """Claude Code, headless (`claude -p`), pointed at a world's gateway."""

    cli: Path
    world: World

    @property
    def home(self) -> Path:
        return self.world.folder / "claude-home"

    @property
    def workdir(self) -> Path:
        return self.world.folder / "claude-work"

    def env(self) -> dict[str, str]:
        """Claude Code's environment: the gateway, the ladder for every model, no extras."""
        env = _base_env(self.home)
        env.update(
            {
                "CLAUDE_CONFIG_DIR": str(self.home / ".claude"),
                "ANTHROPIC_BASE_URL": self.world.url,
                "ANTHROPIC_AUTH_TOKEN": CLAUDE_CLIENT_KEY,
                # The gateway's ladder for the main model and every model tier.
                "ANTHROPIC_MODEL": LADDER,
                "ANTHROPIC_DEFAULT_OPUS_MODEL": LADDER,
                "ANTHROPIC_DEFAULT_SONNET_MODEL": LADDER,
                "ANTHROPIC_DEFAULT_HAIKU_MODEL": LADDER,
                "ANTHROPIC_SMALL_FAST_MODEL": LADDER,
                # Nothing but the conversation: no telemetry, updates, error reports,
                # feature flags or other background calls.
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_ERROR_REPORTING": "1",
            }
        )
        return env

    def run(self, prompt: str, *options: str) -> CliRun:
        """`claude -p PROMPT [options]` in an empty working folder."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        return _run([str(self.cli), "-p", prompt, *options], self.env(), self.workdir)


@pytest.fixture
def claude_code(claude_cli: Path) -> Callable[[World], ClaudeCode]:
    """Claude Code for a world."""
    return lambda world: ClaudeCode(claude_cli, world)


@dataclass
class Codex:
    """The Codex CLI, headless (`codex exec`), with a provider that is the world's gateway."""

    cli: Path
    world: World

    @property
    def home(self) -> Path:
        return self.world.folder / "codex-home"

    @property
    def codex_home(self) -> Path:
        return self.home / ".codex"

    @property
    def workdir(self) -> Path:
        return self.world.folder / "codex-work"

    def write_config(self) -> None:
        """`$CODEX_HOME/config.toml`: the gateway as a Responses provider, the ladder as model."""
        self.codex_home.mkdir(parents=True, exist_ok=True)
        base_url = json.dumps(self.world.url + "/v1")
        (self.codex_home / "config.toml").write_text(
            f"""\
model = "{LADDER}"
model_provider = "rungway"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[model_providers.rungway]
name = "rungway"
base_url = {base_url}
wire_api = "responses"
env_key = "{CODEX_KEY_ENV}"
request_max_retries = 0
stream_max_retries = 0
"""
        )

    def env(self) -> dict[str, str]:
        env = _base_env(self.home)
        env.update({"CODEX_HOME": str(self.codex_home), CODEX_KEY_ENV: CODEX_CLIENT_KEY})
        return env

    def run(self, prompt: str, *options: str) -> CliRun:
        """`codex exec --strict-config --skip-git-repo-check [options] PROMPT`."""
        self.write_config()
        self.workdir.mkdir(parents=True, exist_ok=True)
        args = [str(self.cli), "exec", "--strict-config", "--skip-git-repo-check", *options]
        return _run([*args, prompt], self.env(), self.workdir)


@pytest.fixture
def codex(codex_cli: Path) -> Callable[[World], Codex]:
    """The Codex CLI for a world."""
    return lambda world: Codex(codex_cli, world)


# --- the Gemini CLI (what it sends and why: tests/clients/test_gemini_cli.py) -----------

GEMINI_MODEL = "gemini-2.5-flash"
"""The model the Gemini CLI asks for: one of its own names, which the world's alias maps to
the ladder. Naming one keeps the CLI from first asking a classifier model to pick one."""


@dataclass
class GeminiCli:
    """The Gemini CLI, headless (`gemini -p`), with the world's gateway as its Gemini API."""

    cli: Path
    world: World

    @property
    def home(self) -> Path:
        return self.world.folder / "gemini-home"

    @property
    def workdir(self) -> Path:
        return self.world.folder / "gemini-work"

    def write_settings(self) -> None:
        """`~/.gemini/settings.json`: an API key login, one attempt a turn, no extras."""
        settings = {
            # With GOOGLE_GEMINI_BASE_URL set and no login chosen, the CLI picks its
            # "gateway" login, which its own check then refuses; an API key login reads
            # the same base URL and sends the key in x-goog-api-key.
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            # One attempt: the gateway already walks the ladder, and the CLI's own
            # backoff on a 429 would only hide a failure behind the test's timeout.
            "general": {
                "maxAttempts": 1,
                "retryFetchErrors": False,
                "enableAutoUpdate": False,
                "enableAutoUpdateNotification": False,
            },
            # No usage statistics (sent to another host), telemetry or IDE connection.
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "ide": {"enabled": False},
        }
        folder = self.home / ".gemini"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "settings.json").write_text(json.dumps(settings, indent=2))

    def env(self) -> dict[str, str]:
        env = _base_env(self.home)
        env.update(
            {
                "GOOGLE_GEMINI_BASE_URL": self.world.url,
                "GEMINI_API_KEY": GEMINI_CLIENT_KEY,
                # Headless runs refuse an untrusted folder; the scratch folder is ours.
                "GEMINI_CLI_TRUST_WORKSPACE": "true",
                # One process: the CLI would otherwise start itself again with a bigger heap.
                "GEMINI_CLI_NO_RELAUNCH": "true",
            }
        )
        return env

    def run(self, prompt: str, *options: str, model: str = GEMINI_MODEL) -> CliRun:
        """`gemini -p PROMPT -m MODEL --output-format json [options]`."""
        self.write_settings()
        self.workdir.mkdir(parents=True, exist_ok=True)
        args = [str(self.cli), "-p", prompt, "-m", model, "--output-format", "json"]
        return _run([*args, *options], self.env(), self.workdir)


@pytest.fixture
def gemini(gemini_cli: Path) -> Callable[[World], GeminiCli]:
    """The Gemini CLI for a world."""
    return lambda world: GeminiCli(gemini_cli, world)


def inference_requests(sim: SimUpstream) -> list[RecordedRequest]:
    """The requests a sim received on its inference API (usage polls left out)."""
    return [r for r in sim.requests if r.method == "POST" and r.path.endswith(_INFERENCE_PATHS)]


_INFERENCE_PATHS = (
    "/v1/messages",
    "/chat/completions",
    "/responses",
    ":generateContent",
    ":streamGenerateContent",
)
