"""A generator over every declared field of a pipeline file's tables and of a training recipe: the cases come from
each field's declaration (`synprep.tables.option`: type, bounds, choices, `requires`, `conflicts`; a switch's
`switched_by`), so a new key is covered without a new test. Each wrong value (another type, out of range, NaN or
infinity, an empty text where none is meant, not a choice), each value that does nothing under the others and each
pair that contradicts itself must end in exit 2 and one line naming the file (or flag) and the key, with nothing
written, and the Python API (`synprep.convert`, `syntrain.train`) raises the same line. Only the files are read:
a refusal comes before any input is opened, so each case takes milliseconds."""

from __future__ import annotations

import math
import typing
from dataclasses import MISSING, fields
from typing import Any

import pytest
import tomli_w

import synprep
import syntrain
from synprep.tables import has_type
from tests.conftest import cli_in_process

PIPELINE_BASE = {  # a pipeline that loads (pre-parsed input; the refusals come before the inputs are opened)
    "pipeline": {"name": "x", "src_lang": "en", "tgt_lang": "de"},
    "splits": {"train": {"src": "train.src.conllu", "tgt": "train.tgt.conllu"}},
}
TABLES = {"HeadConfig": ("pipeline",), "SplitConfig": ("splits", "train"), "ParserConfig": ("parser", "src"),
          "BpeConfig": ("bpe",), "FeaturesConfig": ("features",), "NormalizeConfig": ("normalize",),
          "ParseConfig": ("parse",), "FilterSettings": ("filter",)}
WRONG_TYPES = (5, "ten", True, [1], 1.5, {"a": 1})


def _declared(cls: type) -> list[Any]:
    """The fields of `cls` declared with `option` (a key of a file), not the ones the code fills."""
    return [spec for spec in fields(cls) if "help" in spec.metadata and not spec.metadata.get("filled")]


def _default(spec: Any) -> Any:  # noqa: ANN401
    """The field's default (MISSING: a key that must be given)."""
    return spec.default_factory() if spec.default_factory is not MISSING else spec.default


def _scalar(hint: Any) -> Any:  # noqa: ANN401
    """int, float, str or bool where the hint is one of them (optionally None), else None."""
    kinds = [kind for kind in (typing.get_args(hint) or (hint,)) if kind is not type(None)]
    return kinds[0] if len(kinds) == 1 and kinds[0] in (int, float, str, bool) else None


def wrong_values(cls: type, spec: Any) -> list[Any]:  # noqa: ANN401
    """The values a declared field must refuse, from its declaration: two of another type, each bound crossed,
    NaN and infinity for a number, an empty text where its none is None, a choice not offered."""
    hint, meta = typing.get_type_hints(cls)[spec.name], spec.metadata
    items = typing.get_origin(hint) in (list, tuple)
    wrong = [value for value in WRONG_TYPES if not has_type(value, hint)][:2]
    number = _scalar(typing.get_args(hint)[0] if items else hint)
    bad: list[Any] = []
    if number in (int, float):
        step = 1 if number is int else 0.5
        bad += [meta[key] - step for key in ("ge",) if meta.get(key) is not None]
        bad += [meta[key] for key in ("gt", "lt") if meta.get(key) is not None]
        bad += [meta[key] + step for key in ("le",) if meta.get(key) is not None]
        bad = [int(value) if number is int else float(value) for value in bad]
    if number is float:
        bad += [math.nan, math.inf]
    wrong += [[value] for value in bad] if items else bad
    if _default(spec) is None and has_type("x", hint):
        wrong.append("")
    if meta.get("choices") and has_type("x", hint):
        wrong.append("no-such-choice")
    return wrong


def set_value(cls: type, spec: Any) -> Any:  # noqa: ANN401
    """A value the field takes that is not its default (it is set)."""
    hint, meta, default = typing.get_type_hints(cls)[spec.name], spec.metadata, _default(spec)
    if meta.get("choices"):
        return next(choice for choice in meta["choices"] if choice != default)
    kind = _scalar(hint)
    if kind is bool:
        return not default
    if kind in (int, float):
        low = meta.get("ge") if meta.get("ge") is not None else (meta.get("gt") or 0) + 1
        value = kind(max(low, 1))
        return value if value != default else value + 1
    listed = [kind for kind in (typing.get_args(hint) if typing.get_origin(hint) not in (list, tuple) else ()) or
              (hint,) if typing.get_origin(kind) in (list, tuple)]
    if listed:
        return ["en"] if typing.get_args(listed[0])[0] is str else [1]
    return "somewhere.txt"


def other_value(cls: type, name: str, allowed: tuple) -> Any:  # noqa: ANN401
    """A value of field `name` outside `allowed` (what the field that requires it does nothing under)."""
    spec = {spec.name: spec for spec in fields(cls)}[name]
    return next(value for value in (*(spec.metadata.get("choices") or ()), True, False, "none")  # ("none": none)
                if value not in allowed and has_type(value, typing.get_type_hints(cls)[name]))


def together_cases(cls: type) -> list[tuple[dict[str, Any], str]]:
    """(values of the table, the words the refusal must hold) for every declared `requires` and `conflicts`."""
    cases = []
    for spec in _declared(cls):
        for other, wanted in spec.metadata.get("requires", {}).items():
            if wanted is None:  # set, it does nothing unless the other is set too: the other left out
                cases.append(({spec.name: set_value(cls, spec)}, f"{spec.name} does nothing without {other}"))
                continue
            allowed = wanted if isinstance(wanted, tuple) else (wanted,)
            cases.append(({spec.name: set_value(cls, spec), other: other_value(cls, other, allowed)},
                          f"{spec.name} is for {other} = "))
        for other in spec.metadata.get("conflicts", ()):
            other_spec = {s.name: s for s in fields(cls)}[other]
            cases.append(({spec.name: set_value(cls, spec), other: set_value(cls, other_spec)},
                          f"{spec.name} and {other} exclude each other"))
    return cases


# ----------------------------------------------------------------------------------------------- pipeline files


def _pipeline_classes() -> dict[str, type]:
    from synprep.convert import pipeline

    return {name: getattr(pipeline, name) for name in TABLES}


def _table_name(cls_name: str) -> str:
    return "[" + ".".join(TABLES[cls_name]) + "]"


def _scheme_for(key: str) -> Any:  # noqa: ANN401
    """A sub-word scheme whose [bpe] keys include `key`, one that learns its model where there is one (None: the
    default's key, or every scheme's)."""
    from synprep.subwords import registry

    if key in registry.get(registry.DEFAULT).keys or key in ("enabled", "joint", "scheme"):
        return None
    return sorted((scheme for scheme in registry.schemes() if key in scheme.keys), key=lambda s: s.needs_model)[0]


def _clashing(cls: type, values: dict[str, Any]) -> set[str]:
    """The keys of the base table that a key of `values` is declared to exclude, or is excluded by (left out of
    the case: `tsv` stands for the base's src and tgt)."""
    pairs = {(spec.name, other) for spec in _declared(cls) for other in spec.metadata.get("conflicts", ())}
    return {key for pair in pairs for key, given in (pair, pair[::-1]) if given in values and key not in values}


def _pipeline_text(cls_name: str, values: dict[str, Any]) -> str:
    tables = {name: dict(table) for name, table in PIPELINE_BASE.items()}
    tables["splits"] = {"train": dict(PIPELINE_BASE["splits"]["train"])}
    *outer, last = TABLES[cls_name]
    target = tables
    for part in outer:
        target = target.setdefault(part, {})
    clashing = _clashing(_pipeline_classes()[cls_name], values)
    table = target[last] = {**{k: v for k, v in target.get(last, {}).items() if k not in clashing}, **values}
    scheme = _scheme_for(next(iter(values))) if cls_name == "BpeConfig" else None
    if scheme is not None:  # the key of another scheme than the default: that scheme's table (a model named)
        table.update({"scheme": scheme.name, **({"model": "tokenizer.json"} if scheme.needs_model else {})})
    return tomli_w.dumps(tables)


def _pipeline_cases() -> list[tuple[str, dict[str, Any], str]]:
    cases = []
    for cls_name, cls in _pipeline_classes().items():
        for spec in _declared(cls):
            cases += [(cls_name, {spec.name: value}, spec.name) for value in wrong_values(cls, spec)]
        cases += [(cls_name, values, words) for values, words in together_cases(cls)]
    return cases


PIPELINE_CASES = _pipeline_cases()


def test_the_generator_covers_every_pipeline_table():
    covered = {(cls_name, key) for cls_name, values, _ in PIPELINE_CASES for key in values}
    for cls_name, cls in _pipeline_classes().items():
        assert {(cls_name, spec.name) for spec in _declared(cls)} <= covered, cls_name
    together = {(cls_name, next(iter(values))) for cls_name, values, words in PIPELINE_CASES
                if "exclude each other" in words or " is for " in words or "does nothing without" in words}
    assert {("SplitConfig", "tsv"), ("ParserConfig", "model_dir"), ("ParserConfig", "train_conllu"),
            ("ParserConfig", "preset"), ("BpeConfig", "codes"), ("BpeConfig", "src_symbols"),
            ("BpeConfig", "tgt_symbols"), ("FilterSettings", "langid_languages"),
            ("FilterSettings", "langid_min_letters")} <= together


@pytest.mark.parametrize("cls_name, values, named", PIPELINE_CASES, ids=repr)
def test_every_pipeline_key_refuses_in_one_line(cls_name, values, named, tmp_path, monkeypatch):
    """`synprep convert` and `synprep.convert` refuse the value in the same one line, naming the file, the table
    and the key, and write nothing (no output folder)."""
    monkeypatch.chdir(tmp_path)
    pipeline = tmp_path / "pipeline.toml"
    pipeline.write_text(_pipeline_text(cls_name, values), encoding="utf-8")
    code, err = cli_in_process("synprep", ["convert", str(pipeline), "--output", str(tmp_path / "out")])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"synprep: error: {pipeline}: {_table_name(cls_name)} "), lines[0]
    assert named in lines[0], lines[0]
    with pytest.raises(synprep.InputError) as raised:
        synprep.convert(str(pipeline), output=str(tmp_path / "out"))
    assert lines[0] == f"synprep: error: {raised.value}"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["pipeline.toml"]


# ---------------------------------------------------------------------------------------------------- recipes


def _recipe_cases() -> list[tuple[str, dict[str, Any], str]]:
    """(section, the values of one [section] table, the words the refusal must hold): every recipe field's wrong
    values; every declared `requires` and `conflicts` of a recipe key; every option of a switch that is off."""
    from syntrain.config.sections import declaration, model_keys
    from syntrain.config.train import TrainConfig, train_keys
    from syntrain.switches import registered

    cases = []
    for section, keys in (("train", train_keys()), ("model", model_keys())):
        for key in keys:
            cls, spec, _ = declaration(section, key)  # type: ignore[misc]
            cases += [(section, {key: value}, f"[{section}] {key}") for value in wrong_values(cls, spec)]
    cases += [("train", values, words) for values, words in together_cases(TrainConfig)
              if set(values) <= set(train_keys())]
    parts = dict.fromkeys(declaration("model", key)[0] for key in model_keys())  # key order (every process)
    cases += [("model", values, words) for cls in parts for values, words in together_cases(cls)]
    for switch in registered():
        if not switch.switched_by:
            continue
        for spec in _declared(switch.Config):
            if spec.name not in switch.switched_by and not spec.metadata.get("requires"):  # (else: its own)
                value = set_value(switch.Config, spec)
                cases.append(("model", {spec.name: value}, f"{spec.name} = {value!r} does nothing without "))
    return cases


RECIPE_CASES = _recipe_cases()


def test_the_generator_covers_every_recipe_key():
    from syntrain.config.sections import model_keys
    from syntrain.config.train import train_keys

    covered = {key for _, values, _ in RECIPE_CASES for key in values}
    assert set(train_keys()) - {"name", "out", "wandb_project"} <= covered  # any text is a name or a path
    assert {key for key in model_keys() if key != "decoder_target"} <= covered
    assert sum(1 for *_, words in RECIPE_CASES if "does nothing without" in words) >= 5
    assert _flag_together_cases()[0][0] == ["--resume", "--overwrite"]
    together = {key for section, values, words in RECIPE_CASES if " is for " in words or "without " in words
                and " = " not in words for key in values}
    assert {"gcn_labeled", "gcn_gated", "bidirectional_prefixes", "lisa_lambda"} <= together


@pytest.mark.parametrize("section, values, named", RECIPE_CASES, ids=repr)
def test_every_recipe_key_refuses_in_one_line(section, values, named, tmp_path, monkeypatch):
    """`syntrain run RECIPE` and `syntrain.train(RECIPE)` refuse the value in the same one line, naming the recipe,
    the section and the key, and write nothing (no run folder, no runs/)."""
    monkeypatch.chdir(tmp_path)
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(tomli_w.dumps({"data": {"train": "nowhere"}, section: values}), encoding="utf-8")
    code, err = cli_in_process("syntrain", ["run", str(recipe), "--out", str(tmp_path / "run")])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"syntrain: error: {recipe}: [{section}]") and named in lines[0], lines[0]
    with pytest.raises(ValueError) as raised:
        syntrain.train(str(recipe), out=str(tmp_path / "run"))
    assert lines[0] == f"syntrain: error: {' '.join(str(raised.value).split())}"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["recipe.toml"]


# ------------------------------------------------------------------------------------------- syntrain run flags


def _flag_cases() -> list[tuple[str, str, Any]]:
    """(field, the flag's text, the same value in the API) for every `syntrain run` flag that sets a number or a
    choice: each bound crossed, NaN and infinity, a choice not offered (the values both take alike)."""
    from synprep.arguments import Arg
    from syntrain.cli import run_flag_fields
    from syntrain.config.sections import declaration

    cases = []
    for section, name in run_flag_fields():
        cls, spec, _ = declaration(section, name)  # type: ignore[misc]
        arg = Arg.of_field(cls, name, "--" + name.replace("_", "-"))
        if arg is None or (arg.kind is str and not arg.choices):
            continue
        for value in wrong_values(cls, spec):
            if isinstance(value, float) and arg.kind is float or isinstance(value, int) and arg.kind is int \
                    and not isinstance(value, bool) or value == "no-such-choice":
                cases.append((name, str(value), value))
    return cases


FLAG_CASES = _flag_cases()


def test_the_flag_cases_cover_numbers_and_choices():
    names = {name for name, _, _ in FLAG_CASES}
    assert {"max_steps", "lr", "warmup", "dropout", "device", "test_beam"} <= names


@pytest.mark.parametrize("name, text, value", FLAG_CASES, ids=repr)
def test_a_flag_and_its_api_argument_refuse_in_one_line(name, text, value, tmp_path, monkeypatch):
    """`syntrain run --FLAG=TEXT` and `syntrain.train(FIELD=VALUE)`: one line, the same, in the words of every
    other option (`Invalid value for '--lr': nan is not a finite number (see 'syntrain run --help')`)."""
    monkeypatch.chdir(tmp_path)
    flag = "--" + name.replace("_", "-")
    code, err = cli_in_process("syntrain", ["run", "--data", "nowhere", "--out", "run", f"{flag}={text}"])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith(f"syntrain: error: Invalid value for '{flag}': ")
    with pytest.raises(ValueError) as raised:
        syntrain.train(data="nowhere", out="run", **{name: value})
    assert lines[0] == f"syntrain: error: {raised.value}"
    assert list(tmp_path.iterdir()) == []


def _flag_together_cases() -> list[tuple[list[str], dict[str, Any], str]]:
    """(flags, API arguments, words) for every declared `requires` and `conflicts` of [train] fields, given as
    flags."""
    from syntrain.config.train import TrainConfig

    cases = []
    for values, words in together_cases(TrainConfig):
        flags = []
        for key, value in values.items():
            flag = "--" + key.replace("_", "-")
            flags += [flag if value else f"--no-{flag[2:]}"] if isinstance(value, bool) else [f"{flag}={value}"]
        named = words.replace(" and ", " and --").replace(" is for ", " is for --").replace("_", "-")
        cases.append((flags, values, "--" + named))
    return cases


@pytest.mark.parametrize("flags, arguments, named", _flag_together_cases(), ids=repr)
def test_flags_that_contradict_or_do_nothing_are_refused(flags, arguments, named, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, err = cli_in_process("syntrain", ["run", "--data", "nowhere", "--out", "run", *flags])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and named in lines[0], err
    with pytest.raises(ValueError) as raised:
        syntrain.train(data="nowhere", out="run", **arguments)
    assert lines[0] == f"syntrain: error: {raised.value}"
    assert list(tmp_path.iterdir()) == []
    assert len(_flag_together_cases()) >= 1


def test_a_path_that_must_be_there_is_one_line_in_the_command_and_the_api(tmp_path, monkeypatch):
    """Each declared path that must be there (`Arg(exists=...)`) missing: the same line from the command and its
    API function (the function's other arguments: paths that are there)."""
    from synprep.arguments import ARGUMENTS
    from tests.test_api import _api_function, _parameters, _placeholders

    monkeypatch.chdir(tmp_path)
    tried = 0
    for command, declared in ARGUMENTS.items():
        for name, arg in declared.items():
            if not arg.exists or name not in _parameters(command):
                continue
            program, *path = command.split()
            code, err = cli_in_process(program, [*path, f"{arg.flag}=missing" if arg.flag.startswith("-") else
                                                 "missing"])
            with pytest.raises(ValueError) as raised:
                _api_function(command)(**{**_placeholders(command), name: ["missing"] if arg.multiple else "missing"})
            assert code == 2 and err.strip() == f"{program}: error: {raised.value}", (command, name, err)
            tried += 1
    assert tried >= 8 and list(tmp_path.iterdir()) == []
