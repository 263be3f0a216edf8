"""The commands and the Python API together: the function of every command (`API_FUNCTIONS`), and the checked
options, declared once for both: a command's click option is made from its declaration (`Arg.option`), and the
API function checks its arguments against the same declaration (`check_arguments`), raising `InputError` with the
line the command prints for the same value.

Light: click is imported only when an option is made or a value checked.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from . import options
from .errors import InputError
from .subwords import registry
from .tables import LiveChoices, clash

KIND_WORDS = {int: "an integer", float: "a number", str: "a string", bool: "True or False", "path": "a path"}


@dataclass(frozen=True)
class Arg:
    """One option: its flag (as the command line names it in errors), the Python type of its value, its bounds
    or choices, its default, and whether it is repeated (a list of values)."""

    flag: str
    kind: Any = str  # int, float, str, bool or "path" (a str or os.PathLike)
    min: float | None = None
    max: float | None = None
    min_open: bool = False  # the bounds themselves are outside (a field declared gt= / lt=)
    max_open: bool = False
    choices: Sequence[str] | None = None  # a tuple, or LiveChoices read from a registry
    default: Any = None
    multiple: bool = False
    requires: dict[str, Any] | None = None  # set (not its default), it does nothing unless each other has this
    # value (a tuple: one of them; None: any value, i.e. the other is set)
    conflicts: tuple[str, ...] = ()  # options that contradict it when both are set
    exists: str = ""  # a path that must be there: "file" or "folder" (click.Path(exists=True))

    @classmethod
    def of_field(cls, owner: type, name: str, flag: str) -> Arg | None:
        """Field `name` of a config dataclass (declared with `synprep.tables.option`: type, bounds, choices) as
        the option `flag` that sets it (`syntrain run --warmup`, `--beam`), so that its values are checked and
        refused in the words of every other option; None for a field that is not one number, text or choice (a
        list, a table, a boolean: the declaration's own check)."""
        import types
        import typing
        from dataclasses import fields

        hint = typing.get_type_hints(owner)[name]
        union = typing.get_origin(hint) in (typing.Union, types.UnionType)
        kinds = [kind for kind in (typing.get_args(hint) if union else (hint,)) if kind is not type(None)]
        if kinds not in ([int], [float], [str]):
            return None
        meta = {spec.name: spec for spec in fields(owner)}[name].metadata
        low, high = (meta.get(closed) if meta.get(closed) is not None else meta.get(opened)
                     for closed, opened in (("ge", "gt"), ("le", "lt")))
        return cls(flag, kinds[0], min=low, max=high, min_open=meta.get("gt") is not None,
                   max_open=meta.get("lt") is not None, choices=meta.get("choices"))

    @property
    def switch(self) -> str:
        """The flag as a click flag: `--dedupe/--no-dedupe` for an option that is on by default."""
        return f"{self.flag}/--no-{self.flag[2:]}" if self.kind is bool and self.default is True else self.flag

    def setting(self, *values: Any, named: bool = True) -> str:  # noqa: ANN401
        """The command line's words for this option at one of `values`: `--engine ray`, `--backend spacy or
        stanza`, `--no-cache`, `--resume`; `named` False: the value alone (`local`) where it is not a flag."""
        if self.kind is bool:
            return " or ".join(self.flag if value else f"--no-{self.flag[2:]}" for value in values)
        return f"{self.flag} " * named + " or ".join(map(str, values))

    def click_type(self) -> Any:  # noqa: ANN401 (a click.ParamType)
        import click

        if self.choices is not None:
            return click.Choice(self.choices)
        if self.kind is int:
            return click.INT if self.min is None and self.max is None else \
                click.IntRange(self.min, self.max, self.min_open, self.max_open)
        if self.kind is float:
            from .clihelp import Finite

            return Finite(self.min, self.max, self.min_open, self.max_open)
        if self.exists:
            return click.Path(exists=True, dir_okay=self.exists == "folder", file_okay=self.exists == "file")
        return click.BOOL if self.kind is bool else click.STRING

    def option(self, *decls: str, **attrs: Any) -> Callable[[Any], Any]:  # noqa: ANN401
        """The click option of this declaration; `decls`: its short flag and Python name where they differ."""
        import click

        flags = [d for d in decls if d.startswith("-")]
        names = [d for d in decls if not d.startswith("-")]
        extra = {} if self.kind is bool else {"type": self.click_type()}
        if self.default is not None:  # an explicit None would satisfy `required` (click >= 8.3)
            extra["default"] = self.default
        if self.kind is bool:
            extra["is_flag"] = True
        return click.option(*flags, self.switch, *names, multiple=self.multiple, **{**extra, **attrs})

    def argument(self, name: str, **attrs: Any) -> Callable[[Any], Any]:  # noqa: ANN401
        """The click argument of this declaration (`name`: its Python name), shown and named in errors as the
        declared flag (`CHECKPOINTS...`, `[CONFIG]`)."""
        import click

        return click.argument(name, type=self.click_type(), nargs=-1 if self.multiple else 1,
                              **{"metavar": self.flag, **attrs})

    def check(self, value: Any, command: str) -> Any:  # noqa: ANN401
        """`value` as the command would take it, or InputError with the command's line for it."""
        if value is None and (self.default is None or self.multiple):
            return () if self.multiple else None
        if self.multiple:
            if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
                raise self.error(f"{value!r} is not a list of values", command)
            single = replace(self, multiple=False, default=None)
            return tuple(single.check(item, command) for item in value)
        if not self.fits(value):
            raise self.error(f"{value!r} is not {KIND_WORDS[self.kind]}", command)
        if self.kind == "path" and not self.exists:
            return os.fspath(value)
        if self.kind in (int, float) or self.choices is not None or self.exists:
            import click

            try:
                return self.click_type().convert(os.fspath(value) if self.exists else value, None, None)
            except click.BadParameter as err:
                raise self.error(err.message, command) from None
        return value

    def fits(self, value: Any) -> bool:  # noqa: ANN401
        if self.kind == "path":
            return isinstance(value, str | os.PathLike)
        if self.kind is bool:
            return isinstance(value, bool)
        if isinstance(value, bool):
            return False
        return isinstance(value, int | float) if self.kind is float else isinstance(value, self.kind)

    def error(self, message: str, command: str) -> InputError:
        """The line `run_cli` prints for click's usage error on this option."""
        return InputError(f"Invalid value for '{self.flag}': {message.rstrip('.')} (see '{command} --help')")


def check_arguments(command: str, **values: Any) -> dict[str, Any]:  # noqa: ANN401
    """The values of the command's declared options (`ARGUMENTS[command]`), checked as the command checks them
    (type, range, choice): InputError with the command's line (`synprep validate` -> "Invalid value for
    '--max-failures': 0 is not in the range x>=1 (see 'synprep validate --help')")."""
    declared = ARGUMENTS[command]
    checked = {name: declared[name].check(value, command) for name, value in values.items()}
    check_together(declared, checked)
    return checked


def check_together(declared: dict[str, Arg], values: dict[str, Any]) -> None:
    """The declared `requires` and `conflicts` of the options that are set (given, not their default): InputError
    in one line, `--ray-address is for --engine ray, not local`, `--resume and --overwrite exclude each other`
    (the rule of `synprep.tables.clash`, as a file's keys are checked)."""
    problem = clash({name: (arg.requires or {}, arg.conflicts) for name, arg in declared.items()},
                    lambda name: values.get(name) not in (None, (), declared[name].default),
                    lambda name: values.get(name, declared[name].default), lambda name: declared[name].flag,
                    lambda name, allowed, named: declared[name].setting(*allowed, named=named))
    if problem:
        raise InputError(problem)


def invalid(command: str, name: str, message: str) -> InputError:
    """The command's line for a value of option `name` that a later check refused (`message`: why)."""
    return ARGUMENTS[command][name].error(message, command)


def declared(command: str, name: str, *decls: str, **attrs: Any) -> Callable[[Any], Any]:  # noqa: ANN401
    """The click option of `ARGUMENTS[command][name]` (a command line's decorator; `decls`: a short flag, and the
    command function's name for it where that is not `name`); an argument for a declaration named without a dash
    (`CHECKPOINTS...`, `[CONFIG]`)."""
    arg = ARGUMENTS[command][name]
    if not arg.flag.startswith("-"):
        return arg.argument(name, **attrs)
    return arg.option(*decls, *([] if any(not d.startswith("-") for d in decls) else [name]), **attrs)


API_FUNCTIONS = {  # every command of both command lines -> its function in the Python API (docs/python-api.md)
    "synprep bpe learn": "synprep.learn_bpe", "synprep bpe apply": "synprep.apply_bpe",
    "synprep align": "synprep.align", "synprep parse": "synprep.parse",
    "synprep parser train": "synprep.parser_train", "synprep parser eval": "synprep.parser_eval",
    "synprep filter": "synprep.filter", "synprep convert": "synprep.convert",
    "synprep cache info": "synprep.cache_info", "synprep cache verify": "synprep.cache_verify",
    "synprep cache prune": "synprep.cache_prune", "synprep synth": "synprep.synth",
    "synprep inspect": "synprep.inspect", "synprep challenge": "synprep.challenge",
    "synprep validate": "synprep.validate", "synprep export": "synprep.export", "syntrain run": "syntrain.train",
    "syntrain translate": "syntrain.Translator", "syntrain eval": "syntrain.evaluate",
    "syntrain compare": "syntrain.compare", "syntrain average": "syntrain.average", "syntrain env": "syntrain.env",
    "syntrain export-hf": "syntrain.export_hf",
}

WORKERS = Arg("--workers", int, min=0, default=0)
NORMALIZE_REFS = Arg("--normalize-refs", choices=options.NORMALIZERS, multiple=True)
UDPIPE, SPACY_STANZA = {"backend": "udpipe"}, {"backend": ("spacy", "stanza")}  # the trainers reading an option
CHECKPOINT = Arg("--checkpoint", "path", exists="file")
DATA_SPLIT = Arg("--data", "path", exists="folder")  # a split folder a command scores
SUBSETS = Arg("--subsets", "path", exists="folder")
SHARED_TREE_OPTIONS = {"root": Arg("--root", choices=options.ROOT_POLICIES, default="drop"),
                       "non_projective": Arg("--non-projective", choices=options.NON_PROJECTIVE_POLICIES,
                                             default="keep")}

ARGUMENTS: dict[str, dict[str, Arg]] = {  # "PROG COMMAND" -> Python name -> declaration
    "synprep bpe learn": {
        "inputs": Arg("--input", "path", multiple=True), "output": Arg("--output", "path"),
        "symbols": Arg("--symbols", int, min=1, default=16000), "vocab_prefix": Arg("--vocab-prefix", "path"),
        "min_frequency": Arg("--min-frequency", int, min=1, default=2), "verbose": Arg("--verbose", bool,
                                                                                       default=False)},
    "synprep bpe apply": {
        "codes": Arg("--codes", "path"), "input": Arg("--input", "path", default="-"),
        "output": Arg("--output", "path", default="-"), "vocabulary": Arg("--vocabulary", "path"),
        "vocabulary_threshold": Arg("--vocabulary-threshold", int, min=1),
        "merges": Arg("--merges", int, min=-1, default=-1),
        "separator": Arg("--separator", default=options.BPE_SEPARATOR), "glossaries": Arg("--glossaries",
                                                                                          multiple=True)},
    "synprep parse": {
        "input": Arg("--input", "path", default="-"), "output": Arg("--output", "path", default="-"),
        "backend": Arg("--backend", choices=options.PARSER_BACKENDS), "model": Arg("--model", "path"),
        "model_dir": Arg("--model-dir", "path"), "lang": Arg("--lang"),
        "pretokenized": Arg("--pretokenized", bool, default=False), "workers": WORKERS,
        "batch_size": Arg("--batch-size", int, min=1, default=64),
        "max_chars": Arg("--max-chars", int, min=1, default=options.MAX_LINE_CHARS)},
    "synprep convert": {
        "pipeline": Arg("PIPELINE", "path"), "output": Arg("--output", "path"), "workers": WORKERS,
        "shard_size": Arg("--shard-size", int, min=1), "engine": Arg("--engine", choices=options.ENGINES,
                                                                      default="local"),
        "ray_address": Arg("--ray-address", requires={"engine": "ray"}),
        "resume": Arg("--resume", bool, default=False, conflicts=("overwrite",)),
        "overwrite": Arg("--overwrite", bool, default=False),
        "compression": Arg("--compression", choices=options.COMPRESSIONS),
        "keep_work": Arg("--keep-work", bool, default=False), "dedupe": Arg("--dedupe", bool, default=True),
        "parse_cache": Arg("--parse-cache", "path", requires={"cache": True}),
        "cache": Arg("--cache", bool, default=True), "progress": Arg("--progress", bool)},
    "synprep align": {
        "conllu": Arg("--conllu", "path"), "output": Arg("--output", "path", default="-"),
        "bpe_codes": Arg("--bpe-codes", "path"), "model": Arg("--model", "path"),
        "vocabulary": Arg("--vocabulary", "path"),
        "scheme": Arg("--scheme", choices=LiveChoices(registry.names), default=registry.DEFAULT),
        "vocabulary_threshold": Arg("--vocabulary-threshold", int, min=1),
        "features": Arg("--features", default="parents,transitions,labels"),
        "fmt": Arg("--format", choices=options.ALIGN_FORMATS, default="jsonl"), **SHARED_TREE_OPTIONS,
        "strip_subtypes": Arg("--strip-subtypes", bool, default=False), "workers": WORKERS,
        "progress": Arg("--progress", bool)},
    "synprep parser train": {
        "backend": Arg("--backend", choices=("udpipe", "spacy", "stanza"), default="udpipe"),
        "conllu": Arg("--conllu", "path"), "output": Arg("--output", "path"), "heldout": Arg("--heldout", "path"),
        "preset": Arg("--preset", choices=options.UDPIPE_PRESETS, default="default"),
        "tokenizer_options": Arg("--tokenizer-options", requires=UDPIPE),
        "tagger_options": Arg("--tagger-options", requires=UDPIPE),
        "parser_options": Arg("--parser-options", requires=UDPIPE), "settings": Arg("--set", multiple=True,
                                                                                   requires=SPACY_STANZA),
        "lang": Arg("--lang", requires=SPACY_STANZA),
        "max_minutes": Arg("--max-minutes", float, min=0, requires={"backend": "spacy"}),
        "allow_no_spaceafter": Arg("--allow-no-spaceafter", bool, default=False),
        "verbose": Arg("--verbose", bool, default=False)},
    "synprep parser eval": {
        "backend": Arg("--backend", choices=options.PARSER_BACKENDS), "conllu": Arg("--conllu", "path"),
        "model": Arg("--model", "path"), "model_dir": Arg("--model-dir", "path"), "lang": Arg("--lang"),
        "mode": Arg("--mode", choices=("both", "gold", "raw"), default="both")},
    "synprep filter": {
        "src": Arg("--src", "path"), "tgt": Arg("--tgt", "path"), "output_dir": Arg("--output-dir", "path"),
        "src_lang": Arg("--src-lang"), "tgt_lang": Arg("--tgt-lang"),
        "langid": Arg("--langid", choices=(*options.LANGID_BACKENDS, "none"), default=options.DEFAULT_LANGID),
        "langid_min_letters": Arg("--langid-min-letters", int, min=0, default=0),
        "min_len": Arg("--min-len", int, min=0, default=1), "max_len": Arg("--max-len", int, min=1, default=80),
        "max_ratio": Arg("--max-ratio", float, min=1, default=3.0),
        "max_chars": Arg("--max-chars", int, min=1, default=options.MAX_LINE_CHARS),
        "segmentation": Arg("--segmentation", choices=options.SEGMENTATIONS, default="auto"),
        "workers": WORKERS, "overwrite": Arg("--overwrite", bool, default=False), "progress": Arg("--progress", bool)},
    "synprep cache info": {"folder": Arg("FOLDER", "path")},
    "synprep cache verify": {"folder": Arg("FOLDER", "path"), "repair": Arg("--repair", bool, default=False)},
    "synprep cache prune": {"folder": Arg("FOLDER", "path"), "max_gb": Arg("--max-gb", float, min=0),
                            "parser": Arg("--parser")},
    "synprep synth": {
        "pairs": Arg("--pairs", int, min=1, default=5000), "seed": Arg("--seed", int, default=1),
        "output": Arg("--output", "path"), "max_depth": Arg("--max-depth", int, min=0, default=2),
        "non_projective_rate": Arg("--non-projective-rate", float, min=0, max=1, default=0.05),
        "bpe_symbols": Arg("--bpe-symbols", int, min=1, default=300),
        "lengths": Arg("--lengths", choices=("short", "wmt"), default="short"),
        "vocabulary": Arg("--vocabulary", choices=("lexicon", "zipf"), default="lexicon")},
    "synprep inspect": {
        "path": Arg("PATH", "path"), "html": Arg("--html", "path"), "stats": Arg("--stats", bool),
        "show": Arg("--show", int, min=0, default=0), "examples": Arg("--examples", int, min=0, default=3)},
    "synprep challenge": {
        "split": Arg("DATASET_SPLIT", "path"), "rules": Arg("--rules", "path"),
        "output": Arg("--output", "path"), "side": Arg("--side", choices=("src", "tgt", "both"), default="both")},
    "synprep validate": {"directory": Arg("DIRECTORY", "path"),
                         "max_failures": Arg("--max-failures", int, min=1, default=1000), "workers": WORKERS},
    "synprep export": {
        "split": Arg("SPLIT", "path"), "name": Arg("--name"),
        "output": Arg("--output", "path"), "formats": Arg("--format", multiple=True),
        "dbsa_release": Arg("--dbsa-release", choices=("current", "2020"), default="current")},
    "syntrain run": {"recipe": Arg("[CONFIG]", "path", exists="file")},
    "syntrain compare": {
        "runs": Arg("RUNS...", "path", multiple=True, exists="folder"), "data": DATA_SPLIT, "subsets": SUBSETS,
        "samples": Arg("--samples", int, min=1, default=1000), "json_path": Arg("--json", "path"),
        "normalize_refs": NORMALIZE_REFS, "src_lang_code": Arg("--src-lang-code", default=""),
        "tgt_lang_code": Arg("--tgt-lang-code", default="")},  # for the multilingual pretrained rows (compare's check)
    "syntrain translate": {
        "checkpoint": CHECKPOINT, "device": Arg("--device"),
        "nbest": Arg("--nbest", int, min=0, default=0), "progress": Arg("--progress", bool, default=True),
        "parser_model": Arg("--parser-model", "path"), "bpe_codes": Arg("--bpe-codes", "path")},
    "syntrain eval": {
        "checkpoint": CHECKPOINT, "data": DATA_SPLIT, "normalize_refs": NORMALIZE_REFS,
        "device": Arg("--device"), "progress": Arg("--progress", bool, default=False),
        "pretrained": Arg("--pretrained", "path", exists="folder"), "subsets": SUBSETS,
        "src_lang_code": Arg("--src-lang-code", default="", requires={"pretrained": None}),
        "tgt_lang_code": Arg("--tgt-lang-code", default="", requires={"pretrained": None})},
    "syntrain average": {"checkpoints": Arg("CHECKPOINTS...", "path", multiple=True, exists="file"),
                         "output": Arg("--output", "path"),
                         "force": Arg("--force", bool, default=False)},
    "syntrain env": {"checkpoint": CHECKPOINT},
    "syntrain export-hf": {"checkpoint": Arg("CHECKPOINT", "path", exists="file"), "output": Arg("--output", "path")},
}
