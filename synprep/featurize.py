"""The featurize stage: token-level trees (+ BPE) -> the CONTRACT.md features of many sentences, column-wise.

`featurize` is what convert (per piece and side), `synprep align`, `synprep inspect` and the trainer's source
preparation call; `sentence_features` is one sentence as a dict. The features themselves are the pure
functions of `synprep.features`.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np
import pyarrow as pa

from . import features as F
from . import schema as S
from .bpe import split_tokens
from .options import NON_PROJECTIVE_POLICIES, ROOT_POLICIES
from .schema import DEFAULT_FEATURES
from .subwords import UNMARKED_PIECES, CodesRule, TokenCutter, read_back
from .trees import Tree, forest_projective, lift_projective


@dataclass(frozen=True)
class FeatureConfig:
    """What to compute for one side, and the tree policies."""

    features: tuple[str, ...] = DEFAULT_FEATURES
    root: str = "drop"
    non_projective: str = "keep"
    strip_subtypes: bool = False

    def __post_init__(self) -> None:
        if self.root not in ROOT_POLICIES:
            raise ValueError(f"root policy must be one of {', '.join(ROOT_POLICIES)}")
        if self.non_projective not in NON_PROJECTIVE_POLICIES:
            raise ValueError(f"non-projective policy must be one of {', '.join(NON_PROJECTIVE_POLICIES)}")


class Rejected(Exception):
    """A sentence that the policies exclude (counted by the caller under `reason`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _flat_index(lengths: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The indices into flat values (sentence i: `lengths[i]` of them) of the sentences `rows`, in that order."""
    starts = np.concatenate(([0], np.cumsum(lengths)))[rows]
    counts = lengths[rows]
    return np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))


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
    distances: np.ndarray | None = None  # each sentence's token x token matrix, row-major, flat
    transitions: list[list[str] | None] | None = None
    dropped: dict[int, str] = field(default_factory=dict)  # position among the input trees -> reason
    per_subword: dict[str, np.ndarray] = field(default_factory=dict)  # the `schema.SUBWORD_FEATURES` computed
    notes: dict[int, str] = field(default_factory=dict)  # position -> what a read-back rejection found (its token)
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
        for name, values in self.per_subword.items():
            record[name] = values[s0:s1]
        if self.distances is not None:
            record["distances"] = self.distances[cells[i]:cells[i + 1]]
        if self.transitions is not None:
            record["transitions"] = self.transitions[i]
        return record

    def take(self, rows: Sequence[int]) -> FeatureColumns:
        """The kept sentences `rows` (indices into `kept`), in that order, as new columns."""
        rows = np.asarray(rows, dtype=np.int64)
        tokens, subwords = _flat_index(self.n_tokens, rows), _flat_index(self.n_subwords, rows)
        pick = rows.tolist()

        def strings(values: list, index: np.ndarray) -> list:
            return [values[i] for i in index.tolist()]

        return FeatureColumns(
            [self.kept[i] for i in pick], [self.sent_id[i] for i in pick], strings(self.tokens, tokens),
            self.n_tokens[rows], self.heads[tokens], strings(self.subwords, subwords), self.n_subwords[rows],
            self.subword_token[subwords], [self.projective[i] for i in pick],
            None if self.labels is None else strings(self.labels, tokens),
            None if self.distances is None else self.distances[_flat_index(self.n_tokens ** 2, rows)],
            None if self.transitions is None else [self.transitions[i] for i in pick], dict(self.dropped),
            {name: values[subwords] for name, values in self.per_subword.items()}, dict(self.notes))

    def arrays(self, fields: Sequence[pa.Field], prefix: str = "") -> list[pa.Array]:
        """Arrow arrays of the feature fields `fields` (named `prefix` + CONTRACT.md name), built from the
        flat columns (no per-row objects)."""
        lengths = {"tokens": self.n_tokens, "heads": self.n_tokens, "labels": self.n_tokens,
                   "subwords": self.n_subwords, "subword_token": self.n_subwords, "distances": self.n_tokens ** 2}
        arrays = []
        for column in fields:
            name = column.name[len(prefix):]
            if name == "sent_id":
                arrays.append(S.plain_array(self.sent_id, column.type))
            elif name == "projective":
                arrays.append(S.plain_array(self.projective, column.type))
            elif name == "transitions":
                arrays.append(S.list_array_of_lists(self.transitions, column.type))
            elif name in self.per_subword:
                arrays.append(S.list_array(self.per_subword[name], self.n_subwords, column.type))
            else:
                arrays.append(S.list_array(getattr(self, name), lengths[name], column.type))
        return arrays

    def to_batch(self, ids: list[int], schema: pa.Schema) -> pa.RecordBatch:
        """One Arrow record batch of the `align_schema` columns, `ids` = the kept sentences' ids."""
        return pa.RecordBatch.from_arrays([S.plain_array(ids, schema.field("id").type)]
                                          + self.arrays(list(schema)[1:]), schema=schema)


def pair_batch(ids: Sequence[int], src_text: Sequence[str | None], tgt_text: Sequence[str | None],
               src: FeatureColumns, tgt: FeatureColumns, schema: pa.Schema) -> pa.RecordBatch:
    """One record batch of a convert shard (`schema.pair_schema`): ids, texts, then src_* and tgt_* features."""
    head = [S.plain_array(list(ids), pa.int64()), S.plain_array(list(src_text), pa.string()),
            S.plain_array(list(tgt_text), pa.string())]
    src_fields = [f for f in schema if f.name.startswith("src_") and f.name != "src_text"]
    tgt_fields = [f for f in schema if f.name.startswith("tgt_") and f.name != "tgt_text"]
    return pa.RecordBatch.from_arrays(head + src.arrays(src_fields, "src_") + tgt.arrays(tgt_fields, "tgt_"),
                                      schema=schema)


UNALIGNED = "unaligned_pieces"  # the raw-text cut left a token without a piece of its own ([bpe] cut = "raw")
UNMARKED = UNMARKED_PIECES  # a token's pieces do not show its bounds under the scheme's marker


def boundary_of(cutter: Any) -> tuple[str, str]:
    """(marker, marker kind) of a cutter's pieces (subword-nmt's '@@' / end when it has none: no sub-words)."""
    return (getattr(cutter, "marker", F.BPE_SEPARATOR) or "", getattr(cutter, "marker_kind", "end")) if cutter \
        else (F.BPE_SEPARATOR, "end")


def _pieces_left_out(trees: Sequence[Tree], config: FeatureConfig, segment_word: Callable[[str], str] | None,
                     cut: list[list[list[str]] | None] | None, boundary: tuple[str, str],
                     read_back: Callable[[Sequence[str], Sequence[Sequence[str]]], tuple[str, str] | None] | None,
                     dropped: dict[int, str]) -> dict[int, str]:
    """Add to `dropped` the sentences whose pieces do not read back (`read_back`: the token-by-token cut of a
    scheme's model) or, without it, whose pieces hide a token's bounds where transitions need them (`UNMARKED`);
    returns what the read-back found per left-out sentence."""
    notes: dict[int, str] = {}
    if read_back is not None:
        codes = getattr(read_back, "__self__", None)  # BPE codes' rule: only a token holding the separator fails
        for i, tree in enumerate(trees):
            if isinstance(codes, CodesRule) and codes.marker not in "\n".join(tree.tokens):
                continue
            failed = read_back([form for form, in split_tokens(tree.tokens)], split_tokens(tree.tokens, segment_word))
            if failed is not None:
                dropped[i], notes[i] = failed
    elif "transitions" in config.features and boundary[1] != "end":  # subword-nmt's are marked as they are cut
        F.check_boundary_kind(*boundary)
        pieces_of = ((cut[i] if cut is not None else split_tokens(tree.tokens, segment_word))
                     for i, tree in enumerate(trees) if i not in dropped)
        for i, sentence in zip([i for i in range(len(trees)) if i not in dropped], pieces_of, strict=True):
            if not all(F.token_marked(token, *boundary) for token in sentence):  # type: ignore[union-attr]
                dropped[i] = UNMARKED
    return notes


def read_back_of(cutter: Any) -> Callable[[Sequence[str], Sequence[Sequence[str]]], tuple[str, str] | None]:
    """The read-back check of a scheme's cutter cutting token by token (`synprep.subwords.read_back`); for BPE
    codes or no cutter (no sub-words), that of their separator (`synprep.subwords.CodesRule`: a token holding it,
    `dog@@`, does not read back)."""
    if isinstance(cutter, TokenCutter):
        return functools.partial(read_back, cutter)
    return CodesRule(getattr(cutter, "separator", F.BPE_SEPARATOR)).check


def featurize(trees: Sequence[Tree], config: FeatureConfig,
              segment_word: Callable[[str], str] | None = None,
              cut_sentence: Callable[[str, Sequence[str]], list[list[str]] | None] | None = None,
              boundary: tuple[str, str] = (F.BPE_SEPARATOR, "end"),
              read_back: Callable[[Sequence[str], Sequence[Sequence[str]]], tuple[str, str] | None] | None = None
              ) -> FeatureColumns:
    """All requested fields of several sentences at once (see FeatureColumns). Sentences that the
    policies exclude (non-projective policy `drop`) are left out, with their reason in `dropped`.
    `cut_sentence` (text, tokens) -> each token's pieces, instead of `segment_word` token by token (the raw-text
    cut, `synprep.subwords.TokenCutter.cut_text`); a sentence it cannot cut (None) is left out as `UNALIGNED`.
    `boundary`: the (marker, marker kind) of the pieces (`boundary_of`), by which transitions are read back; with
    transitions under a `start` / `continue` marker, a sentence with a token whose pieces do not show its bounds
    (`features.token_marked`) is left out as `UNMARKED`. `read_back` (forms, each token's pieces) -> (reason,
    detail) or None: the scheme's read-back check of the token-by-token cut (`synprep.subwords.read_back`); a
    sentence it refuses is left out under its reason, the detail in `notes`."""
    sizes = np.fromiter(map(len, trees), dtype=np.int64, count=len(trees))
    heads = np.fromiter(chain.from_iterable(tree.heads for tree in trees), dtype=np.int64, count=int(sizes.sum()))
    projective = forest_projective(heads, sizes).tolist()
    kept = list(range(len(trees)))
    dropped: dict[int, str] = {}
    cut = ([cut_sentence(tree.text or " ".join(tree.tokens), tree.tokens) for tree in trees]
           if cut_sentence is not None else None)
    if cut is not None and None in cut:
        dropped = {i: UNALIGNED for i in kept if cut[i] is None}
    notes = _pieces_left_out(trees, config, segment_word, cut, boundary, read_back, dropped)
    if config.non_projective == "drop" and not all(projective):
        dropped.update({i: "non_projective" for i in kept if not projective[i] and i not in dropped})
    if dropped:
        kept = [i for i in kept if i not in dropped]
        trees = [trees[i] for i in kept]
        projective = [projective[i] for i in kept]
        sizes = sizes[kept]
        heads = np.fromiter(chain.from_iterable(tree.heads for tree in trees), dtype=np.int64,
                            count=int(sizes.sum()))
    tokens = list(chain.from_iterable(tree.tokens for tree in trees))
    if cut is not None:
        pieces: list[Sequence[str]] = [token_pieces for i in kept for token_pieces in cut[i]]  # type: ignore[union-attr]
    else:
        pieces = split_tokens(tokens, segment_word)
    counts = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    owner = np.repeat(np.arange(len(tokens)), counts)  # global token of each sub-word
    token_offset = np.cumsum(sizes) - sizes
    bounds = np.concatenate(([0], np.cumsum(counts)))
    n_subwords = bounds[token_offset + sizes] - bounds[token_offset]
    columns = FeatureColumns(
        kept, [tree.sent_id for tree in trees], tokens, sizes, heads, list(chain.from_iterable(pieces)),
        n_subwords, owner - np.repeat(token_offset, n_subwords), projective, dropped=dropped, notes=notes)
    wanted = config.features
    labels = list(chain.from_iterable(tree.labels for tree in trees))
    if config.strip_subtypes:
        labels = F.strip_subtypes(labels)
    if "labels" in wanted:
        columns.labels = labels
    for feature in S.SUBWORD_FEATURES:  # declared once in the schema: field, type, group, pure function
        if feature.group in wanted:
            columns.per_subword[feature.field] = getattr(F, feature.function)(heads, sizes, owner)
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
