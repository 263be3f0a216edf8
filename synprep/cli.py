"""The `synprep` command line: parses options and calls the library, nothing more."""

from __future__ import annotations

import os
import sys

import click

from . import __version__
from .errors import InputError


def fail(message: str) -> None:
    """One line on stderr, exit code 2, no traceback."""
    click.echo(f"synprep: error: {' '.join(message.split())}", err=True)
    sys.exit(2)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="synprep")
def cli() -> None:
    """Dependency trees aligned with BPE sub-words for syntax-aware NMT."""


@cli.group()
def bpe() -> None:
    """Joint BPE with subword-nmt (learn codes, apply them)."""


def _vocab_names(prefix: str, inputs: tuple[str, ...]) -> list[str]:
    """vocab prefix + the input's language suffix (train.tok.en -> PREFIX.en), unique per input."""
    suffixes = [os.path.basename(p).rsplit(".", 1)[-1] if "." in os.path.basename(p) else str(i)
                for i, p in enumerate(inputs)]
    if len(set(suffixes)) != len(suffixes):
        suffixes = [str(i) for i in range(len(inputs))]
    return [f"{prefix}.{s}" for s in suffixes]


@bpe.command("learn")
@click.option("-i", "--input", "inputs", multiple=True, required=True, help="Tokenized text (repeat per language).")
@click.option("-o", "--output", required=True, help="Where to write the joint BPE codes.")
@click.option("-s", "--symbols", default=16000, show_default=True, help="Number of merge operations.")
@click.option("--vocab-prefix", default=None,
              help="Also write one vocabulary per input: PREFIX.<suffix of the input file>.")
@click.option("--min-frequency", default=2, show_default=True, help="Stop when no pair is this frequent.")
def bpe_learn(inputs: tuple[str, ...], output: str, symbols: int, vocab_prefix: str | None,
              min_frequency: int) -> None:
    """Learn joint BPE codes (subword-nmt learn-joint-bpe-and-vocab)."""
    from .bpe import learn_joint

    vocab_paths = _vocab_names(vocab_prefix, inputs) if vocab_prefix else None
    learn_joint(list(inputs), output, symbols, vocab_paths, min_frequency)
    written = ", ".join(vocab_paths) if vocab_paths else "no vocabularies"
    click.echo(f"wrote {output} ({symbols} merges max) and {written}", err=True)


@bpe.command("apply")
@click.option("-c", "--codes", required=True, help="BPE codes file.")
@click.option("-i", "--input", "input_path", default="-", show_default=True, help="Input text ('-' = stdin).")
@click.option("-o", "--output", default="-", show_default=True, help="Output ('-' = stdout).")
@click.option("--vocabulary", default=None, help="Vocabulary file: revert merges that produce rare pieces.")
@click.option("--vocabulary-threshold", type=int, default=None, help="Pieces rarer than this count as OOV.")
@click.option("--merges", type=int, default=-1, help="Use only the first N merges (default: all).")
@click.option("--separator", default="@@", show_default=True)
@click.option("--glossaries", multiple=True, help="Words/regexes never split (repeatable).")
def bpe_apply(codes: str, input_path: str, output: str, vocabulary: str | None,
              vocabulary_threshold: int | None, merges: int, separator: str, glossaries: tuple[str, ...]) -> None:
    """Apply BPE codes: byte-identical to `subword-nmt apply-bpe`, faster."""
    from .bpe import Bpe, apply_file, read_vocabulary

    vocab = read_vocabulary(vocabulary, vocabulary_threshold) if vocabulary else None
    if vocabulary_threshold is not None and vocabulary is None:
        raise click.UsageError("--vocabulary-threshold needs --vocabulary")
    apply_file(Bpe(codes, vocab, merges, separator, list(glossaries) or None), input_path, output)


@cli.command()
@click.option("--conllu", required=True, help="Input CoNLL-U ('-' = stdin; .gz/.xz accepted).")
@click.option("--bpe-codes", default=None, help="Joint BPE codes; without them sub-words = tokens.")
@click.option("--vocabulary", default=None, help="BPE vocabulary file (as for bpe apply).")
@click.option("--vocabulary-threshold", type=int, default=None)
@click.option("--features", "feature_spec", default="parents,transitions,labels", show_default=True,
              help="Comma-separated: parents,distances,transitions,labels.")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "arrow", "pascal", "transitions"]), default="jsonl",
              show_default=True, help="pascal: parent_mid per line; transitions: one sequence per line.")
@click.option("--root", type=click.Choice(["drop", "keep"]), default="drop", show_default=True,
              help="Root transition policy.")
@click.option("--non-projective", type=click.Choice(["drop", "lift", "keep"]), default="keep",
              show_default=True, help="drop: skip the sentence; lift: pseudo-projective; keep: transitions null.")
@click.option("--strip-subtypes", is_flag=True, help="compound:prt -> compound in labels and transitions.")
@click.option("-o", "--output", default="-", show_default=True, help="Output file ('-' = stdout).")
def align(conllu: str, bpe_codes: str | None, vocabulary: str | None, vocabulary_threshold: int | None,
          feature_spec: str, fmt: str, root: str, non_projective: str, strip_subtypes: bool, output: str) -> None:
    """Trees (+ BPE) -> one record per sentence with the contract's features."""
    from .align import FeatureConfig, align_file
    from .bpe import Bpe, read_vocabulary
    from .schema import parse_features

    try:
        features = parse_features(feature_spec)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--features") from None
    vocab = read_vocabulary(vocabulary, vocabulary_threshold) if vocabulary else None
    segmenter = Bpe(bpe_codes, vocab) if bpe_codes else None
    config = FeatureConfig(features, root, non_projective, strip_subtypes)
    summary = align_file(conllu, output, config, segmenter, fmt)
    dropped = sum(summary.rejected.values()) if summary.rejected else 0
    click.echo(f"aligned {summary.sentences} sentences: {summary.written} written, "
               f"{summary.non_projective} non-projective kept, {dropped} dropped (non-projective)", err=True)


def main() -> None:
    """Entry point: user errors become one line and exit code 2."""
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Exit as exit_:
        sys.exit(exit_.exit_code)
    except click.ClickException as err:
        command = err.ctx.command_path if getattr(err, "ctx", None) else "synprep"
        fail(f"{command}: {err.format_message()}")
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except InputError as err:
        fail(str(err))
    except BrokenPipeError:
        # `synprep ... | head`: the reader left; not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)


if __name__ == "__main__":
    main()
