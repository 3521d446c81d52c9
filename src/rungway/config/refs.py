"""Where the config's secrets live: credential references and the encrypted store's settings.

The config never holds a secret itself, only where to read it (`credentials.secrets` does).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CredentialRef(_Frozen):
    """Where a secret lives: an environment variable, a file, or the encrypted credential
    store (`rungway connections import`), never the config itself."""

    env: str | None = None
    file: Path | None = None
    store: Annotated[str, Field(pattern=NAME, max_length=64)] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> CredentialRef:
        given = [self.env, self.file, self.store]
        if sum(value is not None for value in given) != 1:
            raise ValueError(
                "give exactly one of `env` (a variable name), `file` (a path) or `store` "
                "(the name of an imported credential)"
            )
        return self


class StoreKeyRef(_Frozen):
    """Where the credential store's key lives: an environment variable or a key file."""

    env: str | None = None
    file: Path | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> StoreKeyRef:
        if (self.env is None) == (self.file is None):
            raise ValueError("give exactly one of `env` (a variable name) or `file` (a path)")
        return self


class CredentialStoreSettings(_Frozen):
    """The encrypted store of imported logins; by default next to the ledger, with its key
    from `RUNGWAY_CREDENTIALS_KEY` or else a key file created 0600 on first use."""

    path: Path | None = None
    key: StoreKeyRef | None = None
