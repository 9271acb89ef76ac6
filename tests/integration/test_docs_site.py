"""The docs site builds with ``mkdocs build --strict``: every page in the nav, every link and
anchor found, README.md as its home page, the generated reference and the benchmark report in it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    done = build(REPO, tmp_path / "site")
    assert done.returncode == 0, done.stderr[-4000:]
    site = tmp_path / "site"
    home = (site / "index.html").read_text()
    assert "A keyless try-out" in home and 'href="guides/mail/"' in home  # README, links rewritten
    assert "agentmaild agents add" in (site / "reference" / "commands" / "index.html").read_text()
    assert "sustained send" in (site / "benchmarks" / "index.html").read_text()  # bench/results.md
    assert (site / "screenshots" / "team.png").is_file()


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    copy.mkdir()
    for name in ("mkdocs.yml", "README.md"):
        shutil.copy(REPO / name, copy / name)
    shutil.copytree(REPO / "docs", copy / "docs")
    (copy / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "mkdocs_hooks.py", copy / "scripts")
    (copy / "bench").mkdir()
    shutil.copy(REPO / "bench" / "results.md", copy / "bench")
    page = copy / "docs" / "troubleshooting.md"
    page.write_text(page.read_text() + "\nSee [nowhere](guides/nowhere.md#gone).\n")
    done = build(copy, tmp_path / "site")
    assert done.returncode != 0
    assert "guides/nowhere.md" in done.stderr
