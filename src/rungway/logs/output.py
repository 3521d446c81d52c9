"""Where log records go while the gateway serves: plain lines or JSON lines on stderr.

Records are handed to a queue on the event loop and written by a thread, so a slow
terminal or log pipe never stalls a request. Secrets are masked when each record is made
(`credentials/redaction.py`); a JSON line is masked once more as a whole, since its
fields come from outside the message.
"""

from __future__ import annotations

import atexit
import datetime as dt
import logging
import logging.handlers
import queue
import sys
from typing import Any, Literal, TextIO

import orjson

from rungway.credentials.redaction import redact
from rungway.logs.access import LOGGER as ACCESS_LOGGER

LogFormat = Literal["text", "json"]


class JsonLines(logging.Formatter):
    """One JSON object a line: time, level, logger, message, and any fields the record carries."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a single line of JSON."""
        payload: dict[str, Any] = {
            "time": _iso(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            payload.update(fields)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            payload["exception"] = record.exc_text
        return redact(orjson.dumps(payload, default=str).decode())


class TextLines(logging.Formatter):
    """`2026-12-03T11:45:02.153Z INFO access: <message>`, and a traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line (plus its traceback)."""
        name = record.name.removeprefix("rungway.")
        line = f"{_iso(record.created)} {record.levelname:<7} {name}: {record.getMessage()}"
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line += "\n" + record.exc_text
        return line


def configure(fmt: LogFormat, *, quiet: bool, stream: TextIO | None = None) -> None:
    """Send every log record at INFO and above to `stream` (stderr) in `fmt`.

    `quiet` leaves out the access lines; warnings and errors are always written.
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLines() if fmt == "json" else TextLines())
    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    listener = logging.handlers.QueueListener(records, handler, respect_handler_level=True)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(_Enqueue(records))
    root.setLevel(logging.INFO)
    logging.getLogger(ACCESS_LOGGER).setLevel(logging.WARNING if quiet else logging.INFO)
    listener.start()
    # Lines queued before exit are still written.
    atexit.register(listener.stop)


class _Enqueue(logging.handlers.QueueHandler):
    """Queues each record with its message and traceback as text; the writer formats it."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        # The message and traceback are fixed now, while their arguments are unchanged;
        # formatting waits for the writer thread.
        record.msg, record.args = record.getMessage(), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.exc_info = None
        return record


def _iso(epoch: float) -> str:
    moment = dt.datetime.fromtimestamp(epoch, dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
