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


def class_members() -> dict[str, set[str]]:
    """Class name -> the names it defines (methods, class attributes, annotated fields, `self.X` set in its
    methods), with those of its bases that are classes of the code."""
    own: dict[str, set[str]] = {}
    bases: dict[str, list[str]] = {}
    for package in ("synprep", "syntrain"):
        for path in (REPO / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.ClassDef):
                    continue
                names = own.setdefault(node.name, set())
                bases.setdefault(node.name, []).extend(
                    base.value.id if isinstance(base, ast.Subscript) and isinstance(base.value, ast.Name)
                    else base.id if isinstance(base, ast.Name) else "" for base in node.bases)
                for item in ast.walk(node):
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and item is not node:
                        names.add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        names.add(item.target.id)
                    elif isinstance(item, ast.Assign):
                        names.update(t.id for t in item.targets if isinstance(t, ast.Name))
                    elif isinstance(item, ast.Attribute) and isinstance(item.value, ast.Name) \
                            and item.value.id == "self" and isinstance(item.ctx, ast.Store):
                        names.add(item.attr)

    def members(name: str, seen: frozenset = frozenset()) -> set[str]:
        inherited = [members(base, seen | {name}) for base in bases.get(name, []) if base in own and base not in seen]
        return own[name].union(*inherited)

    return {name: members(name) for name in own}


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


def test_every_class_member_the_glossary_quotes_is_that_classs():
    """`Class.member` names a member of that class (or of one of its bases), not just a name found somewhere."""
    classes = class_members()
    quoted = [name for _, row in glossary() for name in re.findall(r"`([A-Z]\w*)\.(\w+)(?:\([^`]*\))?`", row)]
    assert ("ActiveSwitches", "batch_columns") in quoted
    absent = sorted(f"{cls}.{member}" for cls, member in quoted if cls in classes and member not in classes[cls])
    assert not absent, f"the glossary quotes members their classes lack: {absent}"


def test_a_member_of_another_class_is_caught():
    classes = class_members()
    assert "batch_columns" in classes["ActiveSwitches"] and "batch_columns" not in classes["ModelConfig"]
    assert "reads" in classes["Switch"]  # through its base DataHooks


def test_a_term_the_code_lacks_is_caught():
    assert not spellings("batch lane") & code_identifiers()
