"""synprep's Python API (docs/python-api.md): the main jobs as functions, with the command line's defaults and
its checks (the commands call these). Bad input raises `synprep.InputError` (the CLI's one-line error)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import options
from .convert import ConvertResult, convert
from .errors import InputError
from .parse import parse

if TYPE_CHECKING:
    from .bpe import Bpe
    from .results import CacheReport, ParserEvalResult, ParserTrainResult

log = logging.getLogger(__name__)

__all__ = ["ConvertResult", "apply_bpe", "cache_info", "cache_prune", "cache_verify", "convert", "learn_bpe",
           "load_bpe", "load_dataset", "parse", "parser_eval", "parser_train"]


def load_dataset(path: str) -> Any:  # noqa: ANN401 (datasets.Dataset or DatasetDict; datasets is optional)
    """A split folder as a Hugging Face `datasets.Dataset`, or a dataset folder (convert's output) as a
    `DatasetDict` of its splits (`valid` named `validation`); memory-mapped, every shard checked against its
    manifest first. Needs `datasets` (pip install 'synprep[hf]')."""
    import warnings

    try:
        with warnings.catch_warnings():  # in a notebook without ipywidgets, importing datasets imports tqdm.auto,
            warnings.filterwarnings("ignore", message="IProgress not found")  # which warns: its bars are plain
            import datasets
    except ImportError:
        raise InputError("datasets is not installed: pip install 'synprep[hf]'") from None
    from .convert.dataset_card import hf_split_name
    from .shards import MANIFEST, load_hf_dataset

    if os.path.isfile(os.path.join(path, MANIFEST)):
        return load_hf_dataset(path)
    splits = sorted(name for name in os.listdir(path) if os.path.isfile(os.path.join(path, name, MANIFEST))) \
        if os.path.isdir(path) else []
    if not splits:
        raise InputError("neither a split folder (manifest.json) nor a dataset folder of splits", path)
    return datasets.DatasetDict({hf_split_name(name): load_hf_dataset(os.path.join(path, name)) for name in splits})


def vocabulary_paths(prefix: str, inputs: Sequence[str]) -> list[str]:
    """vocab prefix + each input's language suffix (train.tok.en -> PREFIX.en), unique per input."""
    suffixes = [os.path.basename(p).rsplit(".", 1)[-1] if "." in os.path.basename(p) else str(i)
                for i, p in enumerate(inputs)]
    if len(set(suffixes)) != len(suffixes):
        suffixes = [str(i) for i in range(len(inputs))]
    return [f"{prefix}.{s}" for s in suffixes]


def learn_bpe(inputs: Sequence[str], output: str, symbols: int = 16000, *, vocab_prefix: str | None = None,
              min_frequency: int = 2, verbose: bool = False) -> list[str]:
    """`synprep bpe learn`: joint codes from all `inputs` (subword-nmt's bytes) into `output`, and one
    vocabulary per input when `vocab_prefix` is given; returns the vocabularies' paths."""
    from .arguments import check_arguments
    from .bpe_learn import learn_joint

    checked = check_arguments("synprep bpe learn", inputs=inputs, output=output, symbols=symbols,
                              vocab_prefix=vocab_prefix, min_frequency=min_frequency, verbose=verbose)
    inputs, output, vocab_prefix = checked["inputs"], checked["output"], checked["vocab_prefix"]
    vocab_paths = vocabulary_paths(vocab_prefix, inputs) if vocab_prefix else None
    learn_joint(list(inputs), output, symbols, vocab_paths, min_frequency, verbose=verbose)
    return vocab_paths or []


def load_bpe(codes: str, *, vocabulary: str | None = None, vocabulary_threshold: int | None = None,
             merges: int = -1, separator: str = options.BPE_SEPARATOR, glossaries: Sequence[str] = ()) -> Bpe:
    """BPE codes ready to segment (`.segment_line(text)`, `.segment_tokens(tokens)`): subword-nmt's apply-bpe,
    byte for byte."""
    from .bpe import Bpe, check_glossaries, check_separator, read_vocabulary

    if vocabulary_threshold is not None and vocabulary is None:
        raise InputError("--vocabulary-threshold needs --vocabulary")
    check_separator(separator)
    check_glossaries(glossaries)
    vocab = read_vocabulary(vocabulary, vocabulary_threshold) if vocabulary else None
    return Bpe(codes, vocab, merges, separator, list(glossaries) or None)


def apply_bpe(codes: str, input: str = "-", output: str = "-", *, vocabulary: str | None = None,
              vocabulary_threshold: int | None = None, merges: int = -1, separator: str = options.BPE_SEPARATOR,
              glossaries: Sequence[str] = ()) -> int:
    """`synprep bpe apply`: segment a file (`-` = stdin/stdout); the settings as for `load_bpe`. Returns the
    lines written."""
    from .arguments import check_arguments
    from .bpe import apply_file

    checked = check_arguments("synprep bpe apply", codes=codes, input=input, output=output, vocabulary=vocabulary,
                              vocabulary_threshold=vocabulary_threshold, merges=merges, separator=separator,
                              glossaries=glossaries)
    codes, input, output = checked.pop("codes"), checked.pop("input"), checked.pop("output")
    return apply_file(load_bpe(codes, **checked), input, output)


def parser_train(conllu: str, output: str, *, backend: str = "udpipe", heldout: str | None = None,
                 preset: str = "default", tokenizer_options: str | None = None, tagger_options: str | None = None,
                 parser_options: str | None = None, settings: Sequence[str] = (), lang: str | None = None,
                 max_minutes: float | None = None, allow_no_spaceafter: bool = False,
                 verbose: bool = False) -> ParserTrainResult:
    """`synprep parser train --conllu CONLLU -o OUTPUT`: a UDPipe model file, or a spaCy or stanza model folder,
    trained on a treebank (`preset`: tiny, small, medium, default), scored on `heldout` when given. Returns a
    `ParserTrainResult` (`model`, `seconds`, `scores`); the lines of its `text` are logged as they come."""
    import contextlib

    from .arguments import check_arguments
    from .outputs import check_outputs
    from .parse.quality import score_and_record
    from .parse.train import check_treebank
    from .results import ParserTrainResult
    from .textio import rereadable

    checked = check_arguments("synprep parser train", backend=backend, conllu=conllu, output=output, heldout=heldout,
                              preset=preset, tokenizer_options=tokenizer_options, tagger_options=tagger_options,
                              parser_options=parser_options, settings=settings, lang=lang, max_minutes=max_minutes,
                              allow_no_spaceafter=allow_no_spaceafter, verbose=verbose)
    backend, conllu, output, heldout, settings = (checked[k] for k in ("backend", "conllu", "output", "heldout",
                                                                       "settings"))
    check_outputs({"-o": output}, {"the treebank (--conllu)": conllu, "the held-out treebank (--heldout)": heldout})
    with contextlib.ExitStack() as stack:  # a named pipe or <(command) is copied once: each input is read twice
        treebank, held = (stack.enter_context(rereadable(path)) for path in (conllu, heldout))
        warning = check_treebank(treebank, allow_no_spaceafter)
        if warning:
            log.warning(warning)
        options = {"tokenizer": tokenizer_options, "tagger": tagger_options, "parser": parser_options}
        seconds, spec = _train_parser(backend, treebank, output, preset, held, lang or None, settings, max_minutes,
                                      options, verbose, conllu)
        lines = [f"trained {backend} model {output} ({preset} preset) in {seconds:.1f}s"]
        log.info(lines[0])
        model_path = os.path.join(output, str(spec["lang"])) if backend == "stanza" else output
        scores, warning = score_and_record(spec, model_path, preset, held, seconds, heldout)
    lines += [f"held-out {heldout}: {score.format()}" for score in scores]
    for line in lines[1:]:
        log.info(line)
    if warning:
        log.warning(f"synprep: {warning}")
    return ParserTrainResult(output, backend, seconds, list(scores), [f"synprep: {warning}"] if warning else [],
                             "\n".join(lines))


def _train_parser(backend: str, treebank: str, output: str, preset: str, held: str | None, lang: str | None,
                  settings: Sequence[str], max_minutes: float | None, options: dict[str, str | None],
                  verbose: bool, conllu: str) -> tuple[float, dict[str, object]]:
    """One backend's training (`parser_train`): the seconds and the model's parser spec."""
    import sys

    if backend == "stanza":
        from .parse.train_spacy import guess_lang, parse_overrides
        from .parse.train_stanza import stanza_settings, train_stanza

        lang = lang or guess_lang(conllu)
        stanza_settings(preset, parse_overrides(settings))  # refuses a bad preset or option before any work
        seconds = train_stanza(treebank, output, preset, held, lang, parse_overrides(settings), quiet=not verbose,
                               progress=sys.stderr)
        return seconds, {"backend": "stanza", "model_dir": output, "lang": lang}
    if backend == "spacy":
        from .parse.train_spacy import SPACY_PRESETS, guess_lang, parse_overrides, train_spacy

        if preset not in SPACY_PRESETS:
            raise InputError(f"--preset {preset} is a UDPipe preset; spacy has {', '.join(SPACY_PRESETS)} "
                             "(see 'synprep parser train --help')")
        seconds = train_spacy(treebank, output, preset, held, lang or guess_lang(conllu), parse_overrides(settings),
                              quiet=not verbose, max_minutes=max_minutes)
        return seconds, {"backend": "spacy", "model": output}
    from .parse.train import train_udpipe

    seconds = train_udpipe(treebank, output, preset, held, quiet=not verbose, options=options, progress=sys.stderr)
    return seconds, {"backend": "udpipe", "model": output}


def parser_eval(conllu: str, *, model: str | None = None, backend: str | None = None, model_dir: str | None = None,
                lang: str | None = None, mode: str = "both") -> ParserEvalResult:
    """`synprep parser eval --conllu CONLLU --model MODEL`: UPOS, UAS and LAS of a parser on a gold treebank,
    from gold tokenization and from raw text (`mode`: both, gold, raw; `backend` None: spacy for a folder,
    udpipe for a file). Returns a `ParserEvalResult` (`scores`: one per mode)."""
    from .arguments import check_arguments
    from .parse.evaluate import MODES, evaluate_model
    from .results import ParserEvalResult

    checked = check_arguments("synprep parser eval", backend=backend, conllu=conllu, model=model, model_dir=model_dir,
                              lang=lang, mode=mode)
    model, model_dir = checked["model"], checked["model_dir"]
    backend = checked["backend"] or ("stanza" if model_dir else "spacy" if model and os.path.isdir(model) else "udpipe")
    spec = {"backend": backend, "model": model, "model_dir": model_dir, "lang": lang}
    scores = evaluate_model(spec, checked["conllu"], MODES if mode == "both" else (mode,))
    notes = {score.mode: f"  {len(score.mismatched)} sentences with other characters than the gold text (not "
                         f"aligned), e.g. {score.mismatched[0]}" for score in scores if score.mismatched}
    lines = [line for score in scores for line in (score.format(), notes.get(score.mode)) if line]
    return ParserEvalResult(list(scores), notes, "\n".join(lines))


def cache_info(folder: str) -> CacheReport:
    """`synprep cache info FOLDER`: entries, size, parsers and stages of a parse cache (`report`: as data)."""
    from .arguments import check_arguments
    from .convert.parse_cache import cache_info as read_info
    from .convert.parse_cache import format_info
    from .results import CacheReport

    info = read_info(check_arguments("synprep cache info", folder=folder)["folder"])
    return CacheReport(info, format_info(info))


def cache_verify(folder: str, *, repair: bool = False) -> CacheReport:
    """`synprep cache verify FOLDER`: SQLite's integrity check and every entry decoded against its digest;
    `repair` deletes the damaged entries. `ok` is False where the command exits 1."""
    from .arguments import check_arguments
    from .convert.parse_cache import format_verify, verify_cache
    from .results import CacheReport

    checked = check_arguments("synprep cache verify", folder=folder, repair=repair)
    report = verify_cache(checked["folder"], repair)
    failed = report["integrity"] or report["damaged"] > report["deleted"] or \
        ((report["totals"] or report["producers"]) and not repair)
    return CacheReport(report, format_verify(report), not failed)


def cache_prune(folder: str, *, max_gb: float | None = None, parser: str | None = None) -> CacheReport:
    """`synprep cache prune FOLDER`: delete the least recently used entries down to `max_gb`, and/or every entry
    of `parser` (its id or digest prefix, or a stage: filter, bpe, features); the file shrinks (VACUUM)."""
    from .arguments import check_arguments
    from .convert.parse_cache import format_prune, prune_cache
    from .results import CacheReport

    checked = check_arguments("synprep cache prune", folder=folder, max_gb=max_gb, parser=parser)
    if max_gb is None and parser is None:
        raise InputError("give --max-gb and/or --parser (see 'synprep cache prune --help')")
    report = prune_cache(checked["folder"], checked["max_gb"], parser)
    return CacheReport(report, format_prune(report))
