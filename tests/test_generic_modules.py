"""The generic modules of syntrain name no syntax mechanism (the registry is iterated, so a new switch is checked
too). A mechanism is named by its vocabulary: a registered switch's name and its module's name (as an imported
module, an attribute or a string), its option names, and the batch columns and decoder targets it declares (as
an identifier, attribute, keyword or string; a snake_case one also as a word inside a string). Ordinary
identifiers that happen to equal a switch's name (a local `bias`, `labels`, `depth`) and the attribute names of
torch's modules and tensors (`module.bias`) are not mentions; docstrings are prose. What a mechanism needs from
the generic code goes through the `Switch` hooks (syntrain/switches/base.py); what one needs from the data layer,
through the batch columns and decoder targets it declares (`BatchColumn`, `TargetColumn` in syntrain/columns.py)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

import pytest

from syntrain.columns import BatchColumn
from syntrain.config import option
from syntrain.switches import Switch, declared, declared_targets, option_names, register, registered, unregister

from .conftest import REPO

# every module outside the switches' package (but `switches/active`, the generic queries over the switches)
GENERIC = tuple(sorted(str(path.relative_to(REPO / "syntrain").with_suffix("")) for path in
                       (REPO / "syntrain").rglob("*.py")
                       if path.parent.name != "switches" or path.stem == "active"))
# (module, name) -> why it is still there; each one is checked to be still needed (a stale entry fails)
ALLOWED: dict[tuple[str, str], str] = {
    ("columns", "source_labels"): "the data option holding the source label vocabulary, which the shared src_labels "
                                  "column reads (the S&H switch fills it)",
    ("shapes", "pascal"): "the key under which checkpoints of older runs recorded the attention kernel chosen for "
                          "the layers with attention operations (now `kernel`): still read, so those runs resume",
}


def torch_attributes() -> set[str]:
    """Attribute names of torch's tensors and modules (`weight`, `bias`, `training`, ...): not mechanism names."""
    import torch
    from torch import nn

    names = set(dir(torch.Tensor)) | set(dir(nn.Module))
    for module in (nn.Linear(2, 2), nn.LayerNorm(2), nn.Embedding(2, 2), nn.MultiheadAttention(2, 1)):
        names |= set(dir(module))
    return names


def mechanism_names() -> dict[str, tuple[str, bool]]:
    """Name -> (the registered switch it belongs to, whether it is one of its own words: an option, a batch
    column or decoder target it declares, their shard columns; else its name or its module's name)."""
    names = {}
    for switch in registered():
        for name in [switch.name, switch.__module__.rsplit(".", 1)[-1]]:
            names[name] = (switch.name, False)
        words = [*option_names(switch), *(column.name for column in switch.columns),
                 *(target.name for target in switch.decoder_targets),
                 *(target.column for target in switch.decoder_targets)]
        names.update({word: (switch.name, True) for word in words})
    return names


def named(source: str) -> list[tuple[int, str, str]]:
    """(line, word, kind) of every identifier ("name"), attribute ("attribute"), imported module part ("import")
    and string constant ("string"; not docstrings) of a module."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        words: list[tuple[str, str]] = []
        if isinstance(node, ast.Name):
            words = [(node.id, "name")]
        elif isinstance(node, ast.Attribute):
            words = [(node.attr, "attribute")]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            words = [(node.name, "name")]
        elif isinstance(node, ast.arg):
            words = [(node.arg, "name")]
        elif isinstance(node, ast.keyword) and node.arg:
            words = [(node.arg, "name")]
        elif isinstance(node, ast.alias):
            words = [(part, "import") for part in node.name.split(".")]
            words += [(node.asname, "name")] if node.asname else []
        elif isinstance(node, ast.ImportFrom) and node.module:
            words = [(part, "import") for part in node.module.split(".")]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words = [(node.value, "string")]
        found += [(getattr(node, "lineno", 0), word, kind) for word, kind in words]
    return found


def is_mention(word: str, kind: str, names: dict[str, tuple[str, bool]], torch_names: set[str]) -> str | None:
    """The mechanism name `word` (of `kind`) mentions, or None."""
    if kind == "string":
        if word in names:
            return word
        return next((name for name, (_, own) in names.items()  # a snake_case word of its own inside a string
                     if own and "_" in name and re.search(rf"(?<![\w.]){name}(?!\w)", word)), None)
    if word not in names or kind == "attribute" and word in torch_names:
        return None
    _, own = names[word]
    return word if own or kind != "name" else None


def column_layer_data_options() -> set[str]:
    """The names of the data options the column layer's shared batch columns read (their label vocabularies)."""
    from syntrain.columns import SHARED

    return {column.vocabulary for column in SHARED if hasattr(column, "vocabulary")}


def why(name: str, switch: str, data_options: set[str]) -> str:
    """What a mention of `name` (of `switch`) in a generic module means, when it is not plain."""
    if name in data_options:
        return (f": an option of switch {switch!r} is named like a data option the column layer reads; name it "
                f"otherwise and hand its value over as {name!r} in data_options() (docs/switches-api.md, Config)")
    return ""


def mentions(module: str, source: str, allowed: dict[tuple[str, str], str] = ALLOWED) -> list[str]:
    names, torch_names, data_options = mechanism_names(), torch_attributes(), column_layer_data_options()
    found = {(line, is_mention(word, kind, names, torch_names)) for line, word, kind in named(source)}
    return sorted(f"syntrain/{module}.py:{line}: {name!r} (switch {names[name][0]!r})"
                  f"{why(name, names[name][0], data_options)}" for line, name in found
                  if name is not None and (module, name) not in allowed)


@dataclass
class TargetLabelsConfig:
    target_labels: list[str] = option(default_factory=list, help="named like a data option of the column layer")


def test_an_option_named_like_a_data_option_says_why_in_one_line():
    class Tagger(Switch[TargetLabelsConfig], name="tagger", config=TargetLabelsConfig):
        pass

    register(Tagger)
    try:
        found = mentions("columns", (REPO / "syntrain" / "columns.py").read_text(encoding="utf-8"))
    finally:
        unregister("tagger")
    assert found and all("\n" not in line for line in found)
    assert all(line.endswith("an option of switch 'tagger' is named like a data option the column layer reads; "
                             "name it otherwise and hand its value over as 'target_labels' in data_options() "
                             "(docs/switches-api.md, Config)") for line in found), found


@pytest.mark.parametrize("module", GENERIC)
def test_generic_module_names_no_switch(module):
    source = (REPO / "syntrain" / f"{module}.py").read_text(encoding="utf-8")
    assert mentions(module, source) == []


def test_every_allowed_name_is_still_needed():
    for module, word in ALLOWED:
        source = (REPO / "syntrain" / f"{module}.py").read_text(encoding="utf-8")
        assert any(f": {word!r} (" in found for found in mentions(module, source, allowed={})), (module, word)


PLANTED = ["cfg.{option}", "getattr(cfg, '{option}')", "f({option}=1)", "from .switches.{module} import X",
           "import syntrain.switches.{module}", "x = '{name}'", "inputs['{column}']",
           "raise ValueError(f'{{x}} needs {word} > 0')", "switches.{name}.Config"]


@pytest.mark.parametrize("planted", PLANTED)
def test_a_planted_mention_of_any_switch_is_caught(planted):
    for switch in registered():
        options = option_names(switch)
        columns = [column.name for column in switch.columns] or [target.name for target in switch.decoder_targets]
        source = planted.format(option=options[0] if options else switch.name, name=switch.name,
                                module=switch.__module__.rsplit(".", 1)[-1],
                                column=columns[0] if columns else options[0],
                                word=next(word for word in [*options, *columns] if "_" in word))
        assert mentions("planted", source), (switch.name, source)


@dataclass
class BiasConfig:
    bias_gain: float = option(0.0, ge=0, help="a switch whose name is an attribute of torch's modules")


class Bias(Switch[BiasConfig], name="bias", config=BiasConfig, switched_by=("bias_gain",)):
    columns = (BatchColumn("bias_offsets", "src_bias", "src", "bias"),)


def test_a_switch_named_like_an_ordinary_identifier_is_allowed_and_still_caught():
    """A switch named `bias`: `module.bias`, `nn.Linear(..., bias=False)` and a local `bias` in the generic
    modules are not mentions of it; its option, its batch column, its module and its name as a string are."""
    register(Bias)
    try:
        assert "bias" in mechanism_names() and declared("bias_offsets") is Bias.columns[0]
        for module in GENERIC:
            source = (REPO / "syntrain" / f"{module}.py").read_text(encoding="utf-8")
            assert mentions(module, source) == [], module
        ordinary = "def f(module, bias=None):\n    bias = module.bias\n    return nn.Linear(2, 2, bias=False), bias\n"
        assert mentions("planted", ordinary) == []
        for leak in ["cfg.bias_gain", "inputs['bias_offsets']", "from .switches.test_generic_modules import X",
                     "section('bias')", "f'{x} needs bias_gain'"]:
            assert mentions("planted", leak), leak
    finally:
        unregister("bias")
    assert "bias_offsets" not in declared() and "bias" not in {name for name in declared_targets()}


def test_a_switch_declares_its_eval_output_and_compare_column(tmp_path):
    """`syntrain eval --NAME PATH` and the columns of `syntrain compare` come from the registry: a switch
    registered here (its `Decoded` outputs class) gets its option (help shown; refused for a model without it,
    written by the model's outputs object) and its column (header, and its cell computed from the run folder)."""
    from click.testing import CliRunner

    from syntrain.cli import _output_writers, cli
    from syntrain.compare import _extra_cells
    from syntrain.config.model import ModelConfig
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

    from syntrain.cli import cli, model_flags
    from syntrain.config import option
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
        assert refused.exit_code == 2 and "'--gate-gain': 11.0 is not in the range 0<=x<=10" in refused.output
        given = run("--gate-gain", "2.5", "--data", "nowhere")
        assert given.exit_code == 1 and "gate_gain 2.5 reached the model" in given.output, given.output
    finally:
        unregister("flag_gate")
    assert "--gate-gain" not in run("--help").output
    assert "No such option '--gate-gain'" in run("--gate-gain", "1").output
