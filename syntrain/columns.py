"""The shard columns the trainer reads, and the declarations a switch makes over them: a batch column
(`BatchColumn`: how a model input is loaded from shard columns and collated per batch, with its side, shape,
BOS shift and values at EOS, BOS and padding) and a decoder target (`TargetColumn`: a target shard column the
decoder produces instead of the target sub-words); and the batch columns several switches read, declared once
(`SHARED`: head positions, dependency labels and syntax distances, for either side). The data layer names no
switch's column: it receives these declarations from its caller (`syntrain.switches` keeps them by name,
`ActiveSwitches.batch_columns` and `parallel_data_arguments` hand over those of a model)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from synprep import schema
from synprep.features import forest_dbsa_heads, forest_tree_distances, per_subword, subword_distances

from .arrow import encode_strings, flat_numbers

# column names, checked once against the declared Arrow schema
_ALL_FIELDS = {f.name for f in schema.pair_schema(schema.FEATURE_GROUPS, schema.FEATURE_GROUPS, version=1)}
ID, SRC_TEXT, TGT_TEXT = "id", "src_text", "tgt_text"
SRC_SUBWORDS, TGT_SUBWORDS = "src_subwords", "tgt_subwords"
assert {ID, SRC_TEXT, TGT_TEXT, SRC_SUBWORDS, TGT_SUBWORDS} <= _ALL_FIELDS
# the columns the trainer reads (when present); of the others only the declared ones (batch columns, target
# columns) are read
TRAIN_COLUMNS = (ID, SRC_TEXT, TGT_TEXT, SRC_SUBWORDS, TGT_SUBWORDS)


LABEL_NONE, LABEL_UNKNOWN = 0, 1  # ids of a label column: none (EOS, BOS, pad), a label unseen in training
SHAPES = ("token", "pair", "edges")  # what a batch column holds per batch (`BatchColumn.shape`)


class BatchColumn:
    """A batch column: one padded array per batch, collated from shard columns, declared once: by the switch that
    alone reads it (`Switch.columns`), or here in the column layer when several may (`SHARED`, by name); the data
    layer names none. `name`: the key a switch asks for in `batch_columns` and the model input's name
    (`Batch.inputs`; the shard column's name when it reads one); `column`: the shard column read, written by
    pipeline feature group `group` of `side` ("src"/"tgt", also for the error when a split lacks it); `reads`:
    other shard columns it needs; `made_from` + `make`: columns a split without `column` makes it from,
    `make(heads, sizes, global_owner)` (a per-sub-word function of `synprep.features`); `supervision`: read by
    the losses only, in training (decoding does not read it).

    Its layout: `shape` ("token": one value per position of its side, (B, S) on the source, (B, T) on the
    target; "pair": (B, S, S); "edges": rows of its own, (E, k)), `dtype`; `positional`: its values are positions
    of its side (head positions), moved with the positions (a value < 0, none, kept); `pad` the value at
    padding, `eos` at the source's EOS position and `bos` at the positions before the first sub-word (both
    default: `pad`). Those positions are the side's prefix, which the caller gives as `shift` (`Collator`): the
    target's start token (BOS) and any target prefix, the source's prefix (none, or a multilingual model's
    language code: `[model] source_prefix`, `target_prefix`); a sub-word's values move right by it, and a
    positional value too, so that a head still points at its sub-word.

    The defaults collate a per-sub-word number list ("token"); a declaration overrides `row` (one row's values),
    `load` (once per split) and `collate` (per batch) for anything else (a matrix, ids from a vocabulary)."""

    def __init__(self, name: str, column: str, side: str, group: str, *, shape: str = "token", pad: float = -1,
                 eos: float | None = None, bos: float | None = None, dtype: type = np.int64,
                 supervision: bool = False, reads: tuple[str, ...] = (), made_from: tuple[str, ...] = (),
                 make: Callable[..., np.ndarray] | None = None, positional: bool = False) -> None:
        if side not in ("src", "tgt") or shape not in SHAPES:
            raise ValueError(f"batch column {name!r}: side is src or tgt, shape one of {', '.join(SHAPES)}")
        self.name, self.column, self.side, self.group, self.shape = name, column, side, group, shape
        self.positional = positional
        self.pad, self.eos, self.bos = pad, pad if eos is None else eos, pad if bos is None else bos
        self.dtype, self.supervision, self.reads = dtype, supervision, reads
        self.made_from, self.make = made_from, make

    def layout(self) -> str:
        """Its layout in words (docs, errors): e.g. "tgt (B, T) int64, shifted 1 (BOS), pad -1, BOS -1"."""
        letter = "S" if self.side == "src" else "T"
        if self.shape == "edges":
            return f"{self.side} (E, k) {np.dtype(self.dtype).name}"
        dims = f"(B, {letter})" if self.shape == "token" else f"(B, {letter}, {letter})"
        ends = f"EOS {self.eos}" if self.side == "src" else f"shifted 1 (BOS), BOS {self.bos}"
        return f"{self.side} {dims} {np.dtype(self.dtype).name}, pad {self.pad}, {ends}"

    def shard_columns(self) -> list[str]:
        """Every shard column it may read (`read_split` decodes only these and the core ones)."""
        return [name for name in (self.column, *self.reads, *self.made_from) if name]

    def missing(self, names: Sequence[str]) -> bool:
        """Whether a split with columns `names` cannot give this feature."""
        names = set(names)
        made = bool(self.made_from) and set(self.made_from) <= names
        return not (self.column in names or made) or not set(self.reads) <= names

    def load(self, data: Any) -> tuple[np.ndarray, np.ndarray]:
        """What `collate` slices, computed once per split (`data`: a `syntrain.dataset.EncodedSplit`): (flat values,
        int64 row offsets) of `column`, or made from `made_from` by `make` where the split lacks it."""
        table = data.table
        if self.column in table.column_names or not self.made_from:
            return flat_numbers(table.column(self.column))
        heads, owner = (flat_numbers(table.column(name)) for name in self.made_from)
        sizes, pieces = np.diff(heads[1]), np.diff(owner[1])
        global_owner = owner[0].astype(np.int64) + np.repeat(heads[1][:-1], pieces)
        return self.make(heads[0], sizes, global_owner), owner[1]

    def row(self, values: np.ndarray, shift: int) -> np.ndarray:
        """One row's values as collated at positions `shift` on (default: as stored; positional values moved
        by `shift`)."""
        if not self.positional or not shift:
            return values
        return np.where(values >= 0, values + shift, values).astype(values.dtype)

    def row_values(self, loaded: Any, row: int) -> np.ndarray:
        """The values of split row `row` from what `load` gave (default: the slice of the flat values)."""
        values, offsets = loaded
        return values[offsets[row] : offsets[row + 1]]

    def collate(self, loaded: Any, rows: Sequence[int], s: int, t: int, shift: int) -> np.ndarray:
        """The padded (B, S) array (side "tgt": (B, T)), values from position `shift` on (the side's prefix: see
        the class), with the declared values at padding, EOS and the prefix (`bos`)."""
        out = np.full((len(rows), t if self.side == "tgt" else s), self.pad, self.dtype)
        out[:, :shift] = self.bos
        for b, row in enumerate(rows):
            part = self.row(self.row_values(loaded, row), shift)
            out[b, shift : shift + len(part)] = part
            if self.side == "src" and shift + len(part) < s:
                out[b, shift + len(part)] = self.eos
        return out


class HeadColumn(BatchColumn):
    """Head positions (one per sub-word, -1 = none: EOS, BOS, a prefix, pad), positional. On the target,
    positions of the decoder *input* (the shift: + 1 for BOS, + the target prefix), and -1 for sub-words whose
    head comes later (the causal mask hides it: no loss)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, positional=True, **kwargs)

    def row(self, values: np.ndarray, shift: int) -> np.ndarray:
        if self.side == "src":
            return super().row(values, shift)
        head = values.astype(np.int64)
        return np.where(head <= np.arange(len(head)), head + shift, -1)


class LabelColumn(BatchColumn):
    """Dependency-label ids of one side, each sub-word taking its token's label: 0 (`LABEL_NONE`) at EOS, BOS
    and pad, 1 (`LABEL_UNKNOWN`) a label unseen in training, 2... the run's label vocabulary `vocabulary` (the
    name of a `data_options` entry: the EncodedSplit's). Reads the side's labels and subword_token columns; the
    strings become ids once per split."""

    def __init__(self, side: str, vocabulary: str, supervision: bool = False) -> None:
        super().__init__(f"{side}_labels", f"{side}_labels", side, "labels", pad=LABEL_NONE,
                         reads=(f"{side}_subword_token",), supervision=supervision)
        self.vocabulary = vocabulary

    def load(self, data: Any) -> tuple:
        known = pa.array(list(data.data_options.get(self.vocabulary) or []), pa.string())
        return (encode_strings(data.table.column(self.column), known, 2, LABEL_UNKNOWN),
                flat_numbers(data.table.column(self.reads[0])))

    def row_values(self, loaded: Any, row: int) -> np.ndarray:
        (labels, label_offsets), (owners, owner_offsets) = loaded
        return per_subword(labels[label_offsets[row] : label_offsets[row + 1]],
                           owners[owner_offsets[row] : owner_offsets[row + 1]])


class DistanceColumn(BatchColumn):
    """`distances` (B, S, S) uint8 sub-word syntax distances, made from the source heads of the batch's rows at
    once (`forest_tree_distances`, then `subword_distances`), placed after the source prefix (`shift`); the
    prefix, EOS and pad rows/columns are 0: they stay inside every syntax-directed window, unscaled. (Shards of
    format 1 also stored them token x token: not read.)"""

    def load(self, data: Any) -> tuple:
        return tuple(flat_numbers(data.table.column(name)) for name in (self.column, *self.reads))

    def collate(self, loaded: tuple, rows: Sequence[int], s: int, t: int, shift: int) -> np.ndarray:
        (heads, head_offsets), (owners, owner_offsets) = loaded
        out = np.zeros((len(rows), s, s), np.uint8)
        parts = [heads[head_offsets[row] : head_offsets[row + 1]] for row in rows]
        sizes = np.array([len(h) for h in parts], np.int64)
        cells = np.concatenate([[0], np.cumsum(sizes * sizes)])
        token_distances = forest_tree_distances(np.concatenate(parts) if parts else np.zeros(0, np.int64), sizes)
        for b, row in enumerate(rows):
            owner = owners[owner_offsets[row] : owner_offsets[row + 1]]
            n = len(owner)
            at = slice(shift, shift + n)
            out[b, at, at] = subword_distances(token_distances[cells[b] : cells[b + 1]], owner)
        return out


# The batch columns more than one switch may read, declared once here and named by the switches that read them
# (`batch_columns`); a switch's own columns stay in its module (`Switch.columns`).
# (B, S) / (B, T) head positions, -1 = none (EOS, BOS, pad); `*_dbsa_head` of shards written without the `dbsa`
# group is made from the side's heads and subword_token (`forest_dbsa_heads`, the one implementation)
SHARED: tuple[BatchColumn, ...] = (
    HeadColumn("src_parent_first", "src_parent_first", "src", "parents"),
    HeadColumn("src_dbsa_head", "src_dbsa_head", "src", "dbsa",
               made_from=("src_heads", "src_subword_token"), make=forest_dbsa_heads),
    HeadColumn("tgt_parent_first", "tgt_parent_first", "tgt", "parents", supervision=True),
    HeadColumn("tgt_dbsa_head", "tgt_dbsa_head", "tgt", "dbsa", supervision=True,
               made_from=("tgt_heads", "tgt_subword_token"), make=forest_dbsa_heads),
    LabelColumn("src", "source_labels"),
    LabelColumn("tgt", "target_labels", supervision=True),
    DistanceColumn("distances", "src_heads", "src", "distances", pad=0, dtype=np.uint8, shape="pair",
                   reads=("src_subword_token",)),
)


class TargetColumn:
    """A decoder target other than the target sub-words, declared by the switch that produces it
    (`Switch.decoder_targets`; a model's decoder target is the one its active switches declare, else TEXT):
    `name` (what the run header and errors call it), `column` (the shard column, list<string>; a null row has no
    decoder target: it is skipped in training, counted in `skipped_null`, and kept without a loss for decoding),
    `group` (the target-side feature group of the pipeline that writes it, for the error when a split lacks it),
    `counted(item)`: which of its items join the vocabulary (the others, sub-words, are counted from
    `tgt_subwords`)."""

    def __init__(self, name: str, column: str, group: str, counted: Callable[[str], bool] | None = None) -> None:
        self.name, self.column, self.group, self.counted = name, column, group, counted

    def missing_error(self, path: str) -> str:
        """The one-line message for a split without the column."""
        return (f"{path}: decoder_target = \"{self.name}\" needs {self.column}: convert with [features] tgt = [..., "
                f"\"{self.group}\"]")
