"""Where log lines go while the gateway serves: plain lines or JSON lines on stderr.

Log records and access entries are put on one queue on the event loop; a writer thread
formats them, masks them and writes them. It gathers what arrives for a moment and
writes it at once, so a busy gateway wakes the thread a few times a second, not once a
request, and a slow terminal or log pipe never stalls a request. Secrets are masked when
a log record is made (`credentials/redaction.py`), and every line is masked once more as
a whole, since an access line's fields (a model name) come from the client.
"""

from __future__ import annotations

import atexit
import datetime as dt
import logging
import logging.handlers
import queue
import sys
import threading
import time
from typing import Any, Literal, TextIO

import orjson

from rungway.credentials.redaction import redact
from rungway.logs.access import LOGGER as ACCESS_LOGGER
from rungway.logs.access import AccessEntry

LogFormat = Literal["text", "json"]
GATHER_S = 0.05
"""How long the writer lets lines gather after the first before writing them."""


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
    """`2026-12-03T11:45:02.153Z INFO    access: <message>`, and a traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line (plus its traceback)."""
        name = record.name.removeprefix("rungway.")
        line = f"{_iso(record.created)} {record.levelname:<7} {name}: {record.getMessage()}"
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line += "\n" + record.exc_text
        return line


class LogWriter:
    """The thread that formats and writes every log record and access entry."""

    def __init__(self, fmt: LogFormat, stream: TextIO) -> None:
        self._json = fmt == "json"
        self._formatter = JsonLines() if self._json else TextLines()
        self._stream = stream
        self._queue: queue.SimpleQueue[logging.LogRecord | AccessEntry | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="rungway-log", daemon=True)

    def start(self) -> None:
        """Start writing."""
        self._thread.start()

    def stop(self) -> None:
        """Write what is queued, then stop."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout=5)

    def access(self, entry: AccessEntry) -> None:
        """Queue an access entry (the `AccessSink` of `serve`)."""
        self._queue.put(entry)

    def record(self, record: logging.LogRecord) -> None:
        """Queue a log record."""
        self._queue.put(record)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is not None:
                time.sleep(GATHER_S)
            batch = [first]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            lines = [self._line(item) for item in batch if item is not None]
            if lines:
                self._stream.write("\n".join(lines) + "\n")
                self._stream.flush()
            if None in batch:
                return

    def _line(self, item: logging.LogRecord | AccessEntry) -> str:
        if isinstance(item, logging.LogRecord):
            return self._formatter.format(item)
        if self._json:
            payload = {
                "time": _iso(item.created),
                "level": "info",
                "logger": ACCESS_LOGGER,
                "message": item.line(),
                **item.fields,
            }
            return redact(orjson.dumps(payload, default=str).decode())
        return f"{_iso(item.created)} INFO    access: {redact(item.line())}"


def configure(fmt: LogFormat, *, stream: TextIO | None = None) -> LogWriter:
    """Send every log record at INFO and above to `stream` (stderr) in `fmt`, through a
    started `LogWriter`, which also takes the access entries."""
    writer = LogWriter(fmt, stream or sys.stderr)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(_Enqueue(writer))
    root.setLevel(logging.INFO)
    writer.start()
    # Lines queued before exit are still written.
    atexit.register(writer.stop)
    return writer


class _Enqueue(logging.Handler):
    """Queues each record with its message and traceback as text; the writer formats it."""

    def __init__(self, writer: LogWriter) -> None:
        super().__init__()
        self._writer = writer

    def emit(self, record: logging.LogRecord) -> None:
        """Fix the message and traceback now, while their arguments are unchanged."""
        record.msg, record.args = record.getMessage(), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.exc_info = None
        self._writer.record(record)


def _iso(epoch: float) -> str:
    moment = dt.datetime.fromtimestamp(epoch, dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
