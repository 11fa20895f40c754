"""Where neobench's code uses a private name of the libraries it builds on (mteb, datasets,
transformers, sentence-transformers): every such use must sit in neobench/compat/, the one
boundary (docs/architecture.md, "The boundary with the libraries"). Read from the source (AST),
nothing imported:

- an import of a private module or name: ``from mteb._create_dataloaders import ...``,
  ``from transformers.models.auto.auto_factory import _get_model_class``;
- an attribute ``obj._name`` (not a dunder) where neither neobench nor the module's own imports
  define ``_name``: a library object's private attribute (``task._predictions_path``);
- a string naming one: ``getattr(x, "_name")``, an ``(owner, "_name", value)`` patch triple, or
  a dotted path into a library's private module (``"mteb._create_dataloaders"``).

``python tests/private_names.py [PATH...]`` prints the uses found outside the boundary, one per
line, and a count per library.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARIES = ("mteb", "datasets", "transformers", "sentence_transformers")
BOUNDARY = ROOT / "neobench" / "compat"
# Private names of other libraries (torch, numpy, the standard library): not this boundary's.
OTHERS = frozenset({"torch", "np", "numpy", "os", "sys", "threading", "inspect", "types"})
ATTRIBUTE_CALLS = frozenset({"getattr", "setattr", "hasattr", "delattr"})


@dataclass(frozen=True)
class Use:
    path: Path
    line: int
    library: str  # one of LIBRARIES, or "library object" where the owner's type is not written
    name: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.library}: {self.name}"


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _library_of(dotted: str) -> str | None:
    root = dotted.split(".", 1)[0]
    return root if root in LIBRARIES else None


def own_names(paths: list[Path]) -> set[str]:
    """The private names neobench itself defines (functions, classes, attributes, arguments,
    module globals): an access to one of them is neobench's own business."""
    names: set[str] = set()
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # A class body's private attributes declare to a library (a model class's
        # ``_supports_sdpa``): not neobench's own names, so reading them elsewhere is a use.
        declared = {
            id(target)
            for cls in ast.walk(tree)
            if isinstance(cls, ast.ClassDef)
            for statement in cls.body
            if isinstance(statement, ast.Assign | ast.AnnAssign)
            for target in (
                statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            )
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                if id(node) not in declared:
                    names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if _root_name(node) in ("self", "cls"):
                    names.add(node.attr)
            elif isinstance(node, ast.keyword) and node.arg:
                names.add(node.arg)  # dataclass fields given by keyword, replace(x, _y=...)
    return {n for n in names if private(n)}


def _string(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _module_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> the module it names, from the file's imports."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".", 1)[0]
                aliases[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def scan_file(path: Path, own: set[str]) -> list[Use]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases = _module_aliases(tree)
    found: list[Use] = []

    def add(node: ast.AST, library: str, name: str) -> None:
        found.append(Use(path, node.lineno, library, name))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                library = _library_of(alias.name)
                if library and any(private(p) for p in alias.name.split(".")):
                    add(node, library, alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            library = _library_of(node.module)
            if library is None:
                continue
            if any(private(p) for p in node.module.split(".")):
                add(node, library, node.module)
            for alias in node.names:
                if private(alias.name):
                    add(node, library, f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Attribute) and private(node.attr) and node.attr not in own:
            root = _root_name(node)
            module = aliases.get(root or "", "")
            if root in ("self", "cls") or root in OTHERS or module.split(".", 1)[0] in OTHERS:
                continue
            add(node, _library_of(module) or "library object", node.attr)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = _string(node.args[1]) if len(node.args) >= 2 else None
            if node.func.id in ATTRIBUTE_CALLS and name and private(name) and name not in own:
                add(node, "library object", name)
        elif isinstance(node, ast.Tuple) and len(node.elts) == 3:
            name = _string(node.elts[1])  # (owner, "_attribute", replacement): a patch triple
            if name and private(name) and name not in own:
                add(node, "library object", name)
        elif (text := _string(node)) and " " not in text:
            dotted = text.split(":", 1)[0]  # "module:function" names a module too
            library, parts = _library_of(dotted), dotted.split(".")
            if library and len(parts) > 1 and any(private(p) for p in parts):
                add(node, library, dotted)
    return found


def sources(under: list[Path] | None = None) -> list[Path]:
    roots = under or [ROOT / "neobench"]
    return sorted(p for r in roots for p in ([r] if r.is_file() else r.rglob("*.py")))


def outside_boundary(under: list[Path] | None = None) -> list[Use]:
    """Every private use of LIBRARIES in ``under`` (default neobench/) outside neobench/compat."""
    files = sources(under)
    own = own_names(sources())
    uses = [u for f in files for u in scan_file(f, own)]
    return sorted(
        (u for u in uses if BOUNDARY not in u.path.parents),
        key=lambda u: (str(u.path), u.line, u.name),
    )


def main(argv: list[str]) -> int:
    uses = outside_boundary([Path(a).resolve() for a in argv] or None)
    for use in uses:
        print(use)
    counts = Counter(u.library for u in uses)
    files = len({u.path for u in uses})
    summary = ", ".join(f"{lib} {n}" for lib, n in sorted(counts.items())) or "none"
    print(f"{len(uses)} private uses outside neobench/compat in {files} files: {summary}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
