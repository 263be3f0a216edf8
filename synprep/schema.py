"""The Arrow schema of CONTRACT.md, declared once, and the record -> Arrow batch / JSON conversions.

Writers (align, convert), readers (inspect, validate) and the trainer take field names and types from
here; nothing else knows column names by heart.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .tables import repeated

SCHEMA_VERSION = 2  # of convert shards; manifest.json's schema_version (CONTRACT.md "Shard encoding")
READABLE_VERSIONS = (1, 2)  # 1: strings stored as strings, src/tgt_distances stored token x token
FORMAT_VERSION_KEY = "synprep.format_version"  # the key of a convert shard's schema metadata naming its format


@dataclass(frozen=True)
class SubwordFeature:
    """A per-sub-word field made from each tree, declared here once: featurize, align, convert, the shards and the
    readers take it from this declaration (no other edit). `group`: its `[features]` / `--features` name (a group
    may make several fields: `parents`); `field`: the CONTRACT.md field (`src_`/`tgt_` prefixed in convert shards);
    `kind`: its Arrow list type; `doc`: the description stored in every shard; `function`: the name of its pure
    function in `synprep.features`, `function(heads, sizes, subword_owner)` (several trees at once, as
    `forest_parent_positions`) -> one value per sub-word."""

    group: str
    field: str
    kind: pa.DataType
    doc: str
    function: str


SUBWORD_FEATURES = (
    SubwordFeature("parents", "parent_mid", pa.list_(pa.float32()),
                   "per sub-word: mean 0-based sub-word position of its token's head token (root: its own)",
                   "forest_parent_mid"),
    SubwordFeature("parents", "parent_first", pa.list_(pa.int16()),
                   "per sub-word: 0-based position of the first sub-word of its token's head token (root: own)",
                   "forest_parent_first"),
    SubwordFeature("dbsa", "dbsa_head", pa.list_(pa.int16()),
                   "per sub-word: 0-based position of its DBSA head sub-word (a word's non-final piece: the next "
                   "piece; its final piece: the head word's first piece; the root's final piece: itself)",
                   "forest_dbsa_heads"),
    SubwordFeature("depth", "depth", pa.list_(pa.int16()),
                   "per sub-word: the number of arcs from its token to the root (the root token: 0)",
                   "forest_subword_depths"),
)
# --features group -> the fields it adds (besides the always-present BASE_FIELDS): the per-sub-word groups as
# declared above, then the groups of whole trees
GROUP_FIELDS = {
    **{f.group: tuple(g.field for g in SUBWORD_FEATURES if g.group == f.group) for f in SUBWORD_FEATURES},
    "distances": ("distances",),
    "transitions": ("transitions",),
    "labels": ("labels",),
}
FEATURE_GROUPS = tuple(GROUP_FIELDS)  # their canonical order (manifests, `parse_features`)
DEFAULT_FEATURES = ("parents", "transitions", "labels")

# Version 2 stores the string lists dictionary-encoded (per record batch: the batch's distinct strings once,
# then an integer id per item); every Arrow reader decodes them to strings by itself.
LABEL_IDS = pa.dictionary(pa.int16(), pa.string())
STRING_IDS = pa.dictionary(pa.int32(), pa.string())
_FIELD_TYPES: dict[str, pa.DataType] = {
    "tokens": pa.list_(STRING_IDS),
    "heads": pa.list_(pa.int16()),
    "labels": pa.list_(LABEL_IDS),
    "subwords": pa.list_(STRING_IDS),
    "subword_token": pa.list_(pa.int16()),
    **{f.field: f.kind for f in SUBWORD_FEATURES},  # in their declared order
    "distances": pa.list_(pa.uint8()),  # token x token, row-major flattened
    "transitions": pa.list_(STRING_IDS),  # null when the tree cannot be encoded
    "projective": pa.bool_(),
}
_PLAIN_STRINGS = {name: pa.list_(pa.string()) for name in ("tokens", "labels", "subwords", "transitions")}
_V1_TYPES = {**_FIELD_TYPES, **_PLAIN_STRINGS}  # version 1 shards, and `synprep align --format arrow`
# fields that convert shards (version 2) do not store: made from `heads` where used (synprep.features)
MADE_FROM_HEADS = ("distances",)
# What each column holds, stored as field metadata ("description") in every shard, so a reader that never saw
# CONTRACT.md (pandas, polars, HF datasets) can tell 1-based token heads from 0-based sub-word positions.
FIELD_DOCS = {
    "id": "0-based line number of the pair (sentence) in the original input",
    "sent_id": "the sentence's # sent_id comment, or null",
    "text": "the raw sentence",
    "tokens": "surface tokens (a CoNLL-U multiword token is one token)",
    "heads": "per token: 1-based index of its head token, 0 = root (CoNLL-U style)",
    "labels": "per token: UD dependency relation (subtypes kept unless the pipeline strips them)",
    "subwords": "BPE pieces in order (subword-nmt, '@@' = continues); 0-based positions, no BOS/EOS",
    "subword_token": "per sub-word: 0-based index of its token",
    **{f.field: f.doc for f in SUBWORD_FEATURES},
    "distances": "token x token tree distances (arcs), uint8 capped at 255, row-major: reshape (n, n), n = len(tokens)",
    "transitions": "arc-standard sequence, sub-words as SHIFT; null when the tree cannot be encoded",
    "projective": "the tree has no crossing arcs (the root arc included)",
}
BASE_FIELDS = ("tokens", "heads", "subwords", "subword_token", "projective")


def parse_features(spec: str | Sequence[str]) -> tuple[str, ...]:
    """'parents,distances' -> ('parents', 'distances'), in canonical order; unknown names raise."""
    names = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    unknown = [name for name in names if name not in FEATURE_GROUPS]
    if unknown:
        raise ValueError(f"unknown feature(s) {', '.join(unknown)}; choose from {','.join(FEATURE_GROUPS)}")
    if repeated(names):
        raise ValueError(f"feature {repeated(names)[0]!r} is listed twice")
    return tuple(group for group in FEATURE_GROUPS if group in names)


def feature_fields(features: Sequence[str], prefix: str = "", version: int = 1) -> list[pa.Field]:
    """The Arrow fields of one side's sentence features, e.g. prefix 'src_'. `version` 1: every field of the
    groups, strings as strings (align's output and version-1 shards); 2: convert shards (module comments)."""
    names = list(BASE_FIELDS)
    for group in features:
        names.extend(GROUP_FIELDS[group])
    if version >= 2:
        names = [name for name in names if name not in MADE_FROM_HEADS]
    types = _FIELD_TYPES if version >= 2 else _V1_TYPES
    order = list(_FIELD_TYPES)
    names.sort(key=order.index)
    return [_field(prefix + name, types[name], name, nullable=(name == "transitions")) for name in names]


def _field(column: str, kind: pa.DataType, doc: str, nullable: bool = True) -> pa.Field:
    side = {"src_": "source: ", "tgt_": "target: "}.get(column[:4], "")
    return pa.field(column, kind, nullable=nullable, metadata={"description": side + FIELD_DOCS[doc]})


def align_schema(features: Sequence[str]) -> pa.Schema:
    """Schema of `synprep align --format arrow`: id, sent_id, then the features."""
    return pa.schema([_field("id", pa.int64(), "id", nullable=False), _field("sent_id", pa.string(), "sent_id")]
                     + feature_fields(features))


def pair_schema(src_features: Sequence[str], tgt_features: Sequence[str], version: int = SCHEMA_VERSION
                ) -> pa.Schema:
    """Schema of a convert shard of format `version`: id, src_text, tgt_text, src_* and tgt_* features; its
    metadata names the format (`synprep.format_version`; readers compare schemas without metadata)."""
    return pa.schema([_field("id", pa.int64(), "id", nullable=False), _field("src_text", pa.string(), "text"),
                      _field("tgt_text", pa.string(), "text")]
                     + feature_fields(src_features, "src_", version) + feature_fields(tgt_features, "tgt_", version),
                     metadata={FORMAT_VERSION_KEY: str(version)})


# Arrow arrays are built from numpy buffers (pa.Array.from_buffers): pa.array() on Python lists or numpy
# arrays imports pandas (~0.25 s per process) and converts element by element.
_NUMPY_TYPES = {pa.int16(): np.int16, pa.int64(): np.int64, pa.uint8(): np.uint8, pa.float32(): np.float32}


def _validity(valid: Sequence[bool] | None) -> tuple[pa.Buffer | None, int]:
    """(validity bitmap, null count); no bitmap when nothing is null (as pyarrow's own builders)."""
    if valid is None:
        return None, 0
    mask = np.fromiter(valid, dtype=bool, count=len(valid))
    nulls = len(mask) - int(np.count_nonzero(mask))
    return (pa.py_buffer(np.packbits(mask, bitorder="little")), nulls) if nulls else (None, 0)


def _offsets(lengths: np.ndarray) -> pa.Buffer:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.py_buffer(offsets)


def _numeric_values(values: Any, item_type: pa.DataType) -> np.ndarray:
    """Values as the numpy type of `item_type`; integers out of its range raise (as pyarrow's safe cast)."""
    dtype = _NUMPY_TYPES[item_type]
    array = np.asarray(values)
    if array.dtype != dtype:
        if array.size and np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            low, high = array.min(), array.max()
            if low < info.min or high > info.max:
                raise ValueError(f"value {high if high > info.max else low} does not fit in {item_type}")
        array = array.astype(dtype)
    return np.ascontiguousarray(array)


def string_array(strings: Sequence[str], valid: Sequence[bool] | None = None) -> pa.Array:
    """A pa.string() array (`valid[i]` False: null, with strings[i] = "")."""
    text = "".join(strings)
    data = text.encode("utf-8")
    lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))  # characters
    if len(data) != len(text):  # some non-ASCII: UTF-8 byte lengths of those strings
        wide = np.flatnonzero(~np.fromiter(map(str.isascii, strings), dtype=bool, count=len(strings)))
        lengths[wide] = [len(strings[i].encode("utf-8")) for i in wide.tolist()]
    bitmap, nulls = _validity(valid)
    return pa.Array.from_buffers(pa.string(), len(strings), [bitmap, _offsets(lengths), pa.py_buffer(data)], nulls)


def plain_array(values: Sequence[Any], value_type: pa.DataType) -> pa.Array:
    """A non-list column (id, sent_id, projective) from Python values."""
    if value_type == pa.string():
        if None in values:
            return string_array([value or "" for value in values], [value is not None for value in values])
        return string_array(values)
    if value_type == pa.bool_():
        bits = np.packbits(np.fromiter(values, dtype=bool, count=len(values)), bitorder="little")
        return pa.Array.from_buffers(value_type, len(values), [None, pa.py_buffer(bits)])
    return pa.Array.from_buffers(value_type, len(values), [None, pa.py_buffer(_numeric_values(values, value_type))])


def dictionary_array(strings: Sequence[str], dictionary_type: pa.DictionaryType) -> pa.Array:
    """Strings as a dictionary array: the distinct strings in order of first appearance, an id per string."""
    encoded = pc.dictionary_encode(string_array(strings))
    try:
        indices = encoded.indices.cast(dictionary_type.index_type)
    except pa.ArrowInvalid:
        raise ValueError(f"more than {np.iinfo(dictionary_type.index_type.to_pandas_dtype()).max + 1} distinct "
                         "strings in one record batch for a dictionary column of "
                         f"{dictionary_type.index_type}") from None
    return pa.DictionaryArray.from_arrays(indices, encoded.dictionary)


def list_array(flat: Any, lengths: np.ndarray, list_type: pa.DataType,
               valid: Sequence[bool] | None = None) -> pa.Array:
    """A list column from the concatenated values (a list of strings, or numbers) and the list lengths."""
    item_type = list_type.value_type
    if pa.types.is_dictionary(item_type):
        items = dictionary_array(flat, item_type)
    elif item_type == pa.string():
        items = string_array(flat)
    else:
        values = _numeric_values(flat, item_type)
        items = pa.Array.from_buffers(item_type, len(values), [None, pa.py_buffer(values)])
    bitmap, nulls = _validity(valid)
    return pa.Array.from_buffers(list_type, len(lengths), [bitmap, _offsets(np.asarray(lengths))], nulls,
                                 children=[items])


def list_array_of_lists(values: Sequence[Any], list_type: pa.DataType) -> pa.Array:
    """A list column from one list (or numpy array, or None = null) per row."""
    lengths = np.fromiter((0 if v is None else len(v) for v in values), dtype=np.int64, count=len(values))
    present = [v for v in values if v is not None and len(v)]
    if present and isinstance(present[0], np.ndarray):
        flat: Any = np.concatenate(present)
    elif list_type.value_type == pa.string() or pa.types.is_dictionary(list_type.value_type):
        flat = list(chain.from_iterable(present))
    else:
        flat = np.fromiter(chain.from_iterable(present), dtype=np.int64, count=int(lengths.sum()))
    valid = [v is not None for v in values] if any(v is None for v in values) else None
    return list_array(flat, lengths, list_type, valid)


def records_to_batch(records: Sequence[dict[str, Any]], schema: pa.Schema) -> pa.RecordBatch:
    """Column-wise conversion of feature records (lists or numpy arrays) into one record batch."""
    columns = []
    for field in schema:
        values = [record[field.name] for record in records]
        if pa.types.is_list(field.type):
            columns.append(list_array_of_lists(values, field.type))
        else:
            columns.append(plain_array(values, field.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def record_to_json(record: dict[str, Any], distances: str | None = None) -> str:
    """One record as a JSON line (numpy arrays become lists; `distances` stays flattened). `distances`: that
    field's JSON text made beforehand (`uint8_lists_json`), put in its place."""
    plain = {key: value.tolist() if isinstance(value, np.ndarray) else value for key, value in record.items()
             if distances is None or key != "distances"}
    if distances is None:
        return json.dumps(plain, ensure_ascii=False)
    keys = list(record)
    at = keys.index("distances")
    before = json.dumps({key: plain[key] for key in keys[:at]}, ensure_ascii=False)[:-1]
    after = json.dumps({key: plain[key] for key in keys[at + 1:]}, ensure_ascii=False)[1:]
    return (f"{before}, " if at else before) + f'"distances": {distances}' + (f", {after}" if at + 1 < len(keys)
                                                                               else after)


_UINT8_TEXT = np.array([f"{i}, " for i in range(256)], dtype=object)
_UINT8_CHARS = np.array([len(f"{i}, ") for i in range(256)], dtype=np.int64)


def uint8_lists_json(flat: np.ndarray, lengths: np.ndarray) -> list[str]:
    """The JSON text (as json.dumps writes it) of each run of `lengths` values of a flat uint8 array, made for
    all runs at once: per record, encoding the distance matrices was most of the JSON Lines time."""
    text = "".join(_UINT8_TEXT[flat].tolist())
    ends = np.concatenate(([0], np.cumsum(_UINT8_CHARS[flat])))[np.concatenate(([0], np.cumsum(lengths)))].tolist()
    return [f"[{text[start:end - 2]}]" for start, end in zip(ends[:-1], ends[1:])]
