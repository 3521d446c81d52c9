"""What a simulated upstream billed: requests and tokens per model, for completed replies.

Ledger tests compare the gateway's own spend records against this tally. A reply cut
short by a fault (disconnect, in-stream error) is not counted.
"""

from __future__ import annotations

import threading

from pydantic import BaseModel, ConfigDict


class ModelTally(BaseModel):
    """Billed totals for one model."""

    model_config = ConfigDict(frozen=True)

    requests: int = 0
    input_tokens: int = 0
    """Every prompt token, cache reads and writes included."""
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class Tally:
    """Running per-model totals; safe to read from another thread."""

    __slots__ = ("_lock", "_totals")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: dict[str, list[int]] = {}

    def record(
        self,
        model: str,
        input_tokens: int,
        output_tokens: int,
        *,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> None:
        """Count one completed reply (`input_tokens` includes its cache reads and writes)."""
        with self._lock:
            totals = self._totals.get(model)
            if totals is None:
                totals = self._totals[model] = [0, 0, 0, 0, 0]
            totals[0] += 1
            totals[1] += input_tokens
            totals[2] += output_tokens
            totals[3] += cache_read_tokens
            totals[4] += cache_write_tokens

    def by_model(self) -> dict[str, ModelTally]:
        """Totals per model id."""
        with self._lock:
            return {
                model: ModelTally(
                    requests=r,
                    input_tokens=i,
                    output_tokens=o,
                    cache_read_tokens=cr,
                    cache_write_tokens=cw,
                )
                for model, (r, i, o, cr, cw) in self._totals.items()
            }

    def total(self) -> ModelTally:
        """Totals over every model."""
        parts = self.by_model().values()
        return ModelTally(
            requests=sum(part.requests for part in parts),
            input_tokens=sum(part.input_tokens for part in parts),
            output_tokens=sum(part.output_tokens for part in parts),
            cache_read_tokens=sum(part.cache_read_tokens for part in parts),
            cache_write_tokens=sum(part.cache_write_tokens for part in parts),
        )

    def clear(self) -> None:
        """Forget everything counted so far."""
        with self._lock:
            self._totals.clear()
