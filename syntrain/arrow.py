"""Arrow helpers of the data layer: list columns of (memory-mapped) shards -> flat numpy arrays + int64 row
offsets, string counts, in-memory copies of a table. Each helper gives the shard pages it read back to the kernel
as it goes (`synprep.shards.release_pages`), so only the arrays it returns stay in RAM."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from synprep.shards import release_pages

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


def in_memory(table: pa.Table) -> pa.Table:
    """A copy of `table` in this process's memory, not mapped from its shard files: a shard truncated or
    rewritten while a run goes on cannot pull the pages from under it (SIGBUS) or change its references."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return pa.ipc.open_stream(sink.getvalue()).read_all()
