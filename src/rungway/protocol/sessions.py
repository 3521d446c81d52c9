"""Which conversation a request belongs to: its session key, for session affinity.

A conversation's turns are kept on the account that served it while that account is
usable, so the account's prompt cache keeps serving the conversation's prefix. The key
comes from the first of these a request carries, in this order:

1. `cc:` Claude Code's session header, `X-Claude-Code-Session-Id`. Claude Code 2.1 sends it
   on every Messages request, beside `x-app: cli` and its user agent, with the id of the
   session it runs (a new id per session, and per nested session since 2.1.317).
2. `user:` Anthropic's `metadata.user_id` (a Messages body field, a string). Clients use it
   to name the end user or the conversation; Claude Code's names the session too.
3. `cache:` `prompt_cache_key`, a string in an OpenAI Chat Completions or Responses body:
   the client's own name for what shares a prompt cache (Codex sends its conversation id).
4. `resp:` a Responses body's `previous_response_id`. Each response a Responses client is
   served is pinned under the key of its own id (`response_key`), so the next turn naming it
   finds the account that holds the conversation (and the stored response).
5. `gcache:` Gemini's `cachedContent` (`cached_content` is accepted too), the name of a
   cached content resource, which lives on one account.
6. `conv:` otherwise, a hash of the conversation's opening: the system prompt (Messages
   `system`, Responses `instructions`, Gemini `systemInstruction`, Chat's leading system or
   developer messages) and the first user message, which stay the same on every turn of
   one conversation. Two conversations that open with the same words share a key, which
   only keeps them on one account.

Every key is its prefix and a hash of its source, never the source itself (a user id may
name a person, and a hash has a fixed length and no separators). Every input is the
client's: a value of the wrong type is ignored, a long one is hashed only up to a cap,
and nothing here raises on any body.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from hashlib import blake2b as _blake2b
from typing import Any

from rungway.protocol.api import Api

RESPONSE_PREFIX = "resp:"
"""The prefix of a Responses reply's key: one per turn, a link of a chain, not a session."""
SESSION_HEADER = "x-claude-code-session-id"
"""Claude Code's session header, lower-case as the server hands headers on."""

_VALUE_CAP = 512
"""The most characters of an id read: longer ones are cut (their start still tells them apart)."""
_TEXT_CAP = 4096
"""The most characters of one text of the conversation's opening that are hashed."""
_ITEMS_CAP = 16
"""The most parts of one message (or messages of one opening) looked at."""
_DEPTH_CAP = 6
"""How deep into nested content the opening's hash looks."""
_DIGEST_BYTES = 16
_IDS_KEPT = 4096
"""How many ids' keys are kept, so that a session's later turns are not hashed again."""


def session_key(
    api: Api, headers: Mapping[str, str], body: Mapping[str, Any], raw_body: bytes
) -> str | None:
    """The request's session key (see the module's docstring), or None when it has none."""
    del raw_body  # the parsed body's opening is hashed: the raw bytes hold every turn
    try:
        header = headers.get(SESSION_HEADER)
        if header is not None:
            found = _keyed("cc:", header)
            if found is not None:
                return found
        return _key(api, body)
    except Exception:  # a hostile body must never fail a request here
        return None


def response_key(response_id: object) -> str | None:
    """The key a Responses reply's id is pinned under, so that the turn naming it as its
    `previous_response_id` finds its session."""
    return _keyed(RESPONSE_PREFIX, response_id)


def short_session(key: str) -> str:
    """A short form of a session key for the ledger and logs: its kind and the start of
    its hash (a key is already a hash of its source, never the source)."""
    # Every key ends in its hash's 32 hex digits: the label keeps the first 12.
    return key[:-20]


def _key(api: Api, body: Mapping[str, Any]) -> str | None:
    if api is Api.ANTHROPIC_MESSAGES:
        metadata = body.get("metadata")
        if isinstance(metadata, dict):
            found = _keyed("user:", metadata.get("user_id"))
            if found is not None:
                return found
        return _opening("conv:", body.get("system"), body.get("messages"))
    if api is Api.OPENAI_CHAT:
        found = _keyed("cache:", body.get("prompt_cache_key"))
        if found is not None:
            return found
        return _opening("conv:", None, body.get("messages"))
    if api is Api.OPENAI_RESPONSES:
        found = _keyed("cache:", body.get("prompt_cache_key")) or response_key(
            body.get("previous_response_id")
        )
        if found is not None:
            return found
        opening = body.get("input")
        if isinstance(opening, str):
            opening = [{"role": "user", "content": opening}]
        return _opening("conv:", body.get("instructions"), opening)
    # Gemini, the one API left.
    found = _keyed("gcache:", body.get("cachedContent") or body.get("cached_content"))
    if found is not None:
        return found
    system = body.get("systemInstruction") or body.get("system_instruction")
    return _opening("conv:", system, body.get("contents"))


def _keyed(prefix: str, value: object) -> str | None:
    """`prefix` and a hash of `value` when it is a string with something in it."""
    if not isinstance(value, str) or not value or value.isspace():
        return None
    return _hashed(prefix, value[:_VALUE_CAP])


@lru_cache(maxsize=_IDS_KEPT)
def _hashed(prefix: str, value: str) -> str:
    # Kept: a session sends the same id on every turn, and a lookup costs a tenth of a hash.
    return (
        prefix + _blake2b(value.encode("utf-8", "replace"), digest_size=_DIGEST_BYTES).hexdigest()
    )


def _opening(prefix: str, system: object, messages: object) -> str | None:
    """`prefix` and a hash of the system prompt and the messages up to the first user
    message (the system and developer messages before it included); None without a user
    message."""
    if not isinstance(messages, list) or not messages:
        return None
    first = messages[0]
    if isinstance(first, dict) and first.get("role") == "user" and isinstance(system, str | None):
        content = first.get("content")
        if isinstance(content, str):
            # The common opening, a system text and a user text, hashed in one step.
            opening = f"{(system or '')[:_TEXT_CAP]}\x1e{content[:_TEXT_CAP]}"
            data = opening.encode("utf-8", "replace")
            return prefix + _blake2b(data, digest_size=_DIGEST_BYTES).hexdigest()
    digest = _blake2b(digest_size=_DIGEST_BYTES)
    _feed(digest, system, 0)
    for message in messages[:_ITEMS_CAP]:
        if not isinstance(message, dict):
            return None
        digest.update(b"\x1e")
        _feed(digest, message.get("role"), 0)
        _feed(digest, message.get("content") or message.get("parts"), 0)
        if message.get("role") == "user":
            return prefix + digest.hexdigest()
    return None


def _feed(digest: Any, value: object, depth: int) -> None:
    """Add `value` to `digest`, its texts cut at `_TEXT_CAP` and its lists at `_ITEMS_CAP`."""
    if isinstance(value, str):
        digest.update(value[:_TEXT_CAP].encode("utf-8", "replace"))
    elif depth >= _DEPTH_CAP:
        return
    elif isinstance(value, list):
        for item in value[:_ITEMS_CAP]:
            digest.update(b"\x1f")
            _feed(digest, item, depth + 1)
    elif isinstance(value, dict):
        for count, (name, item) in enumerate(value.items()):
            if count >= _ITEMS_CAP:
                break
            # A cache marker moves from turn to turn: it is not part of what was said.
            if name == "cache_control":
                continue
            digest.update(b"\x1d" + str(name)[:64].encode("utf-8", "replace") + b"=")
            _feed(digest, item, depth + 1)
    elif value is not None:
        digest.update(repr(value)[:64].encode() if isinstance(value, int | float) else b"?")
