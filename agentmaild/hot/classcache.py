"""Compiled dataclass methods kept between runs, so a cold command does not recompile them.

``@dataclass`` writes the source of each class's ``__init__``, ``__repr__``, ``__eq__``,
``__hash__`` and (frozen) ``__setattr__`` and compiles it with ``exec`` when the class is
created. A cold ``agentmaild inbox`` creates ~35 dataclasses (the config's sections, the store's
records): compiling their methods cost about as much CPU as starting the interpreter and importing
``sqlite3`` and ``json``. That text is the same on every run, so its compiled code is too: this
module gives ``dataclasses`` an ``exec`` that looks the text up in a cache of code objects first
(the text itself is the key: a hit is exactly what compiling it would give) and saves what it
compiled at exit, as Python keeps ``.pyc`` files.

The cache is one ``marshal`` file per Python version in ``$XDG_CACHE_HOME/agentmaild`` (else
``~/.cache/agentmaild``), read only when the user running us owns it and nobody else may write
it. Any trouble (no home, unreadable or corrupt file, another Python, a read-only directory) and
the classes are compiled as usual: the cache changes speed, never behaviour. Only the CLI's
entry (``hot.entry``) installs it; a library user's ``import agentmaild`` never does.
"""

from __future__ import annotations

import builtins
import marshal
import os
import sys
from typing import Any

_FORMAT = 1
_cache: dict[str, Any] = {}
_added = 0
_path = ""


def _file() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    tag = sys.implementation.cache_tag or "python"
    return os.path.join(base, "agentmaild", f"dataclasses.{tag}.v{_FORMAT}.marshal")


def _load(path: str) -> dict[str, Any]:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return {}
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            return {}
        with os.fdopen(fd, "rb", closefd=False) as f:
            got = marshal.loads(f.read())
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    finally:
        os.close(fd)
    return got if type(got) is dict else {}


def _exec(source: Any, globals_: Any = None, locals_: Any = None) -> None:
    """``exec`` for ``dataclasses``: a known text runs its cached code."""
    global _added
    if type(source) is str:
        code = _cache.get(source)
        if code is None:
            code = _cache[source] = compile(source, "<string>", "exec")
            _added += 1
        source = code
    builtins.exec(source, globals_, locals_)


def save() -> None:
    """Write the cache when this run compiled something new (atomic, private; errors ignored)."""
    if not _added or not _path:
        return
    tmp = f"{_path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(_path), mode=0o700, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(marshal.dumps(_cache))
        os.replace(tmp, _path)
    except (OSError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass


def install() -> None:
    """Give ``dataclasses`` the caching ``exec`` (before any dataclass of ours is created)."""
    global _path, _cache
    import dataclasses

    if getattr(dataclasses, "exec", None) is _exec:
        return
    try:
        _path = _file()
    except (KeyError, RuntimeError):  # no home directory to expand
        return
    _cache = _load(_path)
    dataclasses.exec = _exec  # type: ignore[attr-defined]
