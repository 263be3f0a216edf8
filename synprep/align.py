"""The align stage: a tree (+ BPE) -> one feature record per sentence.

`sentence_features` is what `convert` calls per side; `align_file` is `synprep align`.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from tqdm import tqdm

from . import features as F
from .bpe import Bpe, align_subwords
from .conllu import read_conllu, to_tree
from .schema import DEFAULT_FEATURES, align_schema, record_to_json, records_to_batch
from .textio import open_binary, open_text_output
from .trees import Tree, is_projective, lift_projective

FORMATS = ("jsonl", "arrow", "pascal", "transitions")
ARROW_BATCH_ROWS = 1024


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
        record["parent_mid"] = F.parent_mid(tree.heads, subword_token)
        record["parent_first"] = F.parent_first(tree.heads, subword_token)
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
    rejected: Counter | None = None


def iter_records(conllu_path: str, config: FeatureConfig, bpe: Bpe | None,
                 summary: AlignSummary) -> Iterator[dict[str, Any]]:
    """Records of `synprep align`: id (0-based sentence index), sent_id, then the features."""
    segment = bpe.segment_word if bpe is not None else None
    summary.rejected = Counter()
    for sentence in read_conllu(conllu_path):
        tree = to_tree(sentence, conllu_path)
        summary.sentences += 1
        try:
            record = sentence_features(tree, config, segment)
        except Rejected as rejection:
            summary.rejected[rejection.reason] += 1
            continue
        if not record["projective"]:
            summary.non_projective += 1
        summary.written += 1
        yield {"id": sentence.index, "sent_id": tree.sent_id, **record}


def _format_line(record: dict[str, Any], fmt: str) -> str:
    if fmt == "jsonl":
        return record_to_json(record)
    if fmt == "pascal":
        return " ".join(repr(float(x)) for x in record["parent_mid"])
    transitions = record["transitions"]
    return " ".join(transitions) if transitions is not None else ""


def align_file(conllu_path: str, output_path: str, config: FeatureConfig, bpe: Bpe | None = None,
               fmt: str = "jsonl", progress: bool | None = None) -> AlignSummary:
    """`synprep align`: write one record per sentence in `fmt` (see FORMATS) to `output_path`."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}")
    needed = {"pascal": "parents", "transitions": "transitions"}.get(fmt)
    if needed and needed not in config.features:
        config = FeatureConfig(config.features + (needed,), config.root, config.non_projective,
                               config.strip_subtypes)
    summary = AlignSummary()
    records = iter_records(conllu_path, config, bpe, summary)
    # tqdm's disable=None turns the bar off when stderr is not a terminal
    records = tqdm(records, unit=" sent", disable=None if progress is None else not progress, file=sys.stderr)
    if fmt == "arrow":
        schema = align_schema(config.features)
        sink = open_binary(output_path, "wb")
        try:
            with pa.ipc.new_stream(sink, schema) as writer:
                batch: list[dict[str, Any]] = []
                for record in records:
                    batch.append(record)
                    if len(batch) == ARROW_BATCH_ROWS:
                        writer.write_batch(records_to_batch(batch, schema))
                        batch = []
                if batch:
                    writer.write_batch(records_to_batch(batch, schema))
        finally:
            sink.flush()
            if output_path != "-":
                sink.close()
        return summary
    out = open_text_output(output_path)
    try:
        for record in records:
            out.write(_format_line(record, fmt) + "\n")
    finally:
        out.flush()
        if output_path != "-":
            out.close()
    return summary
