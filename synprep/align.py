"""The align stage: a tree (+ BPE) -> one feature record per sentence.

`sentence_features` is what `convert` calls per side; `align_file` is `synprep align`.
"""

from __future__ import annotations

import gc
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from typing import Any

import numpy as np
import pyarrow as pa

from . import features as F
from . import schema as S
from .bpe import Bpe, split_tokens
from .conllu import chunk_trees, read_conllu_chunks
from .parallel import ordered_map
from .schema import DEFAULT_FEATURES, align_schema, parse_features, record_to_json
from .textio import open_binary
from .trees import Tree, forest_projective, lift_projective

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


@dataclass
class FeatureColumns:
    """The features of several sentences, column-wise: flat values and per-sentence lengths
    (CONTRACT.md field names). `record(i)` is one sentence as a dict; `to_batch` is Arrow."""

    kept: list[int]  # position of every kept sentence among the input trees
    sent_id: list[str | None]
    tokens: list[str]
    n_tokens: np.ndarray  # tokens per sentence
    heads: np.ndarray  # 1-based, flat
    subwords: list[str]
    n_subwords: np.ndarray
    subword_token: np.ndarray  # 0-based token of each sub-word within its sentence, flat
    projective: list[bool]
    labels: list[str] | None = None
    parent_mid: np.ndarray | None = None
    parent_first: np.ndarray | None = None
    distances: np.ndarray | None = None  # each sentence's token x token matrix, row-major, flat
    transitions: list[list[str] | None] | None = None
    dropped: dict[int, str] = field(default_factory=dict)  # position among the input trees -> reason
    _starts: tuple | None = field(default=None, repr=False)

    @property
    def rejected(self) -> Counter:
        """Left-out sentences per reason."""
        return Counter(self.dropped.values())

    def __len__(self) -> int:
        return len(self.kept)

    def record(self, i: int) -> dict[str, Any]:
        """Sentence i (of the kept ones): lists, numpy arrays for the numeric features."""
        if self._starts is None:
            self._starts = tuple(np.concatenate(([0], np.cumsum(n))).tolist()
                                 for n in (self.n_tokens, self.n_subwords, self.n_tokens ** 2))
        tokens, subwords, cells = self._starts
        t0, t1 = tokens[i], tokens[i + 1]
        s0, s1 = subwords[i], subwords[i + 1]
        record: dict[str, Any] = {
            "tokens": self.tokens[t0:t1], "heads": self.heads[t0:t1].tolist(), "subwords": self.subwords[s0:s1],
            "subword_token": self.subword_token[s0:s1].tolist(), "projective": self.projective[i],
        }
        if self.labels is not None:
            record["labels"] = self.labels[t0:t1]
        if self.parent_mid is not None:
            record["parent_mid"], record["parent_first"] = self.parent_mid[s0:s1], self.parent_first[s0:s1]
        if self.distances is not None:
            record["distances"] = self.distances[cells[i]:cells[i + 1]]
        if self.transitions is not None:
            record["transitions"] = self.transitions[i]
        return record

    def to_batch(self, ids: list[int], schema: pa.Schema) -> pa.RecordBatch:
        """One Arrow record batch (the `align_schema` columns), `ids` = the kept sentences' ids."""
        lengths = {"tokens": self.n_tokens, "heads": self.n_tokens, "labels": self.n_tokens,
                   "subwords": self.n_subwords, "subword_token": self.n_subwords, "parent_mid": self.n_subwords,
                   "parent_first": self.n_subwords, "distances": self.n_tokens ** 2}
        columns = []
        for column in schema:
            name = column.name
            if name == "id":
                columns.append(S.plain_array(ids, column.type))
            elif name == "sent_id":
                columns.append(S.plain_array(self.sent_id, column.type))
            elif name == "projective":
                columns.append(S.plain_array(self.projective, column.type))
            elif name == "transitions":
                columns.append(S.list_array_of_lists(self.transitions, column.type))
            else:
                columns.append(S.list_array(getattr(self, name), lengths[name], column.type))
        return pa.RecordBatch.from_arrays(columns, schema=schema)


def featurize(trees: Sequence[Tree], config: FeatureConfig,
              segment_word: Callable[[str], str] | None = None) -> FeatureColumns:
    """All requested fields of several sentences at once (see FeatureColumns). Sentences that the
    policies exclude (non-projective policy `drop`) are left out, with their reason in `dropped`."""
    sizes = np.fromiter(map(len, trees), dtype=np.int64, count=len(trees))
    heads = np.fromiter(chain.from_iterable(tree.heads for tree in trees), dtype=np.int64, count=int(sizes.sum()))
    projective = forest_projective(heads, sizes).tolist()
    kept = list(range(len(trees)))
    dropped: dict[int, str] = {}
    if config.non_projective == "drop" and not all(projective):
        dropped = {i: "non_projective" for i in kept if not projective[i]}
        kept = [i for i in kept if projective[i]]
        trees = [trees[i] for i in kept]
        projective = [True] * len(kept)
        sizes = sizes[kept]
        heads = np.fromiter(chain.from_iterable(tree.heads for tree in trees), dtype=np.int64,
                            count=int(sizes.sum()))
    tokens = list(chain.from_iterable(tree.tokens for tree in trees))
    pieces = split_tokens(tokens, segment_word)
    counts = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    owner = np.repeat(np.arange(len(tokens)), counts)  # global token of each sub-word
    token_offset = np.cumsum(sizes) - sizes
    bounds = np.concatenate(([0], np.cumsum(counts)))
    n_subwords = bounds[token_offset + sizes] - bounds[token_offset]
    columns = FeatureColumns(
        kept, [tree.sent_id for tree in trees], tokens, sizes, heads, list(chain.from_iterable(pieces)),
        n_subwords, owner - np.repeat(token_offset, n_subwords), projective, dropped=dropped)
    wanted = config.features
    labels = list(chain.from_iterable(tree.labels for tree in trees))
    if config.strip_subtypes:
        labels = F.strip_subtypes(labels)
    if "labels" in wanted:
        columns.labels = labels
    if "parents" in wanted:
        columns.parent_mid, columns.parent_first = F.forest_parent_positions(heads, sizes, owner)
    if "distances" in wanted:
        columns.distances = F.forest_tree_distances(heads, sizes)
    if "transitions" in wanted:
        transitions: list[list[str] | None] = []
        lift = config.non_projective == "lift"
        for tree, start, is_proj in zip(trees, token_offset.tolist(), projective, strict=True):
            if not (is_proj or lift):
                transitions.append(None)
                continue
            end = start + len(tree)
            tree_heads = tree.heads if is_proj else lift_projective(tree.heads)
            transitions.append(F.to_transitions(tree_heads, labels[start:end], pieces[start:end], config.root))
        columns.transitions = transitions
    return columns


def sentence_features(tree: Tree, config: FeatureConfig,
                      segment_word: Callable[[str], str] | None = None) -> dict[str, Any]:
    """All requested fields of one sentence (CONTRACT.md field names). Raises Rejected under
    non-projective policy `drop`."""
    columns = featurize([tree], config, segment_word)
    if 0 in columns.dropped:
        raise Rejected(columns.dropped[0])
    return columns.record(0)


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


# The caller's loaded codes, for workers forked from this process (spawned ones load their own).
_PARENT_BPE: dict[_AlignJob, Bpe] = {}


def _load(job: _AlignJob) -> tuple[_AlignJob, Bpe | None]:
    bpe = _PARENT_BPE.get(job)
    if bpe is None and job.codes_path:
        merges, separator, glossaries = job.bpe_options
        bpe = Bpe(job.codes_path, set(job.vocabulary) if job.vocabulary else None, merges, separator,
                  list(glossaries) if glossaries else None)
    return job, bpe


def _align_chunk(state: tuple[_AlignJob, Bpe | None], chunk: tuple[list[str], int, int]
                 ) -> tuple[pa.RecordBatch | str | None, AlignSummary]:
    """Parse, validate and featurize one chunk of sentences; serialize it in the output format."""
    collecting = gc.isenabled()
    gc.disable()  # many small objects, no cycles, bounded by the chunk: the cyclic GC only costs time (~7%)
    try:
        return _align_chunk_now(state, chunk)
    finally:
        if collecting:
            gc.enable()


def _align_chunk_now(state: tuple[_AlignJob, Bpe | None], chunk: tuple[list[str], int, int]
                     ) -> tuple[pa.RecordBatch | str | None, AlignSummary]:
    job, bpe = state
    lines, first_line, first_index = chunk
    trees = chunk_trees(lines, job.path, first_line, first_index)
    columns = featurize(trees, job.config, bpe.segment_word if bpe is not None else None)
    summary = AlignSummary(len(trees), len(columns), columns.projective.count(False), columns.rejected)
    if not len(columns):
        return None, summary
    ids = [first_index + i for i in columns.kept]
    if job.fmt == "arrow":
        return columns.to_batch(ids, align_schema(job.config.features)), summary
    lines_out = []
    for i, index in enumerate(ids):
        record = {"id": index, "sent_id": columns.sent_id[i], **columns.record(i)}
        lines_out.append(_format_line(record, job.fmt) + "\n")
    return "".join(lines_out), summary


def _format_line(record: dict[str, Any], fmt: str) -> str:
    if fmt == "jsonl":
        return record_to_json(record)
    if fmt == "pascal":
        return " ".join(repr(float(x)) for x in record["parent_mid"])
    if fmt == "text":
        return " ".join(record["subwords"])
    transitions = record["transitions"]
    return " ".join(transitions) if transitions is not None else ""


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress_bar(progress: bool | None) -> Any:
    """tqdm on stderr; by default (None) only when stderr is a terminal, as tqdm's disable=None
    (tqdm is imported only then)."""
    if progress is None:
        progress = not hasattr(sys.stderr, "isatty") or sys.stderr.isatty()
    if not progress:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(unit=" sent", file=sys.stderr)


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
    bar = _progress_bar(progress)
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
        _PARENT_BPE.clear()
        bar.close()
        sink.flush()
        if output_path != "-":
            sink.close()
    return summary
