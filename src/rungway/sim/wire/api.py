"""What every simulated wire API is to the server: one endpoint class over its dialect.

Each API serves generation requests at its own paths through the shared
`GenerationService`, and answers its other routes (model listing, token counting, its own
404) with one reply each. The server sees only this class: its routes, its credential
check (which the usage endpoints of Claude and Codex share) and the replies it served.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from rungway.protocol.asgi import Receive, Scope, Send
from rungway.sim.exchange import RecordedRequest, Reply, send_reply
from rungway.sim.prompt_cache import PromptCache
from rungway.sim.scenario import Scenario
from rungway.sim.wire.serving import Dialect, GenerationService, ReplyLog


class AuthenticatingDialect(Dialect, Protocol):
    """A dialect that also checks the request's credential."""

    def authenticate(self, request: RecordedRequest) -> Reply | None:
        """None when the credential is accepted, else the API's 401."""
        ...


D = TypeVar("D", bound=AuthenticatingDialect)


class WireApi(Generic[D]):
    """Routes requests to one wire API's endpoints of a simulated upstream.

    A subclass names the paths that take generation requests and answers every other
    route in `route`.
    """

    generation_paths: frozenset[str] = frozenset()

    def __init__(self, scenario: Scenario, dialect: D, service: GenerationService) -> None:
        self._scenario = scenario
        self._dialect = dialect
        self._service = service

    @property
    def replies(self) -> ReplyLog:
        """The replies served so far."""
        return self._service.replies

    @property
    def prompt_cache(self) -> PromptCache:
        """The prompt cache this API's generation requests read and write."""
        return self._service.prompt_cache

    def authenticate(self, request: RecordedRequest) -> Reply | None:
        """None when the credential is accepted, else the API's 401."""
        return self._dialect.authenticate(request)

    async def handle(
        self, scope: Scope, receive: Receive, send: Send, request: RecordedRequest
    ) -> None:
        """Answer one request."""
        if request.method == "POST" and request.path in self.generation_paths:
            await self._service.serve(scope, receive, send, request)
        else:
            await send_reply(send, self.route(request))

    def route(self, request: RecordedRequest) -> Reply:
        """The answer to a request that is not a generation request."""
        raise NotImplementedError
