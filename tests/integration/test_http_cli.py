"""The CLI in URL mode (``AGENTMAIL_URL`` + ``AGENTMAIL_TOKEN``) against a live daemon: the same
output and exit codes as on the store file (the hook's: ``test_http_hooks``)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import pytest

from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import DaemonProc
from tests.support.http_cli import ID_RE, Both, make_both, normalised, stamps


@pytest.fixture
def both(store: SqliteMailStore, daemons: Callable[..., DaemonProc]) -> Both:
    return make_both(store, daemons)


def test_reading_commands_print_the_same(both: Both) -> None:
    sent = both.remote("send", "--to", "alice", "--subject", "über", "--body", "b\nody",
                       "--from", "bob", "--type", "question", "--priority", "high")  # fmt: skip
    assert sent.returncode == 0 and ID_RE.fullmatch(sent.stdout.strip())
    mid = sent.stdout.strip()
    payload = '{"taskId":"t1","branch":"b1","exitCode":0,"filesModified":["a.py"]}'
    assert both.remote("send", "--to", "alice", "--subject", "done", "--from", "bob",
                       "--type", "worker_done", "--payload", payload).returncode == 0  # fmt: skip
    reply = both.remote("reply", mid, "--body", "answer", "--from", "alice", "--json")
    rid = json.loads(reply.stdout)["ids"][0]
    for args in (
        ("inbox", "--agent", "alice"), ("inbox", "--agent", "alice", "--unread", "--json"),
        ("read", mid), ("read", rid, "--json"), ("thread", mid), ("thread", rid, "--json"),
        ("list", "--to", "alice"), ("list", "--from", "bob", "--json", "-n", "1"),
        ("inbox", "--agent", "ghost"), ("inbox", "--agent", "ghost", "--json"),
        ("read", "msg-doesnotexist"), ("read", "../etc/passwd"), ("thread", "msg-nothread"),
        ("check",), ("send", "--to", "nobody", "--subject", "s", "--from", "bob"),
        ("send", "--to", "alice", "--subject", "s", "--from", "bob", "--type", "worker_done",
         "--payload", "{bad"),
    ):  # fmt: skip
        both.same(*args)
    assert both.same("check").returncode == 2  # usage: no agent
    assert both.same("inbox", "--agent", "ghost").returncode == 1


ERROR_CASES: tuple[tuple[str, ...], ...] = (
    ("reply", "msg-doesnotexist", "--body", "x", "--from", "bob"),
    ("reply", "msg-doesnotexist", "--body", "x", "--from", "bob", "--json"),
    ("reply", "../etc/passwd", "--body", "x"), ("reply", "../etc/passwd", "--body", "x", "--json"),
    ("ack", "../etc/passwd"), ("ack", "../etc/passwd", "--json"),
    ("ack", "msg-unknownzz"), ("ack", "msg-unknownzz", "--json"),
    ("read", "msg-doesnotexist", "--json"), ("read", "../etc/passwd", "--json"),
    ("thread", "msg-nothread", "--json"), ("thread", "a/b"), ("thread", "a/b", "--json"),
    ("inbox", "--agent", "bad name!"), ("inbox", "--agent", "bad name!", "--json"),
    ("check", "--agent", "ghost"), ("check", "--agent", "ghost", "--json"),
    ("check", "--inject", "--agent", "ghost"), ("check", "--inject", "--agent", "ghost", "--json"),
    ("check", "--inject", "--agent", "../x"), ("check", "--json"), ("check", "--inject"),
    ("list", "--to", "ghost"), ("list", "--to", "ghost", "--json"), ("list", "-n", "0"),
    ("send", "--to", "nobody", "--subject", "s", "--from", "bob", "--json"),
    ("send", "--to", "alice", "--subject", "x" * 300, "--from", "bob"),
    ("send", "--to", "alice", "--subject", "x" * 300, "--from", "bob", "--json"),
    ("send", "--to", "@nogroup", "--subject", "s", "--from", "bob"),
    ("send", "--to", "alice", "--subject", "s", "--from", "bob", "--priority", "huge", "--json"),
    ("send", "--to", "alice", "--subject", "s", "--from", "bob", "--type", "worker_done",
     "--json"),
)  # fmt: skip


@pytest.mark.timeout(600)  # about 70 CLI processes
def test_error_cases_print_the_same_lines_and_exit_codes(both: Both) -> None:
    """Bad ids, unknown agents and refused sends: the same stdout, stderr (a one-line error, or
    the --json error object) and exit code over the API as on the store file."""
    codes = set()
    for args in ERROR_CASES:
        done = both.same(*args)
        codes.add(done.returncode)
        assert "Traceback" not in done.stderr, args
        if "--json" in args and done.returncode != 0:
            error = json.loads(done.stdout)
            assert error["ok"] is False and error["error"]["message"], args
        elif done.returncode != 0:
            assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, args
    assert codes == {0, 1, 2}  # unknown ids are skipped; usage is 2; the rest 1


@pytest.mark.timeout(600)
def test_sends_replies_and_acks_print_the_same(both: Both) -> None:
    """Successful send, reply (text and --json), an idempotent repeat and ack print the same
    (message ids aside) over the API as on the store file."""
    def same_but_ids(*args: str) -> tuple[str, str]:
        here, there = both.local(*args), both.remote(*args)
        assert (here.returncode, here.stderr) == (there.returncode, there.stderr) == (0, ""), args
        assert ID_RE.sub("ID", here.stdout) == ID_RE.sub("ID", there.stdout), args
        return here.stdout, there.stdout

    for extra in ((), ("--json",)):
        here, there = same_but_ids("send", "--to", "alice", "--subject", "s", "--body", "b",
                                   "--from", "bob", "--priority", "high", *extra)  # fmt: skip
        here_id, there_id = ID_RE.findall(here)[0], ID_RE.findall(there)[0]
        replies = [both.local("reply", here_id, "--body", "r", "--from", "alice", *extra),
                   both.remote("reply", there_id, "--body", "r", "--from", "alice", *extra)]
        assert [r.returncode for r in replies] == [0, 0]
        assert ID_RE.sub("ID", replies[0].stdout) == ID_RE.sub("ID", replies[1].stdout)
        for run in (both.local, both.remote):
            done = run("ack", ID_RE.findall(here)[0], ID_RE.findall(there)[0], *extra)
            assert done.returncode == 0
        shown = []
        for side, run in (("local", both.local), ("remote", both.remote)):
            group = ("send", "--to", "@builders", "--subject", "all", "--from", "bob",
                     "--idempotency-key", f"{side}{len(extra)}", *extra)  # fmt: skip
            first, again = run(*group), run(*group)
            assert ID_RE.findall(first.stdout) == ID_RE.findall(again.stdout)  # the first's ids
            shown.append([ID_RE.sub("ID", p.stdout) for p in (first, again)])
        assert shown[0] == shown[1]
    assert both.same("ack", "msg-unknownzz", "--json").returncode == 0


def test_check_ack_and_inject_take_the_same_mail(both: Both, store: SqliteMailStore) -> None:
    for agent in ("alice", "carol"):
        for subject in ("first", "second"):
            both.local("send", "--to", agent, "--subject", subject, "--body", "x" * 50,
                       "--from", "bob")  # fmt: skip
    here = both.local("check", "--inject", "--agent", "carol")
    there = both.remote("check", "--inject", "--agent", "alice")
    assert there.returncode == here.returncode == 0
    assert stamps(normalised(there.stdout, "alice")) == stamps(normalised(here.stdout, "carol"))
    assert "second" in there.stdout and store.inbox("alice", unread_only=True) == []
    for agent in ("alice", "carol"):
        both.local("send", "--to", agent, "--subject", "third", "--from", "bob")
    here, there = both.local("check", "--agent", "carol"), both.remote("check", "--agent", "alice")
    assert stamps(normalised(there.stdout, "alice")) == stamps(normalised(here.stdout, "carol"))
    mid = both.local("send", "--to", "alice", "--subject", "ack me", "--from", "bob").stdout.strip()
    first = both.remote("ack", mid, "msg-unknown1")
    expected = "acked 1; already read or unknown: msg-unknown1\n"
    assert (first.returncode, first.stdout) == (0, expected)
    assert both.remote("ack", mid, "--json").stdout == json.dumps(
        {"ok": True, "acked": [], "skipped": [mid]}) + "\n"  # fmt: skip


HEAVY = {"typer", "click", "structlog", "asyncio", "anyio", "starlette", "uvicorn", "httpx",
         "sqlite3", "dataclasses", "agentmaild.models", "agentmaild.config"}  # fmt: skip


@pytest.mark.parametrize(
    ("args", "stdin"),
    [(("check", "--inject", "--agent", "alice", "--json"), None),
     (("hook", "user-prompt-submit", "--agent", "alice"), '{"prompt": "go"}')],
)  # fmt: skip
def test_the_http_hot_paths_import_only_the_stdlib_client(
    both: Both, args: tuple[str, ...], stdin: str | None
) -> None:
    both.local("send", "--to", "alice", "--subject", "s", "--from", "bob")
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "agentmaild", *args],
        env={**both.d.env, **both.remote_env, "AGENTMAIL_DB": "/nonexistent/mail.db"},
        capture_output=True, text=True, input=stdin, timeout=60,
    )  # fmt: skip
    modules = {line.split("|")[-1].strip() for line in done.stderr.splitlines()
               if line.startswith("import time:")}  # fmt: skip
    assert "http.client" in modules and "agentmaild.http.client" in modules
    assert not {m for m in modules if m in HEAVY or m.split(".")[0] in HEAVY}
    assert done.returncode == 0 and "[agentmail] 1 new message for alice" in done.stdout


def test_url_and_token_flags_and_refused_tokens(both: Both) -> None:
    """``--url/--token`` (before or after the command) do what the variables do; no token, a
    wrong one or another agent's is one error line and exit 1 (``--json``: the error object)."""
    both.local("send", "--to", "alice", "--subject", "flags", "--from", "bob")
    url, token = both.remote_env["AGENTMAIL_URL"], both.remote_env["AGENTMAIL_TOKEN"]
    by_env = both.remote("inbox", "--agent", "alice")
    assert by_env.returncode == 0 and "flags" in by_env.stdout
    none = {"AGENTMAIL_URL": "", "AGENTMAIL_TOKEN": ""}
    for args in (("--url", url, "--token", token, "inbox", "--agent", "alice"),
                 ("inbox", "--agent", "alice", "--url", url, "--token", token)):  # fmt: skip
        flagged = both.remote(*args, env=none)
        assert (flagged.returncode, flagged.stdout, flagged.stderr) == (0, by_env.stdout, ""), args
    carol = json.loads(both.local("tokens", "create", "carol", "--json").stdout)["token"]
    for env, words in (({"AGENTMAIL_TOKEN": ""}, "no token"),
                       ({"AGENTMAIL_TOKEN": "amt_wrong"}, "unknown token"),
                       ({"AGENTMAIL_TOKEN": carol}, "acts as 'carol' only")):  # fmt: skip
        refused = both.remote("inbox", "--agent", "alice", env=env)
        assert (refused.returncode, refused.stdout) == (1, ""), env
        assert refused.stderr.startswith("error: ") and words in refused.stderr, refused.stderr
        assert refused.stderr.count("\n") == 1
        as_json = both.remote("inbox", "--agent", "alice", "--json", env=env)
        assert as_json.returncode == 1 and json.loads(as_json.stdout)["ok"] is False
