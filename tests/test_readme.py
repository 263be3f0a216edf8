"""The ```python blocks of the documentation (README.md, docs/*.md, benchmarks/README.md) run as written, and
print what their `# ...` comment lines say."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from .conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "benchmarks" / "README.md"]
BLOCKS = [
    (page.relative_to(REPO).as_posix(), block)
    for page in PAGES
    if page.exists()
    for block in re.findall(r"^```python\n(.*?)^```", page.read_text(encoding="utf-8"), re.S | re.M)
]


def expected_output(block: str) -> str:
    """The comment lines that directly follow a print() line: what the block should print."""
    lines, expected, after_print = block.splitlines(), [], False
    for line in lines:
        if line.startswith("# ") and after_print:
            expected.append(line[2:])
            continue
        after_print = line.startswith("print(")
    return "\n".join(expected)


def test_documentation_has_python_blocks():
    """The reference pages carry the examples (a moved or renamed page would silently drop them)."""
    pages = {page for page, _ in BLOCKS}
    assert {"docs/synprep.md", "docs/tree-decoding.md"} <= pages


@pytest.mark.parametrize(("page", "block"), BLOCKS, ids=[f"{page}-{i}" for i, (page, _) in enumerate(BLOCKS)])
def test_documentation_python_block_runs(page: str, block: str):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block, page, "exec"), {})  # a fresh namespace, as a reader pasting the block would have
    assert printed.getvalue().strip() == expected_output(block)
