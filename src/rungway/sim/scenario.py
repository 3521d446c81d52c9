"""Scenarios: the frozen description of one simulated upstream, loaded from YAML.

A scenario names the wire API served, the credential accepted, the models offered, the
quota windows and which header family reports them, the shape of generated replies and
the faults queued at start.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from rungway.sim.faults import Fault

ApiKind = Literal["anthropic", "openai"]
QuotaHeaderFamily = Literal["anthropic-unified", "anthropic-apikey", "openai", "none"]
WindowUnit = Literal["tokens", "requests", "input_tokens", "output_tokens"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AuthSpec(_Frozen):
    """The one credential the upstream accepts.

    `bearer` reads `Authorization: Bearer <token>`; on the Anthropic API it stands for a
    plan's OAuth token and also requires the `oauth-2025-04-20` beta.
    """

    kind: Literal["bearer", "x-api-key", "none"] = "none"
    token: str | None = None

    @model_validator(mode="after")
    def _token_when_needed(self) -> Self:
        if self.kind != "none" and not self.token:
            raise ValueError(f"auth kind {self.kind!r} needs a token")
        return self


class ModelSpec(_Frozen):
    """One model the upstream serves."""

    id: str
    display_name: str | None = None
    context_window: int | None = Field(default=None, gt=0)
    max_output_tokens: int | None = Field(default=None, gt=0)


class WindowSpec(_Frozen):
    """A quota window: `capacity` units per `length_s`, reset at fixed instants.

    `name` becomes the header infix (`5h`, `7d`, `7d_oi` for the unified family;
    `requests`, `tokens`, `input-tokens`, `output-tokens` for the others). A window with
    `model` set counts and limits only that model's requests.
    """

    name: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    claim: str | None = None
    unit: WindowUnit = "tokens"
    capacity: int = Field(gt=0)
    length_s: float = Field(gt=0)
    first_reset_at: float | None = None
    model: str | None = None

    @property
    def claim_name(self) -> str:
        """The representative-claim name (defaults to the window name)."""
        return self.claim or self.name


class ClockSpec(_Frozen):
    """Where the upstream's clock starts; a set `start` (or `fake`) means a FakeClock."""

    start: float | None = None
    fake: bool = False


class ResponseSpec(_Frozen):
    """How replies are generated and paced.

    With `text` unset the reply is `output_tokens` deterministic words; with `text` set
    each whitespace-separated word is one output token. Pacing uses real time: a stream
    sends its head after `first_byte_ms` and then one frame every `chunk_interval_ms`;
    a non-streamed reply arrives when its last chunk would have.
    """

    text: str | None = None
    output_tokens: int = Field(default=24, ge=1)
    chunk_tokens: int = Field(default=4, ge=1)
    first_byte_ms: float = Field(default=0, ge=0)
    chunk_interval_ms: float = Field(default=0, ge=0)


class Scenario(_Frozen):
    """Everything that defines one simulated upstream."""

    name: str
    api: ApiKind
    quota_headers: QuotaHeaderFamily = "none"
    auth: AuthSpec = AuthSpec()
    models: tuple[ModelSpec, ...] = Field(min_length=1)
    windows: tuple[WindowSpec, ...] = ()
    clock: ClockSpec = ClockSpec()
    response: ResponseSpec = ResponseSpec()
    faults: tuple[Fault, ...] = ()
    usage_reads_per_hour: int = Field(default=30, ge=1)
    """How often the plan's usage endpoint may be read before it answers 429."""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        names = [window.name for window in self.windows]
        if len(set(names)) != len(names):
            raise ValueError(f"window names must be unique, got {names}")
        model_ids = {model.id for model in self.models}
        if len(model_ids) != len(self.models):
            raise ValueError("model ids must be unique")
        for window in self.windows:
            if window.model is not None and window.model not in model_ids:
                raise ValueError(f"window {window.name!r} is scoped to unknown model")
        return self

    def model(self, model_id: str) -> ModelSpec | None:
        """The served model with this id, if any."""
        for model in self.models:
            if model.id == model_id:
                return model
        return None


def load_scenario(path: Path | str) -> Scenario:
    """Read and validate a scenario YAML file."""
    with Path(path).open(encoding="utf-8") as handle:
        raw = yaml.safe_load(handle)
    return Scenario.model_validate(raw)


def builtin_scenario(name: str) -> Path:
    """Path of a scenario shipped with rungway (`claude-plan`, `cheap-openai`, ...)."""
    stem = name.removesuffix(".yaml")
    path = Path(str(resources.files("rungway.sim") / "scenarios" / f"{stem}.yaml"))
    if not path.is_file():
        available = ", ".join(builtin_scenario_names())
        raise FileNotFoundError(f"no built-in scenario {name!r}; available: {available}")
    return path


def builtin_scenario_names() -> list[str]:
    """Names of the scenarios shipped with rungway."""
    folder = Path(str(resources.files("rungway.sim") / "scenarios"))
    return sorted(path.stem for path in folder.glob("*.yaml"))
