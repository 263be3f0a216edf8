"""The Arrow schema of CONTRACT.md, declared once, and the record -> Arrow batch / JSON conversions.

Writers (align, convert), readers (inspect, validate) and the trainer take field names and types from
here; nothing else knows column names by heart.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import chain
from typing import Any

import numpy as np
import pyarrow as pa

SCHEMA_VERSION = 1

# --features group -> the fields it adds (besides the always-present BASE_FIELDS)
FEATURE_GROUPS = ("parents", "distances", "transitions", "labels")
DEFAULT_FEATURES = ("parents", "transitions", "labels")

_FIELD_TYPES: dict[str, pa.DataType] = {
    "tokens": pa.list_(pa.string()),
    "heads": pa.list_(pa.int16()),
    "labels": pa.list_(pa.string()),
    "subwords": pa.list_(pa.string()),
    "subword_token": pa.list_(pa.int16()),
    "parent_mid": pa.list_(pa.float32()),
    "parent_first": pa.list_(pa.int16()),
    "distances": pa.list_(pa.uint8()),  # token x token, row-major flattened
    "transitions": pa.list_(pa.string()),  # null when the tree cannot be encoded
    "projective": pa.bool_(),
}
BASE_FIELDS = ("tokens", "heads", "subwords", "subword_token", "projective")
GROUP_FIELDS = {
    "parents": ("parent_mid", "parent_first"),
    "distances": ("distances",),
    "transitions": ("transitions",),
    "labels": ("labels",),
}


def parse_features(spec: str | Sequence[str]) -> tuple[str, ...]:
    """'parents,distances' -> ('parents', 'distances'), in canonical order; unknown names raise."""
    names = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    unknown = [name for name in names if name not in FEATURE_GROUPS]
    if unknown:
        raise ValueError(f"unknown feature(s) {', '.join(unknown)}; choose from {','.join(FEATURE_GROUPS)}")
    return tuple(group for group in FEATURE_GROUPS if group in names)


def feature_fields(features: Sequence[str], prefix: str = "") -> list[pa.Field]:
    """The Arrow fields of one side's sentence features, e.g. prefix 'src_'."""
    names = list(BASE_FIELDS)
    for group in features:
        names.extend(GROUP_FIELDS[group])
    order = list(_FIELD_TYPES)
    names.sort(key=order.index)
    return [pa.field(prefix + name, _FIELD_TYPES[name], nullable=(name == "transitions"))
            for name in names]


def align_schema(features: Sequence[str]) -> pa.Schema:
    """Schema of `synprep align --format arrow`: id, sent_id, then the features."""
    return pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("sent_id", pa.string())]
                     + feature_fields(features))


def pair_schema(src_features: Sequence[str], tgt_features: Sequence[str]) -> pa.Schema:
    """Schema of a convert shard: id, src_text, tgt_text, src_* and tgt_* features."""
    return pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("src_text", pa.string()),
                      pa.field("tgt_text", pa.string())]
                     + feature_fields(src_features, "src_") + feature_fields(tgt_features, "tgt_"))


def _list_column(values: list[Any], field: pa.Field) -> pa.Array:
    item_type = field.type.value_type
    lengths = np.fromiter((0 if v is None else len(v) for v in values), dtype=np.int32, count=len(values))
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    present = [v for v in values if v is not None and len(v)]
    if present and isinstance(present[0], np.ndarray):
        flat = pa.array(np.concatenate(present), type=item_type)  # (safe) cast in pyarrow; no pandas import
    else:  # python lists: one flat list, converted by pyarrow in C
        flat = pa.array(list(chain.from_iterable(present)), type=item_type)
    mask = None
    if any(v is None for v in values):
        mask = pa.array([v is None for v in values], type=pa.bool_())
    return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), flat, mask=mask)


def records_to_batch(records: Sequence[dict[str, Any]], schema: pa.Schema) -> pa.RecordBatch:
    """Column-wise conversion of feature records (lists or numpy arrays) into one record batch."""
    columns = []
    for field in schema:
        values = [record[field.name] for record in records]
        if pa.types.is_list(field.type):
            columns.append(_list_column(values, field))
        else:
            columns.append(pa.array(values, type=field.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def record_to_json(record: dict[str, Any]) -> str:
    """One record as a JSON line (numpy arrays become lists; `distances` stays flattened)."""
    plain = {key: value.tolist() if isinstance(value, np.ndarray) else value for key, value in record.items()}
    return json.dumps(plain, ensure_ascii=False)
