"""The boundary with the libraries (docs/architecture.md): no private name of mteb, datasets,
transformers or sentence-transformers is used outside neobench/compat, in neobench/ or in
benchmarks/; the scanner itself finds each kind of use it looks for."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from private_names import ROOT, outside_boundary, scan_file


def test_no_private_library_name_outside_the_boundary():
    uses = outside_boundary([ROOT / "neobench", ROOT / "benchmarks"])
    assert [str(u) for u in uses] == []


def test_the_boundary_imports_nothing_by_a_string_and_nothing_above_it():
    """compat imports only core (and the libraries): no importlib, no neobench package above."""
    for path in (ROOT / "neobench" / "compat").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("neobench."):
                package = node.module.split(".")[1]
                assert package in ("compat", "core"), (path.name, node.module)
            if isinstance(node, ast.Attribute) and node.attr == "import_module":
                raise AssertionError(f"{path}: imports by a string")


def test_the_scanner_finds_every_kind_of_private_use(tmp_path):
    code = textwrap.dedent(
        """
        import mteb._create_dataloaders
        from mteb.results.task_result import _write_and_merge_keyed_json
        from transformers import AutoModel
        import transformers as tf

        def f(task, config, dataset):
            task._predictions_path("x")
            AutoModel._model_mapping
            tf._private_thing
            getattr(config, "_attn_implementation", None)
            changes = [(config, "_attn_implementation", "kernel")]
            where = "mteb._evaluators.text:evaluator"
            dataset.__len__()  # a dunder is public
            self_made._mine  # defined below: neobench's own
            return changes, where

        class Mine:
            def __init__(self):
                self._mine = 1
        """
    )
    path = Path(tmp_path) / "sample.py"
    path.write_text(code)
    found = {(u.library, u.name) for u in scan_file(path, {"_mine"})}
    assert found == {
        ("mteb", "mteb._create_dataloaders"),
        ("mteb", "mteb.results.task_result._write_and_merge_keyed_json"),
        ("library object", "_predictions_path"),
        ("transformers", "_model_mapping"),
        ("transformers", "_private_thing"),
        ("library object", "_attn_implementation"),
        ("mteb", "mteb._evaluators.text"),
    }
