"""The compiled dataclass methods kept between runs (``agentmaild.hot.classcache``): the CLI
writes them once, privately, and then compiles nothing; the classes behave as compiled ones do;
a cache that is corrupt, writable by others or not the user's is not read."""

from __future__ import annotations

import json
import marshal
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentmaild.hot import classcache

PROBE = """
import dataclasses, json, sys
from agentmaild.hot import classcache
classcache.install()
from agentmaild.config import Config
from agentmaild.models import Message

@dataclasses.dataclass(frozen=True, slots=True)
class Point:
    x: int
    y: int = 2

p = Point(1)
try:
    p.x = 5
    frozen = False
except dataclasses.FrozenInstanceError:
    frozen = True
cfg = Config()
print(json.dumps({"does": [repr(p), p == Point(1, 2), p != Point(1, 3), hash(p) == hash(Point(1)),
                          frozen, repr(dataclasses.replace(p, y=7)),
                          dataclasses.replace(cfg.daemon) == cfg.daemon, repr(cfg.http)],
                  "cached": len(classcache._cache), "compiled": classcache._added}))
classcache.save()
"""


def _probe(cache: Path) -> dict[str, Any]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env,
                       timeout=60)  # fmt: skip
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)  # type: ignore[no-any-return]


def test_the_second_run_compiles_nothing_and_classes_behave_the_same(tmp_path: Path) -> None:
    first = _probe(tmp_path)
    folder = tmp_path / "agentmaild"
    [cache] = list(folder.iterdir())
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert first["compiled"] > 0  # compiled, then saved
    second = _probe(tmp_path)
    assert second["compiled"] == 0 and second["cached"] == first["cached"]  # every text a hit
    # what the classes do is the same whether their methods were compiled or came from the cache
    assert first["does"] == second["does"]
    assert first["does"][:7] == ["Point(x=1, y=2)", True, True, True, True, "Point(x=1, y=7)", True]


def _cache_file(tmp_path: Path, data: bytes, mode: int = 0o600) -> str:
    path = tmp_path / "c.marshal"
    path.write_bytes(data)
    path.chmod(mode)
    return str(path)


def test_what_is_not_read(tmp_path: Path) -> None:
    good = marshal.dumps({"x = 1": compile("x = 1", "<string>", "exec")})
    assert list(classcache._load(_cache_file(tmp_path, good))) == ["x = 1"]
    assert classcache._load(_cache_file(tmp_path, b"\x00garbage")) == {}
    assert classcache._load(_cache_file(tmp_path, marshal.dumps([1, 2]))) == {}
    assert classcache._load(_cache_file(tmp_path, good, 0o620)) == {}  # group may write it
    assert classcache._load(_cache_file(tmp_path, good, 0o602)) == {}  # anyone may write it
    assert classcache._load(str(tmp_path / "missing")) == {}
    if os.geteuid() == 0:  # CI runs as root: a file of another user's
        path = _cache_file(tmp_path, good)
        os.chown(path, 65534, 65534)
        assert classcache._load(path) == {}


def test_a_corrupt_cache_is_rewritten_and_the_command_works(tmp_path: Path) -> None:
    _probe(tmp_path)
    [cache] = list((tmp_path / "agentmaild").iterdir())
    cache.write_bytes(b"not marshal")
    cache.chmod(0o600)
    again = _probe(tmp_path)
    assert again["compiled"] > 0  # nothing could be read: compiled afresh
    assert isinstance(marshal.loads(cache.read_bytes()), dict)
