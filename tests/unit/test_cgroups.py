"""procs.cgroups: a turn's processes in a cgroup of their own, stopped whatever they shed.

Real cgroup v2 (this machine's unified hierarchy), real children: a grandchild that calls setsid,
double-forks and execs with an empty environment is still stopped when its scope ends, and a dead
daemon's tree is swept by the next one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from agentmaild.procs import cgroups
from agentmaild.procs.scope import open_child
from tests.support.waiting import wait_for, wait_until

BOUND = 30.0

# The leader double-forks a grandchild into a session of its own, which execs `sleep` with no
# environment at all (no AGENTMAIL_SCOPE), then reports the grandchild's pid and hangs.
SHEDDER = [sys.executable, "-c", textwrap.dedent(
    """
    import os, sys, time
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(w, str(os.getpid()).encode())
            os.close(w)
            os.execve("/bin/sleep", ["sleep", "3600"], {})
        os._exit(0)
    print(os.read(r, 32).decode(), flush=True)
    time.sleep(3600)
    """
)]


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2:].split()[0] in ("Z", "X")


def _cgroup_of(pid: int) -> str:
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    return next(line[3:] for line in lines if line.startswith("0::"))


async def test_a_grandchild_that_sheds_group_session_and_environment_is_stopped() -> None:
    lines: list[str] = []
    async with open_child(SHEDDER, on_stdout=lambda line: lines.append(line.text)) as child:
        await wait_until(lambda: lines, BOUND)
        grandchild = int(lines[0])
        await wait_until(lambda: Path(f"/proc/{grandchild}/environ").read_bytes() == b"", BOUND)
        # it is in the scope's cgroup, not ours, and outside the leader's session
        assert _cgroup_of(grandchild) == _cgroup_of(child.pid) != _cgroup_of(os.getpid())
        assert os.getsid(grandchild) != child.pid
        scope_dir = child.escapes.cgroup.path if child.escapes.cgroup else ""
        assert scope_dir and Path(scope_dir).is_dir()  # noqa: ASYNC240 (a cgroupfs stat)
    await wait_until(lambda: _gone(grandchild), BOUND)
    assert not Path(scope_dir).exists(), "the scope's cgroup is removed"  # noqa: ASYNC240


async def test_turned_off_the_child_stays_in_our_cgroup() -> None:
    cgroups.use_cgroups(False)
    try:
        async with open_child([sys.executable, "-c", "import time; time.sleep(60)"]) as child:
            assert child.escapes.cgroup is None
            assert _cgroup_of(child.pid) == _cgroup_of(os.getpid())
    finally:
        cgroups.use_cgroups(True)


def test_a_dead_daemons_tree_is_swept_with_what_it_held() -> None:
    mount = cgroups._cgroup2_mount()
    own = cgroups._own_cgroup()
    assert mount is not None and own is not None, "this machine has cgroup v2"
    parent = os.path.join(mount, own.lstrip("/"))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    tree = os.path.join(parent, f"{cgroups.TREE_PREFIX}{int(dead.stdout)}")
    scope = cgroups.CgroupScope(os.path.join(tree, "left"))
    os.makedirs(scope.path)
    sleeper = subprocess.Popen(scope.wrap(["sleep", "3600"]))
    try:
        wait_for(lambda: list(scope.members()) == [sleeper.pid], BOUND, "the sleeper inside")
        assert cgroups.sweep_stale(parent) == [sleeper.pid]
        assert sleeper.wait(timeout=BOUND) == -9
        assert not os.path.exists(tree)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_missing_command_is_a_start_error_not_a_shell_failure() -> None:
    assert cgroups.executable("no-such-agent-cli", os.environ.get("PATH")) is None
    assert cgroups.executable("/bin/sh", None) == "/bin/sh"
    assert cgroups.executable("/tmp", None) is None
