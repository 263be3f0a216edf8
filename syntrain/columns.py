"""The shard columns the trainer reads, and the declarations a switch makes over them: a batch column
(`BatchColumn`: how a model input is loaded from shard columns and collated per batch) and a decoder target
(`TargetColumn`: a target shard column the decoder produces instead of the target sub-words). The data layer
names no switch's column: it receives these declarations from its caller (`syntrain.switches` keeps them by name,
`ModelConfig.batch_columns` and `dataset_options` hand over those of a model)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from synprep import schema

from .arrow import flat_numbers

# column names, checked once against the declared Arrow schema
_ALL_FIELDS = {f.name for f in schema.pair_schema(schema.FEATURE_GROUPS, schema.FEATURE_GROUPS, version=1)}
ID, SRC_TEXT, TGT_TEXT = "id", "src_text", "tgt_text"
SRC_SUBWORDS, TGT_SUBWORDS = "src_subwords", "tgt_subwords"
assert {ID, SRC_TEXT, TGT_TEXT, SRC_SUBWORDS, TGT_SUBWORDS} <= _ALL_FIELDS
# the columns the trainer reads (when present); of the others only the declared ones (batch columns, target
# columns) are read
TRAIN_COLUMNS = (ID, SRC_TEXT, TGT_TEXT, SRC_SUBWORDS, TGT_SUBWORDS)
TEXT = "text"  # the decoder target of a model whose switches declare none: the target sub-words


class BatchColumn:
    """A batch column: one padded array per batch, collated from shard columns, declared by the switch that reads
    it (`Switch.columns`; the data layer names none). `name`: the key a switch asks for in `batch_columns` and
    the model input's name (`Batch.inputs`; the shard column's name when it reads one); `column`: the shard
    column read, written by pipeline feature group `group` of `side` ("src"/"tgt", for the error when a split
    lacks it); `reads`: other shard columns it needs; `made_from` + `make`: columns a split without `column`
    makes it from, `make(heads, sizes, global_owner)` (a per-sub-word function of `synprep.features`); `pad`,
    `dtype`: the padded (B, S) or (B, T) array (tgt: decoder input positions, after BOS); `supervision`: read
    by the losses only, in training (decoding does not read it).

    The defaults collate a per-sub-word number list; a switch overrides `load` (once per split) and `collate`
    (per batch) for anything else (a matrix, ids from a vocabulary, a shift)."""

    def __init__(self, name: str, column: str, side: str, group: str, *,
                 pad: float = -1, dtype: type = np.int64, supervision: bool = False, reads: tuple[str, ...] = (),
                 made_from: tuple[str, ...] = (), make: Callable[..., np.ndarray] | None = None) -> None:
        self.name, self.column, self.side, self.group = name, column, side, group
        self.pad, self.dtype, self.supervision, self.reads = pad, dtype, supervision, reads
        self.made_from, self.make = made_from, make

    def shard_columns(self) -> list[str]:
        """Every shard column it may read (`read_split` decodes only these and the core ones)."""
        return [name for name in (self.column, *self.reads, *self.made_from) if name]

    def missing(self, names: Sequence[str]) -> bool:
        """Whether a split with columns `names` cannot give this feature."""
        names = set(names)
        made = bool(self.made_from) and set(self.made_from) <= names
        return not (self.column in names or made) or not set(self.reads) <= names

    def load(self, data: Any) -> tuple[np.ndarray, np.ndarray]:
        """What `collate` slices, computed once per split (`data`: a `syntrain.dataset.ParallelData`): (flat values,
        int64 row offsets) of `column`, or made from `made_from` by `make` where the split lacks it."""
        table = data.table
        if self.column in table.column_names or not self.made_from:
            return flat_numbers(table.column(self.column))
        heads, owner = (flat_numbers(table.column(name)) for name in self.made_from)
        sizes, pieces = np.diff(heads[1]), np.diff(owner[1])
        global_owner = owner[0].astype(np.int64) + np.repeat(heads[1][:-1], pieces)
        return self.make(heads[0], sizes, global_owner), owner[1]

    def row(self, values: np.ndarray) -> np.ndarray:
        """One row's values as collated (default: as stored)."""
        return values

    def collate(self, loaded: tuple[np.ndarray, np.ndarray], rows: Sequence[int], s: int, t: int) -> np.ndarray:
        """The padded (B, S) array (side "tgt": (B, T), values from decoder input position 1 on)."""
        values, offsets = loaded
        first = 1 if self.side == "tgt" else 0
        out = np.full((len(rows), t if self.side == "tgt" else s), self.pad, self.dtype)
        for b, row in enumerate(rows):
            part = self.row(values[offsets[row] : offsets[row + 1]])
            out[b, first : first + len(part)] = part
        return out



class TargetColumn:
    """A decoder target other than the target sub-words, declared by the switch that produces it
    (`Switch.decoder_targets`; a model's target is the one its active switches declare, else TEXT): `name` (what the
    run header and errors call it), `column` (the shard column, list<string>; a null row has no target: it is
    skipped in training, counted in `skipped_null`, and kept without a loss for decoding), `group` (the target
    feature group of the pipeline that writes it, for the error when a split lacks it), `counted(item)`: which
    of its items join the vocabulary (the others, sub-words, are counted from `tgt_subwords`)."""

    def __init__(self, name: str, column: str, group: str, counted: Callable[[str], bool] | None = None) -> None:
        self.name, self.column, self.group, self.counted = name, column, group, counted

    def missing_error(self, path: str) -> str:
        """The one-line message for a split without the column."""
        return (f"{path}: target = \"{self.name}\" needs {self.column}: convert with [features] tgt = [..., "
                f"\"{self.group}\"]")
