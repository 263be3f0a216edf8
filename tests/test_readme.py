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


@contextlib.contextmanager
def registries_kept():
    """A block may register a guide's example scheme or switch: it is removed after the block (with what it
    declared), so that it is not registered for the tests after it, in whatever order they run (one process per
    core)."""
    from synprep.subwords import registry as schemes
    from syntrain.switches import registry as switches

    before = (set(schemes.names()), {switch.name for switch in switches.registered()})
    try:
        yield
    finally:
        for name in set(schemes.names()) - before[0]:
            schemes.unregister(name)
        for name in {switch.name for switch in switches.registered()} - before[1]:
            switches.unregister(name)


@pytest.mark.parametrize(("page", "block"), BLOCKS, ids=[f"{page}-{i}" for i, (page, _) in enumerate(BLOCKS)])
def test_documentation_python_block_runs(page: str, block: str):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), registries_kept():
        exec(compile(block, page, "exec"), {})  # a fresh namespace, as a reader pasting the block would have
    assert printed.getvalue().strip() == expected_output(block)


def test_documentation_names_commands_as_users_type_them():
    """`syntrain compare`, not `python -m syntrain.compare`, wherever the module is also a subcommand."""
    from synprep.cli import cli as synprep_cli
    from syntrain.cli import cli as syntrain_cli

    commands = {"synprep": set(synprep_cli.commands), "syntrain": set(syntrain_cli.commands)}
    found = [(page.name, f"{prog}.{module}") for page in PAGES if page.exists()
             for prog, module in re.findall(r"python -m (synprep|syntrain)\.(\w+)", page.read_text(encoding="utf-8"))
             if module in commands[prog]]
    assert not found, f"name these as `PROG SUBCOMMAND`: {found}"


def test_demo_says_why_its_translations_look_like_broken_german():
    """The demo trains on `synprep synth` pairs: its output says the target is a made-up German-like language
    before it shows translations (the README's quick start ends with one)."""
    demo = (REPO / "sample_data" / "demo.sh").read_text(encoding="utf-8")
    printed = [line for line in demo.splitlines() if line.startswith("echo ")]
    first_translation = next(i for i, line in enumerate(printed) if "translation" in line)
    assert any("German-like" in line and "broken German" in " ".join(printed[i:i + 2])
               for i, line in enumerate(printed[:first_translation + 3]))
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "German-like" in readme.split("## On a real corpus")[0]


def test_readme_layout_names_every_module():
    """The Layout section of README.md names every module (`name.py`) and subpackage (`name/`) of synprep and
    syntrain, so it follows the code."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    layout = re.search(r"^## Layout\n\n```\n(.*?)^```", text, re.S | re.M)
    assert layout, "README.md has no Layout block"
    words = set(re.findall(r"[\w.]+/?", layout.group(1)))
    paths = [path for package in ("synprep", "syntrain") for path in sorted((REPO / package).iterdir())]
    missing = [f"{path.parent.name}/{path.name}" for path in paths
               if (path.suffix == ".py" and path.name != "__init__.py" and path.name not in words)
               or (path.is_dir() and (path / "__init__.py").exists() and f"{path.name}/" not in words)]
    assert not missing, f"README.md's Layout does not name {missing}"
