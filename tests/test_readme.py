"""The README's ```python blocks run as written, and print what their `# ...` comment lines say."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from .conftest import REPO

BLOCKS = re.findall(r"^```python\n(.*?)^```", (REPO / "README.md").read_text(encoding="utf-8"), re.S | re.M)


def expected_output(block: str) -> str:
    """The comment lines that directly follow a print() line: what the block should print."""
    lines, expected, after_print = block.splitlines(), [], False
    for line in lines:
        if line.startswith("# ") and after_print:
            expected.append(line[2:])
            continue
        after_print = line.startswith("print(")
    return "\n".join(expected)


def test_readme_has_python_blocks():
    assert BLOCKS


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_python_block_runs(block):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block, "README.md", "exec"), {})  # a fresh namespace, as a new session would have
    assert printed.getvalue().strip() == expected_output(block)
