"""The `syntrain` command line: run (train), translate, eval, env. Options are parsed here; the work is in
train.py and decode.py."""

from __future__ import annotations

import os
import tomllib
from typing import Any

import click

from . import __version__


def load_run_config(path: str) -> dict[str, Any]:
    """A training TOML ([data] train/valid/test, [model] preset + model options, [train] the rest) -> the
    TrainConfig values; relative paths resolve against the file's folder."""
    with open(path, "rb") as f:
        table = tomllib.load(f)
    unknown = set(table) - {"data", "model", "train"}
    if unknown:
        raise click.UsageError(f"{path}: unknown section(s) {', '.join(sorted(unknown))} (use data, model, train)")
    here = os.path.dirname(os.path.abspath(path))
    values: dict[str, Any] = dict(table.get("train", {}))
    for key, value in table.get("data", {}).items():
        if key not in ("train", "valid", "test"):
            raise click.UsageError(f"{path}: [data] {key}: expected train, valid or test")
        values["data" if key == "train" else key] = os.path.normpath(os.path.join(here, value))
    if "out" in values:
        values["out"] = os.path.normpath(os.path.join(here, values["out"]))
    model = dict(table.get("model", {}))
    if "preset" in model:
        values["preset"] = model.pop("preset")
    values["model"] = model
    return values


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="syntrain")
def cli() -> None:
    """Transformer trainer over synprep shards, with Pascal (parent-scaled self-attention) heads."""


@cli.command()
@click.argument("config", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--data", help="Training split directory (synprep convert output).")
@click.option("--valid", help="Validation split directory.")
@click.option("--test", help="Test split, scored with best.pt (beam search) at the end.")
@click.option("--out", help="Run directory (checkpoints, vocab.json, metrics.jsonl); default: "
              "runs/<recipe name or data folder name>-<YYYYmmdd-HHMMSS>.")
@click.option("--preset", type=click.Choice(["tiny", "base"]), help="Model size preset.")
@click.option("--pascal-heads", help="Pascal heads per encoder layer, e.g. '5' (layer 1) or '2,0,1'; '0' = vanilla.")
@click.option("--parent-ignore", type=float, help="Parent ignoring probability q (training only).")
@click.option("--dropout", type=float, help="Dropout on embeddings and residual branches.")
@click.option("--attention-dropout", type=float, help="Dropout on attention weights (default: --dropout).")
@click.option("--activation-dropout", type=float, help="Dropout after the feed-forward ReLU (default: --dropout).")
@click.option("--max-steps", type=int)
@click.option("--max-minutes", type=float, help="Stop after this much wall-clock time.")
@click.option("--max-tokens", type=int, help="Tokens per batch and process (padding included).")
@click.option("--accum-steps", type=int, help="Batches per optimizer step (gradient accumulation).")
@click.option("--lr", type=float, help="Peak learning rate.")
@click.option("--warmup", type=int, help="Warm-up steps.")
@click.option("--eval-interval", type=int)
@click.option("--eval-sentences", type=int, help="Validation sentences decoded for BLEU (0: all).")
@click.option("--log-interval", type=int)
@click.option("--seed", type=int)
@click.option("--threads", type=int, help="Torch CPU threads.")
@click.option("--attention", type=click.Choice(["auto", "math", "flex"]),
              help="Pascal heads kernel: auto = math; flex = FlexAttention (CUDA training, compiled per shape).")
@click.option("--device", type=click.Choice(["auto", "cuda", "cpu"]), help="auto: CUDA when available, else CPU.")
@click.option("--precision", type=click.Choice(["auto", "fp32", "bf16"]),
              help="auto = bf16 autocast on CUDA with bf16 support, else fp32.")
@click.option("--max-len", type=int, help="Skip training pairs with a longer side (sub-words).")
@click.option("--clip-norm", type=float, help="Clip the gradient norm to this (0: no clipping).")
@click.option("--keep-last", type=int, help="Also keep the N most recent OUT/checkpoint_<step>.pt.")
@click.option("--patience", type=int, help="Stop after N validations without improvement (0: never).")
@click.option("--best-metric", type=click.Choice(["bleu", "loss"]),
              help="Validation metric for best.pt and --patience (default bleu).")
@click.option("--tensorboard", is_flag=True, default=None,
              help="Also log to OUT/tensorboard (needs the tensorboard package).")
@click.option("--verify-shards/--no-verify-shards", default=None,
              help="Compare each shard's sha256 with its manifest before training (default: on).")
@click.option("--compile/--no-compile", "compile_model", default=None,
              help="torch.compile the model for training (default: off; docs/syntrain.md, Shapes and compilation).")
@click.option("--shape-ladder", type=click.Choice(["auto", "on", "off"]),
              help="Pad batch lengths to the shape ladder: auto = on CUDA and with --compile, off for the eager CPU.")
@click.option("--resume", is_flag=True, help="Continue from OUT/last.pt.")
@click.option("--overwrite", is_flag=True, default=None, help="Delete an earlier run's files in OUT first.")
def run(config: str | None, pascal_heads: str | None, parent_ignore: float | None, dropout: float | None,
        attention_dropout: float | None, activation_dropout: float | None, resume: bool, **options: Any) -> None:
    """Train a model (from a TOML recipe and/or flags; flags win). An existing run in OUT is refused unless
    --resume or --overwrite."""
    from .train import TrainConfig, train

    values = load_run_config(config) if config else {}
    if config and not values.get("name"):
        values["name"] = os.path.splitext(os.path.basename(config))[0]
    options["compile"] = options.pop("compile_model")
    values.update({key: value for key, value in options.items() if value is not None})
    model = dict(values.get("model", {}))
    if pascal_heads is not None:
        model["pascal_heads"] = [int(h) for h in pascal_heads.split(",") if h.strip()]
    for key, value in (("parent_ignore", parent_ignore), ("dropout", dropout), ("attention_dropout", attention_dropout),
                       ("activation_dropout", activation_dropout)):
        if value is not None:
            model[key] = value
    values["model"], values["resume"] = model, resume
    if not values.get("data"):
        raise click.UsageError("no training data: give a recipe with [data] train or --data")
    try:
        train(TrainConfig.from_dict(values))
    except (ValueError, OSError) as e:
        raise click.ClickException(str(e)) from e


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@cli.command()
@click.option("--checkpoint", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-i", "--input", "input_path", default="-", show_default=True,
              help="Raw source text (one sentence a line, '-' = stdin: parsed and BPE'd with the run's parser model "
              "and codes) or a split directory written by synprep convert.")
@click.option("-o", "--output", "output_path", default="-", show_default=True, help="Output ('-' = stdout).")
@click.option("--interactive", is_flag=True,
              help="Translate raw text line by line as it arrives, writing and flushing each result at once.")
@click.option("--nbest", type=click.IntRange(min=1), default=None,
              help="Write the N best translations per input line: LINE<TAB>SCORE<TAB>TRANSLATION (N <= --beam).")
@click.option("--beam", type=click.IntRange(min=1), default=4, show_default=True, help="1 = greedy.")
@click.option("--length-penalty", type=float, default=0.6, show_default=True)
@click.option("--max-tokens", type=int, default=4096, show_default=True)
def translate(checkpoint: str, input_path: str, output_path: str, interactive: bool, nbest: int | None, beam: int,
              length_penalty: float, max_tokens: int) -> None:
    """Translate raw text or the source side of shards; one detokenized line per input (N with --nbest), in
    order."""
    from synprep.textio import atomic_output, read_lines

    from .translate import Translator, iter_lines

    if nbest and nbest > beam:
        raise click.UsageError(f"--nbest {nbest} needs --beam >= {nbest}")
    is_split = input_path != "-" and os.path.isdir(input_path)
    if input_path != "-" and not os.path.exists(input_path):
        raise click.UsageError(f"{input_path}: no such file or directory")
    if interactive and is_split:
        raise click.UsageError("--interactive reads raw text, not a split directory")
    try:
        translator = Translator(checkpoint, _device(), beam, length_penalty, max_tokens, nbest or 0)
        with atomic_output(output_path) as out:  # no partial file after an error
            if is_split:
                _warn_signature(translator.ckpt, translator.split(input_path))
                results = translator.translate_split(input_path)
                write = translator.writer(out)
                for lineno, ranked in enumerate(results, 1):
                    write(lineno, ranked)
            elif interactive:
                translator.interactive(iter_lines(input_path), out)
            else:
                lines = list(read_lines(input_path))  # one line = one sentence (only '\n' ends a line)
                blank, too_long = translator.translate_lines(lines, out)
                if blank:
                    click.echo(f"{input_path}: {blank} blank line(s) left blank in the output", err=True)
                if too_long:
                    positions = translator.model.cfg.max_len
                    click.echo(f"{input_path}: {too_long} line(s) longer than the model's {positions} positions left "
                               "empty in the output", err=True)
    except ValueError as e:
        raise click.ClickException(str(e)) from e


def _warn_signature(ckpt: dict, data: object) -> None:
    trained, given = ckpt.get("signature", {}), data.signature
    keys = ("parsers", "bpe_codes_sha256")
    if any(trained.get(k) != given.get(k) for k in keys):
        click.echo("warning: the shards were not made with the parsers / BPE codes of the training data "
                   "(synprep signatures differ)", err=True)


@cli.command(name="eval")
@click.option("--checkpoint", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--data", "data_path", required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--beam", type=int, default=4, show_default=True, help="1 = greedy.")
@click.option("--length-penalty", type=float, default=0.6, show_default=True)
@click.option("--max-tokens", type=int, default=4096, show_default=True)
@click.option("-o", "--output", "output_path", type=click.Path(dir_okay=False), help="Also write the hypotheses.")
@click.option("--subsets", "subsets_dir", type=click.Path(exists=True, file_okay=False),
              help="Challenge sets of the split (synprep challenge -o DIR): also one table over the whole split and "
              "every subset.")
@click.option("--trees", "trees_path", type=click.Path(dir_okay=False),
              help="Tree-decoding models: also write the predicted target trees (CoNLL-U).")
def eval_(checkpoint: str, data_path: str, beam: int, length_penalty: float, max_tokens: int,
          output_path: str | None, subsets_dir: str | None, trees_path: str | None) -> None:
    """BLEU and chrF (sacrebleu, detokenized output against the raw `tgt_text`) on a split (and its challenge
    subsets); for tree-decoding models (target = transitions) also the tree measure (docs/tree-decoding.md)."""
    from synprep.challenge import load_subsets

    from .data import ParallelData
    from .decode import conllu_block, score, tree_rows, tree_scores
    from .decode import translate as run_translate
    from .train import data_options, load_checkpoint, tree_text

    device = _device()
    try:
        model, vocab, ckpt = load_checkpoint(checkpoint, device)
        if trees_path and model.cfg.target != "transitions":
            raise ValueError("--trees needs a tree-decoding model (target = \"transitions\")")
        options = data_options(model.cfg)
        if "tgt_transitions" not in open_columns(data_path):  # decoding needs no reference transitions
            options["target"] = "text"
        data = ParallelData(data_path, vocab, features=model.cfg.batch_features(training=False),
                            labels=model.cfg.source_labels, **options)
    except (ValueError, FileNotFoundError) as e:
        raise click.ClickException(str(e)) from e
    _warn_signature(ckpt, data)
    subsets = load_subsets(subsets_dir) if subsets_dir else None  # checked before decoding
    pieces: list[list[str]] = []
    hyps = run_translate(model, data, vocab, beam, length_penalty, max_tokens, device=device, progress=True,
                         pieces=pieces)
    if output_path:
        with open(output_path, "w", encoding="utf-8") as f:
            f.writelines(h + "\n" for h in hyps)
    if trees_path:
        with open(trees_path, "w", encoding="utf-8") as f:
            for row, output in zip(data.keep, pieces):
                f.write(conllu_block(tree_rows(output, model.cfg.transition_root), str(int(row))))
    result = score(hyps, data.references(data.keep))
    click.echo(f"BLEU {result['bleu']:.2f}  BLEU signature: {result['bleu_signature']}")
    click.echo(f"chrF {result['chrf']:.2f}  chrF signature: {result['chrf_signature']}")
    if subsets is not None:
        from .compare import subset_table

        split_ids = data.table.column("id").to_pylist()
        name = os.path.basename(os.path.dirname(os.path.abspath(checkpoint))) or "model"
        click.echo("\n".join(["", *subset_table([(name, hyps)], data.references(data.keep), split_ids, subsets)]))
    if model.cfg.target == "transitions":
        trees = tree_scores(pieces, data.reference_transitions(data.keep), model.cfg.transition_root)
        click.echo(f"trees:{tree_text(trees)[2:]}")


def open_columns(path: str) -> list[str]:
    """The column names of a split folder."""
    from synprep.shards import open_split

    return list(open_split(path).columns)


@cli.command()
@click.argument("checkpoints", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", "output_path", required=True, type=click.Path(dir_okay=False),
              help="The averaged checkpoint (usable by translate/eval; no optimizer state).")
def average(checkpoints: tuple[str, ...], output_path: str) -> None:
    """Average the weights of checkpoints of one run (e.g. OUT/checkpoint_*.pt from --keep-last)."""

    from .checkpoints import average_checkpoints, save_checkpoint

    try:
        averaged = average_checkpoints(list(checkpoints))
    except ValueError as e:
        raise click.ClickException(str(e)) from e
    save_checkpoint(averaged, output_path)
    click.echo(f"wrote {output_path}: the mean of {len(checkpoints)} checkpoint(s)", err=True)


@cli.command()
@click.option("--checkpoint", type=click.Path(exists=True, dir_okay=False),
              help="Also print the syntax switches this checkpoint was trained with.")
def env(checkpoint: str | None) -> None:
    """Print the torch version, the device training would use, what `auto` picks there, and the syntax
    switches (config keys of the recipe's [model] section; docs/switches.md)."""
    import torch

    from .attention import flex_available

    cuda = torch.cuda.is_available()
    name = f"cuda ({torch.cuda.get_device_name()})" if cuda else "cpu"
    precision = "bf16" if cuda and torch.cuda.is_bf16_supported() else "fp32"
    flex = "available" if flex_available() else "not in this torch"
    click.echo(f"syntrain {__version__}, torch {torch.__version__}, device {name}; auto: precision {precision}, "
               f"Pascal attention kernel math (flex on request: {flex})")
    click.echo("syntax switches ([model] keys, all off by default): pascal_heads; directed_heads, double_context, "
               "directed_n; dbsa_encoder, dbsa_decoder, dbsa_layer, dbsa_lambda; sync_lambda, sync_layer; "
               "lisa_layer, lisa_lambda; label_embedding (S&H); tree decoding: target = \"transitions\", "
               "parent_layers, gcn_layers, gcn_labeled, gcn_gated, bidirectional, bidirectional_prefixes")
    if checkpoint:
        from .train import load_checkpoint

        try:
            model, _, _ = load_checkpoint(checkpoint)
        except ValueError as e:
            raise click.ClickException(str(e)) from e
        click.echo(f"{checkpoint}: {model.cfg.switches()}")


def main() -> None:
    """Entry point: user errors become one line `syntrain: error: ...` and exit code 2."""
    from synprep.errors import run_cli

    run_cli(cli, "syntrain")
