"""The hook's marker files are never written through a link planted in the store directory."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.unit.test_hooks import SESSION, Store, hook, ups


def _plant(store_dir: Path, name: str, target: Path) -> Path:
    (store_dir / "hooks").mkdir(exist_ok=True)
    link = store_dir / "hooks" / name
    link.symlink_to(target)
    return link


def test_mid_turn_marker_is_not_touched_through_a_symlink(tmp_path: Path) -> None:
    st = Store(tmp_path)
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    env.pop("AGENTMAIL_DELIVERY", None)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    os.utime(victim, (1_000_000, 1_000_000))
    _plant(st.db.parent, "bob.mid-turn", victim)
    mid = st.send(subject="mid-turn")
    done = hook("post-tool-use", {"session_id": SESSION, "tool_name": "Read"}, db=st.db, env=env)
    assert done.returncode == 0 and done.stdout == ""  # not delivered: the marker was refused
    assert victim.read_text() == "precious"
    assert victim.stat().st_mtime == 1_000_000
    assert st.unread() == [mid]  # the mail waits for the next prompt, nothing lost
    st.store.close()


def test_stop_block_counter_does_not_truncate_a_linked_file(tmp_path: Path) -> None:
    st = Store(tmp_path)
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"),
           "AGENTMAILD_HOOKS_STOP_BLOCK_MAX": "2"}
    env.pop("AGENTMAIL_DELIVERY", None)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious data\n")
    _plant(st.db.parent, "bob.stop-blocks", victim)
    hook("user-prompt-submit", ups(), db=st.db, env=env)
    pending = st.send(subject="end of turn")
    done = hook("stop", {"stop_hook_active": False}, db=st.db, env=env)
    assert done.returncode == 0
    assert victim.read_text() == "precious data\n"
    if done.stdout:  # a refused counter must not have handed mail over and lost it
        assert pending in json.loads(done.stdout)["reason"]
    else:
        assert st.unread() == [pending]
    st.store.close()
