"""The glossary of docs/switches-api.md is the code's vocabulary: each term is an identifier of the code (spelt
snake_case, CamelCase or UPPER_CASE, singular or plural), and each code name the table quotes (`Name`,
`Class.member`, `function()`) exists in synprep or syntrain."""

from __future__ import annotations

import ast
import re

from .conftest import REPO


def code_identifiers() -> set[str]:
    names: set[str] = set()
    for package in ("synprep", "syntrain"):
        for path in (REPO / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Name):
                    names.add(node.id)
                elif isinstance(node, ast.Attribute):
                    names.add(node.attr)
                elif isinstance(node, ast.FunctionDef | ast.ClassDef):
                    names.add(node.name)
                elif isinstance(node, ast.arg | ast.keyword) and node.arg:
                    names.add(node.arg)
    return names


def glossary() -> list[tuple[str, str]]:
    """(term, the rest of its row) of every glossary row."""
    text = (REPO / "docs" / "switches-api.md").read_text(encoding="utf-8")
    table = text.split("## Glossary", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| \*\*([^*]+)\*\* \|(.*)$", table, re.M)


def spellings(term: str) -> set[str]:
    words = term.split()
    forms = {"_".join(words), "".join(word.capitalize() for word in words), "_".join(words).upper()}
    return forms | {form + ("S" if form.isupper() else "s") for form in forms} | {form.removesuffix("s")
                                                                                    for form in forms}


def test_every_glossary_term_is_an_identifier_of_the_code():
    names = code_identifiers()
    rows = glossary()
    assert len(rows) >= 12
    missing = [term for term, _ in rows if not spellings(term) & names]
    assert not missing, f"glossary terms with no identifier in the code: {missing}"


def test_every_code_name_the_glossary_quotes_exists():
    names = code_identifiers()
    quoted = [name for _, row in glossary() for name in re.findall(r"`([A-Za-z_][\w.]*)(?:\([^`]*\))?`", row)
              if "." in name and not name.endswith(".py") or name[0].isupper() or name.endswith("()")]
    assert "Switch.reads" in quoted and "BatchColumn" in quoted
    absent = sorted({name for name in quoted if name.rsplit(".", 1)[-1] not in names})
    assert not absent, f"the glossary quotes names the code lacks: {absent}"


def test_a_term_the_code_lacks_is_caught():
    assert not spellings("batch lane") & code_identifiers()
