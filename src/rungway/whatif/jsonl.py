"""The JSONL trace format: one request per line, so a trace can come from anywhere.

Each non-blank line is one JSON object whose keys are `TraceRequest`'s field names:

    {"at": 1767603600.0, "model": "claude-sonnet-4-5", "api": "anthropic_messages",
     "input_tokens": 12, "output_tokens": 640, "cache_read_tokens": 48000,
     "cache_write_tokens": 2100, "reasoning_tokens": 0, "stream": true, "client_key": "ci"}

- `at` (number): when the request arrived, in epoch seconds, from 0 to the start of the
  year 9999.
- `model` (string): the name the client asked for, such as `auto/thrifty` or a model id.
- `api` (string): the API the client called: `openai_chat`, `openai_responses`,
  `anthropic_messages` or `gemini`.
- `input_tokens`, `output_tokens` (whole numbers up to a billion, as the gateway records):
  input excludes cache reads and writes; output includes reasoning.
- optional: `cache_read_tokens`, `cache_write_tokens`, `reasoning_tokens` (whole numbers
  up to a billion, default 0), `stream` (true or false, default false), `client_key` (a
  string or null, the client key's id, default null), `session` (a string or null, the
  conversation the request belongs to, which session affinity and the prompt cache follow;
  default null).

A key the format does not know is an error, as is a missing required one or a value of the
wrong type; every error names the line and the field. Blank lines are skipped. Requests out
of time order (logs merged from several machines, say) are sorted by `at`, keeping the
file's order among requests at the same second.

The file is read once, line by line, so a large trace costs one pass and the requests it
holds, never a second copy of its text. `write_jsonl` leaves out optional fields at their
defaults, which keeps a month of requests small; reading it back gives the same trace.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import orjson

from rungway.whatif.trace import COUNT_RULE, LAST_AT, Trace, TraceError, TraceRequest, is_count

__all__ = ["read_jsonl", "write_jsonl"]

_REQUIRED: Final = ("at", "model", "api", "input_tokens", "output_tokens")
_COUNTS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
_FIELDS: Final = frozenset({*_REQUIRED, *_COUNTS, "stream", "client_key", "session"})


def read_jsonl(path: Path) -> Trace:
    """The trace in the JSONL file at `path`, sorted by time; a TraceError naming the line
    and field of the first request that does not follow the format."""
    requests: list[TraceRequest] = []
    try:
        with path.open("rb") as lines:
            for number, line in enumerate(lines, start=1):
                if line.strip():
                    requests.append(_request(line, number))
    except OSError as error:
        raise TraceError(f"{path}: {error.strerror or error}") from None
    except TraceError as error:
        raise TraceError(f"{path}:{error}") from None
    ordered = all(requests[i - 1].at <= requests[i].at for i in range(1, len(requests)))
    # sorted() is stable: requests at the same second keep the file's order.
    return tuple(requests) if ordered else tuple(sorted(requests, key=lambda r: r.at))


def write_jsonl(trace: Iterable[TraceRequest], path: Path) -> None:
    """Write `trace` to `path` in the JSONL format, one request per line."""
    with path.open("wb") as out:
        for request in trace:
            out.write(orjson.dumps(_object(request), option=orjson.OPT_APPEND_NEWLINE))


def _object(request: TraceRequest) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "at": request.at,
        "model": request.model,
        "api": request.api,
        "input_tokens": request.input_tokens,
        "output_tokens": request.output_tokens,
    }
    # Optional fields at their defaults are left out: reading supplies them again.
    for name in ("cache_read_tokens", "cache_write_tokens", "reasoning_tokens"):
        if value := getattr(request, name):
            fields[name] = value
    if request.stream:
        fields["stream"] = True
    if request.client_key is not None:
        fields["client_key"] = request.client_key
    if request.session is not None:
        fields["session"] = request.session
    return fields


def _request(line: bytes, number: int) -> TraceRequest:
    try:
        fields = orjson.loads(line)
    except orjson.JSONDecodeError as error:
        fields = _lenient(line, error, number)
    if not isinstance(fields, dict):
        raise TraceError(f"{number}: a line holds one JSON object, not {type(fields).__name__}")
    unknown = sorted(fields.keys() - _FIELDS)
    if unknown:
        raise TraceError(
            f"{number}: unknown field {unknown[0]!r}; a request has {', '.join(sorted(_FIELDS))}"
        )
    _check(fields, number)
    try:
        return TraceRequest(
            at=float(fields["at"]),
            model=fields["model"],
            api=fields["api"],
            input_tokens=fields["input_tokens"],
            output_tokens=fields["output_tokens"],
            cache_read_tokens=fields.get("cache_read_tokens", 0),
            cache_write_tokens=fields.get("cache_write_tokens", 0),
            reasoning_tokens=fields.get("reasoning_tokens", 0),
            stream=fields.get("stream", False),
            client_key=fields.get("client_key"),
            session=fields.get("session"),
        )
    except TraceError as error:
        # The request's own checks (an unknown api, reasoning beyond output) name the
        # field first; the line goes in front.
        raise TraceError(f"{number}: {error}") from None


def _lenient(line: bytes, error: orjson.JSONDecodeError, number: int) -> Any:
    """`line` read by the standard library, which takes what orjson refuses but a field
    check can name (an integer past 64 bits, NaN, Infinity); a TraceError if it is no JSON."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        raise TraceError(f"{number}: not a JSON object: {error}") from None


def _check(fields: dict[str, Any], number: int) -> None:
    """A TraceError for the first field of line `number` that is missing or mistyped."""
    for name in _REQUIRED:
        if name not in fields:
            raise TraceError(f"{number}: field {name!r} is missing")
    at = fields["at"]
    if isinstance(at, bool) or not isinstance(at, int | float) or not 0 <= at <= LAST_AT:
        raise TraceError(
            f"{number}: field 'at' must be a number of epoch seconds from 0 to "
            f"{LAST_AT:.0f} (the start of the year 9999), not {_shown(at)}"
        )
    for name in ("model", "api"):
        if not isinstance(fields[name], str):
            raise TraceError(
                f"{number}: field {name!r} must be a string, not {_shown(fields[name])}"
            )
    for name in _COUNTS:
        value = fields.get(name, 0)
        if not is_count(value):
            raise TraceError(f"{number}: field {name!r} must be {COUNT_RULE}, not {_shown(value)}")
    stream = fields.get("stream", False)
    if not isinstance(stream, bool):
        raise TraceError(f"{number}: field 'stream' must be true or false, not {_shown(stream)}")
    for name in ("client_key", "session"):
        value = fields.get(name)
        if value is not None and not isinstance(value, str):
            raise TraceError(
                f"{number}: field {name!r} must be a string or null, not {_shown(value)}"
            )


def _shown(value: object) -> str:
    """`value` for an error message, cut short: a field may hold a whole document."""
    try:
        text = repr(value)
    except RecursionError:
        return "a value nested too deep to show"
    return text if len(text) <= 60 else f"{text[:57]}..."
