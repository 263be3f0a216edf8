"""Every unit of synprep/ and syntrain/ fits a screen: no function, method or class over SCREEN lines, save the
classes listed in `UNBOUNDED_CLASSES` (each with why it is still longer).

A unit's length is counted from its `def` / `class` line to its last line (decorators not counted), comments,
blank lines and docstrings included: what a reader scrolls through. A class that grows past SCREEN is split
(pure helpers to module-level functions, a collaborating class or a mixin with one responsibility); one listed
here that fits again must leave the list (a test says so), so the list only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .conftest import REPO

SCREEN = 80  # lines
PACKAGES = ("synprep", "syntrain")
UNBOUNDED_CLASSES: dict[str, str] = {  # "path/to/module.py::Class" -> why it is not split yet
    "syntrain/attention.py::MultiHeadAttention": "one class read in one pass (the bound on classes is dropped)",
}


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


def oversized(root: Path, packages: tuple[str, ...], unbounded: tuple[str, ...] = (), screen: int = SCREEN
              ) -> list[str]:
    """`path::name (N lines)` for every function and class over `screen` lines, save the classes `unbounded`."""
    over = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            module = path.relative_to(root).as_posix()
            for kind, name, lines in units(path):
                exempt = kind == "class" and f"{module}::{name}" in unbounded
                if lines > screen and not exempt:
                    over.append(f"{module}::{name} ({lines} lines)")
    return over


def test_no_function_and_no_class_is_longer_than_a_screen():
    over = oversized(REPO, PACKAGES, tuple(UNBOUNDED_CLASSES))
    assert not over, f"over {SCREEN} lines (split them): " + ", ".join(over)


def test_the_unbounded_classes_exist_and_are_still_over():
    """A listed class that was renamed or moved, or that fits a screen again, leaves the list."""
    for entry in UNBOUNDED_CLASSES:
        module, name = entry.split("::")
        lengths = {unit: lines for kind, unit, lines in units(REPO / module) if kind == "class"}
        assert name in lengths, f"{entry} is gone: drop it from UNBOUNDED_CLASSES"
        assert lengths[name] > SCREEN, f"{entry} fits a screen now ({lengths[name]} lines): drop it from the list"


@pytest.mark.parametrize("extra, caught", [(0, False), (1, True)])
def test_a_unit_one_line_over_is_caught(tmp_path, extra, caught):
    """A planted function and classes of SCREEN (+ 1) lines, in a package: only the longer ones are reported,
    save a listed class."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    body = "".join(f"    x{i} = {i}\n" for i in range(SCREEN - 2 + extra))
    (package / "mod.py").write_text(f"def long():\n{body}    return 0\n\n\nclass Long:\n{body}    y = 0\n")
    (package / "sub" / "other.py").write_text(f"class Free:\n{body}    y = 0\n")
    over = oversized(tmp_path, ("pkg",))
    expected = [f"pkg/mod.py::long ({SCREEN + extra} lines)", f"pkg/mod.py::Long ({SCREEN + extra} lines)",
                f"pkg/sub/other.py::Free ({SCREEN + extra} lines)"]
    assert over == (expected if caught else [])
    listed = oversized(tmp_path, ("pkg",), ("pkg/sub/other.py::Free", "pkg/mod.py::long"))  # functions: never exempt
    assert listed == (expected[:2] if caught else [])
