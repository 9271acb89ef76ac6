"""The layout's enforced rules hold (``scripts/layout.py``): the measure itself is tested too."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _layout():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("layout", ROOT / "scripts" / "layout.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["layout"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def found() -> dict[str, list[str]]:
    """The layout's report on the tree, measured once for the tests that read it."""
    report: dict[str, list[str]] = _layout().report()
    return report


def test_every_enforced_rule_holds(found: dict[str, list[str]]) -> None:
    layout = _layout()
    broken = {rule: found[rule] for rule in layout.ENFORCED if found[rule]}
    assert broken == {}


def test_a_circle_is_found_through_a_lazy_import_but_not_through_type_checking() -> None:
    layout = _layout()
    lazy = ast.parse("def f():\n    import agentmaild.b\n")
    hidden = ast.parse("if TYPE_CHECKING:\n    import agentmaild.b\n")
    known = {"agentmaild.a", "agentmaild.b"}
    seen = [layout._targets("agentmaild.a", n, known) for n in layout._imports(lazy)]
    assert seen == [{"agentmaild.b"}]
    assert list(layout._imports(hidden)) == []
    edges = {"agentmaild.a": {"agentmaild.b"}, "agentmaild.b": {"agentmaild.a"}, "c": set()}
    assert layout.circles(edges) == [["agentmaild.a", "agentmaild.b"]]


def test_every_rule_is_enforced_and_no_module_passes_300_lines(
    found: dict[str, list[str]],
) -> None:
    assert set(found) == _layout().ENFORCED
    assert found["long_modules"] == []


def test_the_size_rule_counts_a_module_one_line_over(tmp_path: Path) -> None:
    layout = _layout()
    fits = tmp_path / "fits.py"
    fits.write_text("x = 1\n" * layout.MAX_MODULE_LINES)
    over = tmp_path / "over.py"
    over.write_text("x = 1\n" * (layout.MAX_MODULE_LINES + 1))
    long_modules, _ = layout.sizes({"fits": fits, "over": over})
    assert long_modules == [f"over: {layout.MAX_MODULE_LINES + 1} lines"]


def test_the_store_map_names_every_module_of_the_store() -> None:
    import agentmaild.store as store

    doc = store.__doc__ or ""
    package = ROOT / "agentmaild" / "store"
    names = [
        ".".join(p.relative_to(package).with_suffix("").parts)
        for p in sorted(package.rglob("*.py"))
        if p.stem != "__init__"
    ]
    assert [n for n in names if f"``{n}``" not in doc] == []
