"""Every option of both command lines has help text, and every command's --help ends with one example that
names only options the command has."""

import shlex
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from synprep.cli import cli as synprep_cli
from synprep.clihelp import leaf_commands
from syntrain.cli import cli as syntrain_cli

COMMANDS = [(prog, path, command) for prog, group in (("synprep", synprep_cli), ("syntrain", syntrain_cli))
            for path, command in leaf_commands(group)]
IDS = [" ".join((prog, *path)) for prog, path, _ in COMMANDS]


def test_both_groups_are_walked():
    assert {"synprep bpe learn", "synprep convert", "synprep cache prune", "syntrain run", "syntrain eval"} <= set(IDS)


@pytest.mark.parametrize(("prog", "path", "command"), COMMANDS, ids=IDS)
def test_every_option_has_help(prog, path, command):
    ctx = click.Context(command, info_name=path[-1])
    bare = []
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            _, text = param.get_help_record(ctx)
            if not text.strip() or text.strip().startswith("["):  # only click's [default: ...] / [required]
                bare.append(param.opts[-1])
    assert not bare, f"{' '.join((prog, *path))}: options without help: {bare}"


@pytest.mark.parametrize(("prog", "path", "command"), COMMANDS, ids=IDS)
def test_help_ends_with_one_example(prog, path, command):
    group = synprep_cli if prog == "synprep" else syntrain_cli
    done = CliRunner().invoke(group, [*path, "--help"], prog_name=prog)
    assert done.exit_code == 0, done.output
    lines = done.output.rstrip().splitlines()
    assert lines[-2].strip() == "Example:" and done.output.count("Example:") == 1
    words = shlex.split(lines[-1].strip())
    assert words[:1 + len(path)] == [prog, *path]
    known = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    named = {word for word in words if word.startswith("-") and len(word) > 1}
    assert named <= known, f"the example names options the command does not have: {named - known}"


def test_python_dash_m_synprep():
    done = subprocess.run([sys.executable, "-m", "synprep", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "Usage:" in done.stdout and "convert" in done.stdout, done.stderr


@pytest.mark.parametrize("group", [synprep_cli, syntrain_cli], ids=["synprep", "syntrain"])
def test_group_options_have_help(group):
    ctx = click.Context(group, info_name=group.name)
    records = [param.get_help_record(ctx) for param in group.params if isinstance(param, click.Option)]
    assert {"-v, --verbose", "-q, --quiet"} <= {opts for opts, _ in records} and all(text for _, text in records)
