"""Fault cases of syntrain's configuration: recipe TOML values and `syntrain run` flags of the wrong type or out of
range, damaged recipes, a damaged stored configuration. Each must end in exit 2 and one line naming the file or
flag and the field, with nothing written. Cases as in tests/test_faults.py (`CASES`, counted by
`python -m tests.test_faults`); then a property test: random wrong values for every recipe field and every flag.
"""

from __future__ import annotations

import math
import string
import subprocess
import sys
import types
import typing
from dataclasses import fields
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import cli_in_process
from tests.test_faults import Case, _write

SYNTRAIN = [sys.executable, "-m", "syntrain"]


def _recipe(text: str | bytes, *flags: str):
    """A case: `syntrain run recipe.toml FLAGS` with the recipe's text after a [data] table of real shards."""
    def prepare(data: dict, tmp: Path) -> tuple[list[str], None]:
        head = f'[data]\ntrain = "{data["shards"] / "train"}"\n'
        body = text if isinstance(text, bytes) else text.encode()
        _write(tmp / "recipe.toml", body if body.startswith(b"[data]") else head.encode() + body)
        return [*SYNTRAIN, "run", "recipe.toml", "--out", "run", *flags], None
    return prepare


def _flags(*flags: str):
    def prepare(data: dict, tmp: Path) -> tuple[list[str], None]:
        return [*SYNTRAIN, "run", "--data", str(data["shards"] / "train"), "--out", "run", *flags], None
    return prepare


def _stored_config(data: dict, tmp: Path) -> tuple[list[str], None]:
    """A checkpoint whose stored model configuration is out of range (d_ff = -5)."""
    import torch

    torch.save({"model": {}, "model_config": {"d_ff": -5}, "vocab": ["<pad>"]}, tmp / "bad.pt")
    return [*SYNTRAIN, "translate", "--checkpoint", "bad.pt", "-i", str(data["shards"] / "test")], None


RUN = ("run",)  # a refused run leaves no run folder behind
CASES = [
    # tracebacks before
    Case("run: [data] train = 5", "bad values", _recipe("[data]\ntrain = 5\n"), names="recipe.toml: [data] train",
         absent=RUN),
    Case("run: [train] out = 7", "bad values", _recipe("[train]\nout = 7\n"), names="recipe.toml: [train] out",
         absent=RUN),
    Case("run: recipe with a TOML syntax error", "corruption", _recipe("[train\nlr = 1\n"),
         names="recipe.toml: not valid TOML", absent=RUN),
    Case("run: recipe not UTF-8", "bad bytes", _recipe(b'[train]\nname = "caf\xe9"\n'), names="recipe.toml:4",
         absent=RUN),
    Case("run: [model] d_ff = -5", "bad values", _recipe("[model]\nd_ff = -5\n"), names="[model] d_ff must be >= 1",
         absent=RUN),
    Case("run: [train] warmup = 0", "bad values", _recipe("[train]\nwarmup = 0\n"),
         names="recipe.toml: [train] warmup must be >= 1, got 0", absent=RUN),
    Case("run: [train] eval_interval = 0", "bad values", _recipe("[train]\neval_interval = 0\n"),
         names="[train] eval_interval must be >= 1", absent=RUN),
    Case("run: [train] log_interval = 0", "bad values", _recipe("[train]\nlog_interval = 0\n"),
         names="[train] log_interval must be >= 1", absent=RUN),
    Case("run: [model] n_heads = 0", "bad values", _recipe("[model]\nn_heads = 0\n"),
         names="[model] n_heads must be >= 1", absent=RUN),
    Case("run: [model] pascal_sigma2 = 0", "bad values", _recipe("[model]\npascal_sigma2 = 0\n"),
         names="[model] pascal_sigma2 must be > 0", absent=RUN),
    Case("run: [train] label_smoothing = 2.0", "bad values", _recipe("[train]\nlabel_smoothing = 2.0\n"),
         names="[train] label_smoothing must be < 1", absent=RUN),
    # bad values accepted before
    Case("run --max-steps 0", "bad values", _flags("--max-steps", "0"),
         names="Invalid value for '--max-steps': 0 is not in the range x>=1", absent=RUN),
    Case("run --max-steps -1", "bad values", _flags("--max-steps", "-1"),
         names="'--max-steps': -1 is not in the range x>=1", absent=RUN),
    Case("run --lr inf", "bad values", _flags("--lr", "inf"), names="'--lr': inf is not a finite number", absent=RUN),
    Case("run --lr 0", "bad values", _flags("--lr", "0"), names="'--lr': 0.0 is not in the range x>0", absent=RUN),
    Case("run: [model] parent_ignore = 1.5", "bad values", _recipe("[model]\nparent_ignore = 1.5\n"),
         names="[model] parent_ignore must be <= 1", absent=RUN),
    Case("run: [model] enc_layers = 0", "bad values", _recipe("[model]\nenc_layers = 0\n"),
         names="[model] enc_layers must be >= 1", absent=RUN),
    # unclear errors before
    Case("run: [model] d_model = 0", "bad values", _recipe("[model]\nd_model = 0\n"),
         names="[model] d_model must be >= 1", absent=RUN),
    Case("run --warmup -1", "bad values", _flags("--warmup", "-1"), names="'--warmup': -1 is not in the range x>=1",
         absent=RUN),
    Case("run: [model] pascal_heads = [99]", "bad values", _recipe("[model]\npascal_heads = [99]\n"),
         names="[model] pascal_heads [99]: layer 1 asks for 99 heads, a layer has 4 (n_heads)", absent=RUN),
    Case("run: [model] pascal_heads = [-1]", "bad values", _recipe("[model]\npascal_heads = [-1]\n"),
         names="[model] pascal_heads must be >= 0", absent=RUN),
    Case("run --lr nan", "bad values", _flags("--lr", "nan"), names="'--lr': nan is not a finite number", absent=RUN),
    # silent before: vocab.json was written before the error, and the corrected re-run was refused
    Case("run: [train] lr = nan leaves no run folder", "bad values", _recipe("[train]\nlr = nan\n"),
         names="recipe.toml: [train] lr must be a finite number", absent=RUN),
    # the same declarations check a checkpoint's stored configuration
    Case("translate: a checkpoint storing d_ff = -5", "corruption", _stored_config,
         names="bad.pt: stored model configuration: model d_ff must be >= 1"),
    # accepted before, doing nothing: an option of a switch that is off (a vanilla model was trained)
    Case("run: [model] parent_ignore = 0.5 without pascal_heads", "bad values",
         _recipe("[model]\nparent_ignore = 0.5\n"), names="parent_ignore = 0.5 does nothing without pascal_heads",
         absent=RUN),
    Case("run --parent-ignore 0.5 without Pascal heads", "bad values", _flags("--parent-ignore", "0.5"),
         names="parent_ignore = 0.5 does nothing without pascal_heads", absent=RUN),
    Case("run: [train] test_beam = 100000 (over the documented cap)", "bad values",
         _recipe("[train]\ntest_beam = 100000\n"), names="[train] test_beam must be <= 256", absent=RUN),
]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict:
    """Real shards (synprep synth + convert): the recipes' training split."""
    root = tmp_path_factory.mktemp("config_faults")
    synprep = str(Path(sys.executable).parent / "synprep")
    subprocess.run([synprep, "synth", "--pairs", "40", "--seed", "1", "-o", str(root / "synth")], check=True,
                   capture_output=True)
    subprocess.run([synprep, "convert", str(root / "synth" / "pipeline.toml"), "--output", str(root / "shards")],
                   check=True, capture_output=True)
    return {"shards": root / "shards"}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_config_fault_is_one_line_naming_the_field(case, data, tmp_path):
    argv, stdin = case.prepare(data, tmp_path)
    result = subprocess.run(argv, input=stdin, capture_output=True, timeout=300, cwd=tmp_path)
    err = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 2 and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("syntrain: error: ") and case.names in lines[0], err
    assert not [path for path in case.absent if (tmp_path / path).exists()], "a refused run left files behind"


# ------------------------------------------------------------------------------------------ property test


def run_in_process(argv: list[str]) -> tuple[int, str]:
    """`syntrain ARGV` in this process (exit code, stderr): the real entry point, without a new interpreter."""
    return cli_in_process("syntrain", argv)


WRONG_TYPES = st.one_of(st.text(max_size=8), st.booleans(), st.lists(st.integers(-9, 9), max_size=2),
                        st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x != int(x)),
                        st.dictionaries(st.sampled_from("ab"), st.integers(-9, 9), min_size=1))
LETTERS = st.text(alphabet=string.ascii_letters, min_size=1, max_size=8)


def _fits(value, hint) -> bool:
    """Whether a TOML value has the type `hint` (int is a float, a bool is no number; lists item by item)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in args if arg is not type(None))
    if hint is bool or hint is str:
        return isinstance(value, hint)
    if hint in (int, float):
        return isinstance(value, int if hint is int else int | float) and not isinstance(value, bool)
    if origin in (list, tuple):
        return isinstance(value, list) and all(_fits(item, args[0]) for item in value)
    return True


def _declared(cls: type, name: str) -> tuple[typing.Any, dict, type | None, bool]:
    """(type hint, metadata, number kind of the value or its items, is a list) of a declared field."""
    hint = typing.get_type_hints(cls)[name]
    is_list = typing.get_origin(hint) in (list, tuple)
    numeric = [arg for arg in (typing.get_args(hint) if not is_list else ()) or (hint,) if arg in (int, float)]
    kind = typing.get_args(hint)[0] if is_list else (numeric[0] if numeric else None)
    return hint, {f.name: f for f in fields(cls)}[name].metadata, kind, is_list


def out_of_range(cls: type, name: str) -> list[st.SearchStrategy]:
    """Numbers a declared field (or each item of it) must refuse: non-finite, outside its bounds."""
    _, meta, kind, _ = _declared(cls, name)
    found = [st.sampled_from([math.nan, math.inf, -math.inf])] if kind is float else []
    if kind not in (int, float):
        return found
    integers = kind is int
    for key, make in (("ge", lambda b: st.integers(max_value=math.ceil(b) - 1) if integers else
                       st.floats(max_value=b, exclude_max=True, allow_nan=False, allow_infinity=False)),
                      ("gt", lambda b: st.integers(max_value=math.floor(b)) if integers else
                       st.floats(max_value=b, allow_nan=False, allow_infinity=False)),
                      ("le", lambda b: st.integers(min_value=math.floor(b) + 1) if integers else
                       st.floats(min_value=b, exclude_min=True, allow_nan=False, allow_infinity=False)),
                      ("lt", lambda b: st.integers(min_value=math.ceil(b)) if integers else
                       st.floats(min_value=b, allow_nan=False, allow_infinity=False))):
        if meta.get(key) is not None:
            found.append(make(meta[key]).filter(lambda v: abs(v) < 2 ** 62))  # TOML integers are 64-bit
    return found


def invalid_values(cls: type, name: str) -> st.SearchStrategy:
    """Recipe values a declared field must refuse: of another type, non-finite, outside its bounds or choices."""
    hint, meta, _, is_list = _declared(cls, name)
    wrong = [WRONG_TYPES.filter(lambda v: not _fits(v, hint))]
    numbers = out_of_range(cls, name)
    if numbers:
        bad = st.one_of(numbers)
        wrong.append(st.tuples(bad, bad).map(list) if typing.get_origin(hint) is tuple else
                     bad.map(lambda v: [v]) if is_list else bad)
    if meta.get("choices"):
        wrong.append(st.text(max_size=8).filter(lambda v: v not in meta["choices"]))
    return st.one_of(wrong)


def invalid_flag_texts(cls: type, name: str) -> st.SearchStrategy:
    """Flag texts a declared field must refuse: words, booleans, lists for a scalar, non-integral numbers for an
    integer, numbers out of range."""
    hint, meta, kind, is_list = _declared(cls, name)
    wrong = [LETTERS.filter(lambda v: v not in (meta.get("choices") or ())), st.sampled_from(["true", "false"])]
    if not is_list:
        wrong.append(st.lists(st.integers(-9, 9), min_size=1, max_size=3).map(str))
    if kind is int and not is_list:
        wrong.append(st.floats(-1e6, 1e6).filter(lambda x: x != int(x)).map(repr))
    wrong += [numbers.map(repr) for numbers in out_of_range(cls, name)]
    return st.one_of(wrong)


def _recipe_fields() -> list[tuple[str, str, type, str]]:
    """(section, recipe key, config class, field) of every recipe field."""
    from syntrain.config.sections import declaration, model_keys
    from syntrain.config.train import DATA_KEYS, TrainConfig, train_keys

    return ([("data", key, TrainConfig, name) for key, name in DATA_KEYS.items()] +
            [("model", "preset", TrainConfig, "preset")] +
            [("model", name, declaration("model", name)[0], name) for name in model_keys()]
            + [("train", name, TrainConfig, name) for name in train_keys()])


def _flag_fields() -> list[tuple[str, type, str]]:
    """(flag, config class, field) of every `syntrain run` flag that takes a value."""
    from syntrain.cli import run_flag_fields
    from syntrain.config.sections import declaration

    found = []
    for section, name in run_flag_fields():
        cls, spec, hint = declaration(section, name)
        if hint is not bool and not (hint is str and not spec.metadata.get("choices")):  # any text is a path
            found.append(("--" + name.replace("_", "-"), cls, name))
    return found


@st.composite
def bad_recipe_value(draw):
    section, key, cls, name = draw(st.sampled_from(_recipe_fields()))
    return section, key, draw(invalid_values(cls, name))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(case=bad_recipe_value())
def test_random_wrong_recipe_values_are_one_line_naming_the_field(case, tmp_path):
    section, key, value = case
    recipe = tmp_path / "recipe.toml"
    tables = {"data": {"train": "nowhere"}, section: {key: value}} if section != "data" else {"data": {key: value}}
    recipe.write_text(tomli_w.dumps(tables), encoding="utf-8")
    code, err = run_in_process(["run", str(recipe), "--out", str(tmp_path / "run")])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and f"[{section}] {key}" in lines[0], (case, err)
    assert not (tmp_path / "run").exists()


@st.composite
def bad_flag_value(draw):
    flag, cls, name = draw(st.sampled_from(_flag_fields()))
    return flag, draw(invalid_flag_texts(cls, name))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(case=bad_flag_value())
def test_random_wrong_flag_values_are_one_line_naming_the_flag(case, tmp_path):
    flag, text = case
    code, err = run_in_process(["run", "--data", "nowhere", "--out", str(tmp_path / "run"), f"{flag}={text}"])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and flag in lines[0], (case, err)
    assert not (tmp_path / "run").exists()


def test_the_property_tests_draw_from_every_field():
    assert len(_recipe_fields()) > 60 and len(_flag_fields()) > 25
    assert {name for _, _, _, name in _recipe_fields()} >= {"d_ff", "warmup", "lr", "pascal_heads", "data"}
