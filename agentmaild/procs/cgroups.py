"""Containment a child cannot shed: each scope's processes in a cgroup v2 the daemon owns.

A process group, a session and an environment marker are all things a child can leave: setsid,
a double fork and a scrubbed environment make a process the daemon cannot name. Its cgroup it
cannot leave without write access to the cgroup files above it. So where the unified (v2)
hierarchy is mounted and the daemon's own cgroup is writable by it (root, or a systemd service
with ``Delegate=yes``), the daemon makes ``agentmaild-<pid>/`` beside itself (a child of its own
cgroup), and each scope a ``<token>/`` under that; the child is moved into its scope's cgroup
*before* it runs the agent (a constant ``sh`` prologue writes its own pid into
``cgroup.procs``, then ``exec``\\s the argv list, so nothing the agent does comes first), and
every descendant inherits the cgroup. When the scope ends, whatever is still in the cgroup is
stopped like an escapee (TERM, grace, KILL, reaped) and the cgroup is removed.

Where this is unavailable (no cgroup v2, a read-only or foreign hierarchy, macOS) it is off and
the process-group, session and marker method of ``escapes`` is the whole of the containment.
A hostile child running as the daemon's own user could still write itself into another cgroup
of the daemon's tree; what it cannot do is leave by forking, setsid or clearing its environment.
"""

from __future__ import annotations

import contextlib
import os
import shutil

from agentmaild.procs.pids import is_same, start_time

TREE_PREFIX = "agentmaild-"
# The prologue: `$0` is the scope's cgroup.procs; writing "0" moves the writer (this shell) in.
_PROLOGUE = 'echo 0 > "$0" && exec "$@"'
_SHELL = "/bin/sh"
_KILL_WAIT_S = 2.0


def _cgroup2_mount() -> str | None:
    """Where the unified hierarchy is mounted (``/sys/fs/cgroup``, or ``…/unified`` in hybrid)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            for line in f:
                fields = line.split()
                sep = fields.index("-")
                if fields[sep + 1] == "cgroup2":
                    return fields[4]
    except (OSError, ValueError, IndexError):
        return None
    return None


def _own_cgroup() -> str | None:
    """This process's cgroup in the unified hierarchy (the ``0::`` line)."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            for line in f:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        return None
    return None


def _pids(path: str) -> list[int]:
    try:
        with open(os.path.join(path, "cgroup.procs"), encoding="ascii") as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def _remove(path: str) -> bool:
    """rmdir the cgroup (only an empty one can go); False when it is still in use."""
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


class CgroupScope:
    """One scope's cgroup: its argv prologue, its members, its removal."""

    def __init__(self, path: str) -> None:
        self.path = path

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run inside this cgroup from its first instruction (no shell parses argv)."""
        return [_SHELL, "-c", _PROLOGUE, os.path.join(self.path, "cgroup.procs"), *argv]

    def members(self) -> dict[int, str]:
        """pid → start time of every process in the cgroup now."""
        found: dict[int, str] = {}
        for pid in _pids(self.path):
            started = start_time(pid)
            if started is not None:
                found[pid] = started
        return found

    def remove(self) -> bool:
        return _remove(self.path)

    def kill(self) -> None:
        """SIGKILL every member at once (``cgroup.kill``), then remove the cgroup."""
        _kill_and_remove(self.path)


class CgroupTree:
    """The daemon's subtree ``agentmaild-<pid>/``: made once per process, swept when stale."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.pid = os.getpid()

    @classmethod
    def open(cls) -> CgroupTree | None:
        """This process's tree, made now; None where cgroup v2 cannot contain our children."""
        mount, own = _cgroup2_mount(), _own_cgroup()
        if mount is None or own is None or not os.path.exists(_SHELL):
            return None
        parent = os.path.join(mount, own.lstrip("/"))
        sweep_stale(parent)
        path = os.path.join(parent, f"{TREE_PREFIX}{os.getpid()}")
        try:
            os.makedirs(path, exist_ok=True)
        except OSError:
            return None
        tree = cls(path)
        if tree.works():
            return tree
        tree.close()
        return None

    def works(self) -> bool:
        """Whether a child can really move itself in (a delegated tree may refuse: EBUSY,
        EACCES): tried once with the prologue itself."""
        import subprocess

        probe = self.scope("probe")
        if probe is None:
            return False
        try:
            done = subprocess.run(
                probe.wrap(["true"]), capture_output=True, timeout=10, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
        finally:
            probe.remove()
        return done.returncode == 0

    def scope(self, token: str) -> CgroupScope | None:
        path = os.path.join(self.path, token)
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
        except OSError:
            return None
        return CgroupScope(path)

    def close(self) -> None:
        """Remove the tree and what scopes are left in it (their processes are stopped first
        by their scopes; a crashed daemon's tree is swept by the next one)."""
        with contextlib.suppress(OSError):
            for name in os.listdir(self.path):
                _remove(os.path.join(self.path, name))
        _remove(self.path)


def sweep_stale(parent: str) -> list[int]:
    """Kill what a dead daemon's tree still holds, and remove the tree. Returns the pids killed.

    A tree is stale when the pid in its name no longer runs (its daemon was SIGKILLed)."""
    killed: list[int] = []
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            if not name.startswith(TREE_PREFIX) or not name[len(TREE_PREFIX):].isdigit():
                continue
            owner = int(name[len(TREE_PREFIX):])
            if owner == os.getpid() or _alive(owner):
                continue
            killed += _kill_tree(os.path.join(parent, name))
    return killed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_tree(path: str) -> list[int]:
    killed: list[int] = []
    with contextlib.suppress(OSError):
        for name in os.listdir(path):
            scope = os.path.join(path, name)
            if not os.path.isdir(scope):
                continue
            for pid, started in CgroupScope(scope).members().items():
                if is_same(pid, started):
                    with contextlib.suppress(OSError):
                        os.kill(pid, 9)
                        killed.append(pid)
            _kill_and_remove(scope)
    _remove(path)
    return killed


def _kill_and_remove(scope: str) -> None:
    """``cgroup.kill`` (Linux 5.14+), then rmdir once the members are gone (bounded: a cgroup
    whose members cannot die yet is left for the next daemon's sweep)."""
    import time

    with contextlib.suppress(OSError), open(os.path.join(scope, "cgroup.kill"), "w") as f:
        f.write("1")
    deadline = time.monotonic() + _KILL_WAIT_S
    while not _remove(scope) and time.monotonic() < deadline:
        time.sleep(0.01)  # no event exists for a cgroup emptying that a thread could wait on


class _Tree:
    enabled = True  # [daemon] cgroups
    tree: CgroupTree | None = None
    pid = 0  # the process that opened it: a forked child opens its own


def use_cgroups(enabled: bool) -> None:
    """``[daemon] cgroups``: false leaves containment to process groups and markers."""
    _Tree.enabled = enabled


def scope_for(token: str) -> CgroupScope | None:
    """A new scope's cgroup in this process's tree; None where containment is unavailable or
    turned off (``use_cgroups``)."""
    if not _Tree.enabled:
        return None
    if _Tree.pid != os.getpid():
        _Tree.pid = os.getpid()
        _Tree.tree = CgroupTree.open()
        if _Tree.tree is not None:
            import atexit

            atexit.register(_Tree.tree.close)
    return _Tree.tree.scope(token) if _Tree.tree is not None else None


def executable(argv0: str, path: str | None) -> str | None:
    """What ``argv0`` runs, or None when nothing would (the prologue's ``exec`` would fail in
    the child; checked first so a missing command is still a start error, as without it)."""
    if os.sep in argv0:
        return argv0 if os.access(argv0, os.X_OK) and not os.path.isdir(argv0) else None
    return shutil.which(argv0, path=path)

