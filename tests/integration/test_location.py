"""Store location through git worktrees (SPEC §2, issue 2 item 7), with a real worktree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentmaild.store import location

pytestmark = [
    pytest.mark.timeout(60),
]


def clean_env(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AGENTMAIL_", "AGENTMAILD_", "GIT_", "CLAUDE"))
    }
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.invalid",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.invalid",
    )
    return env


@dataclass
class Repo:
    root: Path  # tmp_path, holding main/, wt/, home/, outside/
    main: Path
    wt: Path
    home: Path
    env: dict[str, str]

    def git(self, *args: str, cwd: Path | None = None) -> str:
        proc = subprocess.run(
            ["git", *args],
            cwd=cwd or self.main,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    def agentmaild(self, *args: str, cwd: Path) -> dict[str, object]:
        proc = subprocess.run(
            [sys.executable, "-m", "agentmaild", *args, "--json"],
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        data: dict[str, object] = json.loads(proc.stdout)
        assert data["ok"] is True, data
        return data

    def git_main_checkout(self, cwd: Path) -> Path:
        common = self.git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=cwd)
        return Path(common).resolve().parent


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    home = tmp_path / "home"
    home.mkdir()
    main = tmp_path / "main"
    main.mkdir()
    r = Repo(root=tmp_path, main=main, wt=tmp_path / "wt", home=home, env=clean_env(home))
    r.git("init", "-q")
    (main / "README").write_text("hello\n")
    (main / "pkg" / "deep").mkdir(parents=True)
    (main / "pkg" / "deep" / "f.txt").write_text("x\n")
    r.git("add", "-A")
    r.git("commit", "-q", "-m", "init")
    r.git("worktree", "add", "-q", "../wt", "-b", "feature")
    assert (r.wt / ".git").is_file()  # a worktree: .git is a file pointing into main/.git
    (r.wt / "sub" / "dir").mkdir(parents=True)
    return r


# ---- project_root against git itself -------------------------------------------------------


def test_project_root_matches_git_common_dir(repo: Repo) -> None:
    main = repo.main.resolve()
    for where in (
        repo.main,
        repo.main / "pkg" / "deep",
        repo.wt,
        repo.wt / "sub" / "dir",
        repo.wt / "pkg" / "deep",
    ):
        expected = repo.git_main_checkout(where)
        assert expected == main
        assert location.project_root(str(where)) == str(main), where
    assert location.default_db(str(repo.wt / "sub")) == str(main / ".agentmail" / "mail.db")


def test_project_root_with_a_relative_gitdir_file(repo: Repo) -> None:
    """Worktrees made with ``--relative-paths`` (or moved) hold a relative ``gitdir:``."""
    marker = repo.wt / ".git"
    target = marker.read_text().split(":", 1)[1].strip()
    marker.write_text(f"gitdir: {os.path.relpath(target, repo.wt)}\n")
    assert repo.git_main_checkout(repo.wt / "sub") == repo.main.resolve()
    assert location.project_root(str(repo.wt / "sub")) == str(repo.main.resolve())


def test_project_root_outside_any_repository(repo: Repo) -> None:
    outside = repo.root / "outside" / "nested"
    outside.mkdir(parents=True)
    probe = subprocess.run(
        ["git", "rev-parse", "--git-common-dir"],
        cwd=outside,
        env=repo.env,
        capture_output=True,
        text=True,
    )
    assert probe.returncode != 0, "precondition: the temporary directory is outside any repository"
    assert location.project_root(str(outside)) is None
    assert location.default_db(str(outside)) == str(outside.resolve() / ".agentmail" / "mail.db")


def test_project_root_from_cwd(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo.wt / "sub")
    assert location.project_root() == str(repo.main.resolve())


def test_override_order(repo: Repo) -> None:
    """--db, then AGENTMAIL_DB, then the config file, then the project default."""
    cfg_dir = repo.home / ".config" / "agentmaild"
    env = {"HOME": str(repo.home), "XDG_CONFIG_HOME": str(repo.home / ".config")}
    start = str(repo.wt)
    default = str(repo.main.resolve() / ".agentmail" / "mail.db")
    assert location.resolve_location(None, env, start).target == default
    cfg_dir.mkdir(parents=True)
    (cfg_dir / "config.toml").write_text(f'[store]\ndb = "{repo.root / "cfg.db"}"\n')
    assert location.resolve_location(None, env, start).target == str(repo.root / "cfg.db")
    env["AGENTMAIL_DB"] = str(repo.root / "env.db")
    assert location.resolve_location(None, env, start).target == str(repo.root / "env.db")
    flagged = location.resolve_location(str(repo.root / "flag.db"), env, start)
    assert flagged == location.StoreLocation.of(repo.root / "flag.db")
    assert flagged.target == str(repo.root / "flag.db")
    env["AGENTMAIL_DB"] = "postgresql://u:secret@db.example:5433/mail"  # a DSN passes as given
    dsn = location.resolve_location(None, env, start)
    assert dsn.target == env["AGENTMAIL_DB"] and "secret" not in dsn.shown


# ---- the CLI in a worktree uses the main checkout's store ----------------------------------


def test_worktree_and_main_checkout_share_one_store(repo: Repo) -> None:
    store = repo.main / ".agentmail" / "mail.db"
    # registered from inside the worktree, sent from the main checkout
    repo.agentmaild("agents", "add", "x1", "--capability", "builder", cwd=repo.wt / "sub")
    first = repo.agentmaild(
        "send", "--to", "x1", "--subject", "from main", "--body", "one", cwd=repo.main
    )
    assert store.is_file()
    assert not (repo.wt / ".agentmail").exists()
    assert not (repo.wt / "sub" / ".agentmail").exists()

    got = repo.agentmaild("check", "--agent", "x1", cwd=repo.wt)
    messages = got["messages"]
    assert isinstance(messages, list)
    assert [m["id"] for m in messages] == first["ids"]
    assert messages[0]["body"] == "one"

    # the hook fast path (check --inject) resolves the same store, from a subdirectory
    second = repo.agentmaild(
        "send", "--to", "x1", "--subject", "again", "--body", "two", cwd=repo.main / "pkg"
    )
    injected = repo.agentmaild("check", "--inject", "--agent", "x1", cwd=repo.wt / "sub" / "dir")
    assert injected["acked"] == second["ids"]
    assert "again" in str(injected["text"])
    assert not (repo.wt / "sub" / "dir" / ".agentmail").exists()
    assert sorted(p.name for p in repo.root.rglob(".agentmail")) == [".agentmail"]


# ---- the store directory keeps itself out of git -------------------------------------------


def test_a_created_store_directory_ignores_itself(repo: Repo) -> None:
    repo.agentmaild("agents", "add", "x1", "--capability", "builder", cwd=repo.wt)
    store_dir = repo.main / ".agentmail"
    assert (store_dir / "mail.db").is_file()
    assert "*" in (store_dir / ".gitignore").read_text().splitlines()
    assert repo.git("status", "--porcelain", "--untracked-files=all") == ""


def test_the_daemon_lock_creates_the_directory_the_same_way(tmp_path: Path) -> None:
    from agentmaild.store.file_lock import hold_lock

    db = tmp_path / "fresh" / "mail.db"
    with hold_lock(db):
        assert (db.parent / ".gitignore").read_text().splitlines()[-1] == "*"


def test_an_existing_directory_gets_no_gitignore(repo: Repo) -> None:
    mine = repo.main / "mine"
    mine.mkdir()
    repo.agentmaild("--db", str(mine / "mail.db"), "agents", "add", "x", "--capability", "lead",
                    cwd=repo.main)
    assert (mine / "mail.db").is_file()
    assert not (mine / ".gitignore").exists()
