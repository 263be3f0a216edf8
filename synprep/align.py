"""The align stage: a tree (+ BPE) -> one feature record per sentence.

`sentence_features` is what `convert` calls per side; `align_file` is `synprep align`.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
from tqdm import tqdm

from . import features as F
from .bpe import Bpe, align_subwords
from .conllu import parse_conllu_lines, read_conllu_chunks, to_tree
from .parallel import ordered_map
from .schema import DEFAULT_FEATURES, align_schema, parse_features, record_to_json, records_to_batch
from .textio import open_binary
from .trees import Tree, is_projective, lift_projective

FORMATS = ("jsonl", "arrow", "pascal", "transitions", "text")


@dataclass(frozen=True)
class FeatureConfig:
    """What to compute for one side, and the tree policies."""

    features: tuple[str, ...] = DEFAULT_FEATURES
    root: str = "drop"
    non_projective: str = "keep"
    strip_subtypes: bool = False

    def __post_init__(self) -> None:
        if self.root not in F.ROOT_POLICIES:
            raise ValueError(f"root policy must be one of {', '.join(F.ROOT_POLICIES)}")
        if self.non_projective not in F.NON_PROJECTIVE_POLICIES:
            raise ValueError(f"non-projective policy must be one of {', '.join(F.NON_PROJECTIVE_POLICIES)}")


class Rejected(Exception):
    """A sentence that the policies exclude (counted by the caller under `reason`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def sentence_features(tree: Tree, config: FeatureConfig,
                      segment_word: Callable[[str], str] | None = None) -> dict[str, Any]:
    """All requested fields of one sentence (CONTRACT.md field names). Raises Rejected under
    non-projective policy `drop`."""
    projective = is_projective(tree.heads)
    if not projective and config.non_projective == "drop":
        raise Rejected("non_projective")
    labels = F.strip_subtypes(tree.labels) if config.strip_subtypes else tree.labels
    subwords, subword_token = align_subwords(tree.tokens, segment_word)
    record: dict[str, Any] = {
        "tokens": tree.tokens, "heads": tree.heads, "subwords": subwords,
        "subword_token": subword_token, "projective": projective,
    }
    wanted = config.features
    if "labels" in wanted:
        record["labels"] = labels
    if "parents" in wanted:
        record["parent_mid"], record["parent_first"] = F.parent_positions(tree.heads, subword_token)
    if "distances" in wanted:
        record["distances"] = F.tree_distances(tree.heads).ravel()
    if "transitions" in wanted:
        heads = tree.heads
        if not projective and config.non_projective == "lift":
            heads = lift_projective(heads)
        encodable = projective or config.non_projective == "lift"
        record["transitions"] = (
            F.to_transitions(heads, labels, F.token_pieces(subwords, subword_token, len(tree)), config.root)
            if encodable else None)
    return record


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


def _load(job: _AlignJob) -> tuple[_AlignJob, Bpe | None]:
    bpe = Bpe(job.codes_path, set(job.vocabulary) if job.vocabulary else None) if job.codes_path else None
    return job, bpe


def _align_chunk(state: tuple[_AlignJob, Bpe | None], chunk: tuple[list[str], int, int]
                 ) -> tuple[pa.RecordBatch | str | None, AlignSummary]:
    """Parse, validate and featurize one chunk of sentences; serialize it in the output format."""
    job, bpe = state
    lines, first_line, first_index = chunk
    segment = bpe.segment_word if bpe is not None else None
    summary = AlignSummary()
    records = []
    for sentence in parse_conllu_lines(lines, job.path, True, first_line, first_index):
        tree = to_tree(sentence, job.path)
        summary.sentences += 1
        try:
            record = sentence_features(tree, job.config, segment)
        except Rejected as rejection:
            summary.rejected[rejection.reason] += 1
            continue
        summary.non_projective += not record["projective"]
        summary.written += 1
        records.append({"id": sentence.index, "sent_id": tree.sent_id, **record})
    if not records:
        return None, summary
    if job.fmt == "arrow":
        return records_to_batch(records, align_schema(job.config.features)), summary
    return "".join(_format_line(record, job.fmt) + "\n" for record in records), summary


def _format_line(record: dict[str, Any], fmt: str) -> str:
    if fmt == "jsonl":
        return record_to_json(record)
    if fmt == "pascal":
        return " ".join(repr(float(x)) for x in record["parent_mid"])
    if fmt == "text":
        return " ".join(record["subwords"])
    transitions = record["transitions"]
    return " ".join(transitions) if transitions is not None else ""


def align_file(conllu_path: str, output_path: str, config: FeatureConfig, bpe: Bpe | None = None,
               fmt: str = "jsonl", workers: int = 1, progress: bool | None = None,
               sentences_per_chunk: int = 256) -> AlignSummary:
    """`synprep align`: write one record per sentence in `fmt` (see FORMATS) to `output_path`.

    With workers > 1, chunks of sentences are featurized in parallel; the output is identical."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}")
    needed = {"pascal": "parents", "transitions": "transitions"}.get(fmt)
    if needed and needed not in config.features:
        config = replace(config, features=parse_features(config.features + (needed,)))
    vocabulary = frozenset(bpe.vocabulary) if bpe is not None and bpe.vocabulary else None
    job = _AlignJob(conllu_path, config, fmt, bpe.codes_path if bpe else None, vocabulary)
    chunks = read_conllu_chunks(conllu_path, sentences_per_chunk)
    if workers <= 1 and bpe is not None:  # reuse the caller's loaded codes
        results: Iterator = (_align_chunk((job, bpe), chunk) for chunk in chunks)
    else:
        results = ordered_map(_align_chunk, chunks, workers, _load, (job,))
    summary = AlignSummary()
    # tqdm's disable=None turns the bar off when stderr is not a terminal
    bar = tqdm(unit=" sent", disable=None if progress is None else not progress, file=sys.stderr)
    sink = open_binary(output_path, "wb")
    try:
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
                    sink.write(payload.encode("utf-8"))
                summary.add(part)
                bar.update(part.sentences)
    finally:
        bar.close()
        sink.flush()
        if output_path != "-":
            sink.close()
    return summary
