"""The layout's enforced rules hold (``scripts/layout.py``): the measure itself is tested too."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _layout():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("layout", ROOT / "scripts" / "layout.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["layout"] = module
    spec.loader.exec_module(module)
    return module


def test_every_enforced_rule_holds() -> None:
    layout = _layout()
    found = layout.report()
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
