"""Every function and method of synprep/ and syntrain/ fits a screen: none over SCREEN lines. Classes are not
bounded: a class with one job may be long, and one with two jobs is split into collaborating objects, not cut to
a line count (../shared/STYLE.md).

A function's length is counted from its `def` line to its last line (decorators not counted), comments, blank
lines and docstrings included: what a reader scrolls through.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .conftest import REPO

SCREEN = 80  # lines
PACKAGES = ("synprep", "syntrain")


def functions(path: Path) -> list[tuple[str, int]]:
    """(qualified name, lines) of every function and method of a Python file, nested ones too."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    found.append((name, child.end_lineno - child.lineno + 1))  # type: ignore[operator]
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return found


def oversized(root: Path, packages: tuple[str, ...], screen: int = SCREEN) -> list[str]:
    """`path::name (N lines)` for every function over `screen` lines."""
    over = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            module = path.relative_to(root).as_posix()
            over += [f"{module}::{name} ({lines} lines)" for name, lines in functions(path) if lines > screen]
    return over


def test_no_function_is_longer_than_a_screen():
    over = oversized(REPO, PACKAGES)
    assert not over, f"over {SCREEN} lines (split them): " + ", ".join(over)


@pytest.mark.parametrize("extra, caught", [(0, False), (1, True)])
def test_a_function_one_line_over_is_caught(tmp_path, extra, caught):
    """A planted function, a method and a class of SCREEN (+ 1) lines, in a package: only the longer function and
    method are reported, never the class."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    body = "".join(f"    x{i} = {i}\n" for i in range(SCREEN - 2 + extra))
    method = "".join(f"        x{i} = {i}\n" for i in range(SCREEN - 2 + extra))
    (package / "mod.py").write_text(f"def long():\n{body}    return 0\n\n\nclass Long:\n{body}    y = 0\n")
    (package / "sub" / "other.py").write_text(f"class Free:\n    def run(self):\n{method}        return 0\n")
    expected = [f"pkg/mod.py::long ({SCREEN + extra} lines)", f"pkg/sub/other.py::Free.run ({SCREEN + extra} lines)"]
    assert oversized(tmp_path, ("pkg",)) == (expected if caught else [])
