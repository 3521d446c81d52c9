"""Masking secrets in log records and in what upstreams say.

The gateway's own log lines carry no secrets, but an exception or a library's message can
quote a header or a URL. Every record is therefore rewritten as it is created: each
known secret value, any `Bearer`/`token` credential and anything shaped like a provider
key becomes `[redacted]`. An upstream's error can quote the credential it was sent, so
the engine masks a failure's message and body the same way before anything keeps or
shows them (`redact`, `redact_bytes`).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from typing import Any

MASK = "[redacted]"
MIN_SECRET_LENGTH = 8
"""Shorter values are not masked by value: they would mask ordinary words."""

# A credential's shape never takes a backslash or a quote, so masking inside JSON text
# leaves every string and escape whole.
_SHAPES = re.compile(
    r"(?i)(?<=\bbearer )[^\s,;\"'\\]+"
    r"|(?<=\btoken )[^\s,;\"'\\]{8,}"
    r"|\bsk-[A-Za-z0-9_-]{12,}"
    r"|\bgh[opusr]_[A-Za-z0-9]{12,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{12,}"
    r"|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"
    # Google: an API key, an OAuth access token and a refresh token.
    r"|\bAIza[A-Za-z0-9_-]{30,}"
    r"|\bya29\.[A-Za-z0-9_.-]{12,}"
    r"|(?<![A-Za-z0-9/])1//[A-Za-z0-9_-]{20,}"
    # A URL's `user:password@` (a proxy's, Redis's, PostgreSQL's), unless already `user:***@`.
    r"|(?<=://)[^\s/@:\"'\\]*:(?!\*\*\*@)[^\s/@\"'\\]+(?=@)"
)

# Every shape above begins with one of these, in any case; a shape added there needs its
# opening added here. An ASCII text holding none of them cannot match, and most lines (an
# access line, as a rule) hold none: a substring search of the lower-cased text costs
# about a tenth of running the pattern over it. Text that is not ASCII always runs the
# pattern, since case-insensitive matching also pairs some other letters with ASCII ones
# (the Kelvin sign with `k`).
_SHAPE_STARTS = (
    "bearer ",
    "token ",
    "sk-",
    "gho_",
    "ghp_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "eyj",
    "aiza",
    "ya29.",
    "1//",
    "://",
)

_FORMATTER = logging.Formatter()


class _Secrets:
    """The secret values known so far, as one pattern; shared by every log record."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.values: set[str] = set()
        self.pattern: re.Pattern[str] | None = None
        self.installed = False


_known = _Secrets()


def redact(text: str) -> str:
    """`text` with every known secret and credential-shaped string masked."""
    pattern = _known.pattern
    if pattern is not None:
        text = pattern.sub(MASK, text)
    if text.isascii():
        lowered = text.lower()
        if not any(start in lowered for start in _SHAPE_STARTS):
            return text
    return _SHAPES.sub(MASK, text)


def redact_bytes(data: bytes) -> bytes:
    """`data` with every known secret and credential-shaped string masked: `data` itself
    when there is nothing to mask. Bytes that are not UTF-8 pass through unchanged."""
    text = data.decode("utf-8", "surrogateescape")
    masked = redact(text)
    return data if masked == text else masked.encode("utf-8", "surrogateescape")


def add_secrets(values: Iterable[str]) -> None:
    """Mask these values from now on (a renewed token joins with this)."""
    fresh = {value for value in values if len(value) >= MIN_SECRET_LENGTH}
    with _known.lock:
        if fresh <= _known.values:
            return
        _known.values.update(fresh)
        # Longest first, so a secret that contains another is masked whole.
        ordered = sorted(_known.values, key=len, reverse=True)
        _known.pattern = re.compile("|".join(re.escape(value) for value in ordered))


def install_redaction(values: Iterable[str] = ()) -> None:
    """Mask secrets in every log record created from now on, in this process."""
    add_secrets(values)
    with _known.lock:
        if _known.installed:
            return
        _known.installed = True
    make_record = logging.getLogRecordFactory()

    def redacting_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return record
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            # Formatters reuse `exc_text` when set, so the traceback is masked only once.
            record.exc_text = redact(_FORMATTER.formatException(record.exc_info))
        return record

    logging.setLogRecordFactory(redacting_record)
