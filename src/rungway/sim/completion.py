"""Deterministic replies: the text a simulated upstream generates and what it counts.

A "token" here is one word (with its leading space), so output token counts, chunking
and `max_tokens` truncation are exact and reproducible. Input tokens are estimated as
the length of the request's JSON-serialised prompt divided by four (at least 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import cycle, islice

import orjson

from rungway.sim.scenario import ResponseSpec

# Generated replies cycle through this sentence, one word per token.
_VOCABULARY = (
    "The", "simulated", "upstream", "answers", "with", "a", "fixed", "and", "predictable",
    "reply", "so", "that", "tests,", "demos", "and", "benchmarks", "can", "count", "every",
    "token", "it", "sends", "back", "to", "the", "gateway.",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Completion:
    """One generated reply: its token pieces and its usage."""

    pieces: tuple[str, ...]
    input_tokens: int
    truncated: bool

    @property
    def output_tokens(self) -> int:
        """Tokens generated (one per piece)."""
        return len(self.pieces)

    @property
    def text(self) -> str:
        """The whole reply text."""
        return "".join(self.pieces)

    def chunks(self, chunk_tokens: int) -> list[str]:
        """The reply split into stream deltas of `chunk_tokens` tokens each."""
        pieces = self.pieces
        return ["".join(pieces[i : i + chunk_tokens]) for i in range(0, len(pieces), chunk_tokens)]


def estimate_input_tokens(prompt: object) -> int:
    """Deterministic input-token estimate: serialised JSON length // 4, at least 1."""
    return max(1, len(orjson.dumps(prompt)) // 4)


@lru_cache(maxsize=64)
def _pieces(text: str | None, output_tokens: int) -> tuple[str, ...]:
    words = text.split() if text is not None else list(islice(cycle(_VOCABULARY), output_tokens))
    return tuple(word if index == 0 else " " + word for index, word in enumerate(words))


def plan_completion(spec: ResponseSpec, input_tokens: int, max_tokens: int | None) -> Completion:
    """The reply to a request with this input size and output cap."""
    pieces = _pieces(spec.text, spec.output_tokens)
    truncated = max_tokens is not None and len(pieces) > max_tokens
    if truncated:
        pieces = pieces[:max_tokens]
    return Completion(pieces=pieces, input_tokens=input_tokens, truncated=truncated)
