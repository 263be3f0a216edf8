"""Two switches written apart merge: each adds its own module and its own pin file (tests/data/switches/NAME.json,
written by `python -m syntrain.config`), and the only files both change are the generated pages, which the command
writes the same whichever switch came first. Tried with the guide's two examples (docs/switches-api.md's switch in
one file, tests/examples/label_guess.py) added to a copy of the checkout in both orders."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from syntrain.config.docs import PAGES

from .conftest import REPO


def gate_module() -> str:
    """The guide's "A switch in one file" example, up to its registration line."""
    page = (REPO / "docs" / "switches-api.md").read_text(encoding="utf-8")
    block = re.search(r"## A switch in one file\n\n```python\n(.*?)```", page, re.S).group(1)
    return block[: block.index("register(GateSwitch)")] + "register(GateSwitch)\n"


TOYS = {"example_gate": gate_module,
        "example_guess": lambda: (REPO / "tests" / "examples" / "label_guess.py").read_text(encoding="utf-8")}


def checkout(tmp_path: Path, name: str) -> Path:
    """A copy of what a new switch and the command touch: the code, the generated pages and the pin files."""
    tree = tmp_path / name
    shutil.copytree(REPO / "syntrain", tree / "syntrain", ignore=shutil.ignore_patterns("__pycache__"))
    for page in PAGES:
        (tree / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / page, tree / page)
    (tree / "tests" / "data" / "switches").mkdir(parents=True)
    for pin in (REPO / "tests" / "data" / "switches").glob("*.json"):
        shutil.copy(pin, tree / "tests" / "data" / "switches" / pin.name)
    return tree


def files(tree: Path) -> dict[str, str]:
    """The files of a tree: path -> text."""
    return {str(path.relative_to(tree)): path.read_text(encoding="utf-8") for path in sorted(tree.rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts}


def add(tree: Path, toy: str) -> dict[str, str]:
    """Write the toy switch's module, run the one command; the files of the tree afterwards."""
    (tree / "syntrain" / "switches" / f"{toy}.py").write_text(TOYS[toy](), encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "syntrain.config"], cwd=tree, capture_output=True, text=True,
                            env={"PYTHONPATH": f"{tree}:{REPO}", "PATH": "", "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr
    return files(tree)


def changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {path for path in after if before.get(path) != after[path]}


def test_two_new_switches_merge_in_either_order(tmp_path):
    first, second = checkout(tmp_path, "gate_first"), checkout(tmp_path, "guess_first")
    base = files(first)
    gate, guess = add(first, "example_gate"), add(second, "example_guess")
    both = add(first, "example_guess")
    assert add(second, "example_gate") == both  # either order: the same tree
    gate_only = changed(base, gate) - {"syntrain/switches/example_gate.py"}
    guess_only = changed(base, guess) - {"syntrain/switches/example_guess.py"}
    assert "tests/data/switches/example_gate.json" in gate_only
    assert "tests/data/switches/example_guess.json" in guess_only
    assert gate_only & guess_only <= set(PAGES)  # the files both change: generated pages only
    assert "- `example_guess` (syntrain/switches/example_guess.py)" in both["README.md"]
    assert "`loss_example_guess` (example_guess)" in both["docs/switches.md"]
