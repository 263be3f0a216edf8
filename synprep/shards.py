"""Dataset folders (CONTRACT.md "Arrow shards"): the only code that writes or reads them.

A dataset made by `synprep convert` is a folder OUT/ holding one folder per split, OUT/<split>/ =
`manifest.json` + `part-00000.arrow`, ... (Arrow IPC *streams*, schema from `synprep.schema`), and at OUT/
what the splits were made with: `codes.bpe` (or `codes.src.bpe` and `codes.tgt.bpe`: BPE per side),
`vocab.src|tgt`, `models/<side>.udpipe` (trained on the fly) and `paths.json` (where the pipeline's relative
paths resolve on this machine; the manifests hold no absolute path, so a dataset written twice into two
folders has byte-identical manifests).

Writing: `write_shard` (atomic; rows and sha256 for the manifest), `Manifest.write`. Reading: `open_split`
-> `Split` (manifest checked; `table` memory-maps the shards, with column selection; `rows` iterates pairs
for inspect/validate); `read_shard` one shard, `count_batches` its record batches. No other module opens a
shard's Arrow stream. Every reader checks each shard's row count against the manifest and has pyarrow
validate every batch fully before any value is touched, so a corrupt shard is a one-line error, never a
crash; `Split.verify_hashes` compares the sha256 of each file with the manifest.

Memory: the shards are mapped read-only, and `release_pages` gives back this process's resident pages of
every mapped shard (on Linux and macOS; the data stay readable, touched again they come back from the file
cache). Readers call it after a pass over a split, so that a process's RSS holds what it copied out, not the
shards (a WMT-size split is gigabytes).
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import re
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from .errors import InputError
from .options import COMPRESSIONS, MANIFEST, PATHS
from .processes import holders, is_running, process_start
from .schema import FEATURE_GROUPS, READABLE_VERSIONS, SCHEMA_VERSION, pair_schema
from .subwords import registry
from .textio import atomic_write, regular_file

LOCK = ".lock"  # at the dataset root: held by the one process writing the dataset
SIDES = ("src", "tgt")
DEFAULT_COMPRESSION = "none"  # zero-copy memory mapping for the trainer and HF datasets (docs/synprep.md "Compression")


def shard_name(index: int) -> str:
    """File name of shard `index` (CONTRACT.md: part-00000.arrow, ...)."""
    return f"part-{index:05d}.arrow"


def check_compression(name: str) -> str:
    """`name` if it is one of COMPRESSIONS, else an InputError naming the choices."""
    if name not in COMPRESSIONS:
        raise InputError(f"unknown shard compression {name!r} (choose from {', '.join(COMPRESSIONS)})")
    return name


# ------------------------------------------------------------------------------------------ writing


class WriterLock:
    """One writer at a time per output folder (a dataset of `synprep convert`, a run folder of `syntrain run`):
    an exclusive `flock` on FOLDER/.lock (or FOLDER/`name`). The operating system releases it when the holder exits
    or is killed (kill -9 leaves no stale lock); the file names the holder (pid, host, start time) for the message
    another writer gets. `what`: how that message names the writer and its folder. Without `fcntl` (Windows) there
    is no lock. A writer that needs the folder only for a moment (setting a parse cache up) waits for the lock
    instead (`acquire(wait=...)`)."""

    def __init__(self, folder: str, what: str = "another synprep convert is writing this dataset",
                 name: str = LOCK) -> None:
        self.path = os.path.join(folder, name)
        self.what = what
        self.fd: int | None = None

    def acquire(self, wait: float = 0.0) -> None:
        """Take the lock, waiting up to `wait` seconds for its holder, or raise an InputError naming the holder."""
        import time

        try:
            import fcntl
        except ImportError:
            return
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() < deadline:
                    time.sleep(0.02)
                    continue
                recorded = os.read(fd, 4096).decode("utf-8", "replace")
                os.close(fd)
                waited = f" for {wait:g} s" if wait else ""
                raise InputError(f"{self.what} ({_holder(recorded, self.path)}){waited}: wait for it to finish or "
                                 "stop it; the lock goes with its process", os.path.dirname(self.path)) from None
        import socket

        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}\n"
                     f"start {process_start(os.getpid())}\n".encode())
        self.fd = fd
        _HELD_LOCKS.add(fd)

    def release(self) -> None:
        """Give the lock back (the file stays: removing it would let two writers lock two files)."""
        if self.fd is not None:
            _HELD_LOCKS.discard(self.fd)
            os.close(self.fd)
            self.fd = None


_HELD_LOCKS: set[int] = set()  # the descriptors of the locks this process holds


def _forget_locks() -> None:
    """In a forked child (a worker): close the inherited lock descriptors. Closing leaves the parent's lock held
    (it goes when every descriptor of it is closed), and a worker outliving its parent then holds none."""
    for fd in _HELD_LOCKS:
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD_LOCKS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_locks)


def _holder(recorded: str, path: str) -> str:
    """Who holds a lock, for the refusal: the recorded writer (pid, host, start) when it still runs, else the
    processes found holding the file (the recorded pid is gone, or now another program)."""
    lines = recorded.strip().splitlines()
    first = lines[0] if lines else "another process"
    fields = first.split()
    start = lines[1].split()[-1] if len(lines) > 1 and lines[1].startswith("start ") else None
    import socket

    here = socket.gethostname()
    if len(fields) < 4 or fields[0] != "pid" or not fields[1].isdigit() or fields[3].rstrip(",") != here:
        return first  # another machine's process (a shared file system), or an unknown writer
    if is_running(int(fields[1]), None if start == "None" else start):
        return first
    others = [pid for pid in holders(path) if pid != os.getpid()]
    named = ", ".join(f"pid {pid}" for pid in others) if others else "a process this user cannot see"
    return f"{first}, is gone: the lock is held by {named}"


def write_shard(path: str, schema: pa.Schema, batches: Iterable[pa.RecordBatch],
                compression: str = DEFAULT_COMPRESSION) -> dict[str, Any]:
    """Write one shard atomically (a stream of `batches`; no batch = a stream with the schema only); returns
    its manifest entry: file name, rows, bytes, sha256."""
    sink = pa.BufferOutputStream()
    options = {} if compression == "none" else {"options": pa.ipc.IpcWriteOptions(compression=compression)}
    rows = 0
    with pa.ipc.new_stream(sink, schema, **options) as writer:
        for batch in batches:
            writer.write_batch(batch)
            rows += batch.num_rows
    data = sink.getvalue().to_pybytes()
    atomic_write(path, data)
    return {"file": os.path.basename(path), "rows": rows, "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest()}


def write_paths(root: str, data_root: str, pipeline_file: str | None) -> None:
    """paths.json at the dataset root: where the manifests' relative input paths resolve on this machine."""
    atomic_write(os.path.join(root, PATHS), json.dumps(
        {"data_root": os.path.abspath(data_root),
         "pipeline_file": os.path.abspath(pipeline_file) if pipeline_file else None}, indent=2).encode())


@dataclass
class Manifest:
    """A split's manifest.json (CONTRACT.md): configuration (input paths as given in the pipeline file),
    signature, accounting (input lines = rows + rejected per reason) and the shards (file, rows, bytes,
    sha256)."""

    split: str
    configuration: dict[str, Any]
    signature: dict[str, Any]
    input_lines: int
    rows: int
    rejected: dict[str, int]
    rejected_reasons: list[str]
    shards: list[dict[str, Any]]
    joined_lines: int = 0
    piece_rows: int = 0
    shard_size: int = 0
    compression: str = "none"
    schema_version: int = SCHEMA_VERSION
    sentences: dict[str, dict[str, int]] = field(default_factory=dict)  # per parsed side: distinct, repeated
    parsers: dict[str, dict[str, Any]] = field(default_factory=dict)  # per parsed side: held-out scores, warnings

    def features(self, side: str) -> tuple[str, ...]:
        """The feature groups of one side (`src` or `tgt`), in canonical order."""
        return tuple(self.configuration.get("features", {}).get(side, ()))

    @property
    def policies(self) -> dict[str, Any]:
        """The tree policies the features were made under (root, non_projective, strip_subtypes)."""
        return {k: v for k, v in self.configuration.get("features", {}).items() if k not in SIDES}

    def schema(self) -> pa.Schema:
        """The Arrow schema every shard of the split has."""
        return pair_schema(self.features("src"), self.features("tgt"), self.schema_version)

    def to_json(self) -> str:
        """manifest.json's text (keys in a fixed order)."""
        data = {"schema_version": self.schema_version, "split": self.split, "configuration": self.configuration,
                "signature": self.signature, "input_lines": self.input_lines, "rows": self.rows,
                "rejected": dict(sorted(self.rejected.items())), "rejected_reasons": list(self.rejected_reasons),
                "joined_lines": self.joined_lines, "piece_rows": self.piece_rows, "shard_size": self.shard_size,
                "compression": self.compression, "sentences": self.sentences,
                **({"parsers": self.parsers} if self.parsers else {}), "shards": self.shards,
                "schema": self.schema().to_string(show_field_metadata=False)}
        return json.dumps(data, indent=2, ensure_ascii=False)

    def write(self, folder: str) -> None:
        """Write manifest.json into the split folder (atomically, after its shards)."""
        accounted = self.rows + sum(self.rejected.values())
        if accounted != self.input_lines:
            raise InputError(f"accounting error: {self.rows} rows + {sum(self.rejected.values())} rejected != "
                             f"{self.input_lines} input lines (a piece of the work folder was changed or removed: "
                             "run again with --overwrite)", folder)
        atomic_write(os.path.join(folder, MANIFEST), self.to_json().encode("utf-8"))


# what every shard entry of a manifest holds (`write_shard`), with its type
SHARD_FIELDS: dict[str, Any] = {"file": str, "rows": int, "bytes": int, "sha256": str}
# the tables of a manifest's configuration that readers look into, with their types (the pipeline's tables)
CONFIGURATION_TABLES: dict[str, Any] = {"splits": list[Any], "filter": dict[str, Any], "bpe": dict[str, Any],
                                        "features": dict[str, Any], "normalize": dict[str, Any],
                                        "src_parser": dict[str, Any] | None, "tgt_parser": dict[str, Any] | None}
SHA256 = re.compile(r"[0-9a-f]{64}")


def _digest_problem(signature: dict) -> str | None:
    """The first digest of a signature (a key ending in `_sha256`: a sha256 or null; `subword_files_sha256`: a
    table of them) that is not one, in words, or None: a damaged digest would let a replaced file pass."""
    for key, value in signature.items():
        digests = value.values() if isinstance(value, dict) and key == "subword_files_sha256" else [value]
        if key.endswith("_sha256") and (key == "subword_files_sha256" and not isinstance(value, dict) or any(
                value is not None and not (isinstance(value, str) and SHA256.fullmatch(value))
                for value in digests)):
            return f"'signature.{key}' is not a sha256 ({value!r:.40})"
    return None


def manifest_problem(data: dict) -> str | None:
    """The first field of a manifest's JSON that is missing (a `Manifest` field without a default), of another
    type than its declaration or an impossible count (below 0), in words; None when every field fits. Read from
    the dataclass, so a field added to it is checked without more code."""
    import dataclasses
    import typing

    from .tables import has_type

    hints = typing.get_type_hints(Manifest)
    for spec in dataclasses.fields(Manifest):
        if spec.name not in data:
            if spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
                return f"'{spec.name}' missing or of the wrong type"
            continue
        value = data[spec.name]
        if not has_type(value, hints[spec.name]):
            return f"'{spec.name}' missing or of the wrong type"
        counts = [value] if hints[spec.name] is int else \
            list(value.values()) if spec.name == "rejected" else []
        if any(not isinstance(n, int) or isinstance(n, bool) or n < 0 for n in counts):
            return f"'{spec.name}' holds an impossible count ({value!r})"
    for number, entry in enumerate(data["shards"]):
        wrong = [key for key, hint in SHARD_FIELDS.items() if not isinstance(entry, dict) or key not in entry
                 or not has_type(entry[key], hint) or hint is int and entry[key] < 0]
        if wrong or os.path.basename(entry["file"]) != entry["file"] or not SHA256.fullmatch(entry["sha256"]):
            return (f"shard {number + 1}'s '{wrong[0] if wrong else 'file'}' missing or of the wrong type (every "
                    "shard needs a plain 'file' name, 'rows', 'bytes' and a 'sha256')")
    for key, hint in CONFIGURATION_TABLES.items():
        if key in data["configuration"] and not has_type(data["configuration"][key], hint):
            return f"'configuration.{key}' is not a {'list' if key == 'splits' else 'table'}"
    return _digest_problem(data["signature"])


def load_manifest(folder: str) -> Manifest:
    """The checked manifest of a split folder; every defect is an InputError naming the file."""
    if not os.path.isdir(folder):
        raise InputError("no such split folder" if not os.path.exists(folder) else
                         "not a split folder (expected a directory written by synprep convert)", folder)
    path = os.path.join(folder, MANIFEST)
    regular_file(path, "manifest.json")
    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read().decode("utf-8"))
    except FileNotFoundError:
        splits = sorted(name for name in os.listdir(folder) if os.path.isfile(os.path.join(folder, name, MANIFEST)))
        if splits:  # a dataset folder (synprep convert's OUT): name its splits
            raise InputError("a dataset folder, not a split: give one of its splits: "
                             + ", ".join(os.path.join(folder, name) for name in splits), folder) from None
        raise InputError("not a split folder (no manifest.json; is it a folder written by synprep convert?)",
                         folder) from None
    except UnicodeDecodeError:
        raise InputError("manifest.json is not UTF-8 (corrupt file?)", path) from None
    except json.JSONDecodeError as err:
        raise InputError(f"manifest.json is not valid JSON (truncated or corrupt?): {err.msg}", path,
                         err.lineno) from None
    except OSError as err:
        raise InputError(f"cannot read manifest.json: {err.strerror}", path) from None
    if not isinstance(data, dict):
        raise InputError("manifest.json is not a JSON object", path)
    if (problem := manifest_problem(data)) is not None:
        raise InputError(f"manifest.json: {problem}", path)
    version = data.get("schema_version", 1)
    if version not in READABLE_VERSIONS:
        raise InputError(f"shard format version {version!r}: this synprep reads versions "
                         f"{', '.join(map(str, READABLE_VERSIONS))} (a newer synprep wrote it: upgrade synprep, or "
                         "convert again)", path)
    features = data["configuration"].get("features", {})
    for side in SIDES:
        groups = features.get(side, ()) if isinstance(features, dict) else None
        if not isinstance(groups, list | tuple) or any(g not in FEATURE_GROUPS for g in groups):
            raise InputError(f"manifest.json: configuration.features.{side} is not a list of "
                             f"{', '.join(FEATURE_GROUPS)}", path)
    known = {f for f in Manifest.__dataclass_fields__}
    return Manifest(**{k: v for k, v in data.items() if k in known})


# ------------------------------------------------------------------------------------------ reading


@dataclass
class Row:
    """One pair (shards) or one sentence (CoNLL-U): per side, the contract's fields without prefix."""

    id: int
    sides: dict[str, dict[str, Any]]
    file: str = ""


def batch_rows(batch: pa.RecordBatch, file: str = "") -> Iterator[Row]:
    """Rows of a shard batch, split into sides (`src_parent_mid` -> sides['src']['parent_mid'])."""
    columns = {name: batch.column(i).to_pylist() for i, name in enumerate(batch.schema.names)}
    for index in range(batch.num_rows):
        sides: dict[str, dict[str, Any]] = {side: {} for side in SIDES}
        for name, values in columns.items():
            side, _, key = name.partition("_")
            if side in sides:
                sides[side][key] = values[index]
        yield Row(int(columns["id"][index]) if "id" in columns else index, sides, file)


def _shard_file_error(path: str, err: Exception) -> InputError:
    return InputError(f"unreadable shard (truncated or corrupt Arrow stream: {err}); run synprep validate on the "
                      "split, or convert again", path)


_MAPPED: weakref.WeakSet[mmap.mmap] = weakref.WeakSet()  # every live shard mapping (for release_pages)


def _map_shard(path: str) -> tuple[mmap.mmap, pa.Buffer]:
    """The shard file mapped read-only, and as one Arrow buffer (zero-copy; the mapping lives as long as any
    buffer or array made from it)."""
    regular_file(path, "the shard")  # a named pipe or /dev/zero would never end
    try:
        with open(path, "rb") as handle:
            mapping = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as err:
        raise InputError(f"cannot open shard: {err.strerror or err}", path) from None
    except ValueError:  # mmap of an empty file
        raise _shard_file_error(path, ValueError("the file is empty")) from None
    _MAPPED.add(mapping)
    return mapping, pa.py_buffer(mapping)


def release_pages(mappings: Iterable[mmap.mmap] | None = None) -> None:
    """Give back the resident pages of every shard this process has mapped (or of `mappings`); their data stay
    readable: touched again, they are read back from the file cache. A no-op where the OS has no
    MADV_DONTNEED."""
    advice = getattr(mmap, "MADV_DONTNEED", None)
    if advice is None:
        return
    for mapping in list(_MAPPED if mappings is None else mappings):
        if not mapping.closed:
            mapping.madvise(advice)


def shard_columns(path: str) -> list[str]:
    """The column names of a shard file, from its schema (InputError, one line, when it cannot be read as an Arrow
    stream)."""
    mapping, mapped = _map_shard(path)
    try:
        return list(pa.ipc.open_stream(pa.BufferReader(mapped)).schema.names)
    except (pa.ArrowInvalid, pa.ArrowException, OSError, ValueError) as err:
        raise _shard_file_error(path, err) from None
    finally:
        release_pages([mapping])


def batch_bytes(batch: pa.RecordBatch) -> bytes:
    """One record batch as an Arrow IPC stream in memory (a value to store elsewhere: the stage caches)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def batch_from_bytes(data: bytes) -> pa.RecordBatch:
    """The record batch of `batch_bytes`."""
    return pa.ipc.open_stream(pa.py_buffer(data)).read_next_batch()


def count_batches(path: str) -> int:
    """The record batches of a shard file (InputError, one line, when it cannot be read as an Arrow stream)."""
    mapping, mapped = _map_shard(path)
    try:
        return sum(1 for _ in pa.ipc.open_stream(pa.BufferReader(mapped)))
    except (pa.ArrowInvalid, pa.ArrowException, OSError, ValueError) as err:
        raise _shard_file_error(path, err) from None
    finally:
        release_pages([mapping])


def read_shard(path: str, expected_rows: int | None = None, columns: Sequence[str] | None = None,
               schema: pa.Schema | None = None, batches: tuple[int, int | None] = (0, None)) -> pa.Table:
    """One shard as a table (memory-mapped: uncompressed buffers are not copied), every batch validated in
    full first; `expected_rows` and `schema` (when given) must match. `batches`: only the record batches
    [start, end) (end None: to the last)."""
    mapping, mapped = _map_shard(path)
    try:
        reader = pa.ipc.open_stream(pa.BufferReader(mapped))
        full = reader.schema
        if schema is not None and not full.equals(schema):
            raise InputError("the shard's schema differs from the one its manifest's features give", path)
        if columns is not None:
            missing = [c for c in columns if c not in full.names]
            if missing:
                raise InputError(f"the shard has no column(s) {', '.join(missing)}", path)
            # only these columns are read (of compressed shards, only these are decompressed)
            wanted = pa.ipc.IpcReadOptions(included_fields=sorted(full.get_field_index(c) for c in columns))
            reader = pa.ipc.open_stream(pa.BufferReader(mapped), options=wanted)
        kept = []
        for index, batch in enumerate(reader):
            if index < batches[0] or (batches[1] is not None and index >= batches[1]):
                continue
            batch.validate(full=True)
            kept.append(batch.select(list(columns)) if columns is not None else batch)
        rows = sum(b.num_rows for b in kept)
        release_pages([mapping])  # reading and validating touched the whole file
    except (pa.ArrowInvalid, pa.ArrowException, OSError, ValueError) as err:
        raise _shard_file_error(path, err) from None
    if expected_rows is not None and rows != expected_rows:
        raise InputError(f"{rows} rows in the shard but {expected_rows} in manifest.json (a shard from another run? "
                         "convert again or restore the shard)", path)
    out_schema = full if columns is None else pa.schema([full.field(c) for c in columns])
    return pa.Table.from_batches(kept, schema=out_schema)


@dataclass
class Split:
    """A split folder: its manifest and shards (see the module docstring)."""

    path: str
    manifest: Manifest
    _schema: pa.Schema | None = field(default=None, repr=False)

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of the split's shards."""
        if self._schema is None:
            self._schema = self.manifest.schema()
        return self._schema

    @property
    def columns(self) -> list[str]:
        """The column names of the split's shards."""
        return self.schema.names

    def shard_paths(self) -> list[str]:
        """The shard files listed in the manifest, in order."""
        return [os.path.join(self.path, shard["file"]) for shard in self.manifest.shards]

    def missing_columns(self, needed: Iterable[str]) -> list[str]:
        """The columns of `needed` that the split does not have."""
        return [name for name in needed if name not in self.columns]

    def table(self, columns: Sequence[str] | None = None) -> pa.Table:
        """All shards as one table (memory-mapped), optionally only `columns`; row counts checked."""
        missing = self.missing_columns(columns or ())
        if missing:
            raise InputError(f"the split has no column(s) {', '.join(missing)}", self.path)
        tables = [read_shard(path, shard["rows"], columns, self.schema)
                  for path, shard in zip(self.shard_paths(), self.manifest.shards)]
        if not tables:
            schema = self.schema if columns is None else pa.schema([self.schema.field(c) for c in columns])
            return schema.empty_table()
        return pa.concat_tables(tables)

    def batches(self) -> Iterator[tuple[str, pa.RecordBatch]]:
        """(shard file name, record batch) for every batch of every shard, in order, each shard checked."""
        for path, shard in zip(self.shard_paths(), self.manifest.shards):
            for batch in read_shard(path, shard["rows"], None, self.schema).to_batches():
                yield shard["file"], batch

    def rows(self) -> Iterator[Row]:
        """Every pair as a Row (Python values; for inspect and validate, not the trainer)."""
        for name, batch in self.batches():
            yield from batch_rows(batch, name)

    def verify_hashes(self) -> list[str]:
        """One message per shard whose sha256 differs from the manifest's (old manifests have none)."""
        problems = []
        for path, shard in zip(self.shard_paths(), self.manifest.shards):
            if "sha256" not in shard:
                continue
            digest = hashlib.sha256()
            regular_file(path, "the shard")
            try:
                with open(path, "rb") as handle:
                    for block in iter(lambda handle=handle: handle.read(1 << 22), b""):
                        digest.update(block)
            except OSError as err:
                problems.append(f"{path}: cannot read: {err.strerror or err}")
                continue
            if digest.hexdigest() != shard["sha256"]:
                problems.append(f"{path}: sha256 differs from manifest.json (changed or corrupt)")
        return problems

    def dataset_root(self) -> str:
        """The dataset folder the split belongs to (where codes, vocabularies, models and paths.json are)."""
        return os.path.dirname(os.path.abspath(self.path))


def open_split(path: str) -> Split:
    """A split folder written by `synprep convert`, its manifest checked."""
    return Split(path, load_manifest(path))


def load_pandas(path: str, columns: Sequence[str] | None = None) -> Any:
    """A split as a pandas DataFrame (needs pandas)."""
    return open_split(path).table(columns).to_pandas()


def load_hf_dataset(path: str) -> Any:
    """A split as a Hugging Face `datasets.Dataset` over the memory-mapped shards (needs `datasets`). Without
    `datasets`' own progress bars: mapping files takes no time to show, and in a notebook without ipywidgets
    each bar would print tqdm's "IProgress not found" warning."""
    import datasets

    split = open_split(path)
    split.table()  # checks every shard before handing the files over
    shown = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        parts = [datasets.Dataset.from_file(p) for p in split.shard_paths()]
        return parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)
    finally:
        if shown:
            datasets.enable_progress_bars()


# --------------------------------------------------------------------------------- making raw text alike


@dataclass(frozen=True)
class SourcePreparation:
    """How a dataset turned source lines into features: parser, BPE codes (+ vocabulary), feature config.
    Resolved for this machine by `source_preparation`."""

    parser: dict[str, Any]  # ParserSpec fields, model paths absolute
    parser_sha256: str | None
    codes: str | None
    codes_sha256: str | None
    vocabulary: str | None
    vocabulary_threshold: int | None
    features: tuple[str, ...]
    policies: dict[str, Any]
    normalize: tuple[str, ...] = ()  # [normalize] src: applied to each line before parsing
    scheme: str = registry.DEFAULT  # how `codes` cut tokens: subword-nmt codes, or another scheme's model (or none)
    cut: str = "token"  # raw: the line's text cut at once (hf-tokenizer, [bpe] cut = "raw")
    vocabulary_sha256: str | None = None  # the signature's bpe_vocabulary_sha256_src (None: not recorded)


def dataset_resolver(dataset_root: str) -> Callable[[str | None], str | None]:
    """Resolves a manifest's relative input path (as written in the pipeline file) on this machine, through the
    dataset's paths.json; absolute paths and paths of a dataset without paths.json are returned unchanged."""
    paths_file = os.path.join(dataset_root, PATHS)
    data_root = None
    if os.path.isfile(paths_file):
        with open(paths_file, encoding="utf-8") as handle:
            data_root = json.load(handle).get("data_root")

    def resolve(value: str | None) -> str | None:
        if not value or os.path.isabs(value) or data_root is None:
            return value
        return os.path.normpath(os.path.join(data_root, value))

    return resolve


def source_preparation(configuration: dict[str, Any], signature: dict[str, Any], dataset_root: str
                       ) -> SourcePreparation:
    """What `synprep.prepare.prepare_source` needs, from a manifest's configuration and signature and the
    dataset folder (for the models and codes convert made there, and paths.json for the given paths)."""
    parser = dict(configuration.get("src_parser") or {})
    if not parser:
        raise InputError("the dataset's source side was given as CoNLL-U (no parser model): convert raw text with "
                         "synprep first and pass the split folder")
    resolve = dataset_resolver(dataset_root)
    if not parser.get("model") and parser.get("train_conllu"):  # trained on the fly by convert
        parser["model"] = os.path.join(dataset_root, "models", "src.udpipe")
    elif not (parser.get("backend") == "spacy" and "/" not in (parser.get("model") or "/")):
        parser["model"] = resolve(parser.get("model"))
    parser["model_dir"] = resolve(parser.get("model_dir"))
    for key in ("train_conllu", "preset"):
        parser.pop(key, None)
    codes, codes_sha256 = side_codes(configuration, signature, dataset_root, "src", resolve)
    threshold = configuration.get("bpe", {}).get("vocabulary_threshold")
    src_signature = signature.get("parsers", {}).get("src", {})
    features = configuration.get("features", {})
    return SourcePreparation(parser, src_signature.get("sha256") if isinstance(src_signature, dict) else None, codes,
                        codes_sha256,
                        os.path.join(dataset_root, "vocab.src") if threshold else None, threshold,
                        tuple(features.get("src", ())), {k: v for k, v in features.items() if k not in SIDES},
                        tuple((configuration.get("normalize") or {}).get("src", ())),
                        configuration.get("bpe", {}).get("scheme", registry.DEFAULT),
                        configuration.get("bpe", {}).get("cut", "token"), signature.get("bpe_vocabulary_sha256_src"))


def side_codes(configuration: dict[str, Any], signature: dict[str, Any], dataset_root: str, side: str,
               resolve: Callable[[str | None], str | None] = lambda path: path) -> tuple[str | None, str | None]:
    """(codes file, its sha256 in the signature) that made one side's sub-words: the joint codes, or with
    `[bpe] joint = false` that side's own (OUT/codes.<side>.bpe when learned); (None, None) without BPE."""
    bpe = configuration.get("bpe", {})
    scheme = registry.get(bpe.get("scheme"))
    if not scheme.bpe_codes:  # the model convert stored in the dataset folder (none: no model)
        joint = bpe.get("joint", True)
        name = scheme.model_file(None if joint else side)
        return (os.path.join(dataset_root, name) if name else None,
                signature.get("subword_model_sha256" if joint else f"subword_model_sha256_{side}"))
    if bpe.get("joint", True):
        codes = resolve(bpe.get("codes")) or (os.path.join(dataset_root, "codes.bpe") if bpe.get("symbols") else None)
        return codes, signature.get("bpe_codes_sha256")
    given = bpe.get("codes")
    codes = resolve(given.get(side)) if isinstance(given, dict) else (
        os.path.join(dataset_root, f"codes.{side}.bpe") if bpe.get("symbols") else None)
    return codes, signature.get(f"bpe_codes_sha256_{side}")
