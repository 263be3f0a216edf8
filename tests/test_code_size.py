"""Every function and method of synprep/ and syntrain/ fits a screen (SCREEN lines), and classes are split by
responsibility, not by length.

A function's length is counted from its `def` line to its last line (decorators not counted), comments, blank
lines and docstrings included: what a reader scrolls through. A function that grows past SCREEN is split into
named steps.

Classes have no line bound: a class cut to fit a line count becomes mixins (`class A(_Part1, _Part2, Base)`)
whose methods only work inside the one final class, so the reader of a part must keep the others in mind and
no part can be used or tested alone. A class is split where it does two jobs, into collaborating objects each
readable alone. So at most one class may be built from two or more of the project's own classes: the one listed
in `MULTI_BASE_CLASSES`, with why.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .conftest import REPO

SCREEN = 80  # lines
PACKAGES = ("synprep", "syntrain")
MULTI_BASE_CLASSES: dict[str, str] = {  # "path/to/module.py::Class" -> why it has several of the project's bases
    "syntrain/switches/base.py::Switch": "the hooks of a switch are read by three parts of the generic code "
    "(the data layer: DataHooks, decoding: DecodingHooks, the model: ModelHooks); each base holds one part's "
    "hooks with do-nothing defaults and is read alone, and a switch overrides the hooks it needs in one class",
}
MAX_MULTI_BASE = 1


def units(path: Path) -> list[tuple[str, str, int]]:
    """(kind, qualified name, lines) of every function, method and class of a Python file, nested ones too."""
    found: list[tuple[str, str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = prefix + child.name
                kind = "class" if isinstance(child, ast.ClassDef) else "function"
                found.append((kind, name, child.end_lineno - child.lineno + 1))  # type: ignore[operator]
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return found


def modules(root: Path, packages: tuple[str, ...]) -> list[tuple[str, Path]]:
    """(path relative to `root`, path) of every Python file of the packages."""
    return [(path.relative_to(root).as_posix(), path) for package in packages
            for path in sorted((root / package).rglob("*.py"))]


def oversized(root: Path, packages: tuple[str, ...], screen: int = SCREEN) -> list[str]:
    """`path::name (N lines)` for every function and method over `screen` lines."""
    return [f"{module}::{name} ({lines} lines)" for module, path in modules(root, packages)
            for kind, name, lines in units(path) if kind == "function" and lines > screen]


def base_name(node: ast.expr) -> str:
    """The class name of a base expression: `A`, `pkg.A`, `A[T]` -> "A"."""
    if isinstance(node, ast.Subscript):
        return base_name(node.value)
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def multi_base(root: Path, packages: tuple[str, ...]) -> dict[str, list[str]]:
    """`path::Class` -> its bases that are classes of the packages, for every class with two or more of them."""
    trees = [(module, ast.parse(path.read_text(encoding="utf-8"))) for module, path in modules(root, packages)]
    classes = [(module, node) for module, tree in trees for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    own = {node.name for _, node in classes}
    found = {}
    for module, node in classes:
        bases = [name for name in map(base_name, node.bases) if name in own]
        if len(bases) >= 2:
            found[f"{module}::{node.name}"] = bases
    return found


def test_no_function_is_longer_than_a_screen():
    over = oversized(REPO, PACKAGES)
    assert not over, f"over {SCREEN} lines (split them into named steps): " + ", ".join(over)


def test_at_most_one_class_is_built_from_several_of_the_projects_classes():
    assert len(MULTI_BASE_CLASSES) <= MAX_MULTI_BASE
    found = multi_base(REPO, PACKAGES)
    mixed = sorted(f"{name} {bases}" for name, bases in found.items() if name not in MULTI_BASE_CLASSES)
    assert not mixed, "classes built from several of the project's classes (join them, or make the parts " \
                      "collaborating objects): " + ", ".join(mixed)
    stale = [name for name in MULTI_BASE_CLASSES if name not in found]
    assert not stale, f"{stale} no longer has several of the project's bases: drop it from MULTI_BASE_CLASSES"


@pytest.mark.parametrize("extra, caught", [(0, False), (1, True)])
def test_a_function_one_line_over_is_caught(tmp_path, extra, caught):
    """A planted function, method and class of SCREEN (+ 1) lines, in a package: only the longer functions and
    methods are reported; a class of any length is not."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    body = "".join(f"    x{i} = {i}\n" for i in range(SCREEN - 2 + extra))
    method = "".join(f"        x{i} = {i}\n" for i in range(SCREEN - 2 + extra))
    (package / "mod.py").write_text(f"def long():\n{body}    return 0\n\n\nclass Long:\n{body}    y = 0\n")
    (package / "sub" / "other.py").write_text(f"class Free:\n    def long(self):\n{method}        return 0\n")
    over = oversized(tmp_path, ("pkg",))
    assert over == ([f"pkg/mod.py::long ({SCREEN + extra} lines)",
                     f"pkg/sub/other.py::Free.long ({SCREEN + extra} lines)"] if caught else [])


def test_a_class_of_several_own_bases_is_caught(tmp_path):
    """A planted mixin class: bases of the package count (plain, dotted, subscripted), others (Generic, a
    library's class) do not."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "parts.py").write_text("class _Kernels:\n    pass\n\n\nclass _Decoding:\n    pass\n")
    (package / "model.py").write_text(
        "from typing import Generic, TypeVar\n\nimport torch\n\nfrom . import parts\nfrom .parts import _Kernels\n"
        "T = TypeVar('T')\n\n\n"
        "class Model(_Kernels, parts._Decoding, torch.nn.Module):\n    pass\n\n\n"
        "class Typed(_Kernels, Generic[T]):\n    pass\n\n\n"
        "class Sub(Typed[int], torch.nn.Module):\n    pass\n\n\n"
        "class Both(Typed[int], parts._Decoding):\n    pass\n")
    assert multi_base(tmp_path, ("pkg",)) == {"pkg/model.py::Model": ["_Kernels", "_Decoding"],
                                              "pkg/model.py::Both": ["Typed", "_Decoding"]}
