"""The docs' generated reference matches the code (``scripts/gen_reference.py --check``), and the
README stays a first-hour page."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    path = ROOT / "scripts" / "gen_reference.py"
    spec = importlib.util.spec_from_file_location("gen_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_reference"] = module
    spec.loader.exec_module(module)
    return module


GEN = _generator()


def test_the_committed_reference_is_what_the_code_gives() -> None:
    assert GEN.stale_pages() == [], (
        "docs/reference is stale: run `python scripts/gen_reference.py` and commit the pages"
    )


def test_a_changed_page_is_reported_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, build in GEN.PAGES.items():
        (tmp_path / name).write_text(build(), encoding="utf-8")
    monkeypatch.setattr(GEN, "REFERENCE", tmp_path)
    assert GEN.stale_pages() == []
    page = tmp_path / "config.md"
    page.write_text(page.read_text().replace("`poll_interval_s`", "`poll_s`"), encoding="utf-8")
    assert GEN.stale_pages() == ["config.md"]
    assert GEN.main(["--check"]) == 1


def test_every_command_option_key_and_variable_is_in_the_reference() -> None:
    from agentmaild.config.load import config_keys

    commands = (ROOT / "docs" / "reference" / "commands.md").read_text()
    for path, _, _ in GEN._commands():
        assert f"# {' '.join(path)}\n" in commands
    assert "| `--tmux-target <str>` |" in commands  # an option of `agents add`
    config = (ROOT / "docs" / "reference" / "config.md").read_text()
    environment = (ROOT / "docs" / "reference" / "environment.md").read_text()
    for section, key, name in config_keys():
        assert f"| `{key}` |" in config and f"`{name}`" in config, (section, key)
        assert f"| `{name}` | `[{section}] {key}` |" in environment
    assert "`AGENTMAIL_DB`" in environment and "`AGENTMAIL_SCOPE`" in environment


def test_a_variable_the_code_uses_must_be_described(monkeypatch: pytest.MonkeyPatch) -> None:
    assert GEN.env_names_in_code() <= GEN.ENV_WORDS.keys()
    words = dict(GEN.ENV_WORDS)
    del words["AGENTMAIL_URL"]
    monkeypatch.setattr(GEN, "ENV_WORDS", words)
    with pytest.raises(SystemExit, match="AGENTMAIL_URL"):
        GEN.environment_page()


def test_config_words_come_from_the_example_file() -> None:
    words = GEN.example_comments()
    assert words[("daemon", "lease_s")].startswith("a claimed batch returns to the queue")
    assert "cgroup v2" in words[("daemon", "cgroups")]  # a comment block above its key
    assert words[("store", "db")].startswith("The SQLite database.")  # above a commented key


def test_the_readme_is_a_first_hour_page() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move detail into docs/"
