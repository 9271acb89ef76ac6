"""The structlog chain: level filtering, JSON lines on a non-TTY stderr, console, file output."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from agentmaild.errors import ConfigError
from agentmaild.log import configure_logging


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    structlog.reset_defaults()
    root.handlers[:] = handlers
    root.setLevel(level)


def run_logging(
    body: str, *, tmp_path: Path, configure: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run ``body`` in a fresh interpreter after ``configure_logging(<configure>)``; stderr is a
    pipe, so "auto" must pick JSON."""
    code = textwrap.dedent(
        f"""
        import logging, structlog
        from pathlib import Path
        from structlog.contextvars import bind_contextvars
        from agentmaild.log import configure_logging
        configure_logging({configure})
        log = structlog.get_logger("agentmaild.demo")
        """
    ) + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


# ---- in process, through capture_logs ------------------------------------------------------


def test_level_filtering_survives_capture_logs() -> None:
    configure_logging(level="info")
    log = structlog.get_logger("agentmaild.test")
    with capture_logs() as logs:
        log.debug("test.hidden")
        log.info("test.shown", agent="a1")
        log.warning("test.warned")
    assert [(e["event"], e["log_level"]) for e in logs] == [
        ("test.shown", "info"),
        ("test.warned", "warning"),
    ]
    assert logs[0]["agent"] == "a1"


def test_debug_level_lets_debug_through() -> None:
    configure_logging(level="DEBUG")
    with capture_logs() as logs:
        structlog.get_logger("agentmaild.test").debug("test.debugged")
    assert [e["event"] for e in logs] == ["test.debugged"]


@pytest.mark.parametrize(("level", "fmt"), [("loud", "auto"), ("info", "xml")])
def test_bad_level_or_format_is_a_config_error(level: str, fmt: str) -> None:
    with pytest.raises(ConfigError, match=r"log\.(level|format)"):
        configure_logging(level=level, fmt=fmt)


# ---- a real process: what lands on stderr --------------------------------------------------


def test_auto_on_a_pipe_writes_json_lines(tmp_path: Path) -> None:
    proc = run_logging(
        """
        bind_contextvars(agent="builder-1")
        log.info("delivery.acked", delivery_id="dlv-1", count=2, db=Path("/tmp/x.db"))
        log.debug("delivery.noise")
        logging.getLogger("asyncio").error("Task exception was never retrieved")
        """,
        tmp_path=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    acked, stdlib = json_lines(proc.stderr)
    assert list(acked)[:4] == ["timestamp", "level", "logger", "event"]
    assert acked["event"] == "delivery.acked"
    assert acked["level"] == "info"
    assert acked["logger"] == "agentmaild.demo"
    assert acked["agent"] == "builder-1"  # contextvars merged
    assert acked["delivery_id"] == "dlv-1"
    assert acked["count"] == 2
    assert acked["db"] == "/tmp/x.db"
    assert acked["timestamp"].endswith("Z")  # ISO 8601, UTC
    assert stdlib["logger"] == "asyncio"
    assert stdlib["level"] == "error"
    assert stdlib["event"] == "Task exception was never retrieved"


def test_exceptions_are_structured_without_frame_locals(tmp_path: Path) -> None:
    proc = run_logging(
        """
        def deliver(body):
            raise RuntimeError("channel gone")
        try:
            deliver("secret message body")
        except RuntimeError:
            log.exception("delivery.failed")
        """,
        tmp_path=tmp_path,
    )
    (event,) = json_lines(proc.stderr)
    assert event["level"] == "error"
    assert event["exception"][0]["exc_type"] == "RuntimeError"
    assert "secret message body" not in proc.stderr


def test_level_from_configure(tmp_path: Path) -> None:
    proc = run_logging(
        'log.info("test.info")\nlog.warning("test.warning")\n'
        'logging.getLogger("lib").info("lib.info")\n',
        tmp_path=tmp_path,
        configure='level="warning"',
    )
    assert [e["event"] for e in json_lines(proc.stderr)] == ["test.warning"]


def test_console_format_is_not_json(tmp_path: Path) -> None:
    proc = run_logging(
        'log.info("test.console", n=1)', tmp_path=tmp_path, configure='fmt="console"'
    )
    assert proc.returncode == 0, proc.stderr
    assert "test.console" in proc.stderr
    assert "n=1" in proc.stderr
    with pytest.raises(json.JSONDecodeError):
        json.loads(proc.stderr.splitlines()[0])


def test_file_output_leaves_stderr_empty(tmp_path: Path) -> None:
    target = tmp_path / "logs" / "agentmaild.log"
    proc = run_logging(
        f'log.info("test.to_file")\nconfigure_logging(file=Path({str(target)!r}))\n'
        'log.info("test.again")\n',
        tmp_path=tmp_path,
        configure=f"file=Path({str(target)!r})",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert [e["event"] for e in json_lines(target.read_text())] == ["test.to_file", "test.again"]


def test_unwritable_file_is_a_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with pytest.raises(ConfigError, match=r"log\.file: cannot open"):
        configure_logging(file=blocker / "x.log")
