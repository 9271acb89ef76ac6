"""The MCP config ``hooks install --vendor V`` writes, read by the REAL pinned Codex, Gemini CLI and
OpenCode: each lists the ``agentmail`` server as we registered it, and Gemini CLI and OpenCode
start it and report it connected (their ``mcp list`` runs the MCP handshake with the server)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.vendor_env import VENDORS, vendor_binary

pytestmark = [pytest.mark.vendors, pytest.mark.timeout(240)]
AGENTMAILD = str(Path(sys.executable).parent / "agentmaild")


@pytest.mark.parametrize("vendor", ["codex", "gemini", "opencode"])
def test_the_vendor_reads_the_registered_server(tmp_path: Path, vendor: str) -> None:
    binary = vendor_binary(vendor)
    db = tmp_path / "store" / "mail.db"
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="alice", capability="builder", channel="pull"))
    store.close()
    with VENDORS[vendor].api("unused") as api:
        home, env = VENDORS[vendor].setup(tmp_path, api)
        project = tmp_path / "proj"
        project.mkdir()
        if vendor == "gemini":  # a folder it does not trust gets no servers at all
            trusted = {str(project): "TRUST_FOLDER"}
            (home / ".gemini" / "trustedFolders.json").write_text(json.dumps(trusted))
        install = [AGENTMAILD, "hooks", "install", "--vendor", vendor, "--agent", "alice",
                   "--db", str(db)]  # fmt: skip
        done = subprocess.run(install, env=env, cwd=project, capture_output=True, text=True,
                              timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        argv = [binary, "mcp", "list", *(["--json"] if vendor == "codex" else [])]
        listed = subprocess.run(argv, env=env, cwd=project, capture_output=True, text=True,
                                timeout=120)  # fmt: skip
    out = listed.stdout + listed.stderr
    assert listed.returncode == 0, out
    want = [AGENTMAILD, "mcp", "--agent", "alice", "--db", str(db)]
    if vendor == "codex":
        [server] = json.loads(listed.stdout)
        transport = server["transport"]
        assert server["name"] == "agentmail" and server["enabled"] is True
        assert [transport["command"], *transport["args"]] == want
    else:
        line = next(line for line in out.splitlines() if "agentmail" in line)
        assert "onnected" in line and " ".join(want) in out, out
