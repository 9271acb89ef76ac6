"""The layout's rules, measured: import circles, the backend's walls, module and function sizes.

Run as ``python scripts/layout.py`` (``make check`` does): prints each rule's count and the
offenders, and exits 1 when an enforced rule is broken. ``tests/unit/test_layout.py`` asserts the
same. A rule is enforced once the tree meets it (``ENFORCED``: every rule below is); a rule added
later is reported until the tree meets it, so the report shows how far the tree is from it.

- circles: strongly connected components of the import graph of ``agentmaild`` (every
  ``import`` and ``from … import``, at any depth of the module, except under ``TYPE_CHECKING``);
- backend: modules outside ``agentmaild/store/`` that import psycopg, and ``*_pg.py``/``pg_*.py``
  modules outside it;
- root: modules at the package's root beyond the kernel every package builds on;
- size: modules over 300 lines, functions over 60.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "agentmaild"
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 60
# The kernel: what every package imports and no package owns (the error tree, the models, ids
# and stamps, logging set-up), and the package's own entry files.
KERNEL = {"__init__", "__main__", "errors", "models", "models_status", "ids", "log"}
ENFORCED: set[str] = {"circles", "backend", "root", "long_modules", "long_functions"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


@functools.cache
def _parsed(path: Path) -> tuple[str, ast.Module]:
    """A module's text and tree, read once per run for every rule."""
    text = path.read_text(encoding="utf-8")
    return text, ast.parse(text)


def _type_checking_block(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if _type_checking_block(node):
            stack.extend(getattr(node, "orelse", []))
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _targets(name: str, node: ast.Import | ast.ImportFrom, known: set[str]) -> set[str]:
    found: set[str] = set()
    if isinstance(node, ast.Import):
        bases = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            pkg = name.split(".")[: -node.level] if not name.endswith("__init__") else name
            base = ".".join([*pkg, base] if base else pkg)
        bases = [base] + [f"{base}.{a.name}" for a in node.names]
    for b in bases:
        while b and b not in known:
            b = b.rpartition(".")[0]
        if b:
            found.add(b)
    return found


def graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    known = set(mods)
    edges: dict[str, set[str]] = {}
    for name, path in mods.items():
        tree = _parsed(path)[1]
        deps: set[str] = set()
        for node in _imports(tree):
            deps |= _targets(name, node, known)
        # importing a.b.c runs a and a.b first; a package importing its own child is no circle
        edges[name] = {d for d in deps if d != name and not d.startswith(name + ".")}
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    sys.setrecursionlimit(10_000)

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = _pop_component(stack, on, v)
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def _pop_component(stack: list[str], on: set[str], root: str) -> list[str]:
    comp: list[str] = []
    while True:
        w = stack.pop()
        on.discard(w)
        comp.append(w)
        if w == root:
            return comp


def backend_leaks(mods: dict[str, Path]) -> list[str]:
    leaks = []
    for name, path in mods.items():
        if name.startswith("agentmaild.store"):
            continue
        stem = path.stem
        if stem.endswith("_pg") or stem.startswith("pg_"):
            leaks.append(f"{name}: a PostgreSQL module outside store/")
        tree = _parsed(path)[1]
        for node in _imports(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [
                node.module or ""
            ]
            if any(n.split(".")[0] in ("psycopg", "psycopg_pool") for n in names):
                leaks.append(f"{name}: imports psycopg")
                break
    leaks += [
        f"{path.relative_to(ROOT)}: SQL outside store/"
        for path in sorted(PKG.rglob("*.sql"))
        if "store" not in path.relative_to(PKG).parts[:1]
    ]
    return leaks


def root_modules(mods: dict[str, Path]) -> list[str]:
    return [
        n for n, p in mods.items()
        if p.parent == PKG and p.stem not in KERNEL
    ]


def sizes(mods: dict[str, Path]) -> tuple[list[str], list[str]]:
    long_modules: list[str] = []
    long_functions: list[str] = []
    for name, path in mods.items():
        text, tree = _parsed(path)
        lines = text.count("\n")
        if lines > MAX_MODULE_LINES:
            long_modules.append(f"{name}: {lines} lines")
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long_functions.append(f"{name}.{node.name}: {n} lines")
    return long_modules, long_functions


def report() -> dict[str, list[str]]:
    mods = modules()
    long_modules, long_functions = sizes(mods)
    return {
        "circles": [" <-> ".join(c) for c in circles(graph(mods))],
        "backend": backend_leaks(mods),
        "root": root_modules(mods),
        "long_modules": long_modules,
        "long_functions": long_functions,
    }


def main() -> int:
    broken = False
    for rule, offenders in report().items():
        mark = "enforced" if rule in ENFORCED else "reported"
        sys.stdout.write(f"{rule}: {len(offenders)} ({mark})\n")
        sys.stdout.writelines(f"  {o}\n" for o in offenders)
        broken |= bool(offenders) and rule in ENFORCED
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
