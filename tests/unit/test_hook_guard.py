"""The poll-loop guard's classifier (``hooks_guard.is_mail_poll``), by example and by generation."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentmaild.hooks.guard import is_mail_poll

EXES = st.sampled_from(
    ["agentmaild", "/work/main/.venv/bin/agentmaild", "python -m agentmaild", "./agentmaild"]
)
READS = st.sampled_from(["check", "inbox", "list"])
OPTS = st.lists(
    st.sampled_from(["--agent x", "--agent lead-1", "--json", "--unread", "--db /tmp/m.db",
                     "--inject"]),
    max_size=3,
).map(" ".join)
SLEEPS = st.sampled_from(["sleep 5", "sleep 0.5", "sleep 1m", "command sleep 2", "sleep $N"])
SPACE = st.sampled_from([" ", "  ", "\t"])
SEP = st.sampled_from(["; ", ";", "\n", " ;\n  "])


@st.composite
def reads(draw: st.DrawFn) -> str:
    return f"{draw(EXES)} {draw(READS)} {draw(OPTS)}".strip()


@st.composite
def poll_loops(draw: st.DrawFn) -> str:
    read, nap, sep = draw(reads()), draw(SLEEPS), draw(SEP)
    tail = draw(st.sampled_from(["", " | grep -q .", " && break", " || true", " >/dev/null"]))
    shape = draw(st.integers(0, 5))
    if shape == 0:
        loop = f"while true{sep}do{draw(SPACE)}{read}{tail}{sep}{nap}{sep}done"
    elif shape == 1:
        loop = f"until {read}{tail}{sep}do {nap}{sep}done"
    elif shape == 2:
        loop = f"for i in $(seq 1 {draw(st.integers(2, 99))}){sep}do {read}{sep}{nap}{sep}done"
    elif shape == 3:
        loop = f"while {nap}{sep}do {read}{tail}{sep}done"
    elif shape == 4:
        loop = f"while :{sep}do{sep}{nap}{sep}{read}{sep}done"
    else:
        return f"watch -n {draw(st.integers(1, 30))} {read}"
    wrap = draw(st.integers(0, 3))
    if wrap == 1:
        return f"bash -c {shlex.quote(loop)}"
    if wrap == 2:
        return f"timeout 300 sh -c {shlex.quote(loop)}"
    if wrap == 3:
        return f"cd /repo && {loop}"
    return loop


@given(poll_loops())
def test_poll_loops_are_blocked(command: str) -> None:
    assert is_mail_poll(command), command


@given(reads(), st.sampled_from(["", " && echo done", " | head -50", "; git status",
                                 "sleep 10 && "]))
def test_a_single_check_is_allowed(read: str, extra: str) -> None:
    command = extra + read if extra.endswith("&& ") else read + extra
    assert not is_mail_poll(command), command


@given(st.text(max_size=300))
def test_never_raises_and_needs_agentmaild(text: str) -> None:
    blocked = is_mail_poll(text)
    if "agentmaild" not in text:
        assert not blocked


@given(st.text(alphabet=st.sampled_from(list("'\"\\$()`;&| \n#{}adgilmnt")), max_size=200))
def test_shell_metacharacter_soup_never_raises(text: str) -> None:
    is_mail_poll(text)


@pytest.mark.parametrize(
    ("command", "blocked"),
    [
        ("while true; do agentmaild check --agent x; sleep 5; done", True),
        ("agentmaild check --agent x", False),
        ("until agentmaild check --agent x | grep -q .; do sleep 2; done", True),
        ("for i in $(seq 30); do agentmaild list --agent x; sleep 10; done", True),
        ("for m in $(agentmaild inbox --json | jq -r .id); do agentmaild read $m; done", False),
        ('bash -lc "while true; do agentmaild check; sleep 1; done"', True),
        ('echo "$(while true; do agentmaild check; sleep 1; done)"', True),
        ('ssh box "while :; do agentmaild inbox; sleep 9; done"', True),
        ('while true; do bash -c "agentmaild check"; sleep 5; done', True),
        ('watch -n 5 "agentmaild check --agent x"', True),
        ("watch -n 5 ls", False),
        ("sleep 30 && agentmaild check --agent x", False),
        ("while true; do make test; sleep 5; done", False),
        ('git commit -m "while agentmaild check; sleep"', False),
        ("agentmaild send --to x -s hi -b 'while true; do agentmaild check; sleep 1; done'", False),
        ("python -m agentmaild check --agent x # while sleep", False),
        ("while true\ndo\n  agentmaild check --agent x\n  sleep 5\ndone", True),
    ],
)
def test_examples(command: str, blocked: bool) -> None:
    assert is_mail_poll(command) is blocked
