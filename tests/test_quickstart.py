"""What a new user runs first: the README's quick start, verbatim, in a fresh clone (translation included), and an
install of the project's own metadata without deprecation warnings."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO


def quick_start_blocks(readme: str) -> list[str]:
    """The ```bash blocks under the `## Quick start` heading (up to the next heading of level 1 or 2)."""
    section = re.search(r"^## Quick start[ \t]*\n(.*?)(?=^##? |\Z)", readme, re.M | re.S)
    return re.findall(r"^```bash[ \t]*\n(.*?)^```", section.group(1), re.M | re.S) if section else []


def test_quick_start_blocks_are_found_under_their_heading():
    readme = ("# synprep\n\n```bash\nmake test\n```\n\n## Quick start\n\nTwo lines:\n\n```bash\nmake demo\n"
              "echo hi | syntrain translate\n```\n\n### Details\n\n```text\nnot bash\n```\n\n## Next\n\n"
              "```bash\nmake bench\n```\n")
    assert quick_start_blocks(readme) == ["make demo\necho hi | syntrain translate\n"]
    assert quick_start_blocks(readme.replace("## Quick start", "## Start")) == []


def _environment(clone: Path) -> dict[str, str]:
    """The environment the quick start runs in. `make demo` creates .venv and installs everything (minutes, and
    PyPI). Shortcut, when this interpreter is a project venv (its prefix is a `.venv` holding make's stamp
    `.installed`): the clone's .venv is a symlink to it, the clone's pyproject.toml is dated just before the stamp
    (so make's `.venv/.installed: pyproject.toml` rule sees nothing to reinstall, and the shared stamp is left
    untouched), and PYTHONPATH puts the clone's own code before the venv's editable install of another checkout.
    What is not checked then: the installation itself (the metadata test below builds it)."""
    env = dict(os.environ)
    prefix = Path(sys.prefix)
    stamp = prefix / ".installed"
    if prefix.name == ".venv" and stamp.is_file():
        (clone / ".venv").symlink_to(prefix, target_is_directory=True)
        before = stamp.stat().st_mtime - 1
        os.utime(clone / "pyproject.toml", (before, before))
        env["PYTHONPATH"] = str(clone)
    for name in ("VIRTUAL_ENV", "PYTHONHOME", "MAKEFLAGS", "MAKELEVEL"):
        env.pop(name, None)
    return env


@pytest.mark.slow
def test_readme_quick_start_runs_verbatim_in_a_fresh_clone(tmp_path):
    """The committed state of this checkout, cloned; the quick start block run as it is written."""
    blocks = quick_start_blocks((REPO / "README.md").read_text(encoding="utf-8"))
    if not blocks:
        pytest.skip("README.md has no ```bash block under `## Quick start`")
    assert len(blocks) == 1, "the quick start is one ```bash block"
    if shutil.which("git") is None or shutil.which("make") is None:
        pytest.skip("needs git and make")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", blocks[0]], cwd=clone, env=_environment(clone),
                          capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.rstrip("\n").split("\n")
    assert "demo finished" in done.stdout, done.stdout[-2000:]
    translation = lines[-1].strip()  # the last command of the block: echo ... | syntrain translate
    assert translation and not translation.startswith("demo finished"), done.stdout[-2000:]
    assert any(char.isalpha() for char in translation), translation
    assert "Traceback" not in done.stderr and "error" not in done.stderr.lower(), done.stderr[-2000:]


def test_install_metadata_has_no_deprecation_warnings(tmp_path):
    """setuptools builds the metadata of pyproject.toml without a deprecation warning (an SPDX `license`)."""
    setuptools = pytest.importorskip("setuptools")
    if int(setuptools.__version__.split(".")[0]) < 77:
        pytest.skip(f"setuptools {setuptools.__version__}: pyproject.toml asks for >= 77 (SPDX license strings)")
    source = tmp_path / "source"
    for name in ("synprep", "syntrain"):  # the metadata needs the packages to exist, not their code
        (source / name).mkdir(parents=True)
        (source / name / "__init__.py").write_text("")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    (tmp_path / "meta").mkdir()
    script = ("import sys; from setuptools import build_meta; "
              "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))")
    done = subprocess.run([sys.executable, "-W", "always", "-c", script, str(tmp_path / "meta")], cwd=source,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "deprecat" not in (done.stdout + done.stderr).lower(), done.stderr[-3000:]
    metadata = (tmp_path / "meta" / done.stdout.split()[-1] / "METADATA").read_text(encoding="utf-8")
    assert "License-Expression: MIT" in metadata
