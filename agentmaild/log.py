"""The structlog chain: key/value events to stderr (or a file), JSON unless a human is watching.

Modules log with ``log = structlog.get_logger(__name__)`` and dotted event names
(``delivery.acked``); ``configure_logging`` is called once by the process entry point (and again
on SIGHUP). Records from the standard ``logging`` module (asyncio, libraries) are rendered by the
same chain, so a daemon's stderr stays one JSON object per line.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path, PurePath
from typing import Any, TextIO

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from agentmaild.errors import ConfigError

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}
FORMATS = ("auto", "json", "console")
_HANDLER_NAME = "agentmaild"

_opened: list[TextIO] = []  # the log file we opened, closed when logging is reconfigured


class _NamedWriteLogger(structlog.WriteLogger):
    """A WriteLogger that remembers the name it was created with, for the ``logger`` key."""

    def __init__(self, file: TextIO, name: str | None) -> None:
        super().__init__(file)
        self.name = name


class _NamedWriteLoggerFactory:
    def __init__(self, file: TextIO) -> None:
        self._file = file

    def __call__(self, *args: Any) -> _NamedWriteLogger:
        return _NamedWriteLogger(self._file, str(args[0]) if args else None)


def _add_logger_name(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    record = event_dict.get("_record")  # set for records coming from stdlib logging
    name = record.name if record is not None else getattr(logger, "name", None)
    if name:
        event_dict.setdefault("logger", name)
    return event_dict


# Structured tracebacks, but without frame locals: they would carry message bodies into the log.
_TRACEBACKS = structlog.processors.ExceptionRenderer(
    structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
)
_LEAD = ("timestamp", "level", "logger", "event")


def _lead_keys(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """Put timestamp, level, logger and event first so a JSON line reads well in a terminal."""
    lead = {key: event_dict.pop(key) for key in _LEAD if key in event_dict}
    return {**lead, **event_dict}


def _json_default(value: object) -> object:
    return str(value) if isinstance(value, PurePath) else repr(value)


def configure_logging(level: str = "info", fmt: str = "auto", file: Path | None = None) -> None:
    """Route every structlog and stdlib log event at ``level`` or above through one renderer.

    ``fmt``: "json" (one object per line), "console" (coloured, aligned), or "auto" — JSON unless
    the destination is a TTY. ``file``: append there instead of stderr.
    """
    if level.lower() not in LEVELS:
        raise ConfigError(f"log.level: expected one of {', '.join(LEVELS)}, got {level!r}")
    if fmt not in FORMATS:
        raise ConfigError(f"log.format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    stream = _open(file)
    as_json = fmt == "json" or (fmt == "auto" and not stream.isatty())
    threshold = LEVELS[level.lower()]
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        _add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    renderer: Processor = (
        structlog.processors.JSONRenderer(default=_json_default)
        if as_json
        else structlog.dev.ConsoleRenderer(colors=stream.isatty())
    )
    tail: list[Processor] = [_TRACEBACKS, _lead_keys] if as_json else []
    structlog.configure(
        processors=[*shared, *tail, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=_NamedWriteLoggerFactory(stream),
        # Not cached: tests swap the processors with capture_logs(), and a cached logger would
        # keep the old chain. The cost is one bind per call, well below a log line's write.
        cache_logger_on_first_use=False,
    )
    _route_stdlib(stream, threshold, [*shared, *tail], renderer)
    _close_previous(keep=stream)


def _open(file: Path | None) -> TextIO:
    if file is None:
        return sys.stderr
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        stream = file.open("a", encoding="utf-8", buffering=1)  # line-buffered: tail -f works
    except OSError as exc:
        raise ConfigError(f"log.file: cannot open {file}: {exc.strerror}") from exc
    _opened.append(stream)
    return stream


def _close_previous(keep: TextIO) -> None:
    for stream in [s for s in _opened if s is not keep]:
        _opened.remove(stream)
        stream.close()


def _route_stdlib(
    stream: TextIO, threshold: int, chain: list[Processor], renderer: Processor
) -> None:
    """Send stdlib ``logging`` records (asyncio's "Task exception was never retrieved", library
    warnings) through the same processors, replacing the handler a previous call installed."""
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=chain,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler = logging.StreamHandler(stream)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(threshold)
