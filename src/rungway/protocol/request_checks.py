"""The limits every client request is held to, and the value checks the APIs share.

Each API's `check_request` walks the fields the gateway reads, rewrites or translates,
once, with these checks. A check returns what is wrong with a value, as the end of a
sentence that the API's own check starts with the field's path, or None when the value
is fine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

MAX_DEPTH: Final = 64
"""The deepest nesting of objects and arrays a request body may have.

Well below what any encoder refuses (orjson stops at 254 levels, some upstreams' parsers
at 128), and far above what real requests need: a tool schema nests a few levels per
property.
"""
MAX_MODEL_CHARS: Final = 256
"""The longest model name a request may ask for; real model ids run under 100."""
MAX_TOKENS_LIMIT: Final = 2**31 - 1
"""The largest output limit a request may set: the upstreams' own schemas stop there."""

Check = Callable[[Any], str | None]
"""A value check: what is wrong with the value, or None."""


def encode_within_depth(body: dict[str, Any]) -> bytes | None:
    """`body` encoded again, or None when it nests deeper than `MAX_DEPTH` levels.

    The gateway forwards these bytes rather than the client's, so an upstream reads exactly
    what the gateway read: a key the client sent twice goes out once, with the value the
    gateway routed and priced by.
    """
    # The encoder itself measures the depth, at a fraction of the cost of a walk in Python:
    # placed inside enough arrays, a body nested deeper than MAX_DEPTH passes its limit.
    # The arrays are built once; nothing awaits between placing the body and taking it out.
    _INNERMOST[0] = body
    try:
        encoded = orjson.dumps(_PADDED)
    except orjson.JSONEncodeError:  # parsed JSON has no other reason to fail
        return None
    finally:
        _INNERMOST[0] = None
    return encoded[_PADDING:-_PADDING]


ENCODER_DEPTH: Final = 254
"""The deepest nesting orjson encodes; a unit test pins it."""
_PADDING: Final = ENCODER_DEPTH - MAX_DEPTH


def _arrays(depth: int) -> tuple[list[Any], list[Any]]:
    innermost: list[Any] = [None]
    outer = innermost
    for _ in range(depth - 1):
        outer = [outer]
    return outer, innermost


_PADDED, _INNERMOST = _arrays(_PADDING)


def nesting_message(limit: int = MAX_DEPTH) -> str:
    """What a client is told when its body nests too deep."""
    return (
        f"the request body is nested too deeply: this gateway accepts at most {limit} levels "
        "of objects and arrays inside one another"
    )


def describe(value: object) -> str:
    """A value's JSON type, as a message names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def model_name(value: object) -> str | None:
    """A model name: a non-empty string of at most `MAX_MODEL_CHARS` characters."""
    if not isinstance(value, str) or not value:
        return f"is required and must be a non-empty string, not {describe(value)}"
    if len(value) > MAX_MODEL_CHARS:
        return f"is {len(value)} characters long; a model name has at most {MAX_MODEL_CHARS}"
    return None


def output_limit(value: object) -> str | None:
    """An output token limit: an integer from 1 to `MAX_TOKENS_LIMIT`."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"must be an integer from 1 to {MAX_TOKENS_LIMIT}, not {describe(value)}"
    if not 1 <= value <= MAX_TOKENS_LIMIT:
        return f"must be an integer from 1 to {MAX_TOKENS_LIMIT}, not {value}"
    return None


def boolean(value: object) -> str | None:
    """A boolean."""
    return None if isinstance(value, bool) else f"must be a boolean, not {describe(value)}"


def number(value: object) -> str | None:
    """A number (an integer or a decimal)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be a number, not {describe(value)}"
    return None


def string(value: object) -> str | None:
    """A string."""
    return None if isinstance(value, str) else f"must be a string, not {describe(value)}"


def mapping(value: object) -> str | None:
    """An object."""
    return None if isinstance(value, dict) else f"must be an object, not {describe(value)}"


def objects(value: object) -> str | None:
    """An array of objects."""
    if not isinstance(value, list):
        return f"must be an array, not {describe(value)}"
    for number_, item in enumerate(value):
        if not isinstance(item, dict):
            return f"must hold only objects; item {number_} is {describe(item)}"
    return None


def strings(value: object) -> str | None:
    """An array of strings."""
    if not isinstance(value, list):
        return f"must be an array of strings, not {describe(value)}"
    if not all(isinstance(item, str) for item in value):
        return "must hold only strings"
    return None


def string_or_strings(value: object) -> str | None:
    """A string, or an array of strings."""
    return None if isinstance(value, str) else strings(value)


def text_map(value: object) -> str | None:
    """An object whose values are strings (OpenAI's `metadata`)."""
    if not isinstance(value, dict):
        return f"must be an object of strings, not {describe(value)}"
    if not all(isinstance(item, str) for item in value.values()):
        return "must be an object whose values are strings"
    return None


def first_problem(body: dict[str, Any], checks: dict[str, Check]) -> tuple[str, str] | None:
    """The first optional field of `body` that fails its check, and why; null is absent."""
    for name, check in checks.items():
        value = body.get(name)
        if value is not None:
            problem = check(value)
            if problem is not None:
                return name, problem
    return None


FUNCTION_FIELDS: Final[dict[str, Check]] = {
    "description": string,
    "parameters": mapping,
    "strict": boolean,
}
"""A function tool's optional fields the gateway translates, in Chat and Responses alike."""


def function_fields(fields: Mapping[str, Any], at: str) -> str | None:
    """What is wrong with a function tool's optional fields, named from `at`; else None."""
    for name, check in FUNCTION_FIELDS.items():
        value = fields.get(name)
        problem = None if value is None else check(value)
        if problem is not None:
            return f"`{at}.{name}` {problem}"
    return None
