"""The encrypted credential store: imported logins kept in one file, encrypted at rest.

The file holds one Fernet token (AES-128-CBC with an HMAC-SHA256) over a JSON map from
credential name to record, so neither the secrets nor the names are readable without the
key. The key comes from an environment variable or from a key file that is created with
mode 0600 on first use. Writes go to a temporary file that replaces the old one, so a
crash leaves either the old store or the new one, never half of either.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Literal

import orjson
import platformdirs

# Deferred: cryptography is imported only where a key or the store is used; a gateway
# without a store would spend ~20 ms of its start on it.

KEY_ENV = "RUNGWAY_CREDENTIALS_KEY"
"""The environment variable that, when set, holds the store's key (a Fernet key)."""

LoginKind = Literal["claude", "codex", "copilot", "gemini", "antigravity"]
LOGIN_KINDS: tuple[LoginKind, ...] = ("claude", "codex", "copilot", "gemini", "antigravity")


class StoreError(Exception):
    """The store cannot be used; the message says what to fix."""


@dataclass(frozen=True, slots=True)
class StoredCredential:
    """One imported login: the token sent upstream and what renews it."""

    kind: LoginKind
    access_token: str
    refresh_token: str | None = None
    expires_at: float | None = None
    """When the access token expires, in epoch seconds (None when unknown)."""
    account_id: str | None = None
    id_token: str | None = None
    source: str = ""
    """Where it was imported from (a path or `env:VAR`), for the operator's information."""

    def renewed(
        self, access_token: str, expires_at: float | None, refresh_token: str | None
    ) -> StoredCredential:
        """This credential with a new access token, keeping the old refresh token when the
        token endpoint sent none."""
        return replace(
            self,
            access_token=access_token,
            expires_at=expires_at,
            refresh_token=refresh_token or self.refresh_token,
        )


def default_store_path() -> Path:
    """The store file under the user's data directory, next to the ledger."""
    return platformdirs.user_data_path("rungway") / "credentials.enc"


def default_key_path() -> Path:
    """The key file under the user's data directory."""
    return platformdirs.user_data_path("rungway") / "credentials.key"


def load_key(*, env: str | None = None, file: Path | None = None) -> bytes:
    """The store key: from `env` (default `RUNGWAY_CREDENTIALS_KEY`) when set, else from
    `file` (default `credentials.key` in the data directory), created 0600 when missing."""
    variable = env or KEY_ENV
    value = os.environ.get(variable, "").strip()
    if value:
        return _checked(value.encode(), f"environment variable {variable}")
    if env is not None:
        raise StoreError(f"environment variable {env} is not set or empty")
    path = (file or default_key_path()).expanduser()
    if not path.exists():
        _create_key_file(path)
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise StoreError(
            f"key file {path} is readable by others (mode {mode:o}); run `chmod 600 {path}`"
        )
    try:
        return _checked(path.read_bytes().strip(), f"key file {path}")
    except OSError as error:
        raise StoreError(f"cannot read key file {path}: {error.strerror}") from None


def _create_key_file(path: Path) -> None:
    from cryptography.fernet import Fernet  # noqa: PLC0415 - see the imports above

    path.parent.mkdir(parents=True, exist_ok=True)
    # O_EXCL: two processes starting at once must not each write a different key.
    with contextlib.suppress(FileExistsError):
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(Fernet.generate_key() + b"\n")


def _checked(key: bytes, where: str) -> bytes:
    from cryptography.fernet import Fernet  # noqa: PLC0415 - see the imports above

    try:
        Fernet(key)
    except ValueError:
        raise StoreError(
            f"{where} does not hold a valid key (32 url-safe base64-encoded bytes); "
            'make one with `python -c "from cryptography.fernet import Fernet; '
            'print(Fernet.generate_key().decode())"`'
        ) from None
    return key


class CredentialStore:
    """Imported credentials by name, encrypted in one file; safe to share between threads."""

    def __init__(self, path: Path, key: bytes) -> None:
        from cryptography.fernet import Fernet  # noqa: PLC0415 - see the imports above

        self.path = path.expanduser()
        self._fernet = Fernet(key)
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        """The stored credentials' names, sorted."""
        with self._lock:
            return sorted(self._read())

    def get(self, name: str) -> StoredCredential:
        """The credential stored as `name`; StoreError when there is none."""
        with self._lock:
            records = self._read()
        record = records.get(name)
        if record is None:
            known = ", ".join(sorted(records)) or "none"
            raise StoreError(
                f"no credential {name!r} in {self.path} (stored: {known}); "
                f"import it with `rungway connections import ... --name {name}`"
            )
        return record

    def put(self, name: str, credential: StoredCredential) -> None:
        """Store `credential` as `name`, replacing any credential of that name."""
        with self._lock:
            records = self._read()
            records[name] = credential
            self._write(records)

    def _read(self) -> dict[str, StoredCredential]:
        from cryptography.fernet import InvalidToken  # noqa: PLC0415 - see the imports above

        try:
            token = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as error:
            raise StoreError(f"cannot read {self.path}: {error.strerror}") from None
        try:
            plain = self._fernet.decrypt(token.strip())
        except InvalidToken:
            raise StoreError(
                f"{self.path} cannot be decrypted with this key; use the key it was written "
                f"with ({KEY_ENV} or the key file)"
            ) from None
        raw = orjson.loads(plain)
        return {name: StoredCredential(**fields) for name, fields in raw.items()}

    def _write(self, records: dict[str, StoredCredential]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        plain = orjson.dumps({name: asdict(record) for name, record in records.items()})
        temporary = self.path.with_name(self.path.name + ".tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(self._fernet.encrypt(plain))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)
