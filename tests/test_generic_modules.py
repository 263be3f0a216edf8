"""The generic modules of syntrain name no syntax mechanism: no identifier, attribute, keyword, imported module
or string constant of theirs is the name of a registered switch, of its module or of one of its options (the
registry is iterated, so a new switch is checked too). What a mechanism needs from the generic code goes through
the `Switch` hooks (syntrain/switches/base.py); what one needs from the data layer, through the batch columns
and decoder targets it declares (`BatchColumn`, `TargetColumn` in syntrain/data.py)."""

from __future__ import annotations

import ast

import pytest

from syntrain.switches import option_names, registered

from .conftest import REPO

GENERIC = ("data", "decode", "train", "compare", "cli", "model", "attention", "config", "translate")
# (module, name) -> why it is still there; each one is checked to be still needed (a stale entry fails)
ALLOWED: dict[tuple[str, str], str] = {}


def mechanism_names() -> dict[str, str]:
    """Name -> the registered switch it belongs to: its name, its module's name, its option names."""
    names = {}
    for switch in registered():
        for name in [switch.name, switch.__module__.rsplit(".", 1)[-1], *option_names(switch)]:
            names[name] = switch.name
    return names


def named(source: str) -> list[tuple[int, str]]:
    """(line, word) of every identifier, attribute, keyword, argument, imported module part and string constant."""
    found = []
    for node in ast.walk(ast.parse(source)):
        words: list[str] = []
        if isinstance(node, ast.Name):
            words = [node.id]
        elif isinstance(node, ast.Attribute):
            words = [node.attr]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            words = [node.name]
        elif isinstance(node, ast.arg):
            words = [node.arg]
        elif isinstance(node, ast.keyword) and node.arg:
            words = [node.arg]
        elif isinstance(node, ast.alias):
            words = [*node.name.split("."), *([node.asname] if node.asname else [])]
        elif isinstance(node, ast.ImportFrom) and node.module:
            words = node.module.split(".")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            words = [node.value]
        found += [(getattr(node, "lineno", 0), word) for word in words]
    return found


def mentions(module: str, source: str) -> list[str]:
    names = mechanism_names()
    return sorted({f"syntrain/{module}.py:{line}: {word!r} (switch {names[word]!r})" for line, word in named(source)
                   if word in names and (module, word) not in ALLOWED})


@pytest.mark.parametrize("module", GENERIC)
def test_generic_module_names_no_switch(module):
    source = (REPO / "syntrain" / f"{module}.py").read_text(encoding="utf-8")
    assert mentions(module, source) == []


def test_every_allowed_name_is_still_needed():
    names = mechanism_names()
    for module, word in ALLOWED:
        source = (REPO / "syntrain" / f"{module}.py").read_text(encoding="utf-8")
        assert word in names and any(found == word for _, found in named(source)), (module, word)


@pytest.mark.parametrize("planted", ["cfg.{option}", "getattr(cfg, '{option}')", "f({option}=1)",
                                     "from .switches.{module} import X", "x = '{name}'"])
def test_a_planted_mention_of_any_switch_is_caught(planted):
    for switch in registered():
        options = option_names(switch)
        source = planted.format(option=options[0] if options else switch.name, name=switch.name,
                                module=switch.__module__.rsplit(".", 1)[-1])
        assert mentions("planted", source), (switch.name, source)


def test_a_switch_declares_its_eval_output_and_compare_column(tmp_path):
    """`syntrain eval --NAME PATH` and the columns of `syntrain compare` come from the registry: a switch
    registered here (its `Decoded` outputs class) gets its option (help shown; refused for a model without it,
    written by the model's outputs object) and its column (header, and its cell computed from the run folder)."""
    from click.testing import CliRunner

    from syntrain.cli import _output_writers, cli
    from syntrain.compare import _extra_cells
    from syntrain.model import ModelConfig
    from syntrain.switches import DecodedOutputs, Switch, decoded, register, registered, unregister

    class MarksOutputs(DecodedOutputs):
        files = {"marks": ("Write the marks.", "a model with marks")}
        compare_header = "marks"

        @classmethod
        def compare_column(cls, run, data_path, described):
            return f"{described.get('marks', '-')} in {run}"

    class Marks(Switch, name="marks_output"):
        Decoded = MarksOutputs

    register(Marks)
    try:
        shown = CliRunner().invoke(cli, ["eval", "--help"]).output
        assert "--marks FILE" in shown and "Write the marks." in shown
        with pytest.raises(ValueError, match="^--marks needs a model with marks$"):
            _output_writers([], {"marks_path": "out.txt"})
        (marks,) = decoded([Marks(ModelConfig.from_dict({}))])
        assert isinstance(marks, MarksOutputs)
        assert _output_writers([marks], {"marks_path": "out.txt"}) == {"marks": ("out.txt", marks)}
        extra = [switch for switch in registered() if switch.Decoded.compare_header]
        assert extra[-1] is Marks
        (tmp_path / "describe.json").write_text('{"marks": 3}')
        assert _extra_cells(extra, str(tmp_path), str(tmp_path))[-1] == f"3 in {tmp_path}"
    finally:
        unregister("marks_output")
    assert "--marks" not in CliRunner().invoke(cli, ["eval", "--help"]).output


def test_a_switch_option_declared_a_flag_is_a_run_flag():
    """`syntrain run --NAME` flags come from the declarations: a switch registered here whose option is declared
    `option(..., flag=True)` gets its flag (help from the declaration, value checked, value reaching the model
    config), its other option none; the flag is gone once the switch is unregistered."""
    from dataclasses import dataclass

    from click.testing import CliRunner

    from synprep.tables import option
    from syntrain.cli import cli, model_flags
    from syntrain.switches import Switch, register, unregister

    @dataclass
    class GateConfig:
        gate_gain: float = option(0.0, ge=0, le=10, flag=True, help="gain of the gate")
        gate_layer: int = option(0, ge=0, help="layer of the gate")

    class Gate(Switch[GateConfig], name="flag_gate", config=GateConfig, switched_by=("gate_gain",)):
        @classmethod
        def check(cls, cfg):
            raise ValueError(f"gate_gain {cls.section(cfg).gate_gain} reached the model")

    def run(*args: str):
        return CliRunner().invoke(cli, ["run", *args], terminal_width=200)

    register(Gate)
    try:
        shown = run("--help").output
        assert "--gate-gain NUMBER" in shown and "Gain of the gate (a number >= 0 and <= 10).  [default: 0.0]" in shown
        assert "--gate-layer" not in shown and model_flags()[-1] == "gate_gain"
        refused = run("--gate-gain", "11")
        assert refused.exit_code == 2 and "--gate-gain must be <= 10, got 11" in refused.output
        given = run("--gate-gain", "2.5", "--data", "nowhere")
        assert given.exit_code == 1 and "gate_gain 2.5 reached the model" in given.output, given.output
    finally:
        unregister("flag_gate")
    assert "--gate-gain" not in run("--help").output
    assert "No such option '--gate-gain'" in run("--gate-gain", "1").output
