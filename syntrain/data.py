"""Data: synprep Arrow shards (memory-mapped) -> token ids, a joint vocabulary (or one per side when the dataset's
BPE is per side, `[bpe] joint = false`), token-count batches.

Positions (CONTRACT.md): shards store 0-based sub-word positions with no BOS/EOS. The encoder reads
`subwords + [EOS]` with **no BOS on the source**, so source positions need no shift; the decoder reads
`[BOS] + subwords` and predicts `subwords + [EOS]` (a target-side batch column starts at input position 1).

Model inputs (`Batch.inputs`): only what the active switches ask for (`Switch.batch_columns`), collated as
their modules declare it (`BatchColumn`, `Switch.columns`); this module names none of them.

Decoder targets: the target sub-words (`target = "text"`), or a target column a switch declares
(`TargetColumn`, `Switch.decoder_targets`: tree decoding's arc-standard transitions): the decoder then reads
`[BOS] + column` and predicts `column + [EOS]`; rows whose column is null are skipped in training (counted in
`skipped_null`) and kept, without a loss, for decoding.
"""

from __future__ import annotations

import json
import os
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from synprep import schema
from synprep.errors import InputError
from synprep.shards import Manifest, open_split, release_pages

from .shapes import padded_length

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
PAD_ID, BOS_ID, EOS_ID, UNK_ID = range(4)

# column names, checked once against the declared Arrow schema
_ALL_FIELDS = {f.name for f in schema.pair_schema(schema.FEATURE_GROUPS, schema.FEATURE_GROUPS, version=1)}
ID, SRC_TEXT, TGT_TEXT = "id", "src_text", "tgt_text"
SRC_SUBWORDS, TGT_SUBWORDS = "src_subwords", "tgt_subwords"
assert {ID, SRC_TEXT, TGT_TEXT, SRC_SUBWORDS, TGT_SUBWORDS} <= _ALL_FIELDS
LABEL_NONE, LABEL_UNKNOWN = 0, 1  # ids of a label feature: none (EOS, pad), a label unseen in training
TEXT = "text"  # the decoder target of a model whose switches declare none: the target sub-words


RELEASE_EVERY = 8  # chunks (record batches of ~1000 rows) read between two `release_pages`


def _chunks(column: pa.ChunkedArray | pa.Array) -> Iterator[pa.Array]:
    """The chunks of a column, the shard pages read given back every RELEASE_EVERY chunks and at the end (the
    kernel maps whole page-cache folios, so reading one column of a mapped shard soon maps all of it)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    for index, chunk in enumerate(chunks):
        yield chunk
        if index % RELEASE_EVERY == RELEASE_EVERY - 1:
            release_pages()
    release_pages()


def _string_chunks(column: pa.ChunkedArray | pa.Array) -> Iterator[tuple[pa.Array, pa.Array]]:
    """The flattened items of a list<string> or list<dictionary<int, string>> column (shard format 1 or 2), per
    chunk: (distinct strings, int64 numpy index of each item into them) or, plain strings, (the items, None)."""
    for chunk in _chunks(column):
        flat = pc.list_flatten(chunk)
        if pa.types.is_dictionary(flat.type):
            yield flat.dictionary, flat.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        else:
            yield flat, None


def _list_offsets(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """int64 row offsets (n + 1) of a list column (null rows: empty)."""
    offsets = np.zeros(len(column) + 1, np.int64)
    row = 1
    for chunk in _chunks(column):  # each row's length, then one running sum
        offsets[row : row + len(chunk)] = pc.list_value_length(chunk).fill_null(0).to_numpy(zero_copy_only=False)
        row += len(chunk)
    return np.cumsum(offsets, out=offsets)


def encode_strings(column: pa.ChunkedArray | pa.Array, value_set: pa.Array, first: int, unknown: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """A list of strings column -> (flat int32 ids, int64 offsets): id = `first` + the string's position in
    `value_set`, `unknown` when absent. A dictionary column looks up each distinct string once; the ids are
    written chunk by chunk into one array (no second copy), and the shard pages read are given back."""
    offsets = _list_offsets(column)
    out, start = np.empty(int(offsets[-1]), np.int32), 0
    for strings, index in _string_chunks(column):
        found = pc.index_in(strings, value_set=value_set)
        ids = (pc.fill_null(pc.add(found, first), unknown).to_numpy(zero_copy_only=False)).astype(np.int32)
        count = len(ids) if index is None else len(index)
        out[start : start + count] = ids if index is None else ids[index]
        start += count
    return out, offsets


def flat_numbers(column: pa.ChunkedArray | pa.Array, dtype: type | None = None, add: float = 0
                 ) -> tuple[np.ndarray, np.ndarray]:
    """A list of numbers column -> (flat values as `dtype` (default: the column's), plus `add`; int64 row
    offsets), copied chunk by chunk into one array, the shard pages read given back."""
    offsets = _list_offsets(column)
    out, start = np.empty(int(offsets[-1]), dtype or column.type.value_type.to_pandas_dtype()), 0
    for chunk in _chunks(column):
        values = pc.list_flatten(chunk).to_numpy(zero_copy_only=False)
        out[start : start + len(values)] = values
        start += len(values)
    if add:
        out += add
    return out, offsets


def count_strings(column: pa.ChunkedArray, keep: Callable[[str], bool] | None = None) -> dict[str, int]:
    """How often each string occurs in a list of strings column (`keep`: only the strings it accepts); the
    counting is Arrow's (per chunk, then one group-by), only the distinct strings become Python objects."""
    values, counts = [], []
    for strings, index in _string_chunks(column):
        if index is None:
            found = pc.value_counts(strings)
            values.append(found.field("values"))
            counts.append(found.field("counts").cast(pa.int64()))
        else:  # a copy of the chunk's dictionary: its pages are given back as the loop goes
            values.append(pa.concat_arrays([strings]))
            counts.append(pa.array(np.bincount(index, minlength=len(strings)).astype(np.int64)))
    if not values:
        return {}
    table = pa.table({"value": pa.concat_arrays(values), "count": pa.concat_arrays(counts)})
    totals = table.group_by("value").aggregate([("count", "sum")])
    return {value: count for value, count in zip(totals.column("value").to_pylist(),
                                                 totals.column("count_sum").to_pylist(), strict=True)
            if value is not None and count and (keep is None or keep(value))}


def separate_bpe(configuration: dict) -> bool:
    """Whether a dataset's sub-words come from separate BPE codes per side (pipeline `[bpe] joint = false`)."""
    bpe = configuration.get("bpe") or {}
    return bpe.get("joint", True) is False and bpe.get("enabled", True) is not False


class Vocab:
    """The target vocabulary (the joint source/target one unless `source` is given): the specials first, then
    sub-words by frequency (ties: alphabetical). `source`: the source side's own vocabulary (separate BPE)."""

    def __init__(self, tokens: Sequence[str], source: Vocab | None = None) -> None:
        if tuple(tokens[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"a vocabulary starts with {SPECIALS}")
        self.itos = list(tokens)
        self.stoi = {token: i for i, token in enumerate(self.itos)}
        self._values: pa.Array | None = None  # itos as an Arrow array (for pc.index_in)
        self.source = source

    def __len__(self) -> int:
        return len(self.itos)

    @property
    def src(self) -> Vocab:
        """The vocabulary of the source ids: the source's own, or this joint one."""
        return self.source or self

    @classmethod
    def build(cls, tables: Iterable[pa.Table], min_freq: int = 1, decoder_target: str = TEXT, joint: bool = True
              ) -> Vocab:
        """Count `src_subwords` and `tgt_subwords` of the given tables (one joint vocabulary; `joint` false: a
        target vocabulary with a source vocabulary of its own); a declared `decoder_target` (`TargetColumn`): the
        items of its column that it counts (tree decoding: the LEFT-ARC/RIGHT-ARC tokens), target side."""
        tables = list(tables)
        declaration = target_column(decoder_target)
        if declaration is not None:
            for table in tables:
                if declaration.column not in table.column_names:
                    raise ValueError(declaration.missing_error("the training split"))
        counted = [(TGT_SUBWORDS, None)] + ([(declaration.column, declaration.counted)] if declaration else [])
        if joint:
            return cls(_counted(tables, [(SRC_SUBWORDS, None), *counted], min_freq))
        return cls(_counted(tables, counted, min_freq), cls(_counted(tables, [(SRC_SUBWORDS, None)], min_freq)))

    @classmethod
    def from_checkpoint(cls, ckpt: dict) -> Vocab:
        """The vocabulary a checkpoint stores: `vocab`, and `src_vocab` when the source has its own."""
        source = ckpt.get("src_vocab")
        return cls(ckpt["vocab"], cls(source) if source is not None else None)

    def checkpoint_fields(self) -> dict[str, list[str]]:
        """What `from_checkpoint` reads back (a joint vocabulary: only `vocab`, as before)."""
        return {"vocab": self.itos, **({"src_vocab": self.source.itos} if self.source else {})}

    def encode_column(self, column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
        """A list<string> column -> (flat int32 ids, int64 offsets); unknown pieces map to <unk>.
        (int32: half the RAM of int64 for WMT-size splits held by every training process.)"""
        return encode_strings(column, self._value_set(), 0, UNK_ID)

    def _value_set(self) -> pa.Array:
        if self._values is None or len(self._values) != len(self.itos):
            self._values = pa.array(self.itos, pa.string())
        return self._values

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Ids -> pieces, stopping at EOS and skipping the other specials."""
        pieces = []
        for i in ids:
            if i == EOS_ID:
                break
            if i >= len(SPECIALS):
                pieces.append(self.itos[i])
        return pieces

    def save(self, path: str) -> None:
        """One JSON list of pieces; a source vocabulary of its own goes beside it (vocab.json -> vocab.src.json)."""
        from synprep.textio import atomic_write  # whole or not at all; a write error names the file

        atomic_write(path, json.dumps(self.itos, ensure_ascii=False).encode("utf-8"))
        if self.source:
            self.source.save(source_vocab_path(path))

    @classmethod
    def load(cls, path: str) -> Vocab:
        """Read what `save` wrote."""
        with open(path, encoding="utf-8") as f:
            return cls(json.load(f))


def source_vocab_path(path: str) -> str:
    """Where `Vocab.save(path)` writes a separate source vocabulary."""
    stem, ext = os.path.splitext(path)
    return f"{stem}.src{ext}"


def _counted(tables: list[pa.Table], columns: list[tuple[str, Callable[[str], bool] | None]], min_freq: int
             ) -> list[str]:
    """The specials, then the strings of `columns` ((name, which strings count: None = all)) by frequency."""
    counts: dict[str, int] = {}
    for table in tables:
        for column, keep in columns:
            found = count_strings(table.column(column), keep)
            for value, count in found.items():
                counts[value] = counts.get(value, 0) + count
    kept = sorted((t for t, c in counts.items() if c >= min_freq and t not in SPECIALS), key=lambda t: (-counts[t], t))
    return list(SPECIALS) + kept


# the columns the trainer reads (when present); of compressed shards only these and the declared ones (batch
# columns, target columns) are decompressed
TRAIN_COLUMNS = (ID, SRC_TEXT, TGT_TEXT, SRC_SUBWORDS, TGT_SUBWORDS)


def in_memory(table: pa.Table) -> pa.Table:
    """A copy of `table` in this process's memory, not mapped from its shard files: a shard truncated or
    rewritten while a run goes on cannot pull the pages from under it (SIGBUS) or change its references."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return pa.ipc.open_stream(sink.getvalue()).read_all()


def check_scored_split(path: str) -> None:
    """A split decoded or scored (eval, translate, compare, a run's validation and test): its shards' sha256 as
    the manifest gives them (a flipped byte is one line, never a wrong id or a crash) and at least one pair."""
    split = open_split(path)
    problems = split.verify_hashes()
    if problems:
        raise InputError(f"{problems[0]} (synprep validate {path} lists all)")
    if not split.manifest.rows:
        raise InputError("the split has 0 pairs: nothing to translate or score (convert it again, or choose "
                         "another split)", path)


def read_split(path: str, columns: Sequence[str] | None = None) -> tuple[pa.Table, Manifest]:
    """A synprep split folder -> (one table over its checked shards, its manifest). Uncompressed shards are
    memory-mapped (zero-copy); of compressed ones only TRAIN_COLUMNS and the
    switches' declared columns are read into RAM. `columns`: only those
    of them that the split has (only they are validated and decoded; a stream's record batch is still read
    whole, so the memory-mapped pages of the others are touched too)."""
    split = open_split(path)
    if not split.manifest.shards:
        raise InputError("the manifest lists no shards", path)
    if columns is not None:
        columns = [c for c in dict.fromkeys(columns) if c in split.columns]
    elif split.manifest.compression != "none":
        columns = [c for c in train_columns() if c in split.columns]
    return split.table(columns), split.manifest


def train_columns() -> list[str]:
    """Every column the trainer may read: TRAIN_COLUMNS, the declared target columns and batch columns."""
    declared_columns = [declaration.column for declaration in declared_targets().values()]
    declared_columns += [c for column in declared().values() for c in column.shard_columns()]
    return list(dict.fromkeys([*TRAIN_COLUMNS, *declared_columns]))


Item, Made = TypeVar("Item"), TypeVar("Made")


def prefetch(items: Sequence[Item], make: Callable[[Item], Made], ahead: int = 2) -> Iterator[Made]:
    """`make(item)` for each item, in order, computed on one background thread up to `ahead` items ahead of
    the consumer (collation of the next batches overlaps the training step; numpy and torch copies release
    the GIL). An exception in `make` is raised at its item."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="syntrain-prefetch") as pool:
        pending = deque(pool.submit(make, item) for item in items[:ahead])
        for i in range(len(items)):
            made = pending.popleft().result()
            if i + ahead < len(items):
                pending.append(pool.submit(make, items[i + ahead]))
            yield made


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

    def load(self, data: ParallelData) -> tuple[np.ndarray, np.ndarray]:
        """What `collate` slices, computed once per split: (flat values, int64 row offsets) of `column`, or made
        from `made_from` by `make` where the split lacks it."""
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


_COLUMNS: dict[str, tuple[BatchColumn, str]] = {}  # name -> (declaration, the switch that declared it)


def declare(columns: Iterable[BatchColumn], by: str) -> None:
    """Add the batch columns a switch declares (`switches.register` calls this); a name is declared once."""
    for column in columns:
        if column.name in _COLUMNS and _COLUMNS[column.name][1] != by:
            raise ValueError(f"switch {by!r}: batch column {column.name!r} is already declared by switch "
                             f"{_COLUMNS[column.name][1]!r}")
        _COLUMNS[column.name] = (column, by)


def declared(name: str | None = None) -> BatchColumn | dict[str, BatchColumn]:
    """The declaration of batch column `name` (ValueError when no switch declares it), or all of them."""
    if name is None:
        return {key: column for key, (column, _) in _COLUMNS.items()}
    if name not in _COLUMNS:
        raise ValueError(f"no switch declares the batch column {name!r} (declared: "
                         f"{', '.join(sorted(_COLUMNS)) or 'none: import syntrain.switches'})")
    return _COLUMNS[name][0]


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


_TARGETS: dict[str, tuple[TargetColumn, str]] = {}  # name -> (declaration, the switch that declared it)


def declare_targets(targets: Iterable[TargetColumn], by: str) -> None:
    """Add the decoder targets a switch declares (`switches.register` calls this); a name is declared once."""
    for declaration in targets:
        name = declaration.name
        if name == TEXT or name in _TARGETS and _TARGETS[name][1] != by:
            owner = "the trainer" if name == TEXT else f"switch {_TARGETS[name][1]!r}"
            raise ValueError(f"switch {by!r}: decoder target {name!r} is already declared by {owner}")
        _TARGETS[name] = (declaration, by)


def undeclare(by: str) -> None:
    """Drop the batch columns and decoder targets switch `by` declared (`switches.unregister`)."""
    for registry in (_COLUMNS, _TARGETS):
        for name in [name for name, (_, owner) in registry.items() if owner == by]:
            del registry[name]


def declared_targets() -> dict[str, TargetColumn]:
    """The declared decoder targets by name (TEXT, the target sub-words, is not one of them)."""
    return {name: declaration for name, (declaration, _) in _TARGETS.items()}


def target_column(decoder_target: str) -> TargetColumn | None:
    """The declaration of `decoder_target` (None: TEXT; ValueError when no switch declares it)."""
    if decoder_target == TEXT:
        return None
    if decoder_target not in _TARGETS:
        raise ValueError(f"the decoder target must be one of {', '.join([TEXT, *_TARGETS])}, got {decoder_target!r}")
    return _TARGETS[decoder_target][0]


def readable_target(decoder_target: str, columns: Sequence[str]) -> str:
    """The decoder target a scored split with `columns` is read with: `decoder_target`, or TEXT when the split
    lacks its column (decoding needs no reference targets; a measure that needs them sees None)."""
    declaration = target_column(decoder_target)
    return TEXT if declaration is not None and declaration.column not in columns else decoder_target


@dataclass
class Batch:
    """Padded tensors of one batch; `index` = row numbers in the dataset; `inputs`: the model inputs of the
    switches by batch column name; `supervision`: those of them that only the losses read (not
    decoding)."""

    src: torch.Tensor  # (B, S) ids, subwords + EOS
    tgt_in: torch.Tensor  # (B, T) BOS + subwords
    tgt_out: torch.Tensor  # (B, T) subwords + EOS
    index: np.ndarray | None
    inputs: dict[str, torch.Tensor] = field(default_factory=dict)
    target_tokens: int = -1  # non-pad tgt_out entries, counted at collation (-1: count when asked)
    supervision: tuple[str, ...] = ()

    def _map(self, apply: Callable[[torch.Tensor], torch.Tensor]) -> Batch:
        return Batch(apply(self.src), apply(self.tgt_in), apply(self.tgt_out), self.index,
                     {name: apply(value) for name, value in self.inputs.items()}, self.tokens(), self.supervision)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        """The same batch on `device` (`non_blocking` copies from pinned memory overlap the running step)."""
        return self._map(lambda x: x.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> Batch:
        """The same batch in page-locked memory (for non-blocking copies to a GPU)."""
        return self._map(lambda x: x.pin_memory())

    def source_inputs(self) -> dict[str, torch.Tensor]:
        """The inputs of the source side only (what decoding reads; no target supervision)."""
        return {name: value for name, value in self.inputs.items() if name not in self.supervision}

    def tokens(self) -> int:
        """Target tokens (the loss normalizer); known without touching the device once collated."""
        if self.target_tokens < 0:
            self.target_tokens = int((self.tgt_out != PAD_ID).sum())
        return self.target_tokens


def data_columns(batch_columns: dict[str, str], decoder_target: str, references: bool = True) -> list[str]:
    """The columns ParallelData reads (when the split has them): the sub-words, the `decoder_target` column and
    the shard columns of the collated `batch_columns`; with `references`, ids and texts too (scoring; training
    needs none)."""
    declaration = target_column(decoder_target)
    needed = [SRC_SUBWORDS, TGT_SUBWORDS] + ([declaration.column] if declaration else [])
    needed += [c for name in batch_columns for c in declared(name).shard_columns()]
    return ([ID, SRC_TEXT, TGT_TEXT] if references else []) + list(dict.fromkeys(needed))


class Batching:
    """Token-count batches of a split's kept rows and their collation (the arrays `ParallelData` loads:
    `src_ids`/`src_off`, `tgt_ids`/`tgt_off`, `src_len`, `tgt_len`, `keep`, `loaded`, `ladder`)."""

    src_ids: np.ndarray
    src_off: np.ndarray
    tgt_ids: np.ndarray
    tgt_off: np.ndarray
    src_len: np.ndarray
    tgt_len: np.ndarray
    keep: np.ndarray
    loaded: dict[str, Any]
    ladder: bool
    ladder_limit: int

    def __len__(self) -> int:
        return len(self.keep)

    def longest(self) -> int:
        """Tokens of the longest kept row (the longer side, with EOS/BOS): the least a batch must hold."""
        return int(np.maximum(self.src_len, self.tgt_len)[self.keep].max()) if len(self.keep) else 0

    def batches(self, max_tokens: int, seed: int = 0, epoch: int = 0, shuffle: bool = True,
                rows: np.ndarray | None = None) -> list[np.ndarray]:
        """Row indices grouped so that rows x longest side <= max_tokens, similar lengths together.

        Shuffle, then stable-sort by length (bucketing with random order inside a length), cut into batches,
        shuffle the batches; the order depends only on (seed, epoch), so a resumed run sees the same batches.
        """
        rng = np.random.default_rng([seed, epoch])
        rows = self.keep if rows is None else np.asarray(rows)
        rows = rng.permutation(rows) if shuffle else rows.copy()
        length = np.maximum(self.src_len, self.tgt_len)
        rows = rows[np.argsort(length[rows], kind="stable")]
        lengths = length[rows]
        if self.ladder and len(rows):  # padding counts against max_tokens (rungs keep the order)
            rungs, index = np.unique(lengths, return_inverse=True)
            lengths = np.array([self.padded(int(n)) for n in rungs])[index]
        batches = np.split(rows, batch_bounds(lengths, max_tokens)) if len(rows) else []
        if shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return batches

    def padded(self, longest: int) -> int:
        """The padded length of a batch side whose longest row has `longest` positions (the ladder's rung when
        `ladder` is on, else `longest`)."""
        return padded_length(longest, self.ladder_limit) if self.ladder else longest

    def shape(self, rows: Sequence[int]) -> tuple[int, int, int]:
        """(rows, source length, target length) of the batch `collate(rows)` makes."""
        return len(rows), self.padded(int(self.src_len[rows].max())), self.padded(int(self.tgt_len[rows].max()))

    def collate(self, rows: Sequence[int]) -> Batch:
        """Rows -> padded tensors (right padding, to the shape ladder when `ladder` is on), with the requested
        batch columns (`BatchColumn.collate`)."""
        n, s, t = self.shape(rows)
        src = np.full((n, s), PAD_ID, np.int64)
        tgt_in = np.full((n, t), PAD_ID, np.int64)
        tgt_out = np.full((n, t), PAD_ID, np.int64)
        for b, row in enumerate(rows):
            a, z = self.src_off[row], self.src_off[row + 1]
            src[b, : z - a] = self.src_ids[a:z]
            src[b, z - a] = EOS_ID
            a, z = self.tgt_off[row], self.tgt_off[row + 1]
            tgt_in[b, 0] = BOS_ID
            tgt_in[b, 1 : z - a + 1] = self.tgt_ids[a:z]
            tgt_out[b, : z - a] = self.tgt_ids[a:z]
            tgt_out[b, z - a] = EOS_ID
        inputs = {column.name: torch.from_numpy(column.collate(loaded, rows, s, t))
                  for column, loaded in self.loaded.values()}
        supervision = tuple(column.name for column, _ in self.loaded.values() if column.supervision)
        tokens = int(self.tgt_len[rows].sum())  # target items + one EOS each
        return Batch(torch.from_numpy(src), torch.from_numpy(tgt_in), torch.from_numpy(tgt_out), np.asarray(rows),
                     inputs, tokens, supervision)


class References:
    """What scoring reads of a split's table (`table`, `configuration`): raw target texts, other columns."""

    table: pa.Table
    configuration: dict

    @property
    def tgt_lang(self) -> str:
        """Target language code from the pipeline configuration ('' if unknown)."""
        return self.configuration.get("tgt_lang", "")

    def column_values(self, name: str, rows: Sequence[int]) -> list[Any]:
        """The values of column `name` of the given rows (None where null or not in the shards)."""
        if name not in self.table.column_names:
            return [None] * len(rows)
        column = self.table.column(name)
        return [column[int(i)].as_py() for i in rows]

    def references(self, rows: Sequence[int]) -> list[str]:
        """Raw target sentences (`tgt_text`) of the given rows."""
        texts = self.table.column(TGT_TEXT)
        return [texts[int(i)].as_py() for i in rows]


class ParallelData(Batching, References):
    """One split as flat id arrays + offsets, copied out of the memory-mapped shards (whose pages are then given
    back: only the arrays stay in RAM; texts are read from the mapping when scoring).

    `batch_columns`: batch columns to collate (names declared by the switches, `BatchColumn`) -> the switch that
    needs each (named in the error when the shards lack its column); `data_options`: what those columns read
    of the run, by name (the switches' `data_options`: label vocabularies). `decoder_target`: TEXT, or a declared
    `TargetColumn`, whose null rows are skipped when `skip_null`, else kept for decoding but left out of
    `loss_rows`. `split`: the (table, manifest) of `path` when already
    read (`read_split`); `table` alone: raw text prepared by synprep.prepare. `ladder` (set by the trainer): pad
    batch lengths to the shape ladder of `syntrain.shapes`, capped at `ladder_limit` when > 0; the padding counts
    against `max_tokens` in `batches`. Batching and the references: the two base classes."""

    def __init__(self, path: str, vocab: Vocab, max_len: int = 0, table: pa.Table | None = None,
                 configuration: dict | None = None, batch_columns: dict[str, str] | None = None,
                 decoder_target: str = TEXT, data_options: dict[str, Any] | None = None, skip_null: bool = False,
                 split: tuple[pa.Table, Manifest] | None = None, copy: bool = False) -> None:
        self.path = path
        if table is None:
            self.table, manifest = split or read_split(path, data_columns(batch_columns or {}, decoder_target))
            if copy:  # references and sources read later (validation, test scoring) are not mapped from shards
                self.table = in_memory(self.table)
            self.configuration, self.signature = manifest.configuration, manifest.signature
        else:  # raw text prepared by synprep.prepare
            self.table, self.configuration, self.signature = table, configuration or {}, {}
        self.vocab = vocab
        self.decoder_target, self.target_column = decoder_target, target_column(decoder_target)
        self.null = self._encode(table is None)
        self.skipped_null = int(self.null.sum())
        self.data_options = dict(data_options or {})
        self.batch_columns = dict(batch_columns or {})
        self.loaded = self._load_columns()
        self.src_len = np.diff(self.src_off) + 1  # + EOS
        self.tgt_len = np.diff(self.tgt_off) + 1  # + BOS (input) / EOS (output)
        self.keep = np.arange(len(self.src_len))
        if skip_null:
            self.keep = self.keep[~self.null]
        self.skipped_long = 0  # rows with a side over max_len (sub-words + EOS/BOS), left out of training
        if max_len:
            before = len(self.keep)
            self.keep = self.keep[(self.src_len[self.keep] <= max_len) & (self.tgt_len[self.keep] <= max_len)]
            self.skipped_long = before - len(self.keep)
        self.loss_rows = self.keep[~self.null[self.keep]]  # rows with a target (validation loss)
        # shape ladder (syntrain.shapes): pad batch lengths to its rungs (capped at `ladder_limit` when > 0)
        self.ladder, self.ladder_limit = False, 0

    def _encode(self, has_targets: bool) -> np.ndarray:
        """Source and target ids (`src_ids`/`src_off`, `tgt_ids`/`tgt_off`); the rows without a target (a null
        target column) as a mask. Raw text (`has_targets` false) has no targets."""
        self.src_ids, self.src_off = self.vocab.src.encode_column(self.table.column(SRC_SUBWORDS))
        null = np.zeros(self.table.num_rows, dtype=bool)
        declaration = self.target_column
        if declaration is not None and has_targets:
            if declaration.column not in self.table.column_names:
                raise ValueError(declaration.missing_error(self.path))
            column = self.table.column(declaration.column)
            null = np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)
            self.tgt_ids, self.tgt_off = self.vocab.encode_column(column)
        else:
            self.tgt_ids, self.tgt_off = self.vocab.encode_column(self.table.column(TGT_SUBWORDS))
        return null

    def _load_columns(self) -> dict[str, Any]:
        """Each requested batch column checked against the split (a one-line error naming the switch and the
        feature group to convert with) and loaded once (`BatchColumn.load`)."""
        columns = {name: declared(name) for name in self.batch_columns}
        for name, column in columns.items():
            if column.missing(self.table.column_names):
                raise ValueError(f"{self.path}: {self.batch_columns[name]} needs {column.column}: convert with "
                                 f"[features] {column.side} = [..., \"{column.group}\"]")
        return {name: (column, column.load(self)) for name, column in columns.items()}


def batch_bounds(lengths: np.ndarray, max_tokens: int) -> list[int]:
    """Where to cut rows sorted by length (non-decreasing `lengths`) so that each batch holds as many rows as
    fit in rows x longest <= max_tokens (at least one), filled in order: the greedy row-by-row cut, computed
    per run of equal lengths (a few hundred steps, not one per row)."""
    change = np.flatnonzero(np.diff(lengths)) + 1
    starts = np.concatenate([[0], change]).tolist()
    ends = np.concatenate([change, [len(lengths)]]).tolist()
    bounds: list[int] = []
    open_rows = 0  # rows in the batch being filled
    for start, end, length in zip(starts, ends, lengths[starts].tolist(), strict=True):
        cap = max(1, max_tokens // length)  # rows of this length a batch can hold
        if open_rows >= cap:
            bounds.append(start)
            open_rows = 0
        taken = min(end - start, cap - open_rows)
        open_rows += taken
        rest = end - start - taken
        if rest:  # the open batch is full: batches of `cap` rows, the last one stays open
            bounds.extend(range(start + taken, end, cap))
            open_rows = rest - (len(range(start + taken, end, cap)) - 1) * cap
    return bounds


def debpe(pieces: Sequence[str]) -> list[str]:
    """BPE pieces -> tokens (subword-nmt's "@@ " continuation marker removed)."""
    return re.sub(r"@@( |$)", "", " ".join(pieces)).split()
