"""Reading the secrets a config names: from an environment variable, a file, or the
encrypted credential store, once, when the gateway or a command starts.

The config only says where each secret lives (`CredentialRef`); reading it is done here, so
the settings stay plain data and only what reads secrets loads the store's cryptography.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import SecretStr

from rungway.config import (
    ConfigError,
    ConnectionConfig,
    CredentialRef,
    CredentialStoreSettings,
    Settings,
)
from rungway.credentials.store import CredentialStore, StoreError, default_store_path, load_key
from rungway.egress import BadProxy, ProxyEnvironment, is_direct, parse_proxy


def open_store(settings: CredentialStoreSettings) -> CredentialStore:
    """The store the settings name, its key loaded; raises StoreError saying what to fix."""
    key = load_key(
        env=settings.key.env if settings.key is not None else None,
        file=settings.key.file if settings.key is not None else None,
    )
    return CredentialStore(settings.path or default_store_path(), key)


def read_credential(ref: CredentialRef, store: CredentialStore | None = None) -> SecretStr:
    """Read the secret `ref` names now; raise ValueError saying what is missing."""
    if ref.store is not None:
        if store is None:
            raise ValueError(f"credential {ref.store!r} needs the credential store")
        try:
            return SecretStr(store.get(ref.store).access_token)
        except StoreError as error:
            raise ValueError(str(error)) from None
    if ref.env is not None:
        value = os.environ.get(ref.env)
        if not value:
            raise ValueError(f"environment variable {ref.env} is not set or empty")
        return SecretStr(value.strip())
    assert ref.file is not None
    path = ref.file.expanduser()
    try:
        value = path.read_text(encoding="utf-8").strip()
    except OSError as error:
        raise ValueError(f"cannot read credential file {path}: {error.strerror}") from None
    if not value:
        raise ValueError(f"credential file {path} is empty")
    return SecretStr(value)


def read_secrets(settings: Settings, source: str = "<config>") -> dict[str, SecretStr]:
    """Read every referenced secret once: `connection:<id>`, `client:<name>`, `admin`, each
    connection's `proxy:<id>`, and the `redis` URL and `postgres` DSN when the config names
    them; the environment's proxy variables are checked too."""
    secrets: dict[str, SecretStr] = {}
    problems: list[str] = []
    store: CredentialStore | None = None
    if any(c.credential is not None and c.credential.store for c in settings.connections):
        try:
            store = open_store(settings.credentials)
        except StoreError as error:
            problems.append(f"  credentials: {error}")
    for index, connection in enumerate(settings.connections):
        _read_proxy(index, connection, secrets, problems)
        if connection.credential is None:
            continue
        if connection.credential.store is not None and store is None:
            continue
        try:
            secrets[f"connection:{connection.id}"] = read_credential(connection.credential, store)
        except ValueError as error:
            problems.append(f"  connections[{index}].credential: {error}")
    for index, client in enumerate(settings.client_keys):
        try:
            secrets[f"client:{client.name}"] = read_credential(client.key)
        except ValueError as error:
            problems.append(f"  client_keys[{index}].key: {error}")
    if settings.admin.key is not None:
        try:
            secrets["admin"] = read_credential(settings.admin.key)
        except ValueError as error:
            problems.append(f"  admin.key: {error}")
    _read_shared(settings, store, secrets, problems)
    try:
        # The proxy variables may carry a proxy's password too; one the gateway cannot
        # use stops it here, with the config's other problems, not at its first request.
        ProxyEnvironment.read(os.environ)
    except BadProxy as error:
        problems.append(f"  {error}")
    if problems:
        raise ConfigError(f"{source}: cannot read credentials\n" + "\n".join(problems))
    return secrets


def connection_proxy(connection_id: str, secrets: Mapping[str, SecretStr]) -> str | None:
    """A connection's `proxy:` as read (a proxy URL, or `direct`); None when it has none
    and the environment's proxy variables decide."""
    secret = secrets.get(f"proxy:{connection_id}")
    return None if secret is None else secret.get_secret_value()


def _read_proxy(
    index: int, connection: ConnectionConfig, secrets: dict[str, SecretStr], problems: list[str]
) -> None:
    # A proxy URL may carry the proxy's password: a secret however it is given.
    value = connection.proxy
    if isinstance(value, CredentialRef):
        try:
            value = read_credential(value).get_secret_value()
            if not is_direct(value):
                parse_proxy(value)
        except ValueError as error:
            problems.append(f"  connections[{index}].proxy: {error}")
            return
    if value is not None:
        secrets[f"proxy:{connection.id}"] = SecretStr(value)


def _read_shared(
    settings: Settings,
    store: CredentialStore | None,
    secrets: dict[str, SecretStr],
    problems: list[str],
) -> None:
    # The Redis URL and the PostgreSQL DSN may carry a password: secrets either way.
    redis, postgres = settings.state.redis, settings.ledger.postgres
    shared = {
        "redis": ("state.redis.url", redis.url if redis is not None else None),
        "postgres": ("ledger.postgres.dsn", postgres.dsn if postgres is not None else None),
    }
    for name, (where, value) in shared.items():
        if isinstance(value, CredentialRef):
            try:
                secrets[name] = read_credential(value, store)
            except ValueError as error:
                problems.append(f"  {where}: {error}")
        elif value:
            secrets[name] = SecretStr(value)
