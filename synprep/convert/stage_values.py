"""What the stage caches of convert store (synprep.convert.stage_cache), as bytes and back: the filter's result
(JSON), the files the BPE stage learned (text, or base64 for a binary model), a piece's features (counts and an
Arrow record batch). `decode_value` refuses, as a ValueError, a value that does not decode: the stage is then
computed again (and `synprep cache verify` counts the entry damaged)."""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import pyarrow as pa

from ..shards import batch_bytes, batch_from_bytes


def file_value(path: str) -> str | dict[str, str]:
    """A learned file as a stage value: its text (BPE codes, vocabularies: as stored before binary models), or
    {"base64": ...} for a file that is not UTF-8 text (a SentencePiece .model)."""
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def _file_bytes(stored: str | dict[str, str]) -> bytes:
    """The bytes of a file stored by `_file_value`."""
    return base64.b64decode(stored["base64"]) if isinstance(stored, dict) else stored.encode("utf-8")


def _decode_filter(data: bytes) -> dict[str, Any]:
    value = json.loads(data)
    if not isinstance(value, dict):
        raise ValueError("not a filter result")
    return value


def _decode_files(data: bytes) -> dict[str, bytes]:
    """The learned files a bpe value holds: plain file names -> their bytes."""
    stored = json.loads(data)
    if not isinstance(stored, dict) or not all(isinstance(name, str) and name and os.path.basename(name) == name
                                               and name not in (".", "..") for name in stored):
        raise ValueError("not learned files")
    try:
        return {name: _file_bytes(value) for name, value in stored.items()}
    except (TypeError, KeyError, AttributeError) as err:
        raise ValueError(f"not a learned file: {err}") from None


def decode_value(stage: str, data: bytes) -> Any:
    """A stage's stored value (inflated) decoded: the filter's result, the bpe stage's files, the features' (batch,
    counts); ValueError when it does not decode (an entry written by no synprep of this FORMAT)."""
    decode = {"filter": _decode_filter, "bpe": _decode_files, "features": _decode_batch}.get(stage)
    if decode is None:
        raise ValueError(f"no stage {stage!r}")
    try:
        return decode(data)
    except (TypeError, KeyError, IndexError, pa.ArrowException, OSError) as err:
        raise ValueError(f"{type(err).__name__}: {err}") from None


def encode_batch(batch: pa.RecordBatch | None, info: dict[str, Any]) -> bytes:
    """A piece's features as a stage value: its counts (JSON) and its record batch (Arrow IPC stream)."""
    head = json.dumps({k: v for k, v in info.items() if k != "seconds"}).encode()
    body = b""
    if batch is not None:
        body = batch_bytes(batch)
    return len(head).to_bytes(4, "little") + head + body


def _decode_batch(data: bytes) -> tuple[pa.RecordBatch | None, dict[str, Any]]:
    size = int.from_bytes(data[:4], "little")
    head = json.loads(data[4:4 + size])
    if not isinstance(head, dict):
        raise ValueError("not a features result")
    info = {**head, "seconds": {}}
    body = data[4 + size:]
    if not body:
        return None, info
    return batch_from_bytes(body), info
