"""Every convert the suite runs is accounted (`conftest.assert_accounted`), by construction: every child process
starts through `subprocess.Popen` (checked when it exits 0: the convert its arguments name, the datasets it
finished in its test folder), every convert in the suite's process ends in `Converter.run` (checked before it
returns). The guards below keep other ways to start a convert out of tests/."""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

TESTS = REPO / "tests"

# Ways to start a process that bypass subprocess.Popen: a convert started so would not be checked.
BYPASSING = {"os.system", "os.popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.posix_spawnp", "pty.spawn",
             "pty.fork", "asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell",
             *(f"os.{name}" for name in ("spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp",
                                         "spawnvpe", "execl", "execle", "execlp", "execlpe", "execv", "execve",
                                         "execvp", "execvpe"))}

# Programs a test writes that convert inside a child (Python code, a notebook): their dataset is found by the
# child's working folder, so the child must run in a test folder, or the test checks the dataset itself.
CONVERTING_CODE = ("synprep.convert(", "Converter(")
CHILD_CONVERTS = {
    "tests/test_api.py": "the script runs with cwd=tmp_path: the dataset it finishes there is checked",
    "tests/test_notebook.py": "the notebook's kernel converts into its TMPDIR, a test folder the test checks",
}


@functools.cache
def _modules() -> list[tuple[str, ast.Module]]:
    return [(path.relative_to(REPO).as_posix(), ast.parse(path.read_text(encoding="utf-8")))
            for path in sorted(TESTS.rglob("*.py"))]


def _dotted(node: ast.expr) -> str:
    return f"{_dotted(node.value)}.{node.attr}" if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def test_every_process_of_the_suite_starts_through_subprocess_popen():
    found = [f"{name}:{node.lineno}: {_dotted(node.func)}" for name, module in _modules()
             for node in ast.walk(module) if isinstance(node, ast.Call) and _dotted(node.func) in BYPASSING]
    imported = [f"{name}:{node.lineno}: from {node.module} import {alias.name}" for name, module in _modules()
                for node in ast.walk(module) if isinstance(node, ast.ImportFrom)
                for alias in node.names if f"{node.module}.{alias.name}" in BYPASSING]
    assert not found + imported, "processes started without subprocess.Popen (their converts go unchecked):\n" + \
        "\n".join(found + imported)


def test_every_child_program_that_converts_is_listed():
    """A convert inside Python code a test runs as a child (`python -c`, a script, a notebook's cells) is seen by
    no argument list: each such module is listed with how its dataset is checked."""
    found = {name for name, module in _modules() if name != "tests/test_convert_accounting.py"
             for node in ast.walk(module) if isinstance(node, ast.Constant) and isinstance(node.value, str)
             and any(code in node.value for code in CONVERTING_CODE)}
    notebooks = {name for name, module in _modules()
                 for node in ast.walk(module) if isinstance(node, ast.Name | ast.Attribute)
                 and _dotted(node).endswith("NotebookClient")}
    converting = {path.name for path in REPO.glob("docs/*.ipynb")
                  if any(code in "".join(cell["source"]) for cell in json.loads(path.read_text())["cells"]
                         for code in CONVERTING_CODE)}
    assert converting, "docs/notebook.ipynb converts: the notebook check lost it"
    assert found | notebooks == set(CHILD_CONVERTS), "list each module and how its child's dataset is checked"


def _unaccounted_dataset(out: Path) -> str:
    """Python code that writes a dataset whose manifest counts 3 input pairs, 2 rows and no rejection."""
    return (f"import json, pathlib\nout = pathlib.Path({str(out)!r})\n(out / 'train').mkdir(parents=True)\n"
            "(out / 'train' / 'manifest.json').write_text(json.dumps({'input_lines': 3, 'rows': 2, 'rejected': {}}))\n"
            "(out / 'train' / 'rejected.tsv').write_text('')\n(out / 'run.json').write_text('{}')\n")


def test_a_child_that_finishes_an_unaccounted_dataset_in_its_test_folder_fails(tmp_path):
    with pytest.raises(AssertionError, match="out/train/manifest.json"):
        subprocess.run([sys.executable, "-c", _unaccounted_dataset(tmp_path / "out")], cwd=tmp_path, check=True)
    with pytest.raises(AssertionError):
        process = subprocess.Popen([sys.executable, "-c", _unaccounted_dataset(tmp_path / "popen")], cwd=tmp_path)
        process.wait(timeout=60)


def test_a_dataset_finished_before_the_child_started_is_not_its_own(tmp_path):
    """A test may damage a checked dataset and run commands on it: only what a child finished is checked."""
    with pytest.raises(AssertionError):
        subprocess.run([sys.executable, "-c", _unaccounted_dataset(tmp_path / "out")], cwd=tmp_path, check=True)
    assert subprocess.run([sys.executable, "-c", "pass"], cwd=tmp_path).returncode == 0


def test_a_convert_named_by_its_arguments_is_checked_wherever_its_output_lies(tmp_path):
    """`... synprep convert P --output O`: O is checked, outside the child's working folder too (a program named
    synprep here writes an unaccounted dataset there)."""
    program = tmp_path / "bin" / "synprep"
    program.parent.mkdir()
    program.write_text(f"#!{sys.executable}\nimport sys\n" + _unaccounted_dataset(tmp_path / "O").replace(
        repr(str(tmp_path / "O")), "sys.argv[sys.argv.index('--output') + 1]"))
    program.chmod(0o755)
    with pytest.raises(AssertionError, match="O/train/manifest.json"):
        subprocess.run([str(program), "convert", "p.toml", "--output", str(tmp_path / "O")], check=True)
