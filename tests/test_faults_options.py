"""A generator over every option of both command lines: the cases come from each option's declared type (click's
types, made from `synprep.arguments.Arg` declarations, and syntrain's `DeclaredType`), so a new option is covered
without a new test. Each wrong value (a word for a number, a number out of its range, NaN or infinity, a choice
not offered, an empty text for a number, a path that is not there where one must be) must end in exit 2 and one
line naming the option, with nothing written."""

from __future__ import annotations

import math
import os
import typing

import click
import pytest

from synprep.clihelp import leaf_commands
from tests.conftest import cli_in_process


def _groups() -> list[tuple[str, click.Group]]:
    from synprep.cli import cli as synprep_cli
    from syntrain.cli import cli as syntrain_cli

    return [("synprep", synprep_cli), ("syntrain", syntrain_cli)]


def _numbers(kind: click.ParamType) -> tuple[type | None, float | None, float | None]:
    """(int or float or None, lower bound, upper bound) of an option's type, read from its declaration."""
    if type(kind).__name__ == "DeclaredType":  # syntrain's flags of recipe fields
        from syntrain.config.sections import declaration

        cls, spec, hint = declaration(kind.section, kind.field_name)
        args = typing.get_args(hint) or (hint,)
        number = float if float in args else int if int in args else None
        meta = spec.metadata
        return number, meta.get("ge", meta.get("gt")), meta.get("le", meta.get("lt"))
    if isinstance(kind, click.IntRange | click.FloatRange):
        return (int if isinstance(kind, click.IntRange) else float), kind.min, kind.max
    if kind is click.INT:
        return int, None, None
    if kind is click.FLOAT:
        return float, None, None
    return None, None, None


def wrong_values(option: click.Parameter) -> list[str]:
    """The values an option or argument must refuse, derived from its type."""
    if getattr(option, "is_flag", False) or getattr(option, "count", False):
        return []
    kind = option.type
    if isinstance(kind, click.Path) and kind.exists:  # declared `Arg(exists="file" | "folder")`
        return ["no-such-path"]
    if isinstance(kind, click.Choice):
        return ["no-such-choice", ""]
    number, low, high = _numbers(kind)
    if number is None:
        return []
    wrong = ["ten", "", "1e400" if number is float else "1.5"]
    if number is float:
        wrong += ["nan", "inf", "-inf"]
    if low is not None and math.isfinite(low):
        wrong.append(str(int(low) - 1 if number is int else low - 1))
    if high is not None and math.isfinite(high):
        wrong.append(str(int(high) + 1 if number is int else high + 1))
    return wrong


def _cases() -> list[tuple[str, tuple[str, ...], str, str]]:
    found = []
    for program, group in _groups():
        for path, command in leaf_commands(group):
            for param in command.params:
                if isinstance(param, click.Option):
                    found += [(program, path, param.opts[0], value) for value in wrong_values(param)]
                elif isinstance(param, click.Argument) and param.metavar:  # declared: named by its metavar
                    found += [(program, path, param.metavar, value) for value in wrong_values(param)]
    return found


CASES = _cases()


def test_the_generator_covers_both_command_lines():
    options = {(program, path, flag) for program, path, flag, _ in CASES}
    assert len(options) > 40
    assert ("synprep", ("convert",), "--workers") in options and ("syntrain", ("eval",), "--beam") in options
    assert ("syntrain", ("average",), "CHECKPOINTS...") in options and ("syntrain", ("run",), "[CONFIG]") in options


@pytest.mark.parametrize("program, path, flag, value", CASES, ids=lambda v: " ".join(v) if isinstance(v, tuple)
                         else str(v))
def test_every_option_refuses_a_wrong_value_in_one_line(program, path, flag, value, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, err = cli_in_process(program, [*path, f"{flag}={value}" if flag.startswith("-") else value])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err[-1500:]
    assert lines[0].startswith(f"{program}: error: ") and flag in lines[0], lines[0]
    assert os.listdir(tmp_path) == []
