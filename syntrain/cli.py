"""The `syntrain` command line: run (train), translate, eval, env. Options are parsed here; the work is in
train.py and decode.py."""

from __future__ import annotations

import os
import sys
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
@click.option("--out", help="Run directory (checkpoints, vocab.json, metrics.jsonl).")
@click.option("--preset", type=click.Choice(["tiny", "base"]), help="Model size preset.")
@click.option("--pascal-heads", help="Pascal heads per encoder layer, e.g. '5' (layer 1) or '2,0,1'; '0' = vanilla.")
@click.option("--parent-ignore", type=float, help="Parent ignoring probability q (training only).")
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
              help="Pascal heads kernel: auto = FlexAttention on CUDA (no attention dropout), else math.")
@click.option("--precision", type=click.Choice(["auto", "fp32", "bf16"]),
              help="auto = bf16 autocast on CUDA with bf16 support, else fp32.")
@click.option("--resume", is_flag=True, help="Continue from OUT/last.pt.")
def run(config: str | None, pascal_heads: str | None, parent_ignore: float | None, resume: bool,
        **options: Any) -> None:
    """Train a model (from a TOML recipe and/or flags; flags win)."""
    from .train import TrainConfig, train

    values = load_run_config(config) if config else {}
    values.update({key: value for key, value in options.items() if value is not None})
    model = dict(values.get("model", {}))
    if pascal_heads is not None:
        model["pascal_heads"] = [int(h) for h in pascal_heads.split(",") if h.strip()]
    if parent_ignore is not None:
        model["parent_ignore"] = parent_ignore
    values["model"], values["resume"] = model, resume
    if not values.get("data"):
        raise click.UsageError("no training data: give a recipe with [data] train or --data")
    try:
        train(TrainConfig.from_dict(values))
    except (ValueError, FileNotFoundError) as e:
        raise click.ClickException(str(e)) from e


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@cli.command()
@click.option("--checkpoint", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-i", "--input", "input_path", required=True, type=click.Path(exists=True),
              help="Raw source text (one sentence a line: parsed and BPE'd with the run's parser model and codes) "
              "or a split directory written by synprep convert.")
@click.option("-o", "--output", "output_path", type=click.Path(dir_okay=False), help="Default: stdout.")
@click.option("--beam", type=int, default=4, show_default=True, help="1 = greedy.")
@click.option("--length-penalty", type=float, default=0.6, show_default=True)
@click.option("--max-tokens", type=int, default=4096, show_default=True)
def translate(checkpoint: str, input_path: str, output_path: str | None, beam: int, length_penalty: float,
              max_tokens: int) -> None:
    """Translate raw text or the source side of shards; one detokenized line per input, in order."""
    from synprep.errors import InputError
    from synprep.textio import read_lines

    from .data import ParallelData, raw_source
    from .decode import translate as run_translate
    from .train import load_checkpoint

    device = _device()
    try:
        model, vocab, ckpt = load_checkpoint(checkpoint, device)
        data = ParallelData(input_path, vocab) if os.path.isdir(input_path) else None
    except (ValueError, FileNotFoundError) as e:
        raise click.ClickException(str(e)) from e
    if data is not None:
        _warn_signature(ckpt, data)
        lines = run_translate(model, data, vocab, beam, length_penalty, max_tokens, device=device)
    else:  # raw text: parse + BPE as the training shards were made; blank lines stay blank
        if "pipeline" not in ckpt:
            raise click.UsageError("this checkpoint has no pipeline configuration: give a split folder")
        try:
            raw = list(read_lines(input_path))  # one line = one sentence (only '\n' ends a line)
            filled = [i for i, line in enumerate(raw) if line.strip()]
            dataset = ckpt.get("dataset") or ckpt["pipeline"].get("output", "")  # older checkpoints: the output
            table = raw_source([raw[i] for i in filled], ckpt["pipeline"], ckpt.get("signature", {}), dataset)
        except (ValueError, InputError) as e:
            raise click.ClickException(str(e)) from e
        data = ParallelData(input_path, vocab, table=table, configuration=ckpt["pipeline"])
        lines = [""] * len(raw)
        for i, hyp in zip(filled, run_translate(model, data, vocab, beam, length_penalty, max_tokens, device=device)):
            lines[i] = hyp
        if len(filled) < len(raw):
            click.echo(f"{input_path}: {len(raw) - len(filled)} blank line(s) left blank in the output", err=True)
    out = open(output_path, "w", encoding="utf-8") if output_path else sys.stdout
    for line in lines:
        out.write(line + "\n")
    if output_path:
        out.close()


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
def eval_(checkpoint: str, data_path: str, beam: int, length_penalty: float, max_tokens: int,
          output_path: str | None) -> None:
    """BLEU and chrF (sacrebleu, detokenized output against the raw `tgt_text`) on a split."""
    from .data import ParallelData
    from .decode import score
    from .decode import translate as run_translate
    from .train import load_checkpoint

    device = _device()
    try:
        model, vocab, ckpt = load_checkpoint(checkpoint, device)
        data = ParallelData(data_path, vocab)
    except (ValueError, FileNotFoundError) as e:
        raise click.ClickException(str(e)) from e
    _warn_signature(ckpt, data)
    hyps = run_translate(model, data, vocab, beam, length_penalty, max_tokens, device=device)
    if output_path:
        with open(output_path, "w", encoding="utf-8") as f:
            f.writelines(h + "\n" for h in hyps)
    result = score(hyps, data.references(data.keep))
    click.echo(f"BLEU {result['bleu']:.2f}  {result['bleu_signature']}")
    click.echo(f"chrF {result['chrf']:.2f}  {result['chrf_signature']}")


@cli.command()
def env() -> None:
    """Print the torch version, the device training would use, and what `auto` picks there."""
    import torch

    from .attention import flex_available

    cuda = torch.cuda.is_available()
    name = f"cuda ({torch.cuda.get_device_name()})" if cuda else "cpu"
    precision = "bf16" if cuda and torch.cuda.is_bf16_supported() else "fp32"
    kernel = "flex" if cuda and flex_available() else "math"
    click.echo(f"syntrain {__version__}, torch {torch.__version__}, device {name}; auto: precision {precision}, "
               f"Pascal attention kernel {kernel} (math while attention dropout is on)")


def main() -> None:
    """Entry point: bad input (a damaged split, a missing file) is one line and exit code 2."""
    from synprep.errors import InputError

    try:
        cli(standalone_mode=False)
    except click.exceptions.Exit as exit_:
        sys.exit(exit_.exit_code)
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except InputError as err:
        click.echo(f"syntrain: error: {err}", err=True)
        sys.exit(2)
