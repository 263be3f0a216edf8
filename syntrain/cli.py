"""The `syntrain` command line: run (train), translate, eval, env. Options are parsed here; the work is in
train.py and decode.py."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from dataclasses import fields
from typing import TYPE_CHECKING, Any

import click

from synprep.arguments import declared
from synprep.clihelp import add_examples, verbosity_options
from synprep.logs import set_verbosity
from synprep.outputs import check_outputs

from . import __version__
from .config.recipe import load_run_config  # noqa: F401 (its home was here: `from syntrain.cli import load_run_config`)

if TYPE_CHECKING:
    from .switches import DecodedOutputs

TRAIN_FLAGS = (  # the [train] fields that are `syntrain run` flags, in --help order (the model flags follow --preset)
    "data", "valid", "test", "out", "pretrained", "src_lang_code", "tgt_lang_code", "preset", "max_steps",
    "max_minutes", "max_tokens", "accum_steps",
    "lr", "warmup", "label_smoothing", "clip_norm", "eval_interval", "eval_sentences", "eval_beam", "test_beam",
    "length_penalty",
    "bleu_tokenize", "log_interval", "seed", "threads", "attention", "device", "precision", "max_len", "keep_last",
    "patience", "best_metric", "tensorboard", "wandb_project", "verify_shards", "shape_ladder", "compile", "name",
    "resume", "overwrite", "bundle")
MODEL_FLAGS_AFTER = "preset"


def model_flags() -> list[str]:
    """The [model] options that are `syntrain run` flags: those declared `option(..., flag=True)`, the generic
    model's first (syntrain.config.core), then each registered switch's (reading the declarations imports torch)."""
    from .config.model import config_parts

    names = [spec.name for part in config_parts().values() for spec in fields(part) if spec.metadata.get("flag")]
    clash = sorted(set(names) & set(TRAIN_FLAGS))
    if clash:
        raise ValueError(f"[model] {clash[0]} is declared a flag, and --{clash[0].replace('_', '-')} is a [train] flag")
    return names


def run_flag_fields() -> list[tuple[str, str]]:
    """Every `syntrain run` flag as (section, field), in --help order."""
    at = TRAIN_FLAGS.index(MODEL_FLAGS_AFTER) + 1
    train = [("train", name) for name in TRAIN_FLAGS]
    return train[:at] + [("model", name) for name in model_flags()] + train[at:]


class DeclaredType(click.ParamType):
    """A flag's value parsed for its declared field and checked by the declaration (one line naming the flag)."""

    def __init__(self, section: str, name: str) -> None:
        self.section, self.field_name, self.name = section, name, "value"

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:  # type: ignore[override]
        from .config.sections import declaration

        cls, spec, hint = declaration(self.section, self.field_name)  # type: ignore[misc]
        if spec.metadata.get("choices"):
            return "[" + "|".join(spec.metadata["choices"]) + "]"
        words = {int: "INTEGER", float: "NUMBER", str: "TEXT", float | None: "NUMBER"}
        return words.get(hint, "N,N,...")

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from .arguments import field_option
        from .config.sections import check_value, declaration
        from .config.values import ConfigError, parse_value

        if not isinstance(value, str):
            return value
        flag = param.opts[0] if param else self.field_name
        arg = field_option(self.section, self.field_name, flag)  # a number, text or choice: as any option
        if arg is not None:
            return arg.click_type().convert(value, param, ctx)
        try:
            return check_value(self.section, self.field_name,
                               parse_value(value, declaration(self.section, self.field_name)[2]), flag)
        except ConfigError as err:
            self.fail(str(err).removeprefix(f"{flag} "), param, ctx)


class DeclaredOption(click.Option):
    """A `syntrain run` flag made from a declared field: its help, default and allowed values (shown by --help,
    read from the declaration only then: model fields import torch)."""

    def __init__(self, declared: tuple[str, str]) -> None:
        from .config.sections import declaration

        section, name = declared
        flag = "--" + name.replace("_", "-")
        self.section, self.field_name = section, name
        if section == "train" and declaration(section, name)[2] is bool:  # type: ignore[index]
            default_on = declaration(section, name)[1].default  # type: ignore[index]
            super().__init__([f"{flag}/--no-{flag[2:]}" if default_on else flag], is_flag=True, default=None)
        else:
            super().__init__([flag], type=DeclaredType(section, name), default=None)

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        from synprep.tables import describe_option

        from .config.docs import default_words
        from .config.sections import declaration

        cls, spec, hint = declaration(self.section, self.field_name)  # type: ignore[misc]
        help_text = spec.metadata.get("help", "")
        plain = hint in (bool, str) or spec.metadata.get("choices")
        allowed = "" if plain else f" ({describe_option(cls, spec.name)})"
        self.help = (f"{help_text[:1].upper()}{help_text[1:]}{allowed}.  "
                     f"[default: {default_words(self.section, self.field_name)}]")
        return super().get_help_record(ctx)


def run_flags(function: Any) -> Any:
    """The TRAIN_FLAGS options, as decorators of a command function."""
    for name in reversed(TRAIN_FLAGS):
        function = click.option("train", name, cls=DeclaredOption)(function)
    return function


class RunCommand(click.Command):
    """`syntrain run`: its model flags (`model_flags`) are added after --preset when the command shows its help or
    its arguments name an option other than the [train] ones, not when this module is imported: the declarations
    of the switches import torch, so `syntrain --help` and a bad [train] flag value answer without it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        known = {opt for param in super().get_params(ctx) for opt in (*param.opts, *param.secondary_opts)}
        ctx.meta["syntrain.model_flags"] = any(
            arg.startswith("-") and (arg in ctx.help_option_names or arg.split("=", 1)[0] not in known) for arg in args)
        return super().parse_args(ctx, args)

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        if not ctx.meta.get("syntrain.model_flags", True):
            return params
        at = next(i + 1 for i, param in enumerate(params) if param.name == MODEL_FLAGS_AFTER)
        return params[:at] + [DeclaredOption(("model", name)) for name in model_flags()] + params[at:]


def decoding_options(function: Any) -> Any:
    """--beam, --length-penalty, --max-tokens and --threads of a decoding command: by default the run's own (its
    final test's: `decode.run_settings`), so that one checkpoint gives one set of hypotheses."""
    options = [
        click.option("--beam", type=DeclaredType("train", "test_beam"), default=None,
                     help="1 = greedy.  [default: the run's test_beam]"),
        click.option("--length-penalty", type=DeclaredType("train", "length_penalty"), default=None,
                     help="Beam search's length penalty (alpha).  [default: the run's]"),
        click.option("--max-tokens", type=DeclaredType("train", "max_tokens"), default=None,
                     help="Tokens per batch (batch shapes can change outputs).  [default: the run's]"),
        click.option("--threads", type=DeclaredType("train", "threads"), default=None,
                     help="torch CPU threads, 0 = torch's default (other counts can change outputs).  "
                     "[default: the run's]")]
    for option in reversed(options):
        function = option(function)
    return function


log = logging.getLogger("syntrain.cli")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="syntrain")
@verbosity_options
def cli(verbose: int, quiet: int) -> None:
    """Transformer trainer over synprep shards, with Pascal (parent-scaled self-attention) heads."""
    set_verbosity(verbose, quiet)


@cli.command(cls=RunCommand)
@declared("syntrain run", "recipe", required=False)
@run_flags
@click.option("--set", "sets", multiple=True, metavar="SECTION.FIELD=VALUE",
              help="Set any [model] or [train] field, e.g. --set model.d_model=512 --set train.warmup=100 "
              "(VALUE is a TOML value: true, 100, 1e-3, [2, 0], \"text\"; docs/recipe-fields.md lists the fields).")
def run(recipe: str | None, sets: tuple[str, ...], **options: Any) -> None:
    """Train a model from a TOML recipe and/or flags (flags win; docs/recipe-fields.md). Every value is checked
    before anything is read or written; the run folder gets config.toml (the resolved configuration) and
    train.log. An earlier run in OUT is refused unless --resume (which needs only --out RUN) or --overwrite."""
    from .api import train

    model_values = {name: options.pop(name, None) for name in model_flags()}  # absent: none was given
    try:
        train(recipe, sets=sets, model=model_values, **options)
    except (ValueError, OSError) as err:  # ConfigError is a ValueError
        raise click.ClickException(str(err)) from None


def _device() -> str:
    from .translate import default_device

    return default_device()


@cli.command()
@declared("syntrain translate", "checkpoint", required=True,
          help="The checkpoint to decode with (a run's best.pt, last.pt or an average).")
@click.option("-i", "--input", "input_path", default="-", show_default=True,
              help="Raw source text (one sentence a line, '-' = stdin: parsed and BPE'd with the run's parser model "
              "and codes) or a split directory written by synprep convert.")
@click.option("-o", "--output", "output_path", default="-", show_default=True, help="Output ('-' = stdout).")
@click.option("--interactive", is_flag=True,
              help="Translate raw text line by line as it arrives, writing and flushing each result at once (on a "
              "terminal: a '> ' prompt on stderr before each line).")
@declared("syntrain translate", "nbest", help="Write the N best translations per input line: "
                                              "LINE<TAB>SCORE<TAB>TRANSLATION (N <= --beam; 0: the best only).")
@decoding_options
@declared("syntrain translate", "parser_model", help="Raw text: the source parser model, where neither the run "
              "folder (source/, --bundle) nor the path it was trained with has it (docs/syntrain.md).")
@declared("syntrain translate", "bpe_codes", help="Raw text: the BPE codes, where neither the run folder (source/) "
              "nor the dataset has them.")
def translate(checkpoint: str, input_path: str, output_path: str, interactive: bool, nbest: int | None,
              beam: int | None, length_penalty: float | None, max_tokens: int | None, threads: int | None,
              parser_model: str | None, bpe_codes: str | None) -> None:
    """Translate raw text or the source side of shards; one detokenized line per input (N with --nbest), in
    order."""
    from synprep.textio import atomic_output, read_lines

    from .api import warn_signature
    from .translate import Translator, iter_lines

    if nbest and beam is not None and nbest > beam:
        raise click.UsageError(f"--nbest {nbest} needs --beam >= {nbest}")
    is_split = input_path != "-" and os.path.isdir(input_path)
    if input_path != "-" and not os.path.exists(input_path):
        raise click.UsageError(f"{input_path}: no such file or directory")
    if interactive and is_split:
        raise click.UsageError("--interactive reads raw text, not a split directory")
    from synprep.errors import InputError

    from .dataset import check_scored_split

    try:
        check_outputs({"-o": output_path}, {"the checkpoint (--checkpoint)": checkpoint,
                                            f"the {'split' if is_split else 'input'} (-i)": input_path,
                                            "the parser model (--parser-model)": parser_model,
                                            "the BPE codes (--bpe-codes)": bpe_codes}, runs=True)
        if is_split:
            check_scored_split(input_path)  # before the model is loaded or anything written
        translator = Translator(checkpoint, _device(), nbest=nbest or 0, parser_model=parser_model,
                                bpe_codes=bpe_codes, beam=beam, length_penalty=length_penalty, max_tokens=max_tokens,
                                threads=threads)
        with atomic_output(output_path) as out:  # no partial file after an error
            if is_split:
                warn_signature(translator.ckpt, translator.split(input_path))
                results = translator.translate_split(input_path)
                write = translator.writer(out)
                for lineno, ranked in enumerate(results, 1):
                    write(lineno, ranked)
            elif interactive:
                lines = iter_lines(input_path)
                terminal = input_path == "-" and sys.stdin is not None and sys.stdin.isatty()
                translator.interactive(_prompted(lines) if terminal else lines, out, log.info)
            else:
                lines = list(read_lines(input_path))  # one line = one sentence (only '\n' ends a line)
                blank, too_long = translator.translate_lines(lines, out)
                if blank:
                    log.warning(f"{input_path}: {blank} blank line(s) left blank in the output")
                if too_long:
                    positions = translator.model.cfg.sizes.max_len
                    log.warning(f"{input_path}: {too_long} line(s) longer than the model's {positions} positions left "
                               "empty in the output")
    except (ValueError, InputError) as e:
        raise click.ClickException(str(e)) from e


def _prompted(lines: Iterator[str]) -> Iterator[str]:
    """`lines` with a '> ' prompt on stderr before each (on a terminal: after the previous translation)."""
    while True:
        click.echo("> ", nl=False, err=True)
        line = next(lines, None)
        if line is None:
            click.echo(err=True)
            return
        yield line


class EvalCommand(click.Command):
    """`syntrain eval`: one `--NAME PATH` option per output file a registered switch declares (`DecodedOutputs.files`),
    after its --subsets option; looked up when the command runs or shows its help (the registry imports torch)."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        from .switches import registered

        params = super().get_params(ctx)
        at = next(i + 1 for i, param in enumerate(params) if param.name == "subsets_dir")
        added = [click.Option([f"--{name}", f"{name}_path"], type=click.Path(dir_okay=False), help=help_text)
                 for switch in registered() for name, (help_text, _) in switch.Decoded.files.items()]
        return params[:at] + added + params[at:]


@cli.command(name="eval", cls=EvalCommand)
@declared("syntrain eval", "checkpoint", help="The checkpoint to decode with (a run's best.pt, last.pt or an average).")
@declared("syntrain eval", "pretrained",
          help="Instead of a checkpoint: a Hugging Face model folder (Marian, M2M100/NLLB) scored as it is, the "
              "baseline of its fine-tunes (docs/pretrained.md); decoded with the default settings.")
@declared("syntrain eval", "src_lang_code", help="With --pretrained: a multilingual model's source language code "
          "(M2M100: en, NLLB: eng_Latn).")
@declared("syntrain eval", "tgt_lang_code", help="With --pretrained: a multilingual model's target language code, "
          "forced first in decoding.")
@declared("syntrain eval", "data", "data_path", required=True,
          help="The split folder (synprep convert output) to translate and score.")
@decoding_options
@click.option("-o", "--output", "output_path", type=click.Path(dir_okay=False), help="Also write the hypotheses.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False),
              help="Also write the scores as one JSON object: BLEU, chrF, their signatures, loss, the switches' "
              "measures, and what was scored (checkpoint or pretrained model, split, pairs, beam, length penalty, "
              "max_tokens, threads, device, reference normalizers).")
@declared("syntrain eval", "subsets", "subsets_dir",
          help="Challenge sets of the split (synprep challenge -o DIR): also one table over the whole split and "
          "every subset.")
@click.option("--bleu-tokenize", type=DeclaredType("train", "bleu_tokenize"), default="auto", show_default=True,
              help="sacrebleu tokenizer; auto: from the split's target language (ja-mecab, zh, else 13a).")
@declared("syntrain eval", "normalize_refs",
          help="Normalize the references first, in the order given (e.g. romanian, as the training target was).")
def eval_(checkpoint: str | None, pretrained: str | None, src_lang_code: str, tgt_lang_code: str, data_path: str,
          beam: int | None, length_penalty: float | None, max_tokens: int | None, threads: int | None,
          output_path: str | None, json_path: str | None, subsets_dir: str | None, bleu_tokenize: str,
          normalize_refs: tuple[str, ...], **output_paths: str | None) -> None:
    """BLEU and chrF (sacrebleu, detokenized output against the raw `tgt_text`) on a split (and its challenge
    subsets), the loss (teacher-forced cross-entropy per target token, EOS included, no label smoothing), and the
    measures of the model's switches (tree decoding: the tree measure, docs/tree-decoding.md)."""
    from synprep.challenge import load_subsets
    from synprep.errors import InputError
    from synprep.textio import atomic_write  # whole files or none; a write error is one line naming the file

    from .api import evaluation
    from .arguments import check_folders, write_json
    from .compare import normalization_note, subset_table
    from .scoring import bleu_tokenizer
    from .switches import decoded

    if (checkpoint is None) == (pretrained is None):
        raise click.UsageError("give the model to score: --checkpoint CHECKPOINT or --pretrained FOLDER (one)")
    if checkpoint and (src_lang_code or tgt_lang_code):
        raise click.UsageError("--src-lang-code/--tgt-lang-code go with --pretrained: a checkpoint keeps its run's")
    try:
        scoring = evaluation(checkpoint, data_path, beam=beam, length_penalty=length_penalty, max_tokens=max_tokens,
                             threads=threads, pretrained=pretrained, src_lang_code=src_lang_code,
                             tgt_lang_code=tgt_lang_code)
        outputs = decoded(scoring.model.switches)
        writers = _output_writers(outputs, output_paths)
        paths = {"-o": output_path, "--json": json_path, **{f"--{name}": path for name, (path, _) in writers.items()}}
        check_folders(list(paths.values()))
        check_outputs(paths, {"the checkpoint (--checkpoint)": checkpoint, "the model (--pretrained)": pretrained,
                              "the split (--data)": data_path, "the challenge sets (--subsets)": subsets_dir},
                      runs=True)
        subsets = load_subsets(subsets_dir) if subsets_dir else None  # checked before decoding
        record = scoring.run(normalize_refs, bleu_tokenize, progress=True)
    except (ValueError, FileNotFoundError, InputError) as e:
        raise click.ClickException(str(e)) from e
    data, hyps = scoring.split, scoring.hypotheses
    if output_path:
        atomic_write(output_path, "".join(h + "\n" for h in hyps).encode("utf-8"))
    for name, (path, writer) in writers.items():
        atomic_write(path, writer.file_text(name, scoring.pieces, data.keep).encode("utf-8"))
    note = normalization_note(data_path, normalize_refs)
    click.echo(f"BLEU {record['bleu']:.2f}  BLEU signature: {record['bleu_signature']}{note}")
    click.echo(f"chrF {record['chrf']:.2f}  chrF signature: {record['chrf_signature']}{note}")
    click.echo(f"loss {record['loss']:.4f}  (teacher-forced cross-entropy per target token, EOS included, no label "
               "smoothing)")
    if subsets is not None:
        split_ids = data.table.column("id").to_pylist()
        scored = scoring.scored
        name = (os.path.basename(os.path.normpath(scored)) if pretrained
                else os.path.basename(os.path.dirname(os.path.abspath(scored)))) or "model"
        click.echo("\n".join(["", *subset_table([(name, hyps)], scoring.references, split_ids, subsets,
                                                 tokenize=bleu_tokenizer(data.tgt_lang, bleu_tokenize),
                                                 normalized=note)]))
    for switch_outputs in outputs:
        text = switch_outputs.scores_text(record, line=True)
        if text:
            click.echo(text)
    if json_path:
        write_json(json_path, record)


def _output_writers(outputs: list[DecodedOutputs], paths: dict[str, str | None]
                    ) -> dict[str, tuple[str, DecodedOutputs]]:
    """Output name -> (its path, the decoded outputs of the model's switch that writes it) for each `--NAME PATH`
    given (`outputs`: the model's switches' `DecodedOutputs`); ValueError when no switch of the model writes it."""
    from .switches import registered

    writers = {}
    for option, path in paths.items():
        name = option.removesuffix("_path")
        if path:
            writer = next((switch_outputs for switch_outputs in outputs if name in switch_outputs.files), None)
            if writer is None:
                needs = next(switch.Decoded.files[name][1] for switch in registered() if name in switch.Decoded.files)
                raise ValueError(f"--{name} needs {needs}")
            writers[name] = (path, writer)
    return writers



@cli.command(name="compare")
@declared("syntrain compare", "runs", required=True)
@declared("syntrain compare", "data", "data_path", required=True,
          help="The test split folder (synprep convert output) every run is scored on.")
@declared("syntrain compare", "subsets", "subsets_dir",
          help="Challenge sets of the split (synprep challenge -o DIR): also one table over the whole split and "
              "every subset.")
@decoding_options
@declared("syntrain compare", "samples", show_default=True, help="Paired-bootstrap resamples.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Also write the tables here (JSON).")
@click.option("--bleu-tokenize", type=DeclaredType("train", "bleu_tokenize"), default="auto", show_default=True,
              help="sacrebleu tokenizer; auto: from the split's target language (ja-mecab, zh, else 13a).")
@declared("syntrain compare", "normalize_refs",
          help="Normalize the references first, in the order given (e.g. romanian, as the training target was).")
@declared("syntrain compare", "src_lang_code", help="The source language code of the multilingual pretrained "
          "model folders among the runs (M2M100: en, NLLB: eng_Latn).")
@declared("syntrain compare", "tgt_lang_code", help="Their target language code, forced first in decoding.")
def compare_command(runs: tuple[str, ...], data_path: str, subsets_dir: str | None, beam: int | None,
                    length_penalty: float | None, max_tokens: int | None, threads: int | None, samples: int,
                    json_path: str | None, bleu_tokenize: str, normalize_refs: tuple[str, ...], src_lang_code: str,
                    tgt_lang_code: str) -> None:
    """Results table of runs on one test split: BLEU and chrF with sacrebleu signatures and a paired bootstrap of each
    run against the first (the baseline). A run is a folder with best.pt or test.hyp (hypotheses, one line per pair
    of the split), or a pretrained model's folder (config.json: scored as it is, decoded with the default settings,
    nothing written into it; a multilingual one with --src-lang-code and --tgt-lang-code). Into a run folder with
    best.pt it writes only RUN/test.hyp (its decoding, reused while the checkpoint, the split and the decoding
    settings recorded in RUN/test.hyp.json are the same), RUN/describe.json (switches, seed, steps) and, for
    tree-decoding runs, RUN/test.trans; it names every file it writes on stderr. A run whose hypotheses equal the
    baseline's is "identical" (no p value)."""
    from .compare import compare

    try:
        result = compare(runs, data_path, subsets=subsets_dir, beam=beam, length_penalty=length_penalty,
                         max_tokens=max_tokens, threads=threads, samples=samples, json_path=json_path,
                         bleu_tokenize=bleu_tokenize, normalize_refs=normalize_refs, src_lang_code=src_lang_code,
                         tgt_lang_code=tgt_lang_code)
    except ValueError as err:
        raise click.ClickException(str(err)) from None
    click.echo(result.text)
    log.info(f"compare wrote {', '.join(result.written)}" if result.written else
             "compare wrote nothing into the run folders")


@cli.command()
@declared("syntrain average", "checkpoints", required=True)
@click.option("-o", "--output", "output_path", required=True, type=click.Path(dir_okay=False),
              help="The averaged checkpoint (usable by translate/eval; no optimizer state).")
@click.option("--force", is_flag=True,
              help="Average checkpoints of different runs (other run folder, training data or seed) too.")
def average(checkpoints: tuple[str, ...], output_path: str, force: bool) -> None:
    """Average the weights of checkpoints of one run (e.g. OUT/checkpoint_*.pt from --keep-last)."""
    from .api import average as average_checkpoints

    try:
        log.info(average_checkpoints(checkpoints, output_path, force=force).text)
    except ValueError as e:
        raise click.ClickException(str(e)) from e


@cli.command(name="export-hf")
@declared("syntrain export-hf", "checkpoint")
@click.option("-o", "--output", "output_path", required=True, type=click.Path(file_okay=False),
              help="The Hugging Face model folder to write (config.json, model.safetensors, the tokenizer files).")
def export_hf_command(checkpoint: str, output_path: str) -> None:
    """Write a checkpoint of a run from a pretrained model ([model] pretrained) back as a Hugging Face folder
    that transformers' AutoModelForSeq2SeqLM.from_pretrained loads with the same logits (docs/pretrained.md);
    refused for switches that change inference (Pascal heads, label embeddings, ...)."""
    from .export_hf import export_hf

    try:
        log.info(export_hf(checkpoint, output_path).text)
    except ValueError as err:
        raise click.ClickException(str(err)) from None


@cli.command()
@declared("syntrain env", "checkpoint", help="Also print the syntax switches this checkpoint was trained with.")
def env(checkpoint: str | None) -> None:
    """Print the torch version, the device training would use, what `auto` picks there, and the syntax
    switches (config keys of the recipe's [model] section; docs/switches.md)."""
    from .api import env as describe_env

    try:
        click.echo(describe_env(checkpoint).text)
    except ValueError as e:
        raise click.ClickException(str(e)) from e


EXAMPLES = {
    "run": "syntrain run --data out/sample/train --valid out/sample/valid --preset cpu --max-steps 200 --out runs/x",
    "translate": "syntrain translate --checkpoint runs/x/best.pt -i new.en -o new.de",
    "eval": "syntrain eval --checkpoint runs/x/best.pt --data out/sample/test -o hyp.de",
    "compare": "syntrain compare --data out/sample/test runs/vanilla runs/pascal",
    "average": "syntrain average runs/x/checkpoint_*.pt -o runs/x/average.pt",
    "export-hf": "syntrain export-hf runs/finetune/best.pt -o opus-mt-en-de-finetuned",
    "env": "syntrain env --checkpoint runs/x/best.pt",
}
add_examples(cli, "syntrain", EXAMPLES)


def main() -> None:
    """Entry point: user errors become one line `syntrain: error: ...` and exit code 2."""
    from synprep.errors import run_cli

    run_cli(cli, "syntrain", ending_signals=True)  # SIGTERM/SIGHUP: one line (a run's loop saves last.pt first)
