"""The everyday commands' reader without typer (``agentmaild.hot.argv``) against typer itself.

The table it reads is what ``cli/grammar.py`` generates from the typer commands now (else the
first test fails: regenerate it). Then, over command lines generated from the commands' own
spellings mixed with awkward words (option-like values, ``--``, help, repeats, bounds, junk),
every line the reader accepts is one typer accepts too, read into the same root options, the
same command and the same keyword arguments for its body; and the everyday shapes are accepted.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmaild.cli import grammar
from agentmaild.hot import argv as fast
from agentmaild.hot.grammar_table import COMMANDS, ROOT


def test_the_table_is_what_the_typer_commands_say() -> None:
    assert grammar.TABLE_FILE.read_text(encoding="utf-8") == grammar.source(), (
        "hot/grammar_table.py is stale: run python -m agentmaild.cli.grammar"
    )


_TYPER: dict[str, Any] = {}


def _root() -> Any:
    if "root" not in _TYPER:
        import typer.main

        from agentmaild.cli.app import app

        _TYPER["root"] = typer.main.get_command(app)
    return _TYPER["root"]


def typer_read(argv: list[str]) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
    """What typer makes of ``argv``: the command's words, the root's and the command's values
    as the body would get them (typer's own collection rule applied), or None when it refuses."""
    import typer
    import typer._click as click
    from typer.main import _normalize_collection_value

    root = _root()
    try:
        ctx = root.make_context("agentmaild", list(argv))
        rest = [*ctx._protected_args, *ctx.args]
        words: list[str] = []
        group, parent = root, ctx
        while True:
            name, cmd, rest = group.resolve_command(parent, rest)
            words.append(name)
            if not hasattr(cmd, "resolve_command"):  # a command, not a group
                break
            parent = cmd.make_context(name, rest, parent=parent)
            rest = [*parent._protected_args, *parent.args]
            group = cmd
        sub = cmd.make_context(name, rest, parent=parent)
    except (click.exceptions.ClickException, typer.Exit, typer.Abort):
        return None
    values = {p.name: _normalize_collection_value(p, sub.params[p.name]) for p in cmd.params}
    root_values = {k: v for k, v in ctx.params.items() if k != "version"}
    return " ".join(words), root_values, values


def _fast(argv: list[str]) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
    got = fast.read(argv)
    if got is None:
        return None
    body, root_values, values = got
    [words] = [w for w, (b, _) in COMMANDS.items() if b == body]
    return words, root_values, values


EVERYDAY = [
    ["send", "--to", "bob", "-s", "hi", "-b", "x"],
    ["send", "--from", "alice", "--to=@builders", "--subject=a=b", "--body", "-", "--json"],
    ["--db", "/tmp/m.db", "send", "--to", "bob", "-s", "hi"],
    ["reply", "msg-1", "--from", "bob", "-b", "ok"],
    ["inbox", "--agent", "bob"],
    ["--db=/tmp/m.db", "--json", "inbox", "-a", "bob", "--unread"],
    ["read", "msg-1"],
    ["ack", "msg-1", "msg-2", "--json"],
    ["check", "--agent", "alice"],
    ["thread", "msg-1"],
    ["list", "--limit", "20", "--to", "bob"],
    ["list", "-n", "100000"],
    ["status"],
    ["--db", "x.db", "status", "--json"],
    ["agents", "list"],
    ["ctl", "ping"],
    ["ctl", "pause", "agent=b1", "--json"],
]


@pytest.mark.parametrize("argv", EVERYDAY, ids=" ".join)
def test_the_everyday_shapes_are_read_as_typer_reads_them(argv: list[str]) -> None:
    got = _fast(argv)
    assert got is not None
    assert got == typer_read(argv)


REFUSED = [
    [],
    ["--version"],
    ["inbox", "--agent", "bob", "--help"],
    ["inbox", "-h"],
    ["inbox"],  # --agent is required
    ["inbox", "--agent"],  # no value
    ["inbox", "--agent", "--json"],  # a value click may read as an option
    ["inbox", "--agent", "bob", "--agent", "carol"],  # twice
    ["inbox", "-abob"],  # glued short option
    ["inbox", "--agent", "bob", "extra"],
    ["inbox", "--agent", "bob", "--", "x"],
    ["inbox", "--nope", "x"],
    ["list", "--limit", "0"],
    ["list", "--limit", "100001"],
    ["list", "--limit", "+5"],
    ["list", "--unread=1"],
    ["ack"],
    ["agents"],
    ["agents", "--json", "list"],
    ["agents", "show", "bob"],
    ["purge", "--all"],
    ["nope"],
]


@pytest.mark.parametrize("argv", REFUSED, ids=lambda a: " ".join(a) or "(none)")
def test_the_rest_is_left_to_typer(argv: list[str]) -> None:
    assert fast.read(argv) is None


_AWKWARD = ["-", "--", "-h", "--help", "--json", "-x", "--nope", "", "=", "a=b", "0", "1", "50",
            "100000", "100001", "007", "+5", "-5", " 5", "msg-1", "a b", "é", "--db",
            "-a"]  # fmt: skip
_VALUES = st.one_of(st.sampled_from(_AWKWARD), st.text(max_size=6))


def _words_for(params: tuple[Any, ...]) -> st.SearchStrategy[list[str]]:
    """One token group for one of ``params``: an option with or without its value, a flag, a
    positional word, or something awkward."""
    choices: list[st.SearchStrategy[list[str]]] = [_VALUES.map(lambda v: [v])]
    for p in params:
        for s in p[1]:
            choices.append(_VALUES.map(lambda v, s=s: [s, v]))
            choices.append(st.just([s]))
            if s.startswith("--"):
                choices.append(_VALUES.map(lambda v, s=s: [f"{s}={v}"]))
    return st.one_of(choices)


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    words = draw(st.sampled_from(sorted(COMMANDS))).split()
    root = draw(st.lists(_words_for(ROOT), max_size=2))
    tail = draw(st.lists(_words_for(COMMANDS[" ".join(words)][1]), max_size=6))
    return [*[w for g in root for w in g], *words, *[w for g in tail for w in g]]


# No deadline: a loaded 2-core CI runs typer's parse slower than hypothesis' default allows.
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(command_lines())
def test_whatever_it_accepts_typer_reads_the_same(argv: list[str]) -> None:
    got = _fast(argv)
    if got is not None:
        assert got == typer_read(argv), argv


_PLAIN = st.one_of(st.sampled_from(["bob", "msg-1", "a b", "-", "0", "1", "20", "é", "a=b", ""]),
                   st.text(max_size=5).filter(lambda v: not v.startswith("-")))  # fmt: skip


@st.composite
def plausible_lines(draw: st.DrawFn) -> list[str]:
    """Mostly well-formed: each parameter given or not, in any order and spelling, plain values,
    now and then one awkward word."""
    words = draw(st.sampled_from(sorted(COMMANDS))).split()
    groups: list[list[str]] = []
    for p in draw(st.permutations(COMMANDS[" ".join(words)][1])):
        if not draw(st.booleans()):
            continue
        if not p[1]:
            groups += [
                [draw(_PLAIN)] for _ in range(draw(st.integers(1, 2 if p[2] == "strs" else 1)))
            ]
        elif p[2] == "flag":
            groups.append([draw(st.sampled_from(p[1]))])
        else:
            spelling, value = draw(st.sampled_from(p[1])), draw(_PLAIN)
            eq = spelling.startswith("--") and draw(st.booleans())
            groups.append([f"{spelling}={value}"] if eq else [spelling, value])
    if draw(st.integers(0, 4)) == 0:
        groups.insert(draw(st.integers(0, len(groups))), [draw(_VALUES)])
    root = draw(st.lists(_words_for(ROOT), max_size=2))
    return [*[w for g in root for w in g], *words, *[w for g in groups for w in g]]


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plausible_lines())
def test_plausible_lines_typer_reads_the_same(argv: list[str]) -> None:
    got = _fast(argv)
    if got is not None:
        assert got == typer_read(argv), argv
