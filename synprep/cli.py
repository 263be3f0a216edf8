"""The `synprep` command line: parses options and calls the library, nothing more."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shlex
import sys
from collections.abc import Callable
from typing import Any

import click

from . import __version__, options
from .clihelp import add_examples, verbosity_options
from .convert import ConvertArguments
from .errors import InputError, Interrupted, run_cli
from .logs import set_verbosity
from .outputs import check_outputs

log = logging.getLogger("synprep.cli")  # (not __name__: `python -m synprep.cli` runs it as __main__)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="synprep")
@verbosity_options
def cli(verbose: int, quiet: int) -> None:
    """Dependency trees aligned with BPE sub-words for syntax-aware NMT."""
    set_verbosity(verbose, quiet)


@cli.group()
def bpe() -> None:
    """Joint BPE with subword-nmt (learn codes, apply them)."""


class Finite(click.FloatRange):
    """A number in a range, never NaN or an infinity (click's FloatRange takes `nan`: no comparison refuses it)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:  # noqa: ANN401
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


class Declared(click.ParamType):
    """An option whose type and range an API function's declaration gives (`synprep.tables.parse_argument`):
    the command and the function refuse a value with one message."""

    def __init__(self, cls: type, name: str) -> None:
        import typing

        from .tables import has_type

        hint = typing.get_type_hints(cls)[name]
        self.cls, self.field_name = cls, name
        self.name = "number" if has_type(1.5, hint) else "integer" if has_type(1, hint) else "text"  # the metavar

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:  # noqa: ANN401
        from .tables import parse_argument

        try:
            return parse_argument(self.cls, self.field_name, value) if isinstance(value, str) else value
        except ValueError as err:  # the API function's message, word for word
            raise InputError(str(err)) from None


def _checked_by(check: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A click callback running `synprep.bpe.<check>` on the value: its error names the option."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        from . import bpe

        try:
            getattr(bpe, check)(value)
        except InputError as err:
            raise click.BadParameter(str(err), ctx, param) from None
        return value

    return callback


@bpe.command("learn")
@click.option("-i", "--input", "inputs", multiple=True, required=True,
              help="Tokenized text (repeat per language: joint codes; one side's files only: that side's codes).")
@click.option("-o", "--output", required=True, help="Where to write the BPE codes (learned on all inputs together).")
@click.option("-s", "--symbols", type=click.IntRange(min=1), default=16000, show_default=True,
              help="Number of merge operations.")
@click.option("--vocab-prefix", default=None,
              help="Also write one vocabulary per input: PREFIX.<suffix of the input file>.")
@click.option("--min-frequency", type=click.IntRange(min=1), default=2, show_default=True,
              help="Stop when no pair is this frequent.")
@click.option("-v", "--verbose", is_flag=True, help="Show subword-nmt's own progress and messages.")
@click.option("--scheme", type=click.Choice(["subword-nmt", "sentencepiece"]), default="subword-nmt",
              show_default=True, help="sentencepiece: learn a SentencePiece model on the files' tokens (-o: the "
                                      ".model file), as convert's [bpe] scheme = \"sentencepiece\" does.")
@click.option("--vocab-size", type=click.IntRange(min=8), default=8000, show_default=True,
              help="sentencepiece: pieces of the model.")
@click.option("--model-type", type=click.Choice(["unigram", "bpe"]), default="unigram", show_default=True,
              help="sentencepiece: the model learned.")
@click.option("--character-coverage", type=Finite(0.98, 1.0), default=1.0, show_default=True,
              help="sentencepiece: share of the characters the model covers.")
@click.option("--byte-fallback", is_flag=True, help="sentencepiece: unknown characters become byte pieces.")
def bpe_learn(inputs: tuple[str, ...], output: str, symbols: int, vocab_prefix: str | None,
              min_frequency: int, verbose: bool, scheme: str, vocab_size: int, model_type: str,
              character_coverage: float, byte_fallback: bool) -> None:
    """Learn BPE codes (subword-nmt learn-joint-bpe-and-vocab): joint codes from both languages' files, or
    separate codes per side (pipeline [bpe] joint = false) by running it once per side on that side's files.
    With --scheme sentencepiece: a SentencePiece model on the files' tokens instead."""
    if scheme == "sentencepiece":
        from .subwords.load import scheme_module

        scheme_module(scheme).learn_files(list(inputs), output, vocab_size, model_type, character_coverage,
                                          byte_fallback)
        log.info(f"wrote {output} (a SentencePiece {model_type} model, {vocab_size} pieces max)")
        return
    from .api import learn_bpe

    vocab_paths = learn_bpe(inputs, output, symbols, vocab_prefix=vocab_prefix, min_frequency=min_frequency,
                            verbose=verbose)
    written = ", ".join(vocab_paths) if vocab_paths else "no vocabularies"
    log.info(f"wrote {output} ({symbols} merges max) and {written}")


@bpe.command("apply")
@click.option("-c", "--codes", default=None, help="BPE codes file (subword-nmt).")
@click.option("--scheme", type=click.Choice(["subword-nmt", "sentencepiece", "hf-tokenizer"]), default="subword-nmt",
              show_default=True, help="sentencepiece / hf-tokenizer: cut each token of the input with --model.")
@click.option("--model", default=None, help="sentencepiece: a .model file; hf-tokenizer: a tokenizer.json or its "
                                            "folder.")
@click.option("-i", "--input", "input_path", default="-", show_default=True, help="Input text ('-' = stdin).")
@click.option("-o", "--output", default="-", show_default=True, help="Output ('-' = stdout).")
@click.option("--vocabulary", default=None, help="Vocabulary file: revert merges that produce rare pieces.")
@click.option("--vocabulary-threshold", type=click.IntRange(min=1), default=None,
              help="Pieces rarer than this count as OOV.")
@click.option("--merges", type=click.IntRange(min=-1), default=-1, help="Use only the first N merges (default: all).")
@click.option("--separator", default=options.BPE_SEPARATOR, show_default=True, callback=_checked_by("check_separator"),
              help="Marks a piece that continues (non-empty, no whitespace).")
@click.option("--glossaries", multiple=True, callback=_checked_by("check_glossaries"),
              help="Words/regexes never split (repeatable).")
def bpe_apply(codes: str | None, scheme: str, model: str | None, input_path: str, output: str,
              vocabulary: str | None, vocabulary_threshold: int | None, merges: int, separator: str,
              glossaries: tuple[str, ...]) -> None:
    """Apply BPE codes: byte-identical to `subword-nmt apply-bpe`, faster. With --scheme sentencepiece or
    hf-tokenizer: each space-separated token cut on its own by --model (as convert cuts them)."""
    from .api import apply_bpe
    from .bpe import apply_file

    if scheme != "subword-nmt":
        apply_file(_cutter(scheme, model, codes), input_path, output)
        return
    if codes is None:
        raise click.UsageError("give --codes (subword-nmt), or --scheme with --model")

    if vocabulary_threshold is not None and vocabulary is None:
        raise click.UsageError("--vocabulary-threshold needs --vocabulary")
    apply_bpe(codes, input_path, output, vocabulary=vocabulary, vocabulary_threshold=vocabulary_threshold,
              merges=merges, separator=separator, glossaries=glossaries)


def _cutter(scheme: str, model: str | None, codes: str | None):  # noqa: ANN202 (a subwords.TokenCutter)
    """The sentencepiece / hf-tokenizer model of --scheme/--model (usage errors: no model, BPE codes too)."""
    from .subwords.load import load_cutter, model_path

    if model is None or codes is not None:
        raise click.UsageError(f"--scheme {scheme} takes --model (a {scheme} model), not BPE codes")
    return load_cutter(scheme, model_path(scheme, model))


@cli.command()
@click.option("--conllu", required=True, help="Input CoNLL-U ('-' = stdin; .gz/.xz accepted).")
@click.option("--bpe-codes", default=None, help="Joint BPE codes; without them sub-words = tokens.")
@click.option("--scheme", type=click.Choice(["subword-nmt", "sentencepiece", "hf-tokenizer"]), default="subword-nmt",
              show_default=True, help="sentencepiece / hf-tokenizer: cut each token with --model instead of BPE.")
@click.option("--model", default=None, help="sentencepiece: a .model file; hf-tokenizer: a tokenizer.json or its "
                                            "folder.")
@click.option("--vocabulary", default=None, help="BPE vocabulary file (as for bpe apply).")
@click.option("--vocabulary-threshold", type=click.IntRange(min=1), default=None,
              help="With --vocabulary: split pieces seen fewer times in it (as for bpe apply).")
@click.option("--features", "feature_spec", default="parents,transitions,labels", show_default=True,
              help="Comma-separated feature groups: the per-sub-word groups declared in synprep/schema.py "
                   "(parents, dbsa, depth, ...), distances, transitions, labels; a wrong name lists them all.")
@click.option("--format", "fmt", type=click.Choice(options.ALIGN_FORMATS),
              default="jsonl", show_default=True,
              help="Line formats: pascal = parent_mid, transitions = the sequence, text = the sub-words "
                   "(tokens without codes), one sentence per line.")
@click.option("--root", type=click.Choice(options.ROOT_POLICIES), default="drop", show_default=True,
              help="Root transition policy.")
@click.option("--non-projective", type=click.Choice(options.NON_PROJECTIVE_POLICIES), default="keep",
              show_default=True, help="drop: skip the sentence; lift: pseudo-projective; keep: transitions null.")
@click.option("--strip-subtypes", is_flag=True, help="compound:prt -> compound in labels and transitions.")
@click.option("-o", "--output", default="-", show_default=True, help="Output file ('-' = stdout).")
@click.option("--workers", type=click.IntRange(min=0), default=0,
              help="Processes (default 0 = all cores); the output is the same.")
def align(conllu: str, bpe_codes: str | None, scheme: str, model: str | None, vocabulary: str | None,
          vocabulary_threshold: int | None, feature_spec: str, fmt: str, root: str, non_projective: str,
          strip_subtypes: bool, output: str, workers: int) -> None:
    """Trees (+ BPE) -> one record per sentence with the contract's features."""
    from .align import align_file
    from .bpe import Bpe, read_vocabulary
    from .featurize import FeatureConfig
    from .schema import parse_features

    try:
        features = parse_features(feature_spec)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--features") from None
    vocab = read_vocabulary(vocabulary, vocabulary_threshold) if vocabulary else None
    segmenter = Bpe(bpe_codes, vocab) if bpe_codes else None
    if scheme != "subword-nmt":
        segmenter = _cutter(scheme, model, bpe_codes)
        if "transitions" in features and segmenter.marker_kind == "none":
            raise click.BadParameter(f"transitions: the pieces of {model} carry no marker (neither Metaspace/ByteLevel "
                                     "nor WordPiece), so token ends cannot be read from them", param_hint="--features")
    config = FeatureConfig(features, root, non_projective, strip_subtypes)
    from .parallel import default_workers

    summary = align_file(conllu, output, config, segmenter, fmt, workers or default_workers())
    dropped = sum(summary.rejected.values()) if summary.rejected else 0
    reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(summary.rejected.items()) if n)
    log.info(f"aligned {summary.sentences} sentences: {summary.written} written, "
               f"{summary.non_projective} non-projective kept, {dropped} dropped"
               + (f" ({reasons})" if dropped else ""))


@cli.command()
@click.option("--backend", type=click.Choice(options.PARSER_BACKENDS), required=True,
              help="Parser library (docs/synprep.md: models and extras of each).")
@click.option("--model", default=None, help="UDPipe model file (udpipe, spacy-udpipe) or spaCy pipeline name/path.")
@click.option("--model-dir", default=None, help="stanza: local model folder (nothing is downloaded).")
@click.option("--lang", default=None, help="Language code (stanza, spacy-udpipe).")
@click.option("-i", "--input", "input_path", default="-", show_default=True,
              help="One sentence per line ('-' = stdin; .gz/.xz accepted).")
@click.option("-o", "--output", default="-", show_default=True, help="CoNLL-U output ('-' = stdout).")
@click.option("--pretokenized", is_flag=True, help="Input is tokenized (space-separated): keep the tokens.")
@click.option("--workers", type=click.IntRange(min=0), default=0, help="Processes (default 0: all cores).")
@click.option("--batch-size", type=click.IntRange(min=1), default=64, show_default=True, help="Lines per task.")
@click.option("--max-chars", type=click.IntRange(min=1), default=options.MAX_LINE_CHARS, show_default=True,
              help="Longer lines are not parsed: an empty sentence with `# skipped = ...` keeps the alignment.")
def parse(backend: str, model: str | None, model_dir: str | None, lang: str | None, input_path: str, output: str,
          pretokenized: bool, workers: int, batch_size: int, max_chars: int) -> None:
    """Parse text into CoNLL-U: exactly one sentence per input line, in order."""
    from .api import parse as parse_text

    summary = parse_text(input_path, output, backend, model=model, model_dir=model_dir, lang=lang,
                         pretokenized=pretokenized, workers=workers, batch_size=batch_size, max_chars=max_chars)
    log.info(f"parsed {summary.lines} lines ({summary.words} words; {summary.empty} empty, {summary.joined} "
               f"joined from several sentences, {summary.skipped} longer than {max_chars} characters) with {backend} "
               f"on {summary.workers} worker(s) in {summary.seconds:.1f}s ({summary.rate:.3g} sentences/s per worker "
               "while parsing)")


@cli.group()
def parser() -> None:
    """Parser models: training and evaluation."""


@parser.command("train")
@click.option("--backend", type=click.Choice(["udpipe", "spacy", "stanza"]), default="udpipe", show_default=True,
              help="Parser library to train a model for (udpipe: one model file; spacy, stanza: a folder).")
@click.option("--conllu", required=True, help="Training treebank (CoNLL-U; .gz/.xz accepted).")
@click.option("--heldout", default=None, help="Held-out CoNLL-U: scored at the end (UPOS/UAS/LAS); spaCy, stanza "
                                              "and UDPipe's default options also use it for early stopping.")
@click.option("-o", "--output", required=True, help="Model file (udpipe) or folder (spacy, stanza) to write.")
@click.option("--preset", type=click.Choice(options.UDPIPE_PRESETS), default="default", show_default=True,
              help="udpipe: tiny (seconds, tests) < small (minutes on a dev set) < medium (the shared en/de "
                   "models' options) < default (UDPipe's); spacy: tiny or default; stanza: tiny, small or default.")
@click.option("--tokenizer-options", default=None, help="udpipe: replace the preset's tokenizer options "
                                                         "(UDPipe syntax, `none`: no tokenizer).")
@click.option("--tagger-options", default=None, help="udpipe: replace the preset's tagger options.")
@click.option("--parser-options", default=None, help="udpipe: replace the preset's parser options.")
@click.option("--set", "settings", multiple=True, help="spacy: KEY=VALUE configuration override; stanza: "
                                                        "PROCESSOR.OPTION=VALUE (tokenize, pos, depparse), "
                                                        "tokenize=none: no tokenizer (repeatable).")
@click.option("--lang", default=None, help="spacy, stanza: language code (default: from the file name, "
                                           "en_ewt-ud-train.conllu -> en).")
@click.option("--max-minutes", type=Finite(min=0), default=None, help="spacy: training time budget.")
@click.option("--allow-no-spaceafter", is_flag=True,
              help="Train even when a treebank of a language written without spaces has no SpaceAfter=No.")
@click.option("-v", "--verbose", is_flag=True, help="Show the trainer's own log.")
def parser_train(backend: str, conllu: str, heldout: str | None, output: str, preset: str,
                 tokenizer_options: str | None, tagger_options: str | None, parser_options: str | None,
                 settings: tuple[str, ...], lang: str | None, max_minutes: float | None, allow_no_spaceafter: bool,
                 verbose: bool) -> None:
    """Train a parser (UDPipe 1 tokenizer+tagger+parser, a spaCy tagger+parser, or stanza tokenizer+tagger+parser)
    from CoNLL-U."""
    from .parse.quality import score_and_record
    from .parse.train import check_backend_options, check_treebank, train_udpipe
    from .textio import rereadable

    check_backend_options(backend, {"--tokenizer-options": tokenizer_options, "--tagger-options": tagger_options,
                                    "--parser-options": parser_options, "--set": settings, "--lang": lang,
                                    "--max-minutes": max_minutes})
    check_outputs({"-o": output}, {"the treebank (--conllu)": conllu, "the held-out treebank (--heldout)": heldout})
    with contextlib.ExitStack() as stack:  # a named pipe or <(command) is copied once: each input is read twice
        treebank, held = (stack.enter_context(rereadable(path)) for path in (conllu, heldout))
        warning = check_treebank(treebank, allow_no_spaceafter)
        if warning:
            log.warning(warning)
        if backend == "stanza":
            from .parse.train_spacy import guess_lang, parse_overrides
            from .parse.train_stanza import stanza_settings, train_stanza

            lang = lang or guess_lang(conllu)
            stanza_settings(preset, parse_overrides(settings))  # refuses a bad preset or option before any work
            seconds = train_stanza(treebank, output, preset, held, lang, parse_overrides(settings),
                                   quiet=not verbose, progress=sys.stderr)
            spec: dict[str, object] = {"backend": "stanza", "model_dir": output, "lang": lang}
        elif backend == "spacy":
            from .parse.train_spacy import SPACY_PRESETS, guess_lang, parse_overrides, train_spacy

            if preset not in SPACY_PRESETS:
                raise click.UsageError(f"--preset {preset} is a UDPipe preset; spacy has {', '.join(SPACY_PRESETS)}")
            seconds = train_spacy(treebank, output, preset, held, lang or guess_lang(conllu),
                                  parse_overrides(settings), quiet=not verbose, max_minutes=max_minutes)
            spec = {"backend": "spacy", "model": output}
        else:
            chosen = {"tokenizer": tokenizer_options, "tagger": tagger_options, "parser": parser_options}
            seconds = train_udpipe(treebank, output, preset, held, quiet=not verbose, options=chosen,
                                   progress=sys.stderr)
            spec = {"backend": "udpipe", "model": output}
        log.info(f"trained {backend} model {output} ({preset} preset) in {seconds:.1f}s")
        model_path = os.path.join(output, str(spec["lang"])) if backend == "stanza" else output
        scores, warning = score_and_record(spec, model_path, preset, held, seconds, heldout)
        for score in scores:
            log.info(f"held-out {heldout}: {score.format()}")
        if warning:
            log.warning(f"synprep: {warning}")


@parser.command("eval")
@click.option("--backend", type=click.Choice(options.PARSER_BACKENDS), default=None,
              help="Default: spacy for a folder, udpipe for a file.")
@click.option("--model", default=None, help="Model file (udpipe, spacy-udpipe) or pipeline (spacy).")
@click.option("--model-dir", default=None, help="stanza model folder.")
@click.option("--lang", default=None, help="Language code (stanza, spacy-udpipe).")
@click.option("--conllu", required=True, help="Gold treebank (CoNLL-U).")
@click.option("--mode", type=click.Choice(["both", "gold", "raw"]), default="both", show_default=True,
              help="gold: parse the gold words; raw: parse each sentence's text (words aligned by characters).")
def parser_eval(backend: str | None, model: str | None, model_dir: str | None, lang: str | None, conllu: str,
                mode: str) -> None:
    """UPOS, UAS and LAS of a parser on a gold treebank, from gold tokenization and from raw text."""
    from .parse.evaluate import MODES, evaluate_model

    backend = backend or ("stanza" if model_dir else "spacy" if model and os.path.isdir(model) else "udpipe")
    spec = {"backend": backend, "model": model, "model_dir": model_dir, "lang": lang}
    for scores in evaluate_model(spec, conllu, MODES if mode == "both" else (mode,)):
        click.echo(scores.format())
        if scores.mismatched:
            log.info(f"  {len(scores.mismatched)} sentences with other characters than the gold text "
                       f"(not aligned), e.g. {scores.mismatched[0]}")


@cli.command("filter")
@click.option("--src", "src_path", required=True, help="Source side, one sentence per line (.gz/.xz accepted).")
@click.option("--tgt", "tgt_path", required=True, help="Target side, line-aligned with --src.")
@click.option("--src-lang", required=True, help="Source language, ISO 639-1 (e.g. en).")
@click.option("--tgt-lang", required=True, help="Target language, ISO 639-1 (e.g. de).")
@click.option("-o", "--output-dir", required=True, help="Folder for the kept sides, ids and rejected.tsv.")
@click.option("--langid", type=click.Choice([*options.LANGID_BACKENDS, "none"]), default=options.DEFAULT_LANGID,
              show_default=True, help="Language-ID backend (py3langid: faster than langdetect and more accurate, "
                                      "docs/langid.md); none: no language checks.")
@click.option("--langid-languages", default=None,
              help="Comma-separated candidate languages for the identifier (default: the backend's set).")
@click.option("--langid-min-letters", type=click.IntRange(min=0), default=0, show_default=True,
              help="Sides with fewer letters skip the language check (0: check all).")
@click.option("--min-len", type=click.IntRange(min=0), default=1, show_default=True, help="Min tokens per side.")
@click.option("--max-len", type=click.IntRange(min=1), default=80, show_default=True, help="Max tokens per side.")
@click.option("--max-ratio", type=Finite(min=1), default=3.0, show_default=True,
              help="Max token-count ratio longer/shorter side.")
@click.option("--max-chars", type=click.IntRange(min=1), default=options.MAX_LINE_CHARS, show_default=True,
              help="Max characters per side (longer lines are rejected first: bounded work per line).")
@click.option("--segmentation", type=click.Choice(options.SEGMENTATIONS), default="auto", show_default=True,
              help="Token counts: auto (a character rule for ja, zh, th, lo, km, my; whitespace elsewhere) or "
                   "whitespace (input tokenized beforehand); docs/languages.md.")
@click.option("--workers", type=click.IntRange(min=0), default=0, help="Processes (default 0: all cores).")
@click.option("--overwrite", is_flag=True, help="Write into a non-empty output folder, replacing its output files.")
def filter_command(src_path: str, tgt_path: str, src_lang: str, tgt_lang: str, output_dir: str, langid: str,
                   langid_languages: str | None, langid_min_letters: int, min_len: int, max_len: int,
                   max_ratio: float, max_chars: int, segmentation: str, workers: int, overwrite: bool) -> None:
    """Clean a parallel corpus: keep or reject (one counted reason) every pair; output identical for any --workers."""
    from .filter import FilterSettings, filter_files

    languages = tuple(c for c in langid_languages.split(",") if c.strip()) if langid_languages else None
    try:
        settings = FilterSettings(src_lang, tgt_lang, min_len, max_len, max_ratio,
                                  None if langid == "none" else langid, languages, langid_min_letters, max_chars,
                                  segmentation)
        summary = filter_files(src_path, tgt_path, output_dir, settings, workers or None, overwrite=overwrite)
    except ValueError as err:
        raise click.UsageError(str(err)) from None
    click.echo(summary.format())


@cli.command()
@click.argument("pipeline_file")
@click.option("--output", default=None, help="Output folder (overrides the pipeline's `output`).")
@click.option("--shard-size", type=Declared(ConvertArguments, "shard_size"), default=None,
              help="Input pairs per shard (overrides `shard_size`).")
@click.option("--workers", type=Declared(ConvertArguments, "workers"), default=0,
              help="Processes (default 0 = all cores); same shards.")
@click.option("--engine", type=click.Choice(options.ENGINES), default="local", show_default=True,
              help="local: worker processes on this machine; ray: a Ray cluster (docs/scale.md).")
@click.option("--ray-address", default=None, help="Existing Ray cluster (default: start a local one).")
@click.option("--resume", is_flag=True, help="Continue an interrupted run into the same output folder.")
@click.option("--overwrite", is_flag=True, help="Delete an existing output folder made by convert first.")
@click.option("--compression", type=click.Choice(options.COMPRESSIONS), default=None,
              help="Shard compression (overrides the pipeline's `compression`; default none: memory-mappable).")
@click.option("--keep-work", is_flag=True,
              help="Keep OUT/.work (parsed CoNLL-U, tokens) after a finished run; by default it is removed.")
@click.option("--dedupe/--no-dedupe", default=True, show_default=True,
              help="Parse each distinct sentence of a side once and reuse its tree (same shards either way).")
@click.option("--parse-cache", default=None, metavar="DIR",
              help="Parse cache folder shared by converts (overrides [parse] cache): sentences an earlier convert "
                   "parsed with the same parser are not parsed again (same shards).")
@click.option("--no-cache", is_flag=True,
              help="Use no cache in this convert: neither the parse cache nor the stage caches beside it.")
def convert(pipeline_file: str, output: str | None, shard_size: int | None, workers: int, engine: str,
            ray_address: str | None, resume: bool, overwrite: bool, compression: str | None, keep_work: bool,
            dedupe: bool, parse_cache: str | None, no_cache: bool) -> None:
    """Convert a whole corpus (pipeline TOML) into Arrow shards: filter, parse, BPE, features."""
    from .api import convert as convert_pipeline
    from .convert.converter import WorkKept
    from .processes import Terminated

    again = shlex.join(["synprep", *(arg for arg in sys.argv[1:] if arg not in ("--overwrite", "--resume"))])
    try:
        result = convert_pipeline(pipeline_file, output, workers=workers, shard_size=shard_size, engine=engine,
                                  ray_address=ray_address, resume=resume, overwrite=overwrite,
                                  compression=compression, keep_work=keep_work, dedupe=dedupe,
                                  parse_cache=parse_cache, cache=not no_cache)
    except KeyboardInterrupt as err:  # Ctrl-C, SIGTERM, SIGHUP
        why = f"stopped by {err}" if isinstance(err, Terminated) else "interrupted"
        raise Interrupted(f"{why}; the finished pieces are kept: continue with {again} --resume",
                          getattr(err, "exit_code", 130)) from None
    except WorkKept as err:
        raise InputError(f"{err}; the finished pieces are kept: continue with {again} --resume") from None
    click.echo(result.summary)


@cli.group()
def cache() -> None:
    """The parse cache that converts share (`synprep convert --parse-cache DIR`, `[parse] cache`), with the stage
    caches beside the parses (filter, bpe, features)."""


@cache.command("info")
@click.argument("folder")
def cache_info(folder: str) -> None:
    """Entries, size, parsers and stages of a parse cache."""
    from .convert.parse_cache import cache_info, format_info

    click.echo(format_info(cache_info(folder)))


@cache.command("verify")
@click.argument("folder")
@click.option("--repair", is_flag=True, help="Delete the damaged entries (a convert parses them again).")
def cache_verify(folder: str, repair: bool) -> None:
    """Check a parse cache: SQLite's integrity check, and every entry decodes and matches its digest (exit 1 if
    not)."""
    from .convert.parse_cache import format_verify, verify_cache

    report = verify_cache(folder, repair)
    click.echo(format_verify(report))
    if report["integrity"] or report["damaged"] > report["deleted"] or (report["totals"] and not repair):
        sys.exit(1)


@cache.command("prune")
@click.argument("folder")
@click.option("--max-gb", type=Finite(min=0), default=None,
              help="Delete the least recently used entries until the cache holds at most this much.")
@click.option("--parser", "parser_id", default=None, help="Delete every entry of this parser (its id or digest "
                                                           "prefix, from `synprep cache info`) or stage (filter, "
                                                           "bpe, features).")
def cache_prune(folder: str, max_gb: float | None, parser_id: str | None) -> None:
    """Make a parse cache smaller (the file shrinks: VACUUM)."""
    from .convert.parse_cache import format_prune, prune_cache

    if max_gb is None and parser_id is None:
        raise click.UsageError("give --max-gb and/or --parser")
    report = prune_cache(folder, max_gb, parser_id)
    click.echo(format_prune(report))


@cli.command()
@click.option("--pairs", type=click.IntRange(min=1), default=5000, show_default=True, help="Pairs in all splits.")
@click.option("--seed", type=int, default=1, show_default=True, help="Same seed, same corpus.")
@click.option("-o", "--output", required=True, help="Output folder (text, gold CoNLL-U, pipeline.toml).")
@click.option("--max-depth", type=click.IntRange(min=0), default=2, show_default=True,
              help="Nesting depth of relative/complement clauses and PPs inside noun phrases.")
@click.option("--non-projective-rate", type=Finite(0, 1), default=0.05, show_default=True,
              help="Share of pairs with an extraposed relative clause (non-projective on both sides).")
@click.option("--bpe-symbols", type=click.IntRange(min=1), default=300, show_default=True,
              help="BPE merges in the written pipeline.toml.")
@click.option("--lengths", type=click.Choice(["short", "wmt"]), default="short", show_default=True,
              help="Sentence lengths: short (one clause, ~12 tokens) or wmt (mean ~25 tokens, a tail to 100).")
@click.option("--vocabulary", type=click.Choice(["lexicon", "zipf"]), default="lexicon", show_default=True,
              help="Words: lexicon (~100 per side) or zipf (Zipfian frequencies, distinct words growing with "
                   "the corpus as in real text).")
def synth(pairs: int, seed: int, output: str, max_depth: int, non_projective_rate: float, bpe_symbols: int,
          lengths: str, vocabulary: str) -> None:
    """Synthetic en-like/de-like parallel corpus with gold trees (90/5/5 train/valid/test)."""
    from .synth import SynthConfig, write_corpus

    summary = write_corpus(output, pairs, seed, SynthConfig(max_depth, non_projective_rate, lengths=lengths,
                                                                vocabulary=vocabulary),
                           bpe_symbols)
    log.info(summary.format() + f" to {output}; next: synprep convert {os.path.join(output, 'pipeline.toml')}")


@cli.command("inspect")
@click.argument("path")
@click.option("--show", type=click.IntRange(min=0), default=0, help="Render N examples in the terminal.")
@click.option("--html", "html_path", default=None, help="Write a self-contained HTML report here.")
@click.option("--examples", type=click.IntRange(min=0), default=3, show_default=True,
              help="Examples in the HTML report.")
@click.option("--stats/--no-stats", "print_stats", default=None,
              help="Print the statistics to stdout  [default: --stats, but --no-stats with --html]")
def inspect_command(path: str, show: int, html_path: str | None, examples: int, print_stats: bool | None) -> None:
    """Statistics of a shard directory (manifest.json + part-*.arrow) or a CoNLL-U file."""
    from .inspect import compute_stats, format_stats, open_dataset, pick_examples, render_example

    dataset = open_dataset(path)
    stats = compute_stats(dataset)
    if print_stats or (print_stats is None and not html_path):  # the HTML report holds them already
        click.echo(format_stats(stats))
    for row in pick_examples(dataset, show) if show else []:
        click.echo(render_example(row))
    if html_path:
        from .report import write_html

        write_html(html_path, stats, pick_examples(dataset, examples, max_tokens=24))
        log.info(f"wrote {html_path}")


@cli.command()
@click.argument("split_path", metavar="DATASET_SPLIT")
@click.option("-o", "--output", required=True, help="Folder for summary.json and one .ids/.tsv per subset.")
@click.option("--side", type=click.Choice(["src", "tgt", "both"]), default="both", show_default=True,
              help="Which side's trees to search for the phenomena.")
@click.option("--phenomena", default=None,
              help="Comma-separated rule names (default: all; built in: particle,reflexive,stranding).")
@click.option("--rules", "rules_path", default=None, help="TOML file of extra [[rule]] tables (docs/synprep.md).")
def challenge(split_path: str, output: str, side: str, phenomena: str | None, rules_path: str | None) -> None:
    """Syntactic challenge sets: the pairs of a converted split whose trees contain each phenomenon."""
    from .challenge import format_summary, load_rules, select_rules, write_challenge

    extra = load_rules(rules_path) if rules_path else ()
    names = [n.strip() for n in phenomena.split(",") if n.strip()] if phenomena else None
    rules = select_rules(names, extra)
    sides = ("src", "tgt") if side == "both" else (side,)
    summary = write_challenge(split_path, output, sides, rules)
    log.info(format_summary(summary))
    log.info(f"wrote {os.path.join(output, 'summary.json')}")


@cli.command()
@click.argument("directory")
@click.option("--max-failures", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Failures listed at most (all are counted).")
@click.option("--workers", type=click.IntRange(min=0), default=0,
              help="Processes, one shard each at a time (default 0: all cores); the output is the same.")
def validate(directory: str, max_failures: int, workers: int) -> None:
    """Check every contract invariant on every row of a shard directory; exit 1 on failures."""
    from .parallel import default_workers
    from .validate import validate_directory

    report, manifest = validate_directory(directory, max_failures, workers or default_workers())
    for failure in report.failures:
        click.echo(failure.format())
    click.echo(report.summary(manifest), err=not report.ok)
    if not report.ok:
        sys.exit(1)


@cli.command()
@click.argument("split_path", metavar="SPLIT")
@click.option("-o", "--output", required=True, help="Output folder: one subfolder per format.")
@click.option("--format", "formats", multiple=True,
              help="Comma-separated or repeated, each once: pascal (e-bug/pascal), dbsa (de9uch1/dbsa), nematus "
                   "(borgr/nematus). Default: every one whose reader reads the dataset's pieces (all three for "
                   "subword-nmt; pascal,dbsa for sentencepiece and hf-tokenizer pieces).")
@click.option("--name", default=None, help="File name prefix (default: the split's name, e.g. train).")
@click.option("--dbsa-release", type=click.Choice(["current", "2020"]), default="current", show_default=True,
              help="DBSA .dep heads: current = de9uch1/dbsa master b0cdef6 (0-based, format since b96fb46); "
                   "2020 = commits 43eef77/0e9dd5c (1-based).")
def export(split_path: str, output: str, formats: tuple[str, ...], name: str | None, dbsa_release: str) -> None:
    """A split (shard folder) in the input formats of the papers' released trainers, with BPE codes, references
    and a README of commands per format (docs/synprep.md, docs/handoff.md)."""
    from .export import EXPORT_FORMATS, check_formats, export_split, summary_line

    given = ",".join(formats)  # --format a,b and --format a --format b alike
    chosen = tuple(f.strip() for f in given.split(",") if f.strip()) if formats else None
    try:
        check_formats(EXPORT_FORMATS if chosen is None else chosen, dbsa_release)
    except ValueError as err:
        raise click.BadParameter(f"{err}, got {given!r}", param_hint="--format") from None
    log.info(summary_line(export_split(split_path, output, chosen, name, dbsa_release), output))


EXAMPLES = {
    "bpe learn": "synprep bpe learn --symbols 16000 -i train.tok.en -i train.tok.de -o codes.bpe --vocab-prefix vocab",
    "bpe apply": "synprep bpe apply --codes codes.bpe < tokens.txt > tokens.bpe",
    "align": "synprep align --conllu train.de.conllu --bpe-codes codes.bpe --format pascal -o train.de.pascal",
    "parse": "synprep parse --backend udpipe --model english-ewt.udpipe -i train.en -o train.en.conllu",
    "parser train": "synprep parser train --conllu treebank.conllu --heldout dev.conllu -o my.udpipe",
    "parser eval": "synprep parser eval --model my.udpipe --conllu test.conllu",
    "filter": "synprep filter --src train.en --tgt train.de --src-lang en --tgt-lang de -o filtered/",
    "convert": "synprep convert pipelines/sample.toml --output out/sample",
    "cache info": "synprep cache info parse-cache/",
    "cache verify": "synprep cache verify parse-cache/ --repair",
    "cache prune": "synprep cache prune parse-cache/ --max-gb 5",
    "synth": "synprep synth --pairs 300 --seed 1 -o synth/",
    "inspect": "synprep inspect out/sample/train --show 3",
    "challenge": "synprep challenge out/sample/test -o challenge/",
    "validate": "synprep validate out/sample/train",
    "export": "synprep export out/sample/train -o export/ --format pascal,dbsa",
}
add_examples(cli, "synprep", EXAMPLES)


def main() -> None:
    """Entry point: user errors become one line `synprep: error: ...` and exit code 2."""
    run_cli(cli, "synprep", ending_signals=True)


if __name__ == "__main__":
    main()
