"""`synprep align`: a CoNLL-U file (+ BPE) -> one feature record per sentence, in one of FORMATS.

The features come from the featurize stage (`synprep.featurize`); this module only reads, chunks, runs
workers and serializes.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .bpe import Bpe, subword_file
from .callables import make_callable
from .conllu import chunk_trees, read_conllu_chunks
from .featurize import FeatureConfig, boundary_of, featurize, read_back_of
from .options import ALIGN_FORMATS
from .outputs import check_outputs
from .parallel import ordered_map
from .schema import align_schema, parse_features, record_to_json, uint8_lists_json
from .subwords import TokenCutter, registry
from .subwords.load import load_cutter
from .textio import atomic_output

if TYPE_CHECKING:
    from .results import AlignResult

FORMATS = ALIGN_FORMATS


@dataclass
class AlignSummary:
    sentences: int = 0
    written: int = 0
    non_projective: int = 0
    rejected: Counter = field(default_factory=Counter)

    def add(self, other: AlignSummary) -> None:
        self.sentences += other.sentences
        self.written += other.written
        self.non_projective += other.non_projective
        self.rejected.update(other.rejected)


@dataclass(frozen=True)
class _AlignJob:
    """What every worker needs: picklable, loaded once per worker by `_load`."""

    path: str
    config: FeatureConfig
    fmt: str
    codes_path: str | None
    vocabulary: frozenset[str] | None
    bpe_options: tuple = ()  # Bpe(...) merges, separator, glossaries
    scheme: str = registry.DEFAULT  # another: `codes_path` is its model (None: a scheme without one)


# The caller's loaded codes, for workers forked from this process (spawned ones load their own).
_PARENT_BPE: dict[_AlignJob, Bpe | TokenCutter] = {}


def _load(job: _AlignJob) -> tuple[_AlignJob, Bpe | TokenCutter | None]:
    bpe = _PARENT_BPE.get(job)
    if bpe is None and not registry.get(job.scheme).bpe_codes:
        bpe = load_cutter(job.scheme, job.codes_path)
    elif bpe is None and job.codes_path:
        merges, separator, glossaries = job.bpe_options
        bpe = Bpe(job.codes_path, set(job.vocabulary) if job.vocabulary else None, merges, separator,
                  list(glossaries) if glossaries else None)
    return job, bpe


def _align_chunk(state: tuple[_AlignJob, Bpe | TokenCutter | None], chunk: tuple[list[str], int, int]
                 ) -> tuple[pa.RecordBatch | bytes | None, AlignSummary]:
    """Parse, validate and featurize one chunk of sentences; serialize it in the output format."""
    collecting = gc.isenabled()
    gc.disable()  # many small objects, no cycles, bounded by the chunk: the cyclic GC only costs time (~7%)
    try:
        return _align_chunk_now(state, chunk)
    finally:
        if collecting:
            gc.enable()


def _align_chunk_now(state: tuple[_AlignJob, Bpe | TokenCutter | None], chunk: tuple[list[str], int, int]
                     ) -> tuple[pa.RecordBatch | bytes | None, AlignSummary]:
    job, bpe = state
    lines, first_line, first_index = chunk
    trees = chunk_trees(lines, job.path, first_line, first_index)
    columns = featurize(trees, job.config, bpe.segment_word if bpe is not None else None,
                        boundary=boundary_of(bpe), read_back=read_back_of(bpe))
    summary = AlignSummary(len(trees), len(columns), columns.projective.count(False), columns.rejected)
    if not len(columns):
        return None, summary
    ids = [first_index + i for i in columns.kept]
    if job.fmt == "arrow":
        return columns.to_batch(ids, align_schema(job.config.features)), summary
    lines_out = []
    distances = (uint8_lists_json(columns.distances, columns.n_tokens ** 2)
                 if job.fmt == "jsonl" and columns.distances is not None else None)
    for i, index in enumerate(ids):
        record = {"id": index, "sent_id": columns.sent_id[i], **columns.record(i)}
        lines_out.append(_format_line(record, job.fmt, distances[i] if distances else None) + "\n")
    return "".join(lines_out).encode("utf-8"), summary  # bytes: encoded by the worker, cheaper to send back


def _format_line(record: dict[str, Any], fmt: str, distances: str | None = None) -> str:
    if fmt == "jsonl":
        return record_to_json(record, distances)
    if fmt == "pascal":
        return " ".join(repr(float(x)) for x in record["parent_mid"])
    if fmt == "text":
        return " ".join(record["subwords"])
    transitions = record["transitions"]
    return " ".join(transitions) if transitions is not None else ""


def align_file(conllu_path: str, output_path: str, config: FeatureConfig, bpe: Bpe | TokenCutter | None = None,
               fmt: str = "jsonl", workers: int = 1, progress: bool | None = None,
               sentences_per_chunk: int = 256) -> AlignSummary:
    """`synprep align`: write one record per sentence in `fmt` (see FORMATS) to `output_path`.

    `bpe`: subword-nmt codes, or a sentencepiece / hf-tokenizer cutter (`synprep.subwords.load.load_cutter`).
    With workers > 1, chunks of sentences are featurized in parallel; the output is identical."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}")
    check_outputs({"-o": output_path}, {"the CoNLL-U input (--conllu)": conllu_path,
                                        "the sub-word model (--bpe-codes)": subword_file(bpe)})
    needed = {"pascal": "parents", "transitions": "transitions"}.get(fmt)
    if needed and needed not in config.features:
        config = replace(config, features=parse_features(config.features + (needed,)))
    if isinstance(bpe, TokenCutter):
        job = _AlignJob(conllu_path, config, fmt, bpe.path or None, None, (), bpe.scheme)
    else:
        vocabulary = frozenset(bpe.vocabulary) if bpe is not None and bpe.vocabulary else None
        job = _AlignJob(conllu_path, config, fmt, bpe.codes_path if bpe else None, vocabulary,
                        bpe.options if bpe else ())
    chunks = read_conllu_chunks(conllu_path, sentences_per_chunk)
    if workers <= 1 and bpe is not None:  # reuse the caller's loaded codes
        results: Iterator = (_align_chunk((job, bpe), chunk) for chunk in chunks)
    else:
        if bpe is not None:
            _PARENT_BPE.clear()
            _PARENT_BPE[job] = bpe
        results = ordered_map(_align_chunk, chunks, workers, _load, (job,))
    summary = AlignSummary()
    from .progress import progress as progress_bar

    bar = progress_bar("align", unit="sent", shown=progress, lines=False)  # None: on a terminal or in a notebook
    try:
        with atomic_output(output_path, text=False) as sink:
            if fmt == "arrow":
                with pa.ipc.new_stream(sink, align_schema(config.features)) as writer:
                    for payload, part in results:
                        if payload is not None:
                            writer.write_batch(payload)
                        summary.add(part)
                        bar.update(part.sentences)
            else:
                for payload, part in results:
                    if payload is not None:
                        sink.write(payload)
                    summary.add(part)
                    bar.update(part.sentences)
    finally:
        _PARENT_BPE.clear()
        bar.close()
    return summary


def align(conllu: str, output: str = "-", *, bpe_codes: str | None = None, scheme: str = registry.DEFAULT,
          model: str | None = None, vocabulary: str | None = None, vocabulary_threshold: int | None = None,
          features: str = "parents,transitions,labels", fmt: str = "jsonl", root: str = "drop",
          non_projective: str = "keep", strip_subtypes: bool = False, workers: int = 0,
          progress: bool | None = None) -> AlignResult:
    """`synprep align --conllu CONLLU`: one record per sentence with the contract's features (`features`: the
    groups, comma-separated), in `fmt`, sub-words from BPE `bpe_codes` or the `scheme`'s `model`. Returns an
    `AlignResult` (sentences, written, non-projective kept, drops by reason)."""
    from .arguments import check_arguments, invalid
    from .bpe import read_vocabulary
    from .errors import InputError
    from .parallel import default_workers
    from .results import AlignResult
    from .subwords.load import cutter_of

    checked = check_arguments("synprep align", conllu=conllu, output=output, bpe_codes=bpe_codes, model=model,
                              vocabulary=vocabulary, scheme=scheme,
                              vocabulary_threshold=vocabulary_threshold, features=features, fmt=fmt, root=root,
                              non_projective=non_projective, strip_subtypes=strip_subtypes, workers=workers,
                              progress=progress)
    try:
        groups = parse_features(features)
    except ValueError as err:
        raise invalid("synprep align", "features", str(err)) from None
    bpe_codes, model, vocabulary = checked["bpe_codes"], checked["model"], checked["vocabulary"]
    vocab = read_vocabulary(vocabulary, vocabulary_threshold) if vocabulary else None
    segmenter = Bpe(bpe_codes, vocab) if bpe_codes else None
    if not registry.get(checked["scheme"]).bpe_codes:
        try:
            segmenter = cutter_of(checked["scheme"], model, bpe_codes)
        except InputError as err:
            raise InputError(f"{err} (see 'synprep align --help')") from None
        if "transitions" in groups and segmenter.marker_kind == "none":
            raise invalid("synprep align", "features", f"transitions: the pieces of {model} carry no marker "
                          "(neither Metaspace/ByteLevel nor WordPiece), so token ends cannot be read from them")
        why = segmenter.unreadable()
        if why:
            raise invalid("synprep align", "model", f"{model}: {why}")
    config = FeatureConfig(groups, checked["root"], checked["non_projective"], strip_subtypes)
    summary = align_file(checked["conllu"], checked["output"], config, segmenter, checked["fmt"],
                         checked["workers"] or default_workers(), progress=progress)
    dropped = sum(summary.rejected.values()) if summary.rejected else 0
    reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(summary.rejected.items()) if n)
    text = (f"aligned {summary.sentences} sentences: {summary.written} written, {summary.non_projective} "
            f"non-projective kept, {dropped} dropped" + (f" ({reasons})" if dropped else ""))
    return AlignResult(checked["output"], summary.sentences, summary.written, summary.non_projective,
                       dict(summary.rejected), text)


make_callable(__name__, align)  # synprep.align(...) is synprep.align.align(...) (docs/python-api.md)
