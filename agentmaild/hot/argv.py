"""The everyday commands without typer: importing typer alone costs a cold process about twice
what ``python -c "import sqlite3, json"`` costs, more than the whole command's work.

Still one grammar: ``hot/grammar_table.py`` is generated from the typer commands
(``cli/grammar.py``; a test fails while it is stale), and the command runs the same typer-free
body its typer declaration calls. This reader takes only the command lines that table describes
exactly: the root's options, then the command's words, then its options (``--name value``,
``--name=value``, a short ``-x value``, flags) and arguments in any order, each option at most
once, every value plain (a text that cannot be read as an option, an integer within its bounds).
Everything else (``--help``, ``--version``, ``--``, an unknown or repeated option, a missing
value or a missing required one, an extra argument, a bundled ``-xy``) is handed back as None,
and typer then parses it and prints its usual help or usage error: a line typer would refuse is
never read here. ``tests/unit/test_fast_argv.py`` checks, over generated command lines, that what
this reader accepts it reads exactly as typer does.
"""

from __future__ import annotations

from agentmaild.hot.grammar_table import COMMANDS, GROUPS, HELP, ROOT

TYPE_CHECKING = False  # not ``typing``'s: ``check --inject`` comes this way on every prompt
if TYPE_CHECKING:
    from typing import Any

    Param = tuple[Any, ...]  # (name, spellings, kind, required, default, min, max)
    Read = tuple[str, dict[str, Any], dict[str, Any]]

# the root options that set the CLI's state (``--version`` is typer's to answer)
_STATE = ("db", "url", "token", "as_json")


def read(argv: list[str]) -> Read | None:
    """``(body, root values, command values)`` for a command line the table covers, else None."""
    if any(a in HELP or a == "--" for a in argv):
        return None
    root: dict[str, Any] = {}
    i = _options(argv, 0, ROOT, root)
    if i is None or i >= len(argv):
        return None
    words = argv[i : i + 2] if argv[i] in GROUPS else argv[i : i + 1]
    entry = COMMANDS.get(" ".join(words))
    if entry is None:
        return None
    body, params = entry
    values: dict[str, Any] = {}
    if not _command(argv[i + len(words) :], params, values):
        return None
    root_values = {k: v for k, v in _complete(ROOT, root).items() if k in _STATE}
    return body, root_values, _complete(params, values)


def _options(argv: list[str], i: int, params: tuple[Param, ...], got: dict[str, Any]) -> int | None:
    """The group's options from ``i`` up to its first word; the index of that word."""
    spellings = _spellings(params)
    at: int | None = i
    while at is not None and at < len(argv) and argv[at][:1] == "-" and argv[at] != "-":
        at = _option(argv, at, spellings, got)
    return at


def _command(args: list[str], params: tuple[Param, ...], got: dict[str, Any]) -> bool:
    """A command's options and arguments (interspersed, as click reads them) into ``got``."""
    spellings = _spellings(params)
    positional: list[str] = []
    i: int | None = 0
    while i is not None and i < len(args):
        if args[i][:1] == "-" and args[i] != "-":
            i = _option(args, i, spellings, got)
        else:
            positional.append(args[i])
            i += 1
    return (
        i is not None
        and _arguments(positional, params, got)
        and all(p[0] in got for p in params if p[3])
    )


def _spellings(params: tuple[Param, ...]) -> dict[str, Param]:
    return {s: p for p in params for s in p[1]}


def _option(
    argv: list[str], i: int, spellings: dict[str, Param], got: dict[str, Any]
) -> int | None:
    """One option at ``argv[i]``: the index after it, or None when typer must read it."""
    word = argv[i]
    name, eq, given = word.partition("=") if word.startswith("--") else (word, "", "")
    param = spellings.get(name)
    if param is None or param[2] == "slow" or param[0] in got:
        return None
    if param[2] == "flag":
        if eq:
            return None
        got[param[0]] = True
        return i + 1
    if not eq:
        if i + 1 >= len(argv) or (argv[i + 1][:1] == "-" and argv[i + 1] != "-"):
            return None  # no value, or one click might read as an option
        given, i = argv[i + 1], i + 1
    value = _value(param, given)
    if value is None:
        return None
    got[param[0]] = value
    return i + 1


def _value(param: Param, text: str) -> str | int | None:
    if param[2] == "str":
        return text
    if param[2] != "int" or not (text.isascii() and text.isdigit() and len(text) < 19):
        return None
    number, low, high = int(text), param[5], param[6]
    if (low is not None and number < low) or (high is not None and number > high):
        return None
    return number


def _arguments(positional: list[str], params: tuple[Param, ...], got: dict[str, Any]) -> bool:
    """The positional words onto the arguments, in order; False on any left over or missing."""
    arguments = [p for p in params if not p[1]]
    for n, param in enumerate(arguments):
        if param[2] == "strs":
            take = len(positional) - (len(arguments) - n - 1)
            if take > 0:
                got[param[0]] = positional[:take]
                positional = positional[take:]
        elif param[2] == "str" and positional:
            got[param[0]] = positional.pop(0)
        elif param[2] != "str":
            return False
    return not positional


def _complete(params: tuple[Param, ...], got: dict[str, Any]) -> dict[str, Any]:
    """Every parameter's value: the given one, else its default (as the command declares it)."""
    return {p[0]: got.get(p[0], p[4]) for p in params}
