"""What one upstream response used: its token counts, and the cost the upstream named."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class _Counts(Protocol):
    """The five counts a wire API's usage reader returns (`translate`'s `CanonicalUsage`)."""

    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def cache_read_tokens(self) -> int: ...
    @property
    def cache_write_tokens(self) -> int: ...
    @property
    def reasoning_tokens(self) -> int: ...


@dataclass(slots=True)
class ReportedUsage:
    """Token counts of one response. `input_tokens` excludes cache reads and writes."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None
    """What the upstream itself says the request cost (OpenRouter's `usage.cost`)."""

    @classmethod
    def of(cls, tokens: _Counts, cost_usd: float | None = None) -> ReportedUsage:
        """The token counts a wire API's usage reader found, with the upstream's own cost."""
        return cls(
            tokens.input_tokens,
            tokens.output_tokens,
            tokens.cache_read_tokens,
            tokens.cache_write_tokens,
            tokens.reasoning_tokens,
            cost_usd,
        )
