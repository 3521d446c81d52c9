"""`SimUpstream`: one simulated provider as an ASGI app, with Python and HTTP controls,
runnable on loopback in a background thread (tests) or in the foreground (CLI).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

import uvicorn

from rungway.clock import Clock, FakeClock, SystemClock
from rungway.protocol.asgi import Receive, Scope, Send
from rungway.runner import BackgroundServer, JoinedHeadProtocol, bind, uvicorn_config
from rungway.sim.control import SimState, WindowState, handle_control
from rungway.sim.exchange import (
    TRANSPORT_EXTENSION,
    RecordedRequest,
    read_request,
    send_reply,
)
from rungway.sim.faults import Fault, FaultQueue
from rungway.sim.oauth.token_server import TokenServer
from rungway.sim.quota.credits import CreditLedger
from rungway.sim.quota.windows import QuotaBook
from rungway.sim.scenario import Scenario
from rungway.sim.tally import Tally
from rungway.sim.usage.endpoints import build_usage_endpoint
from rungway.sim.wire.anthropic_api import AnthropicApi
from rungway.sim.wire.antigravity import AntigravityApi
from rungway.sim.wire.api import WireApi
from rungway.sim.wire.code_assist import CodeAssistApi
from rungway.sim.wire.gemini_api import GeminiApi
from rungway.sim.wire.glm import GlmApi
from rungway.sim.wire.kimi_code import KimiCodeApi
from rungway.sim.wire.minimax import MiniMaxApi
from rungway.sim.wire.openai_api import OpenAIApi
from rungway.sim.wire.responses_api import ResponsesApi
from rungway.sim.wire.serving import ServedReply

# Recorded requests are capped so a long benchmark run cannot grow memory without bound.
MAX_RECORDED_REQUESTS = 10_000
CONTROL_PREFIX = "/_sim/"


class SimHttpProtocol(JoinedHeadProtocol):
    """uvicorn's httptools protocol, also handing each request its connection's transport.

    The disconnect fault needs to close the socket mid-response; ASGI has no message for
    that, so the transport travels in a scope extension.

    Subclassing uvicorn's protocol class is the only way to reach the transport: uvicorn
    offers no public hook per connection or request, only its `http` setting, which takes
    a protocol class. An app that raises instead (`ConnectionDropped`, what a server
    without this extension gets) makes uvicorn answer 500 before a response has started
    and log an application error, which is not what a dropped connection looks like.
    It leans on uvicorn's internals (`on_message_begin`, `self.scope`), so an upgrade of
    the pinned uvicorn must be checked against them.
    """

    def on_message_begin(self) -> None:
        """Start a request's scope and attach the transport to it."""
        super().on_message_begin()
        extension: dict[object, object] = {"transport": self.transport}
        self.scope["extensions"] = {TRANSPORT_EXTENSION: extension}


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


class SimUpstream:
    """A simulated upstream provider serving one scenario.

    Without an explicit `clock`, a scenario with `clock.start` (or `clock.fake`) runs on
    a FakeClock and any other on the system clock.
    """

    def __init__(self, scenario: Scenario, clock: Clock | None = None) -> None:
        if clock is None:
            if scenario.clock.start is not None or scenario.clock.fake:
                clock = FakeClock(scenario.clock.start)
            else:
                clock = SystemClock()
        self.scenario = scenario
        self._clock = clock
        self._book = QuotaBook(scenario.windows, clock, scenario.soft_windows())
        credits = scenario.credit_settings
        self._ledger = None if credits is None else CreditLedger(credits, scenario.models, clock)
        self._faults = FaultQueue(scenario.faults)
        self.tally = Tally()
        self._requests: deque[RecordedRequest] = deque(maxlen=MAX_RECORDED_REQUESTS)
        self._requests_lock = threading.Lock()
        self._request_count = 0
        self._api: WireApi[Any]
        if scenario.api == "anthropic":
            self._api = AnthropicApi(scenario, self._book, self._faults, self.tally)
        elif scenario.api == "gemini":
            self._api = GeminiApi(scenario, self._book, self._faults, self.tally)
        elif scenario.api == "code-assist":
            self._api = CodeAssistApi(scenario, self._book, self._faults, self.tally)
        elif scenario.api == "kimi-code":
            self._api = KimiCodeApi(scenario, clock, self._book, self._faults, self.tally)
        elif scenario.api == "minimax":
            self._api = MiniMaxApi(scenario, self._book, self._faults, self.tally)
        elif scenario.api == "antigravity":
            self._api = AntigravityApi(scenario, self._book, self._faults, self.tally)
        else:
            openai_api = {"responses": ResponsesApi, "glm": GlmApi}.get(scenario.api, OpenAIApi)
            self._api = openai_api(
                scenario, clock, self._book, self._faults, self.tally, billing=self._ledger
            )
        self._usage = build_usage_endpoint(
            scenario, self._book, self._api.authenticate, self._ledger
        )
        self.oauth = (
            None
            if scenario.oauth is None or scenario.auth.token is None
            else TokenServer(scenario.oauth, scenario.auth.token, clock)
        )
        self._server: BackgroundServer | None = None
        self._url: str | None = None

    # --- ASGI -------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI entry point."""
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await _lifespan(receive, send)
            return
        request = await read_request(scope, receive)
        if request.path.startswith(CONTROL_PREFIX):
            reply = handle_control(self, request)
            await send_reply(send, reply)
            return
        with self._requests_lock:
            self._requests.append(request)
            self._request_count += 1
        if self.oauth is not None:
            if self.oauth.serves(request):
                await send_reply(send, self.oauth.answer(request))
                return
            request = self.oauth.admit(request)
        if self._usage is not None and self._usage.serves(request):
            await send_reply(send, self._usage.answer(request))
            return
        await self._api.handle(scope, receive, send, request)

    # --- Python control ---------------------------------------------------------------

    @property
    def clock(self) -> Clock:
        """The clock quota windows are read against."""
        return self._clock

    @property
    def fake_clock(self) -> FakeClock:
        """The FakeClock this sim runs on (raises when it runs on the real clock)."""
        if not isinstance(self._clock, FakeClock):
            raise RuntimeError(f"sim {self.scenario.name!r} runs on the real clock")
        return self._clock

    @property
    def requests(self) -> list[RecordedRequest]:
        """Requests received on the API routes, oldest first (control calls excluded)."""
        with self._requests_lock:
            return list(self._requests)

    @property
    def replies(self) -> list[ServedReply]:
        """What the simulated model answered to each admitted generation request, oldest
        first: its text or tool call, the tool result it quoted, whether it was delivered."""
        return self._api.replies.all()

    def push_fault(self, fault: Fault) -> None:
        """Queue `fault` behind any already queued."""
        self._faults.push(fault)

    def state(self) -> SimState:
        """Snapshot clock, windows, tally, queued faults and request count."""
        with self._requests_lock:
            count = self._request_count
        return SimState(
            scenario=self.scenario.name,
            api=self.scenario.api,
            now=self._clock.now(),
            fake_clock=isinstance(self._clock, FakeClock),
            windows=[WindowState.of(reading) for reading in self._book.readings()],
            tally=self.tally.by_model(),
            faults=self._faults.pending(),
            request_count=count,
            credits=None if self._ledger is None else self._ledger.state(),
        )

    def set_window_used(self, name: str, used: int) -> None:
        """Set the units used in window `name` (a test steering usage to a level).

        Raises ValueError when the scenario has no such window.
        """
        if not self._book.set_used(name, used):
            known = ", ".join(window.name for window in self.scenario.windows) or "none"
            raise ValueError(f"no window {name!r}; windows: {known}")

    def set_credits_remaining(self, remaining: float) -> None:
        """Leave `remaining` credits (may be negative) under an OpenRouter key's limit.

        Raises ValueError when the sim has no credits or its key is unlimited.
        """
        if self._ledger is None:
            raise ValueError(f"sim {self.scenario.name!r} has no credits (not OpenRouter)")
        self._ledger.set_remaining(remaining)

    def reset(self) -> None:
        """Empty windows, credits, tally, prompt cache, request and reply logs and
        usage-read log; restore the scenario's faults.

        The clock keeps its time (a clock never moves backwards); window resets are
        placed again relative to it.
        """
        self._book.reset()
        if self._ledger is not None:
            self._ledger.reset()
        if self._usage is not None:
            self._usage.reset()
        if self.oauth is not None:
            self.oauth.reset()
        if isinstance(self._api, AntigravityApi):
            self._api.reset()
        self.tally.clear()
        self._api.replies.clear()
        self._api.prompt_cache.clear()
        self._faults.clear()
        for fault in self.scenario.faults:
            self._faults.push(fault)
        with self._requests_lock:
            self._requests.clear()
            self._request_count = 0

    # --- running ----------------------------------------------------------------------

    def _config(self, host: str, port: int, background: bool) -> uvicorn.Config:
        # In a background thread, leave the host process's logging alone and do not let
        # a request stuck in a timeout fault hold up stop().
        extra: dict[str, Any] = (
            {"log_config": None, "timeout_graceful_shutdown": 1} if background else {}
        )
        return uvicorn_config(
            self,
            host=host,
            port=port,
            http=SimHttpProtocol,
            ws="none",
            lifespan="off",
            server_header=False,
            **extra,
        )

    @property
    def url(self) -> str:
        """Base URL of the running sim, e.g. `http://127.0.0.1:54321`."""
        if self._url is None:
            raise RuntimeError("the sim is not running; call start()")
        return self._url

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve on `host:port` (0 picks a free port) in a daemon thread; return the URL."""
        if self._server is not None:
            raise RuntimeError("the sim is already running")
        server = BackgroundServer(
            self._config(host, port, background=True), f"sim-upstream-{self.scenario.name}"
        )
        self._url = server.start()
        self._server = server
        return self._url

    def stop(self) -> None:
        """Stop a sim started with `start()` (no-op when not running)."""
        if self._server is not None:
            self._server.stop()
        self._server = self._url = None

    def serve(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        on_ready: Callable[[str], None] | None = None,
    ) -> None:
        """Serve in the foreground until interrupted (Ctrl-C).

        `on_ready` gets the URL once the socket listens, before requests are served.
        """
        sock = bind(host, port)
        host, port = sock.getsockname()[:2]
        self._url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        try:
            if on_ready is not None:
                on_ready(self._url)
            uvicorn.Server(self._config(host, port, background=False)).run(sockets=[sock])
        finally:
            self._url = None
            sock.close()

    def __enter__(self) -> Self:
        if self._server is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
