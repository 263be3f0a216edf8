"""A dataset: one synprep split (Arrow shards, memory-mapped) as token ids of a vocabulary (`syntrain.vocab`),
cut into token-count batches and collated (`syntrain.batch`), with the references scoring reads.

Positions (CONTRACT.md): shards store 0-based sub-word positions with no BOS/EOS. The encoder reads
`subwords + [EOS]` with **no BOS on the source**, so source positions need no shift; the decoder reads
`[BOS] + subwords` and predicts `subwords + [EOS]` (a target-side batch column starts at input position 1).
A multilingual pretrained model's language codes (`Prefixes`: `[model] source_prefix`, `target_prefix`) add
positions: the encoder reads `prefix + subwords + [EOS]`, the decoder `[BOS] + prefix + subwords` and predicts
`[pad] * len(prefix) + subwords + [EOS]` (the prefix is given, never predicted: no loss); every batch column
moves by the same shift (`BatchColumn.collate`).

Model inputs (`Batch.inputs`): only the batch columns the caller passes (`BatchColumn`s: those the active
switches read, `ActiveSwitches.batch_columns`), collated as their modules declare them; this module names none.

Decoder targets: the target sub-words (None, `decoder_target = "text"`), or a target-side column a switch
declares, passed by the caller (`TargetColumn`, `Switch.decoder_targets`: tree decoding's arc-standard
transitions): the decoder then reads `[BOS] + column` and predicts `column + [EOS]`; rows whose column is null are
skipped in training (counted in `skipped_null`) and kept, without a loss, for decoding.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple, TypeVar

import numpy as np
import pyarrow as pa
import torch

from synprep.errors import InputError
from synprep.shards import Manifest, open_split

from .arrow import in_memory
from .batch import Batch, Bucketing
from .columns import ID, SRC_SUBWORDS, SRC_TEXT, TGT_SUBWORDS, TGT_TEXT, BatchColumn, TargetColumn
from .vocab import BOS_ID, EOS_ID, PAD_ID, Vocab


class Prefixes(NamedTuple):
    """The ids each side begins with before its sub-words (`[model] source_prefix`, `target_prefix`: a
    multilingual pretrained model's language codes; none by default); the target's after its start token."""

    src: tuple[int, ...] = ()
    tgt: tuple[int, ...] = ()

    @property
    def shifts(self) -> tuple[int, int]:
        """(source, target) positions a sub-word's values move right: the source prefix; BOS + the target's."""
        return len(self.src), 1 + len(self.tgt)


NO_PREFIXES = Prefixes()  # syntrain's own models: the source's sub-words first, the target's after the start


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
    memory-mapped (zero-copy), compressed ones read into RAM. `columns`: only those of them that the split has
    (only they are validated and decoded; a stream's record batch is still read whole, so the memory-mapped
    pages of the others are touched too); None: all (`data_columns` names what a `ParallelData` reads)."""
    split = open_split(path)
    if not split.manifest.shards:
        raise InputError("the manifest lists no shards", path)
    if columns is not None:
        columns = [c for c in dict.fromkeys(columns) if c in split.columns]
    return split.table(columns), split.manifest


def data_columns(batch_columns: Mapping[BatchColumn, str], decoder_target: TargetColumn | None,
                 references: bool = True) -> list[str]:
    """The columns ParallelData reads (when the split has them): the sub-words, the `decoder_target` column and
    the shard columns of the collated `batch_columns`; with `references`, ids and texts too (scoring; training
    needs none)."""
    needed = [SRC_SUBWORDS, TGT_SUBWORDS] + ([decoder_target.column] if decoder_target else [])
    needed += [c for column in batch_columns for c in column.shard_columns()]
    return ([ID, SRC_TEXT, TGT_TEXT] if references else []) + list(dict.fromkeys(needed))


def readable_target(decoder_target: TargetColumn | None, columns: Sequence[str]) -> TargetColumn | None:
    """The decoder target a scored split with `columns` is read with: `decoder_target`, or None (the target
    sub-words) when the split lacks its column (decoding needs no reference decoder targets; a measure that needs them
    sees None)."""
    return None if decoder_target is not None and decoder_target.column not in columns else decoder_target


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


class EncodedSplit:
    """One split read and encoded with the run's vocabularies: its table (the memory-mapped shards, or raw text
    prepared by synprep.prepare), its manifest's `configuration` and `signature`, the source ids and the
    decoder's target ids as flat arrays + offsets (`src_ids`/`src_off`, `tgt_ids`/`tgt_off`), the rows without a
    target (`null`: a null decoder-target column; `skipped_null` of them) and each row's positions (`src_len`:
    sub-words + EOS; `tgt_len`: + BOS on input, + EOS on output).

    `columns`: the shard columns to read (`data_columns`); `split`: the (table, manifest) of `path` when already
    read (`read_split`); `table` alone: raw text, which has no targets; `copy`: the table copied into RAM
    (references and sources read later are not mapped from the shards); `configuration`, `signature`: with
    `table`, its dataset's manifest's (what the pieces are: `synprep.subwords.load.dataset_marker`). `vocab` and
    `data_options` (what the batch columns read of the run, by name: the switches' label vocabularies) are what
    `BatchColumn.load` reads besides the table. `prefixes`: the ids before each side's sub-words (`Prefixes`;
    the lengths count them)."""

    def __init__(self, path: str, vocab: Vocab, columns: Sequence[str], table: pa.Table | None = None,
                 configuration: dict | None = None, decoder_target: TargetColumn | None = None,
                 data_options: dict[str, Any] | None = None, split: tuple[pa.Table, Manifest] | None = None,
                 copy: bool = False, signature: dict | None = None, prefixes: Prefixes = NO_PREFIXES) -> None:
        self.path, self.prefixes = path, prefixes
        if table is None:
            self.table, manifest = split or read_split(path, columns)
            if copy:
                self.table = in_memory(self.table)
            self.configuration, self.signature = manifest.configuration, manifest.signature
        else:
            self.table, self.configuration, self.signature = table, configuration or {}, signature or {}
        self.vocab, self.decoder_target = vocab, decoder_target
        self.data_options = dict(data_options or {})
        self.null = self._encode(table is None)
        self.skipped_null = int(self.null.sum())
        self.src_len = np.diff(self.src_off) + 1 + len(prefixes.src)  # + EOS
        self.tgt_len = np.diff(self.tgt_off) + 1 + len(prefixes.tgt)  # + BOS (input) / EOS (output)

    def _encode(self, has_targets: bool) -> np.ndarray:
        """Source and target ids (`src_ids`/`src_off`, `tgt_ids`/`tgt_off`); the rows without a decoder target (a
        null decoder target column) as a mask. Raw text (`has_targets` false) has no target side."""
        self.src_ids, self.src_off = self.vocab.src.encode_column(self.table.column(SRC_SUBWORDS))
        null = np.zeros(self.table.num_rows, dtype=bool)
        declaration = self.decoder_target
        if declaration is not None and has_targets:
            if declaration.column not in self.table.column_names:
                raise ValueError(declaration.missing_error(self.path))
            column = self.table.column(declaration.column)
            null = np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)
            self.tgt_ids, self.tgt_off = self.vocab.encode_column(column)
        else:
            self.tgt_ids, self.tgt_off = self.vocab.encode_column(self.table.column(TGT_SUBWORDS))
        return null


class Collator:
    """Rows of an encoded split -> their `Batch`: the source, target input and target output ids padded right
    (EOS after the source and the target output, BOS before the target input, the split's `prefixes` before
    each side's sub-words, padding in the target output under the target prefix) and the model inputs of the
    batch columns, moved by the same shifts, each checked against the split and loaded once here
    (`BatchColumn.load`), collated as it declares (`BatchColumn.collate`). `batch_columns`: the columns -> who
    needs each (named in the error when the shards lack it)."""

    def __init__(self, split: EncodedSplit, batch_columns: Mapping[BatchColumn, str]) -> None:
        for column, needed_by in batch_columns.items():
            if column.missing(split.table.column_names):
                raise ValueError(f"{split.path}: {needed_by} needs {column.column}: convert with "
                                 f"[features] {column.side} = [..., \"{column.group}\"]")
        self.split = split
        self.loaded = {column.name: (column, column.load(split)) for column in batch_columns}
        self.supervision = tuple(column.name for column, _ in self.loaded.values() if column.supervision)

    def collate(self, rows: Sequence[int], shape: tuple[int, int, int]) -> Batch:
        """`rows` -> their batch of `shape` (rows, source length, target length: at least their longest)."""
        split = self.split
        n, s, t = shape
        (sp, tp), prefixes = split.prefixes.shifts, split.prefixes
        src = np.full((n, s), PAD_ID, np.int64)
        tgt_in = np.full((n, t), PAD_ID, np.int64)
        tgt_out = np.full((n, t), PAD_ID, np.int64)
        src[:, :sp], tgt_in[:, :tp] = prefixes.src, (BOS_ID, *prefixes.tgt)
        for b, row in enumerate(rows):
            a, z = split.src_off[row], split.src_off[row + 1]
            src[b, sp : sp + z - a] = split.src_ids[a:z]
            src[b, sp + z - a] = EOS_ID
            a, z = split.tgt_off[row], split.tgt_off[row + 1]
            tgt_in[b, tp : tp + z - a] = split.tgt_ids[a:z]
            tgt_out[b, tp - 1 : tp - 1 + z - a] = split.tgt_ids[a:z]
            tgt_out[b, tp - 1 + z - a] = EOS_ID
        shifts = {"src": sp, "tgt": tp}
        inputs = {column.name: torch.from_numpy(column.collate(loaded, rows, s, t, shifts[column.side]))
                  for column, loaded in self.loaded.values()}
        tokens = int(split.tgt_len[rows].sum()) - len(rows) * len(prefixes.tgt)  # target items + one EOS each
        return Batch(torch.from_numpy(src), torch.from_numpy(tgt_in), torch.from_numpy(tgt_out), np.asarray(rows),
                     inputs, tokens, self.supervision)


class References:
    """What scoring reads of a split beyond its ids: the reference sentences, any column's values, the target
    language of its pipeline."""

    def __init__(self, table: pa.Table, configuration: dict) -> None:
        self.table, self.configuration = table, configuration

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


def kept_rows(split: EncodedSplit, max_len: int, skip_null: bool) -> tuple[np.ndarray, int]:
    """(the rows a dataset uses, how many were left out as too long): every row, less the null ones when
    `skip_null`, less those with a side over `max_len` positions (sub-words + EOS/BOS) when `max_len`."""
    keep = np.arange(len(split.src_len))
    if skip_null:
        keep = keep[~split.null]
    if not max_len:
        return keep, 0
    fits = keep[(split.src_len[keep] <= max_len) & (split.tgt_len[keep] <= max_len)]
    return fits, len(keep) - len(fits)


class ParallelData:
    """One split as a dataset: the rows it uses (`keep`; `loss_rows` those with a decoder target) and what the trainer,
    decoding and scoring call on them, each done by one collaborator: the split read and encoded (`encoded`, an
    `EncodedSplit`: flat id arrays + offsets copied out of the memory-mapped shards, whose pages are then given
    back), token-count batches (`bucketing`, a `Bucketing`: `batches`, `shape`, `longest`), their collation
    (`collator`, a `Collator`: `collate`) and the scoring lookups (`_references`, `References`: `references`,
    `column_values`, `tgt_lang`). `path`, `table`, `configuration`, `signature`, `src_len`, `tgt_len` and
    `skipped_null` are the encoded split's, named here for its callers (the run header, decoding's length check).

    `batch_columns`: the batch columns to collate (`BatchColumn`s declared by the switches) -> who needs each;
    `data_options`: what those columns read of the run, by name (the switches' `data_options`: label
    vocabularies). `decoder_target`: None (the target sub-words), or a declared `TargetColumn`, whose null rows
    are skipped when `skip_null`, else kept for decoding but left out of `loss_rows`. `max_len` > 0: rows with a
    side longer are left out (`skipped_long`). `split`, `table`, `configuration`, `copy`: see `EncodedSplit`.
    `ladder` (set by the trainer): pad batch lengths to the shape ladder of `syntrain.shapes`, capped at
    `ladder_limit` when > 0; the padding counts against `max_tokens` in `batches`. `prefixes`: the ids before
    each side's sub-words (`Prefixes`, the model's: `ActiveSwitches.parallel_data_arguments` gives them)."""

    def __init__(self, path: str, vocab: Vocab, max_len: int = 0, table: pa.Table | None = None,
                 configuration: dict | None = None, batch_columns: Mapping[BatchColumn, str] | None = None,
                 decoder_target: TargetColumn | None = None, data_options: dict[str, Any] | None = None,
                 skip_null: bool = False, split: tuple[pa.Table, Manifest] | None = None, copy: bool = False,
                 signature: dict | None = None, prefixes: Prefixes = NO_PREFIXES) -> None:
        batch_columns = dict(batch_columns or {})
        self.encoded = EncodedSplit(path, vocab, data_columns(batch_columns, decoder_target), table, configuration,
                                    decoder_target, data_options, split, copy, signature, prefixes)
        encoded = self.encoded
        self.path, self.table = path, encoded.table  # the encoded split's, for the callers
        self.configuration, self.signature = encoded.configuration, encoded.signature
        self.src_len, self.tgt_len, self.skipped_null = encoded.src_len, encoded.tgt_len, encoded.skipped_null
        self.collator = Collator(encoded, batch_columns)
        self.keep, self.skipped_long = kept_rows(encoded, max_len, skip_null)
        self.loss_rows = self.keep[~encoded.null[self.keep]]  # rows with a decoder target (validation loss)
        self.bucketing = Bucketing(encoded.src_len, encoded.tgt_len)
        self._references = References(encoded.table, encoded.configuration)

    def __len__(self) -> int:
        return len(self.keep)

    # batching and collation (Bucketing, Collator)

    @property
    def ladder(self) -> bool:
        """Batch lengths padded to the shape ladder (`Bucketing.ladder`)."""
        return self.bucketing.ladder

    @ladder.setter
    def ladder(self, on: bool) -> None:
        self.bucketing.ladder = on

    @property
    def ladder_limit(self) -> int:
        """The ladder's cap when > 0 (`Bucketing.ladder_limit`)."""
        return self.bucketing.ladder_limit

    @ladder_limit.setter
    def ladder_limit(self, limit: int) -> None:
        self.bucketing.ladder_limit = limit

    def fitting(self, rows: np.ndarray, positions: int, target: bool = True) -> np.ndarray:
        """The `rows` whose source (and, with `target`, target) fits a model of `positions` positions (sub-words
        + EOS; BOS + target items): what a forward pass can take. Decoding needs the source only."""
        rows = np.asarray(rows, dtype=np.int64)  # an empty list too
        fits = self.src_len[rows] <= positions
        if target:
            fits &= self.tgt_len[rows] <= positions
        return rows[fits]

    def longest(self) -> int:
        """Tokens of the longest kept row (the longer side, with EOS/BOS): the least a batch must hold."""
        return self.bucketing.longest(self.keep)

    def batches(self, max_tokens: int, seed: int = 0, epoch: int = 0, shuffle: bool = True,
                rows: np.ndarray | None = None) -> list[np.ndarray]:
        """The kept rows (or `rows`) in token-count batches (`Bucketing.batches`)."""
        return self.bucketing.batches(self.keep if rows is None else rows, max_tokens, seed, epoch, shuffle)

    def shape(self, rows: Sequence[int]) -> tuple[int, int, int]:
        """(rows, source length, target length) of the batch `collate(rows)` makes."""
        return self.bucketing.shape(rows)

    def collate(self, rows: Sequence[int]) -> Batch:
        """Rows -> padded tensors (right padding, to the shape ladder when `ladder` is on), with the requested
        batch columns (`Collator.collate`)."""
        return self.collator.collate(rows, self.bucketing.shape(rows))

    # what scoring reads (References)

    @property
    def tgt_lang(self) -> str:
        """Target language code from the pipeline configuration ('' if unknown)."""
        return self._references.tgt_lang

    def column_values(self, name: str, rows: Sequence[int]) -> list[Any]:
        """The values of column `name` of the given rows (None where null or not in the shards)."""
        return self._references.column_values(name, rows)

    def references(self, rows: Sequence[int]) -> list[str]:
        """Raw target sentences (`tgt_text`) of the given rows."""
        return self._references.references(rows)
