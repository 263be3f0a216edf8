"""The Python API (docs/python-api.md, whose blocks tests/test_readme.py runs): light imports, `__all__`, the
callable module names, and the command line's checks and messages."""

import subprocess
import sys

import pytest

import synprep
import syntrain
from syntrain.config import ConfigError

from .conftest import REPO, value_id


def test_imports_stay_light():
    code = ("import sys, synprep, syntrain; heavy = [m for m in ('torch', 'pyarrow', 'datasets', 'click') "
            "if m in sys.modules]; print(heavy)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("package", [synprep, syntrain])
def test_all_names_resolve(package):
    names = [name for name in package.__all__ if name != "__version__"]
    assert names and all(callable(getattr(package, name)) for name in names)


def test_modules_named_like_functions_stay_callable():
    import synprep.convert.converter  # noqa: F401 (the package becomes synprep's attribute)
    import synprep.parse.runner  # noqa: F401
    import syntrain.train  # noqa: F401

    assert callable(synprep.convert) and callable(synprep.parse) and callable(syntrain.train)
    assert synprep.convert.__call__.__doc__.startswith("`synprep convert PIPELINE`")
    assert syntrain.train.train is not syntrain.train.run  # the module's own functions are still there


def cli_error(program, *args):
    done = subprocess.run([sys.executable, "-m", program, *args], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2
    return done.stderr.strip()


def test_convert_raises_what_the_command_prints(tmp_path):
    with pytest.raises(synprep.InputError) as raised:
        synprep.convert(str(REPO / "pipelines" / "sample.toml"), output=str(tmp_path / "o"), shard_size=0)
    printed = cli_error("synprep", "convert", "pipelines/sample.toml", "--output", str(tmp_path / "o"),
                        "--shard-size", "0")
    assert printed == f"synprep: error: {raised.value}"


def test_parse_and_bpe_raise_what_the_commands_print(tmp_path):
    missing = str(tmp_path / "none.udpipe")
    with pytest.raises(synprep.InputError) as raised:
        synprep.parse("-", "-", "udpipe", model=missing)
    assert cli_error("synprep", "parse", "--backend", "udpipe", "--model", missing) == f"synprep: error: {raised.value}"
    with pytest.raises(synprep.InputError, match="separator"):
        synprep.load_bpe(str(REPO / "tests" / "data" / "none.bpe"), separator="a b")


def test_train_raises_what_the_command_prints(tmp_path):
    missing = str(tmp_path / "no-split")
    with pytest.raises(ValueError) as raised:
        syntrain.train(data=missing, out=str(tmp_path / "run"))
    printed = cli_error("syntrain", "run", "--data", missing, "--out", str(tmp_path / "run"))
    assert printed == f"syntrain: error: {' '.join(str(raised.value).split())}"
    with pytest.raises(ConfigError, match="'--pascal-heads': must be a list of integers"):
        syntrain.train(data=missing, pascal_heads="two")  # a [model] field that is a flag, checked as the flag
    with pytest.raises(ConfigError, match=r"\[model\] d_model must be an integer"):
        syntrain.train(data=missing, d_model="two")  # one that is not: checked as in a recipe


def test_load_dataset_refuses_a_folder_without_splits(tmp_path):
    with pytest.raises(synprep.InputError, match="neither a split folder"):
        synprep.load_dataset(str(tmp_path))


def test_every_command_has_its_api_function():
    from synprep.arguments import API_FUNCTIONS
    from synprep.cli import cli as synprep_cli
    from synprep.clihelp import leaf_commands
    from syntrain.cli import cli as syntrain_cli

    commands = {" ".join((prog, *path)) for prog, group in (("synprep", synprep_cli), ("syntrain", syntrain_cli))
                for path, _ in leaf_commands(group)}
    assert {"synprep cache prune", "synprep parser eval", "syntrain env"} <= commands  # groups walked
    assert sorted(commands - set(API_FUNCTIONS)) == []  # a command without its function
    assert sorted(set(API_FUNCTIONS) - commands) == []  # a function of a command that is gone
    documented = (REPO / "docs" / "python-api.md").read_text(encoding="utf-8")
    for command, dotted in API_FUNCTIONS.items():
        package, name = dotted.split(".")
        assert callable(getattr({"synprep": synprep, "syntrain": syntrain}[package], name)), dotted
        assert f"`{dotted}(" in documented and f"`{command}`" in documented, f"{dotted} ({command}) not documented"


@pytest.mark.parametrize(("call", "command"), [
    (lambda: synprep.validate("x", max_failures=0), ("synprep", "validate", "x", "--max-failures", "0")),
    (lambda: synprep.inspect("x", show=-1), ("synprep", "inspect", "x", "--show", "-1")),
    (lambda: synprep.synth("x", lengths="long"), ("synprep", "synth", "-o", "x", "--lengths", "long")),
    (lambda: synprep.filter("a", "b", "en", "de", "o", max_ratio=0.5),
     ("synprep", "filter", "--src", "a", "--tgt", "b", "--src-lang", "en", "--tgt-lang", "de", "-o", "o",
      "--max-ratio", "0.5")),
    (lambda: synprep.challenge("x", "o", side="left"), ("synprep", "challenge", "x", "-o", "o", "--side", "left")),
    (lambda: synprep.export("x", "o", formats="moses"), ("synprep", "export", "x", "-o", "o", "--format", "moses")),
    (lambda: synprep.cache_prune("x", max_gb=-1.0), ("synprep", "cache", "prune", "x", "--max-gb", "-1")),
    (lambda: synprep.parser_eval("x", mode="fast"), ("synprep", "parser", "eval", "--conllu", "x", "--mode", "fast")),
    (lambda: syntrain.compare([str(REPO)], str(REPO), samples=0),
     ("syntrain", "compare", "--data", str(REPO), str(REPO), "--samples", "0")),
    (lambda: syntrain.compare([str(REPO)], str(REPO), beam=0),
     ("syntrain", "compare", "--data", str(REPO), str(REPO), "--beam", "0")),
])
def test_api_functions_raise_what_the_commands_print(call, command):
    with pytest.raises((synprep.InputError, ValueError)) as raised:
        call()
    assert cli_error(*command) == f"{command[0]}: error: {raised.value}"


def test_arguments_of_the_wrong_type_are_refused_in_one_line():
    with pytest.raises(synprep.InputError, match=r"^Invalid value for '--workers': '2' is not an integer"):
        synprep.validate("x", workers="2")
    with pytest.raises(synprep.InputError, match="'--max-failures': True is not an integer"):
        synprep.validate("x", max_failures=True)
    with pytest.raises(synprep.InputError, match="'DIRECTORY': 123 is not a path"):
        synprep.validate(123)
    with pytest.raises(ValueError, match="'--beam': '2' is not an integer"):
        syntrain.compare([str(REPO)], str(REPO), beam="2")


SCRIPT = """import synprep
corpus = synprep.synth({folder!r}, pairs=40, bpe_symbols=50)
result = synprep.convert(corpus.pipeline, output={out!r}, workers=2, progress=False)
print("rows", sum(stats.rows for stats in result.stats.values()))
"""


@pytest.mark.parametrize("guarded", [False, True], ids=["plain-script", "main-guard"])
def test_a_script_converts_with_or_without_the_main_guard(tmp_path, guarded):
    """Convert learns BPE in a spawned process, which imports the program's __main__: a plain script would run
    again there. It does not: the learner's process imports nothing of the script."""
    code = SCRIPT.format(folder=str(tmp_path / "corpus"), out=str(tmp_path / "out"))
    if guarded:
        code = 'if __name__ == "__main__":\n' + "".join(f"    {line}\n" for line in code.splitlines())
    script = tmp_path / "script.py"
    script.write_text(code, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "rows 40" and (tmp_path / "out" / "codes.bpe").stat().st_size  # BPE learned


def test_api_functions_have_the_defaults_of_their_commands():
    import inspect

    from synprep.arguments import API_FUNCTIONS, ARGUMENTS

    compared = 0
    for command, declared in ARGUMENTS.items():
        package, name = API_FUNCTIONS[command].split(".")
        parameters = inspect.signature(getattr({"synprep": synprep, "syntrain": syntrain}[package], name)).parameters
        for option, arg in declared.items():
            if option in parameters and parameters[option].default is not inspect.Parameter.empty:
                expected = ((), None) if arg.multiple else (arg.default,)  # a repeated option: none given
                assert parameters[option].default in expected, f"{command} {option}"
                compared += 1
    assert compared > 30


# ------------------------------------------------------------------------------ every argument, from its declaration

def _wrong_values(arg):
    """Values an API argument declared by `arg` (synprep.arguments.Arg) must refuse: another type, NaN and
    infinity for a number, a value out of its range, a choice not offered, one value for a repeated option."""
    wrong = [object(), b"bytes", 7 if arg.kind is bool else True]
    if arg.multiple:
        return [*wrong, "one"]
    if arg.kind in (int, float):
        wrong += ["2", float("nan"), float("inf")]
    if arg.kind in (str, "path"):
        wrong.append(123)
    wrong += [bound for bound in (arg.min - 1 if arg.min is not None else None,
                                  arg.max + 1 if arg.max is not None else None) if bound is not None]
    return [*wrong, "no-such-choice"] if arg.choices is not None else wrong


def _api_function(command):
    """The function of `command` (a callable module, `synprep.convert`, is its function)."""
    from synprep.arguments import API_FUNCTIONS

    package, name = API_FUNCTIONS[command].split(".")
    return getattr({"synprep": synprep, "syntrain": syntrain}[package], name)


def _parameters(command):
    """The parameters of the command's API function (a callable module's: its function's)."""
    import inspect

    function = _api_function(command)
    return inspect.signature(getattr(function.__call__, "__wrapped__", function)).parameters


def _placeholders(command):
    """The function's required arguments, each a harmless value of its declared kind (a path that is not there)."""
    import inspect

    from synprep.arguments import ARGUMENTS

    declared = ARGUMENTS[command]
    required = [name for name, parameter in _parameters(command).items()
                if parameter.default is inspect.Parameter.empty and parameter.kind not in (
                    inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
    def harmless(arg):  # a path that must be there: one that is (this file, the repository's folder)
        path = {"file": __file__, "folder": str(REPO)}.get(arg.exists, "nowhere")
        return [path] if arg.multiple else arg.choices[0] if arg.choices else path

    return {name: harmless(declared[name]) if name in declared else "nowhere" for name in required}


# The parameters of API functions that no declaration checks, each with why; a new parameter must be declared
# (synprep.arguments.ARGUMENTS, under its own name), be a decoding option (checked by its [train] declaration,
# syntrain.arguments.DECODING_FIELDS) or be listed here.
FREE_FORM = {
    "synprep filter": {"langid_languages": "a list or comma-separated codes, each checked against the identifier's "
                                           "languages (a name that is none is one line)"},
    "synprep challenge": {"phenomena": "a list or comma-separated rule names, each checked against the rules"},
    "syntrain run": {"recipe": "checked by type in syntrain.train (ConfigError), then read as a recipe",
                     "sets": "checked by type in syntrain.train, each KEY=VALUE by the field it sets",
                     "model": "checked by type in syntrain.train, each key by its [model] declaration",
                     "fields": "the [train] fields, checked by their declarations (TrainConfig, _train_cases)"},
}
# Declarations of command-line options that have no API parameter, each with why.
COMMAND_LINE_ONLY = {"synprep inspect": {"stats": "what the command prints; the API returns the statistics"},
                     "syntrain eval": {"subsets": "the challenge-set table the command prints; from Python: "
                                                  "syntrain.compare(runs, data, subsets=...)"}}


def _decoding(command):
    """The decoding and scoring parameters of a syntrain API function (checked by their [train] fields)."""
    from syntrain.arguments import DECODING_FIELDS

    return [name for name in _parameters(command) if command.startswith("syntrain") and name in DECODING_FIELDS]


def test_every_api_parameter_is_declared_or_listed():
    """Every parameter of every API function (synprep's and syntrain's) is checked by a declaration of its own
    name, or is listed free-form with a reason; every declaration names a parameter (one name per argument)."""
    from synprep.arguments import API_FUNCTIONS, ARGUMENTS

    unchecked, unknown = [], []
    for command in API_FUNCTIONS:
        declared, parameters = ARGUMENTS.get(command, {}), _parameters(command)
        listed = {*declared, *_decoding(command), *FREE_FORM.get(command, {})}
        unchecked += [f"{command}: {name}" for name in parameters if name not in listed]
        unknown += [f"{command}: {name}" for name in declared
                    if name not in parameters and name not in COMMAND_LINE_ONLY.get(command, {})]
    assert not unchecked, "API parameters no declaration checks (declare them, or list them in FREE_FORM):\n" + \
        "\n".join(unchecked)
    assert not unknown, "declarations named unlike any API parameter:\n" + "\n".join(unknown)
    listed = [(command, name) for table in (FREE_FORM, COMMAND_LINE_ONLY) for command, names in table.items()
              for name in names]
    assert all(name in _parameters(command) or name in ARGUMENTS[command] for command, name in listed), listed


def _decoding_wrong_values(field):
    """Values a decoding parameter declared by the [train] `field` must refuse, from its type."""
    import typing

    from syntrain.config.train import TrainConfig

    hint = typing.get_type_hints(TrainConfig)[field]
    kinds = set(typing.get_args(hint)) or {hint}
    return [object(), b"bytes", True, *(["2", float("nan"), float("inf")] if kinds & {int, float} else [123])]


def _argument_cases():
    from synprep.arguments import ARGUMENTS
    from syntrain.arguments import DECODING_FIELDS

    declared = [(command, name, value) for command, arguments in ARGUMENTS.items() for name, arg in arguments.items()
                if name not in COMMAND_LINE_ONLY.get(command, {}) for value in _wrong_values(arg)]
    decoding = [(command, name, value) for command in ARGUMENTS for name in _decoding(command)
                for value in _decoding_wrong_values(DECODING_FIELDS[name])]
    return declared + decoding


def test_the_declarations_name_the_api_arguments():
    """Convert's declarations are its function's arguments, one for one; every declaration and decoding option
    of every API function is tried by the generator below."""
    from synprep.arguments import ARGUMENTS

    assert list(ARGUMENTS["synprep convert"]) == list(_parameters("synprep convert"))
    assert len(_argument_cases()) > 250


@pytest.mark.parametrize("command, name, value", _argument_cases(), ids=value_id)
def test_api_functions_refuse_a_wrong_argument_in_one_line(tmp_path, monkeypatch, command, name, value):
    """Each declared argument of each API function, of a wrong type, NaN/inf, out of range or not a choice:
    the exception with the line naming its option (as the command prints it), nothing written
    (`convert(123)` opened file descriptor 123, `workers="2"` was a TypeError deep inside)."""
    from synprep.arguments import ARGUMENTS

    monkeypatch.chdir(tmp_path)
    with pytest.raises((synprep.InputError, ValueError)) as raised:
        _api_function(command)(**{**_placeholders(command), name: value})
    message = str(raised.value)
    flag = ARGUMENTS[command][name].flag if name in ARGUMENTS[command] else "--" + name.replace("_", "-")
    assert "\n" not in message and flag in message, message
    assert list(tmp_path.iterdir()) == []


def test_convert_options_and_arguments_share_one_message(tmp_path):
    """A declared option's bad value is one message in `synprep convert` and in `synprep.convert`."""
    with pytest.raises(synprep.InputError) as raised:
        synprep.convert(str(REPO / "pipelines" / "sample.toml"), output=str(tmp_path / "o"), workers=-1)
    printed = cli_error("synprep", "convert", "pipelines/sample.toml", "--output", str(tmp_path / "o"),
                        "--workers", "-1")
    assert printed == f"synprep: error: {raised.value}"


def _train_cases():
    """Values of another type than each [train] field's (NaN and infinity for a number), from its declaration."""
    import typing
    from dataclasses import fields

    from syntrain.config.train import TrainConfig

    cases = []
    for spec in fields(TrainConfig):
        kinds = set(typing.get_args(typing.get_type_hints(TrainConfig)[spec.name])) or \
            {typing.get_type_hints(TrainConfig)[spec.name]}
        wrong = [object(), b"bytes", 7 if bool in kinds else True]
        wrong += ["2", float("nan"), float("inf")] if kinds & {int, float} else []
        cases += [(spec.name, value) for value in wrong + ([123] if str in kinds else [])]
    return [*cases, ("recipe", 5), ("sets", "model.d_model=8"), ("model", 5)]


@pytest.mark.parametrize("name, value", _train_cases(), ids=value_id)
def test_train_refuses_an_argument_of_the_wrong_type_in_one_line(tmp_path, monkeypatch, name, value):
    """Each argument of `syntrain.train` (every [train] field by its declaration, the recipe, `sets`, `model`), of
    a wrong type: ConfigError naming it by its command-line option, nothing written (not even runs/)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as raised:
        syntrain.train(**{name: value})
    message = str(raised.value)
    flag = {"recipe": "CONFIG", "sets": "--set", "model": "model"}.get(name, "--" + name.replace("_", "-"))
    assert "\n" not in message and flag in message
    assert list(tmp_path.iterdir()) == []


def _together_cases():
    """(command, arguments, flag named) for every declared `requires` and `conflicts` of every command."""
    from synprep.arguments import ARGUMENTS

    def given(arg):  # a value that sets the option (not its default)
        if arg.multiple:
            return ("somewhere",)
        return (not arg.default) if arg.kind is bool else arg.min or 1 if arg.kind in (int, float) else \
            arg.choices[0] if arg.choices else "somewhere"

    cases = []
    for command, declared in ARGUMENTS.items():
        for name, arg in declared.items():
            for other, wanted in (arg.requires or {}).items():
                allowed = wanted if isinstance(wanted, tuple) else (wanted,)  # None: any value, so unset is unwanted
                unwanted = None if wanted is None else next(
                    value for value in (*(declared[other].choices or ()), True, False, None) if value not in allowed)
                cases.append((command, {name: given(arg), other: unwanted}, arg.flag))
            for other in arg.conflicts:
                cases.append((command, {name: given(arg), other: given(declared[other])}, "exclude each other"))
    return cases


@pytest.mark.parametrize("command, arguments, named", _together_cases(), ids=value_id)
def test_api_functions_refuse_values_that_do_nothing_or_contradict(tmp_path, monkeypatch, command, arguments, named):
    """The `requires` and `conflicts` declared beside the options: a value that does nothing under the others
    (`--parse-cache` with `--no-cache` was ignored) or two that contradict each other is one line, nothing
    written."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(synprep.InputError if command.startswith("synprep") else ConfigError, match=named):
        _api_function(command)(**{**_placeholders(command), **arguments})
    assert list(tmp_path.iterdir()) == []
    assert len(_together_cases()) >= 3
