"""The child-process scope with real processes: drains, line caps, watchdog, group kill, logs."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import tracemalloc
from pathlib import Path

import anyio
import pytest

from agentmaild.procs.child import ChildStartError
from agentmaild.procs.lines import Line, LineSplitter
from agentmaild.procs.logfiles import RotatingLog, log_path
from agentmaild.procs.scope import open_child
from tests.support.waiting import alive
from tests.support.waiting import wait_until as wait_for

BOUND = 30.0  # upper bound for any single wait: only a hang reaches it, never a loaded machine
PY = sys.executable


def real(path: str | Path) -> str:
    return os.path.realpath(path)


def total_size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.iterdir())


def script(body: str) -> list[str]:
    return [PY, "-c", textwrap.dedent(body)]


# A leader that starts a TERM-ignoring grandchild, reports both pids on stdout, then hangs.
FAMILY = script(
    """
    import json, os, signal, subprocess, sys, time
    if "--ignore-term" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    kid = subprocess.Popen([sys.executable, "-c", "import time\\nwhile True: time.sleep(60)"])
    print(json.dumps({"pid": os.getpid(), "grandchild": kid.pid}), flush=True)
    time.sleep(3600)
    """
)


async def test_round_trip_stdin_stdout_stderr() -> None:
    out: list[Line] = []
    err: list[Line] = []
    argv = script(
        """
        import sys
        data = sys.stdin.read()
        print(data.upper(), end="")
        print("warning", file=sys.stderr)
        sys.exit(3)
        """
    )
    with anyio.fail_after(BOUND):
        async with open_child(argv, on_stdout=out.append, on_stderr=err.append) as child:
            assert await child.send(b"one\ntwo\n")
            await child.close_stdin()
            done = await child.wait()
    assert [line.text for line in out] == ["ONE", "TWO"]
    assert [line.text for line in err] == ["warning"]
    assert done.returncode == 3
    assert done.reason() == "exit code 3"
    assert not done.stalled


async def test_unterminated_last_line_is_delivered() -> None:
    out: list[Line] = []
    async with open_child(script("print('tail', end='')"), on_stdout=out.append) as child:
        await child.wait()
    assert out == [Line(b"tail")]


async def test_stdout_and_stderr_drained_concurrently() -> None:
    # 4 MB on stderr before a word on stdout: a reader of stdout alone would deadlock the child.
    argv = script(
        """
        import sys
        sys.stderr.write(("e" * 1023 + "\\n") * 4096)
        sys.stderr.flush()
        print("done")
        """
    )
    out: list[Line] = []
    err: list[Line] = []
    with anyio.fail_after(BOUND):
        async with open_child(argv, on_stdout=out.append, on_stderr=err.append) as child:
            done = await child.wait()
    assert done.returncode == 0
    assert out == [Line(b"done")]
    assert len(err) == 4096


async def test_cwd_and_env_are_passed(tmp_path: Path) -> None:
    out: list[Line] = []
    argv = script("import os; print(os.getcwd()); print(os.environ.get('PROBE'))")
    env = {"PATH": os.environ["PATH"], "PROBE": "x y $(z)"}
    async with open_child(argv, cwd=tmp_path, env=env, on_stdout=out.append) as child:
        await child.wait()
    assert [line.text for line in out] == [real(tmp_path), "x y $(z)"]


async def test_missing_executable_and_bad_cwd(tmp_path: Path) -> None:
    with pytest.raises(ChildStartError, match="no-such-agent-cli"):
        async with open_child(["no-such-agent-cli"]):
            pass
    with pytest.raises(ChildStartError, match="nowhere"):
        async with open_child([PY, "-c", "pass"], cwd=tmp_path / "nowhere"):
            pass


async def test_stall_terms_then_kills_the_whole_group() -> None:
    pids: dict[str, int] = {}
    ready = anyio.Event()

    def on_line(line: Line) -> None:
        pids.update(json.loads(line.data))
        ready.set()

    with anyio.fail_after(BOUND):
        async with open_child(
            [*FAMILY, "--ignore-term"], stall_timeout_s=None, kill_grace_s=0.3, on_stdout=on_line
        ) as child:
            await ready.wait()  # armed once the family is up: start-up is not in the 0.3 s
            child.set_stall_timeout(0.3)
            done = await child.wait()
    assert done.stalled
    assert done.killed  # TERM was ignored, so the group needed KILL
    assert done.returncode == -9
    assert "stalled" in done.reason()
    assert not alive(pids["pid"])
    await wait_for(lambda: not alive(pids["grandchild"]), within_s=BOUND)


async def test_stall_term_is_enough_for_a_polite_child() -> None:
    grace_s = 60.0  # far beyond any start-up: a stop that waited it out is unmistakable
    with anyio.fail_after(BOUND * 3):
        async with open_child(
            script("import time; time.sleep(3600)"), stall_timeout_s=0.2, kill_grace_s=grace_s
        ) as child:
            done = await child.wait()
    assert done.stalled
    assert not done.killed
    assert done.returncode == -15
    assert done.duration_s < grace_s / 2  # it did not wait the whole grace


async def test_output_keeps_the_watchdog_quiet() -> None:
    # 3 s of ticks, 0.1 s apart, against a 1.5 s watchdog armed at the first tick (so start-up is
    # not in it): only the ticks keep it quiet, and a loaded machine still has 1.4 s of slack.
    ready = anyio.Event()
    argv = script(
        """
        import time
        for _ in range(30):
            print("tick", flush=True)
            time.sleep(0.1)
        """
    )
    with anyio.fail_after(BOUND):
        async with open_child(
            argv, stall_timeout_s=None, kill_grace_s=0.2, on_stdout=lambda _: ready.set()
        ) as child:
            await ready.wait()
            child.set_stall_timeout(1.5)
            done = await child.wait()
    assert done.returncode == 0
    assert not done.stalled


async def test_watchdog_can_be_disabled_and_rearmed() -> None:
    # What a long-lived (stdin) child needs: no watchdog between turns, one during a turn.
    ready = anyio.Event()
    argv = script("import time; print('up', flush=True); time.sleep(3600)")
    with anyio.fail_after(BOUND):
        async with open_child(
            argv, stall_timeout_s=None, kill_grace_s=0.2, on_stdout=lambda _: ready.set()
        ) as child:
            await ready.wait()
            with anyio.move_on_after(0.4):
                await child.wait()
            assert child.returncode is None  # silent, yet alive: no watchdog armed
            child.set_stall_timeout(0.2)
            done = await child.wait()
    assert done.stalled


async def test_cancellation_kills_and_reaps_the_group() -> None:
    pids: dict[str, int] = {}
    started = anyio.Event()

    def on_line(line: Line) -> None:
        pids.update(json.loads(line.data))
        started.set()

    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                async with open_child(
                    [*FAMILY, "--ignore-term"], kill_grace_s=0.3, on_stdout=on_line
                ) as child:
                    await child.wait()

            tg.start_soon(run)
            await started.wait()
            tg.cancel_scope.cancel()
    assert not alive(pids["pid"])
    await wait_for(lambda: not alive(pids["grandchild"]), within_s=BOUND)


async def test_an_exception_in_the_block_propagates_as_itself() -> None:
    pids: dict[str, int] = {}
    started = anyio.Event()

    def on_line(line: Line) -> None:
        pids.update(json.loads(line.data))
        started.set()

    async def run() -> None:
        async with open_child(FAMILY, kill_grace_s=1.0, on_stdout=on_line):
            await started.wait()
            raise KeyError("boom")

    with anyio.fail_after(BOUND), pytest.raises(KeyError, match="boom"):
        await run()
    assert not alive(pids["pid"])
    await wait_for(lambda: not alive(pids["grandchild"]), within_s=BOUND)


async def test_stragglers_die_when_the_leader_exits() -> None:
    # The grandchild keeps stdout open; without stopping the group, EOF would never come.
    argv = script(
        """
        import subprocess, sys
        kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        print(kid.pid, flush=True)
        """
    )
    out: list[Line] = []
    with anyio.fail_after(BOUND):
        async with open_child(argv, kill_grace_s=1.0, on_stdout=out.append) as child:
            done = await child.wait()
    assert done.returncode == 0
    await wait_for(lambda: not alive(int(out[0].text)), within_s=BOUND)


async def test_huge_line_is_capped_and_memory_stays_bounded(tmp_path: Path) -> None:
    # 48 MB without a newline, then a normal line: the reader holds at most one capped line.
    argv = script(
        """
        import sys
        chunk = b"x" * (1 << 20)
        for _ in range(48):
            sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.write(b"\\nafter\\n")
        """
    )
    out: list[tuple[int, bool, bytes]] = []
    logfile = RotatingLog(tmp_path / "a.log", max_bytes=100_000, keep=1)
    tracemalloc.start()
    try:
        with anyio.fail_after(BOUND * 3):
            async with open_child(
                argv,
                line_max_bytes=1 << 20,
                log_file=logfile,
                on_stdout=lambda ln: out.append((len(ln.data), ln.truncated, ln.data[:5])),
            ) as child:
                done = await child.wait()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        logfile.close()
    assert done.returncode == 0
    assert out == [(1 << 20, True, b"xxxxx"), (5, False, b"after")]
    assert peak < 8 * (1 << 20)
    assert total_size(tmp_path) <= 2 * 100_000
    assert (tmp_path / "a.log").read_bytes().endswith(b"after\n")


@pytest.mark.parametrize("chunk_size", [1, 3, 7, 64, 10_000])
def test_line_splitter_across_chunk_boundaries(chunk_size: int) -> None:
    stream = b"short\n" + b"y" * 25 + b"\nexact-ten!\n\nlast"
    splitter = LineSplitter(10)
    lines: list[Line] = []
    for i in range(0, len(stream), chunk_size):
        lines += splitter.feed(stream[i : i + chunk_size])
    lines += splitter.flush()
    assert lines == [
        Line(b"short"),
        Line(b"y" * 10, truncated=True),
        Line(b"exact-ten!"),
        Line(b""),
        Line(b"last"),
    ]


def test_rotating_log_bounds_size_and_count(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "agent.log"
    rlog = RotatingLog(path, max_bytes=1000, keep=3)
    for n in range(500):
        rlog.write_line(Line(b"%04d " % n + b"z" * 45))
    rlog.write_line(Line(b"w" * 5000, truncated=True))  # larger than a whole file: clipped
    rlog.close()
    names = sorted(p.name for p in path.parent.iterdir())
    assert names == ["agent.log", "agent.log.1", "agent.log.2", "agent.log.3"]
    assert all(p.stat().st_size <= 1000 for p in path.parent.iterdir())
    assert b"0499 " in (path.parent / "agent.log.1").read_bytes()


def test_rotating_log_keep_zero_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    rlog = RotatingLog(path, max_bytes=100, keep=0)
    for _ in range(10):
        rlog.write(b"x" * 40 + b"\n")
    rlog.close()
    assert [p.name for p in tmp_path.iterdir()] == ["a.log"]
    assert path.stat().st_size <= 100
    again = RotatingLog(path, max_bytes=100, keep=0)  # a new turn appends to what is there
    again.write(b"y\n")
    again.close()
    assert path.read_bytes().endswith(b"x\ny\n")


def test_log_path_is_beside_the_store_and_safe(tmp_path: Path) -> None:
    assert log_path(tmp_path / "mail.db", "alice") == tmp_path / "logs" / "alice.log"
    assert log_path(tmp_path / "mail.db", "../evil/x").parent == tmp_path / "logs"
