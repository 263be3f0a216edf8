"""Every unit of synprep/ and syntrain/ fits a screen: no function or method over SCREEN lines, and the classes
named here (all of the convert modules', and those listed in `BOUNDED_CLASSES`) no longer than SCREEN either.

A unit's length is counted from its `def` / `class` line to its last line (decorators not counted), comments,
blank lines and docstrings included: what a reader scrolls through. Classes outside the list are not bounded
yet (syntrain's ParallelData, ModelConfig, Transformer, ...): add a class to `BOUNDED_CLASSES` once it fits.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .conftest import REPO

SCREEN = 80  # lines
PACKAGES = ("synprep", "syntrain")
BOUNDED_MODULES = ("synprep/convert.py", "synprep/convert_*.py")  # every class in these files is bounded
BOUNDED_CLASSES: tuple[str, ...] = ()  # more classes held to SCREEN, as "path/to/module.py::Class"


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


def oversized(root: Path, packages: tuple[str, ...], bounded_modules: tuple[str, ...],
              bounded_classes: tuple[str, ...], screen: int = SCREEN) -> list[str]:
    """`path::name (N lines)` for every function over `screen` lines, and every bounded class over it."""
    bounded = {path.relative_to(root).as_posix() for pattern in bounded_modules for path in root.glob(pattern)}
    over = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            module = path.relative_to(root).as_posix()
            for kind, name, lines in units(path):
                checked = kind == "function" or module in bounded or f"{module}::{name}" in bounded_classes
                if checked and lines > screen:
                    over.append(f"{module}::{name} ({lines} lines)")
    return over


def test_no_function_and_no_bounded_class_is_longer_than_a_screen():
    over = oversized(REPO, PACKAGES, BOUNDED_MODULES, BOUNDED_CLASSES)
    assert not over, f"over {SCREEN} lines (split them): " + ", ".join(over)


def test_the_bounded_classes_exist():
    """A listed class that was renamed or moved would otherwise pass unchecked."""
    assert list(REPO.glob("synprep/convert_*.py")), "the convert modules moved: update BOUNDED_MODULES"
    for entry in BOUNDED_CLASSES:
        module, name = entry.split("::")
        assert ("class", name) in {(kind, unit) for kind, unit, _ in units(REPO / module)}, entry


@pytest.mark.parametrize("extra, caught", [(0, False), (1, True)])
def test_a_unit_one_line_over_is_caught(tmp_path, extra, caught):
    """A planted function and class of SCREEN (+ 1) lines, in a package: only the longer ones are reported."""
    package = tmp_path / "pkg"
    package.mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(SCREEN - 2 + extra))
    (package / "mod.py").write_text(f"def long():\n{body}    return 0\n\n\nclass Long:\n{body}    y = 0\n")
    (package / "other.py").write_text(f"class Free:\n{body}    y = 0\n")  # not bounded: never reported
    over = oversized(tmp_path, ("pkg",), ("pkg/mod.py",), ())
    expected = [f"pkg/mod.py::long ({SCREEN + extra} lines)", f"pkg/mod.py::Long ({SCREEN + extra} lines)"]
    assert over == (expected if caught else [])
    listed = oversized(tmp_path, ("pkg",), (), ("pkg/other.py::Free",))  # functions: always checked
    assert listed == ([expected[0], f"pkg/other.py::Free ({SCREEN + extra} lines)"] if caught else [])
