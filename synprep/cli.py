"""The `synprep` command line: parses options and calls the library, nothing more."""

from __future__ import annotations

import logging
import shlex
import sys
from collections.abc import Callable
from typing import Any

import click

from . import __version__
from .arguments import declared
from .clihelp import add_examples, verbosity_options
from .errors import InputError, Interrupted, run_cli
from .logs import set_verbosity
from .subwords import registry

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


def _learn_options(command: Callable) -> Callable:
    """The `bpe learn` options the learning schemes declare (`Scheme.learn_options`), in their order."""
    for scheme in reversed(registry.schemes()):
        for decls, attrs in reversed(scheme.learn_options):
            command = click.option(*decls, **attrs)(command)
    return command


def _model_help() -> str:
    """`--model`'s help: what it is for each scheme with a model file (`Scheme.model_help`)."""
    return "; ".join(f"{scheme.name}: {scheme.model_help}" for scheme in registry.schemes() if scheme.model_help) + "."


@bpe.command("learn")
@declared("synprep bpe learn", "inputs", "-i", required=True,
          help="Tokenized text (repeat per language: joint codes; one side's files only: that side's codes).")
@declared("synprep bpe learn", "output", "-o", required=True,
          help="Where to write the BPE codes (learned on all inputs together).")
@declared("synprep bpe learn", "symbols", "-s", show_default=True, help="Number of merge operations.")
@declared("synprep bpe learn", "vocab_prefix",
          help="Also write one vocabulary per input: PREFIX.<suffix of the input file>.")
@declared("synprep bpe learn", "min_frequency", show_default=True, help="Stop when no pair is this frequent.")
@declared("synprep bpe learn", "verbose", "-v", help="Show subword-nmt's own progress and messages.")
@click.option("--scheme", type=click.Choice([s.name for s in registry.schemes() if s.learns]),
              default=registry.DEFAULT, show_default=True,
              help="sentencepiece: learn a SentencePiece model on the files' tokens (-o: the .model file), as "
                   "convert's [bpe] scheme = \"sentencepiece\" does.")
@_learn_options
def bpe_learn(inputs: tuple[str, ...], output: str, symbols: int, vocab_prefix: str | None,
              min_frequency: int, verbose: bool, scheme: str, **scheme_options: Any) -> None:
    """Learn BPE codes (subword-nmt learn-joint-bpe-and-vocab): joint codes from both languages' files, or
    separate codes per side (pipeline [bpe] joint = false) by running it once per side on that side's files.
    With --scheme sentencepiece: a SentencePiece model on the files' tokens instead."""
    if not registry.get(scheme).bpe_codes:
        from .subwords.load import scheme_module

        scheme_module(scheme)  # its library checked: a one-line error without it
        log.info(registry.get(scheme).learn_files(list(inputs), output, scheme_options))
        return
    from .api import learn_bpe

    vocab_paths = learn_bpe(inputs, output, symbols, vocab_prefix=vocab_prefix, min_frequency=min_frequency,
                            verbose=verbose)
    written = ", ".join(vocab_paths) if vocab_paths else "no vocabularies"
    log.info(f"wrote {output} ({symbols} merges max) and {written}")


@bpe.command("apply")
@declared("synprep bpe apply", "codes", "-c", help="BPE codes file (subword-nmt).")
@click.option("--scheme", type=click.Choice(registry.names()), default=registry.DEFAULT,
              show_default=True, help="sentencepiece / hf-tokenizer / characters: cut each token of the input with "
                                      "the scheme (and its --model).")
@click.option("--model", default=None, help=_model_help())
@declared("synprep bpe apply", "input", "-i", show_default=True, help="Input text ('-' = stdin).")
@declared("synprep bpe apply", "output", "-o", show_default=True, help="Output ('-' = stdout).")
@declared("synprep bpe apply", "vocabulary", help="Vocabulary file: revert merges that produce rare pieces.")
@declared("synprep bpe apply", "vocabulary_threshold", help="Pieces rarer than this count as OOV.")
@declared("synprep bpe apply", "merges", help="Use only the first N merges (default: all).")
@declared("synprep bpe apply", "separator", show_default=True, callback=_checked_by("check_separator"),
          help="Marks a piece that continues (non-empty, no whitespace).")
@declared("synprep bpe apply", "glossaries", callback=_checked_by("check_glossaries"),
          help="Words/regexes never split (repeatable).")
def bpe_apply(codes: str | None, scheme: str, model: str | None, input: str, output: str,
              vocabulary: str | None, vocabulary_threshold: int | None, merges: int, separator: str,
              glossaries: tuple[str, ...]) -> None:
    """Apply BPE codes: byte-identical to `subword-nmt apply-bpe`, faster. With --scheme sentencepiece or
    hf-tokenizer: each space-separated token cut on its own by --model (as convert cuts them)."""
    from .api import apply_bpe
    from .bpe import apply_file

    if not registry.get(scheme).bpe_codes:
        apply_file(_cutter(scheme, model, codes), input, output)
        return
    if codes is None:
        raise click.UsageError("give --codes (subword-nmt), or --scheme with --model")

    if vocabulary_threshold is not None and vocabulary is None:
        raise click.UsageError("--vocabulary-threshold needs --vocabulary")
    apply_bpe(codes, input, output, vocabulary=vocabulary, vocabulary_threshold=vocabulary_threshold,
              merges=merges, separator=separator, glossaries=glossaries)


def _cutter(scheme: str, model: str | None, codes: str | None):  # noqa: ANN202 (a subwords.TokenCutter)
    """The cutter of --scheme/--model (usage errors: no model for a scheme with one, a model for one without,
    BPE codes too)."""
    from .subwords.load import cutter_of

    try:
        return cutter_of(scheme, model, codes)
    except InputError as err:
        raise click.UsageError(str(err)) from None


@cli.command()
@declared("synprep align", "conllu", required=True, help="Input CoNLL-U ('-' = stdin; .gz/.xz accepted).")
@declared("synprep align", "bpe_codes", help="Joint BPE codes; without them sub-words = tokens.")
@declared("synprep align", "scheme", show_default=True,
          help="sentencepiece / hf-tokenizer / characters: cut each token with the scheme (and its --model) instead "
               "of BPE.")
@declared("synprep align", "model", help=_model_help())
@declared("synprep align", "vocabulary", help="BPE vocabulary file (as for bpe apply).")
@declared("synprep align", "vocabulary_threshold",
          help="With --vocabulary: split pieces seen fewer times in it (as for bpe apply).")
@declared("synprep align", "features", show_default=True,
          help="Comma-separated feature groups: the per-sub-word groups declared in synprep/schema.py "
               "(parents, dbsa, depth, ...), distances, transitions, labels; a wrong name lists them all.")
@declared("synprep align", "fmt", show_default=True,
          help="Line formats: pascal = parent_mid, transitions = the sequence, text = the sub-words "
               "(tokens without codes), one sentence per line.")
@declared("synprep align", "root", show_default=True, help="Root transition policy.")
@declared("synprep align", "non_projective", show_default=True,
          help="drop: skip the sentence; lift: pseudo-projective; keep: transitions null.")
@declared("synprep align", "strip_subtypes", is_flag=True, help="compound:prt -> compound in labels and transitions.")
@declared("synprep align", "output", "-o", show_default=True, help="Output file ('-' = stdout).")
@declared("synprep align", "workers", help="Processes (default 0 = all cores); the output is the same.")
def align(conllu: str, bpe_codes: str | None, scheme: str, model: str | None, vocabulary: str | None,
          vocabulary_threshold: int | None, features: str, fmt: str, root: str, non_projective: str,
          strip_subtypes: bool, output: str, workers: int) -> None:
    """Trees (+ BPE) -> one record per sentence with the contract's features."""
    from .align import align as align_conllu

    log.info(align_conllu(conllu, output, bpe_codes=bpe_codes, scheme=scheme, model=model, vocabulary=vocabulary,
                          vocabulary_threshold=vocabulary_threshold, features=features, fmt=fmt, root=root,
                          non_projective=non_projective, strip_subtypes=strip_subtypes, workers=workers).text)


@cli.command()
@declared("synprep parse", "backend", required=True,
          help="Parser library (docs/synprep.md: models and extras of each).")
@declared("synprep parse", "model", help="UDPipe model file (udpipe, spacy-udpipe) or spaCy pipeline name/path.")
@declared("synprep parse", "model_dir", help="stanza: local model folder (nothing is downloaded).")
@declared("synprep parse", "lang", help="Language code (stanza, spacy-udpipe).")
@declared("synprep parse", "input", "-i", show_default=True,
          help="One sentence per line ('-' = stdin; .gz/.xz accepted).")
@declared("synprep parse", "output", "-o", show_default=True, help="CoNLL-U output ('-' = stdout).")
@declared("synprep parse", "pretokenized", help="Input is tokenized (space-separated): keep the tokens.")
@declared("synprep parse", "workers", help="Processes (default 0: all cores).")
@declared("synprep parse", "batch_size", show_default=True, help="Lines per task.")
@declared("synprep parse", "max_chars", show_default=True,
          help="Longer lines are not parsed: an empty sentence with `# skipped = ...` keeps the alignment.")
def parse(backend: str, model: str | None, model_dir: str | None, lang: str | None, input: str, output: str,
          pretokenized: bool, workers: int, batch_size: int, max_chars: int) -> None:
    """Parse text into CoNLL-U: exactly one sentence per input line, in order."""
    from .api import parse as parse_text

    summary = parse_text(input, output, backend, model=model, model_dir=model_dir, lang=lang,
                         pretokenized=pretokenized, workers=workers, batch_size=batch_size, max_chars=max_chars)
    log.info(f"parsed {summary.lines} lines ({summary.words} words; {summary.empty} empty, {summary.joined} "
               f"joined from several sentences, {summary.skipped} longer than {max_chars} characters) with {backend} "
               f"on {summary.workers} worker(s) in {summary.seconds:.1f}s ({summary.rate:.3g} sentences/s per worker "
               "while parsing)")


@cli.group()
def parser() -> None:
    """Parser models: training and evaluation."""


@parser.command("train")
@declared("synprep parser train", "backend", show_default=True,
          help="Parser library to train a model for (udpipe: one model file; spacy, stanza: a folder).")
@declared("synprep parser train", "conllu", required=True, help="Training treebank (CoNLL-U; .gz/.xz accepted).")
@declared("synprep parser train", "heldout", help="Held-out CoNLL-U: scored at the end (UPOS/UAS/LAS); spaCy, stanza "
                                                  "and UDPipe's default options also use it for early stopping.")
@declared("synprep parser train", "output", "-o", required=True,
          help="Model file (udpipe) or folder (spacy, stanza) to write.")
@declared("synprep parser train", "preset", show_default=True,
          help="udpipe: tiny (seconds, tests) < small (minutes on a dev set) < medium (the shared en/de "
               "models' options) < default (UDPipe's); spacy: tiny or default; stanza: tiny, small or default.")
@declared("synprep parser train", "tokenizer_options", help="udpipe: replace the preset's tokenizer options "
                                                            "(UDPipe syntax, `none`: no tokenizer).")
@declared("synprep parser train", "tagger_options", help="udpipe: replace the preset's tagger options.")
@declared("synprep parser train", "parser_options", help="udpipe: replace the preset's parser options.")
@declared("synprep parser train", "settings", help="spacy: KEY=VALUE configuration override; stanza: "
                                                   "PROCESSOR.OPTION=VALUE (tokenize, pos, depparse), "
                                                   "tokenize=none: no tokenizer (repeatable).")
@declared("synprep parser train", "lang", help="spacy, stanza: language code (default: from the file name, "
                                               "en_ewt-ud-train.conllu -> en).")
@declared("synprep parser train", "max_minutes", help="spacy: training time budget.")
@declared("synprep parser train", "allow_no_spaceafter", is_flag=True,
          help="Train even when a treebank of a language written without spaces has no SpaceAfter=No.")
@declared("synprep parser train", "verbose", "-v", is_flag=True, help="Show the trainer's own log.")
def parser_train(backend: str, conllu: str, heldout: str | None, output: str, preset: str,
                 tokenizer_options: str | None, tagger_options: str | None, parser_options: str | None,
                 settings: tuple[str, ...], lang: str | None, max_minutes: float | None, allow_no_spaceafter: bool,
                 verbose: bool) -> None:
    """Train a parser (UDPipe 1 tokenizer+tagger+parser, a spaCy tagger+parser, or stanza tokenizer+tagger+parser)
    from CoNLL-U."""
    from .api import parser_train as train_parser

    train_parser(conllu, output, backend=backend, heldout=heldout, preset=preset, tokenizer_options=tokenizer_options,
                 tagger_options=tagger_options, parser_options=parser_options, settings=settings, lang=lang,
                 max_minutes=max_minutes, allow_no_spaceafter=allow_no_spaceafter, verbose=verbose)


@parser.command("eval")
@declared("synprep parser eval", "backend", help="Default: spacy for a folder, udpipe for a file.")
@declared("synprep parser eval", "model", help="Model file (udpipe, spacy-udpipe) or pipeline (spacy).")
@declared("synprep parser eval", "model_dir", help="stanza model folder.")
@declared("synprep parser eval", "lang", help="Language code (stanza, spacy-udpipe).")
@declared("synprep parser eval", "conllu", required=True, help="Gold treebank (CoNLL-U).")
@declared("synprep parser eval", "mode", show_default=True,
          help="gold: parse the gold words; raw: parse each sentence's text (words aligned by characters).")
def parser_eval(backend: str | None, model: str | None, model_dir: str | None, lang: str | None, conllu: str,
                mode: str) -> None:
    """UPOS, UAS and LAS of a parser on a gold treebank, from gold tokenization and from raw text."""
    from .api import parser_eval as evaluate_parser

    result = evaluate_parser(conllu, model=model, backend=backend, model_dir=model_dir, lang=lang, mode=mode)
    for score in result.scores:
        click.echo(score.format())
        if score.mode in result.notes:
            log.info(result.notes[score.mode])


@cli.command("filter")
@declared("synprep filter", "src", required=True, help="Source side, one sentence per line (.gz/.xz accepted).")
@declared("synprep filter", "tgt", required=True, help="Target side, line-aligned with --src.")
@declared("synprep filter", "src_lang", required=True, help="Source language, ISO 639-1 (e.g. en).")
@declared("synprep filter", "tgt_lang", required=True, help="Target language, ISO 639-1 (e.g. de).")
@declared("synprep filter", "output_dir", "-o", required=True, help="Folder for the kept sides, ids and rejected.tsv.")
@declared("synprep filter", "langid", show_default=True,
          help="Language-ID backend (py3langid: faster than langdetect and more accurate, "
               "docs/langid.md); none: no language checks.")
@click.option("--langid-languages", default=None,
              help="Comma-separated candidate languages for the identifier (default: the backend's set).")
@declared("synprep filter", "langid_min_letters", show_default=True,
          help="Sides with fewer letters skip the language check (0: check all).")
@declared("synprep filter", "min_len", show_default=True, help="Min tokens per side.")
@declared("synprep filter", "max_len", show_default=True, help="Max tokens per side.")
@declared("synprep filter", "max_ratio", show_default=True, help="Max token-count ratio longer/shorter side.")
@declared("synprep filter", "max_chars", show_default=True,
          help="Max characters per side (longer lines are rejected first: bounded work per line).")
@declared("synprep filter", "segmentation", show_default=True,
          help="Token counts: auto (a character rule for ja, zh, th, lo, km, my; whitespace elsewhere) or "
               "whitespace (input tokenized beforehand); docs/languages.md.")
@declared("synprep filter", "workers", help="Processes (default 0: all cores).")
@declared("synprep filter", "overwrite", is_flag=True,
          help="Write into a non-empty output folder, replacing its output files.")
def filter_command(src: str, tgt: str, src_lang: str, tgt_lang: str, output_dir: str, langid: str,
                   langid_languages: str | None, langid_min_letters: int, min_len: int, max_len: int,
                   max_ratio: float, max_chars: int, segmentation: str, workers: int, overwrite: bool) -> None:
    """Clean a parallel corpus: keep or reject (one counted reason) every pair; output identical for any --workers."""
    from .filter import filter_corpus

    click.echo(filter_corpus(src, tgt, src_lang, tgt_lang, output_dir, langid=langid,
                             langid_languages=langid_languages, langid_min_letters=langid_min_letters,
                             min_len=min_len, max_len=max_len, max_ratio=max_ratio, max_chars=max_chars,
                             segmentation=segmentation, workers=workers, overwrite=overwrite).text)


@cli.command()
@click.argument("pipeline_file")
@declared("synprep convert", "output", help="Output folder (overrides the pipeline's `output`).")
@declared("synprep convert", "shard_size", help="Input pairs per shard (overrides `shard_size`).")
@declared("synprep convert", "workers", help="Processes (default 0 = all cores); same shards.")
@declared("synprep convert", "engine", show_default=True,
          help="local: worker processes on this machine; ray: a Ray cluster (docs/scale.md).")
@declared("synprep convert", "ray_address", help="Existing Ray cluster (default: start a local one).")
@declared("synprep convert", "resume", help="Continue an interrupted run into the same output folder.")
@declared("synprep convert", "overwrite", help="Delete an existing output folder made by convert first.")
@declared("synprep convert", "compression",
          help="Shard compression (overrides the pipeline's `compression`; default none: memory-mappable).")
@declared("synprep convert", "keep_work",
          help="Keep OUT/.work (parsed CoNLL-U, tokens) after a finished run; by default it is removed.")
@declared("synprep convert", "dedupe", show_default=True,
          help="Parse each distinct sentence of a side once and reuse its tree (same shards either way).")
@declared("synprep convert", "parse_cache", metavar="DIR",
          help="Parse cache folder shared by converts (overrides [parse] cache): sentences an earlier convert "
               "parsed with the same parser are not parsed again (same shards).")
@declared("synprep convert", "cache", show_default=True,
          help="--no-cache: use no cache in this convert, neither the parse cache nor the stage caches beside it.")
def convert(pipeline_file: str, output: str | None, shard_size: int | None, workers: int, engine: str,
            ray_address: str | None, resume: bool, overwrite: bool, compression: str | None, keep_work: bool,
            dedupe: bool, parse_cache: str | None, cache: bool) -> None:
    """Convert a whole corpus (pipeline TOML) into Arrow shards: filter, parse, BPE, features."""
    from .api import convert as convert_pipeline
    from .convert.converter import WorkKept
    from .processes import Terminated

    again = shlex.join(["synprep", *(arg for arg in sys.argv[1:] if arg not in ("--overwrite", "--resume"))])
    try:
        result = convert_pipeline(pipeline_file, output, workers=workers, shard_size=shard_size, engine=engine,
                                  ray_address=ray_address, resume=resume, overwrite=overwrite,
                                  compression=compression, keep_work=keep_work, dedupe=dedupe,
                                  parse_cache=parse_cache, cache=cache)
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
    from .api import cache_info as read_info

    click.echo(read_info(folder).text)


@cache.command("verify")
@click.argument("folder")
@declared("synprep cache verify", "repair", is_flag=True,
          help="Delete the damaged entries (a convert parses them again).")
def cache_verify(folder: str, repair: bool) -> None:
    """Check a parse cache: SQLite's integrity check, and every entry decodes and matches its digest (exit 1 if
    not)."""
    from .api import cache_verify as verify

    result = verify(folder, repair=repair)
    click.echo(result.text)
    if not result.ok:
        sys.exit(1)


@cache.command("prune")
@click.argument("folder")
@declared("synprep cache prune", "max_gb",
          help="Delete the least recently used entries until the cache holds at most this much.")
@declared("synprep cache prune", "parser", help="Delete every entry of this parser (its id or digest "
                                                   "prefix, from `synprep cache info`) or stage (filter, "
                                                   "bpe, features).")
def cache_prune(folder: str, max_gb: float | None, parser: str | None) -> None:
    """Make a parse cache smaller (the file shrinks: VACUUM)."""
    from .api import cache_prune as prune

    click.echo(prune(folder, max_gb=max_gb, parser=parser).text)


@cli.command()
@declared("synprep synth", "pairs", show_default=True, help="Pairs in all splits.")
@declared("synprep synth", "seed", show_default=True, help="Same seed, same corpus.")
@declared("synprep synth", "output", "-o", required=True, help="Output folder (text, gold CoNLL-U, pipeline.toml).")
@declared("synprep synth", "max_depth", show_default=True,
          help="Nesting depth of relative/complement clauses and PPs inside noun phrases.")
@declared("synprep synth", "non_projective_rate", show_default=True,
          help="Share of pairs with an extraposed relative clause (non-projective on both sides).")
@declared("synprep synth", "bpe_symbols", show_default=True, help="BPE merges in the written pipeline.toml.")
@declared("synprep synth", "lengths", show_default=True,
          help="Sentence lengths: short (one clause, ~12 tokens) or wmt (mean ~25 tokens, a tail to 100).")
@declared("synprep synth", "vocabulary", show_default=True,
          help="Words: lexicon (~100 per side) or zipf (Zipfian frequencies, distinct words growing with "
               "the corpus as in real text).")
def synth(pairs: int, seed: int, output: str, max_depth: int, non_projective_rate: float, bpe_symbols: int,
          lengths: str, vocabulary: str) -> None:
    """Synthetic en-like/de-like parallel corpus with gold trees (90/5/5 train/valid/test)."""
    from .synth import synth as write_synth

    log.info(write_synth(output, pairs=pairs, seed=seed, max_depth=max_depth, non_projective_rate=non_projective_rate,
                         bpe_symbols=bpe_symbols, lengths=lengths, vocabulary=vocabulary).text)


@cli.command("inspect")
@click.argument("path")
@declared("synprep inspect", "show", help="Render N examples in the terminal.")
@declared("synprep inspect", "html", help="Write a self-contained HTML report here.")
@declared("synprep inspect", "examples", show_default=True, help="Examples in the HTML report.")
@click.option("--stats/--no-stats", "stats", default=None,
              help="Print the statistics to stdout  [default: --stats, but --no-stats with --html]")
def inspect_command(path: str, show: int, html: str | None, examples: int, stats: bool | None) -> None:
    """Statistics of a shard directory (manifest.json + part-*.arrow) or a CoNLL-U file."""
    from .inspect import inspect as inspect_data

    result = inspect_data(path, show=show, html=html, examples=examples)
    if stats or (stats is None and not html):  # the HTML report holds them already
        click.echo(result.text)
    if result.shown:
        click.echo(result.shown_text)
    if html:
        log.info(f"wrote {html}")


@cli.command()
@click.argument("split", metavar="DATASET_SPLIT")
@declared("synprep challenge", "output", "-o", required=True,
          help="Folder for summary.json and one .ids/.tsv per subset.")
@declared("synprep challenge", "side", show_default=True, help="Which side's trees to search for the phenomena.")
@click.option("--phenomena", default=None,
              help="Comma-separated rule names (default: all; built in: particle,reflexive,stranding).")
@declared("synprep challenge", "rules", help="TOML file of extra [[rule]] tables (docs/synprep.md).")
def challenge(split: str, output: str, side: str, phenomena: str | None, rules: str | None) -> None:
    """Syntactic challenge sets: the pairs of a converted split whose trees contain each phenomenon."""
    from .challenge import challenge as write_challenge

    for line in write_challenge(split, output, side=side, phenomena=phenomena, rules=rules).text.split("\n"):
        log.info(line)


@cli.command()
@click.argument("directory")
@declared("synprep validate", "max_failures", show_default=True, help="Failures listed at most (all are counted).")
@declared("synprep validate", "workers",
          help="Processes, one shard each at a time (default 0: all cores); the output is the same.")
def validate(directory: str, max_failures: int, workers: int) -> None:
    """Check every contract invariant on every row of a shard directory; exit 1 on failures."""
    from .validate import validate as validate_split

    result = validate_split(directory, max_failures=max_failures, workers=workers)
    for failure in result.failures:
        click.echo(failure.format())
    click.echo(result.summary, err=not result.ok)
    if not result.ok:
        sys.exit(1)


@cli.command()
@click.argument("split", metavar="SPLIT")
@declared("synprep export", "output", "-o", required=True, help="Output folder: one subfolder per format.")
@declared("synprep export", "formats",
          help="Comma-separated or repeated, each once: pascal (e-bug/pascal), dbsa (de9uch1/dbsa), nematus "
               "(borgr/nematus). Default: every one whose reader reads the dataset's pieces (all three for "
               "subword-nmt; pascal,dbsa for sentencepiece and hf-tokenizer pieces).")
@declared("synprep export", "name", help="File name prefix (default: the split's name, e.g. train).")
@declared("synprep export", "dbsa_release", show_default=True,
          help="DBSA .dep heads: current = de9uch1/dbsa master b0cdef6 (0-based, format since b96fb46); "
               "2020 = commits 43eef77/0e9dd5c (1-based).")
def export(split: str, output: str, formats: tuple[str, ...], name: str | None, dbsa_release: str) -> None:
    """A split (shard folder) in the input formats of the papers' released trainers, with BPE codes, references
    and a README of commands per format (docs/synprep.md, docs/handoff.md)."""
    from .export import export as export_split

    log.info(export_split(split, output, formats=formats, name=name, dbsa_release=dbsa_release).text)


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
