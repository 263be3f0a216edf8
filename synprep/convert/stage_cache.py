"""The stage caches of `synprep convert`: what the filter, the BPE learner and the features made, kept by a
fingerprint of what each was made from, so that a convert recomputes only the stages whose inputs changed (as
`datasets.Dataset.map` caches a transform by the fingerprint of its function and data).

They live in the parse cache's database (synprep.convert.parse_cache: one folder, one SQLite file), as entries of
one producer per stage (its identity: the stage, FORMAT, synprep's version; pyarrow's for the features), so they
have its guarantees: an 8-byte digest per entry (a damaged entry is never served: the stage runs again and
replaces it), any number of converts at once, one size limit for all entries (least recently used deleted
first), and `synprep cache info / verify / prune` (prune `--parser STAGE` empties one stage).

Stages and their fingerprints (sha256 of):
  filter    per piece: the [filter] settings with the identifier's signature (backend, version, candidates),
            max_chars, [normalize], and the piece's input lines            -> the filter's decisions
  bpe       the whole [bpe] section as read (any key, and the sha256 of every file it names) and the train
            pieces' word counts in input order                            -> the codes and vocabulary files
  features  per piece: the feature settings, the sha256 of the codes and vocabularies, the piece's parsed
            CoNLL-U                                                       -> its record batch and counts
(the parses themselves are the parse cache's entries). A stage reused gives the bytes it would compute: the
shards, codes and vocabularies of a convert are the same with or without the caches.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict
from typing import Any

import pyarrow as pa

from .. import __version__
from ..textio import atomic_write, file_sha256
from .parse_cache import ParseCache
from .stage_values import decode_value, encode_batch, file_value

FORMAT = 1  # of the stages' values (bump when what a stage stores changes)
STAGES = ("filter", "bpe", "features")


def fingerprint(*parts: Any) -> bytes:
    """sha256 of the parts: bytes as they are, anything else as sorted JSON."""
    digest = hashlib.sha256()
    for part in parts:
        data = part if isinstance(part, bytes) else json.dumps(part, sort_keys=True, default=str).encode()
        digest.update(len(data).to_bytes(8, "little") + data)
    return digest.digest()


def _with_digests(value: Any) -> Any:
    """A settings value with the sha256 of every existing file it names beside the name."""
    if isinstance(value, dict):
        return {k: _with_digests(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_with_digests(v) for v in value]
    if isinstance(value, str) and os.path.isfile(value):
        return {"file": value, "sha256": file_sha256(value)}
    return value


Known = Callable[[], Any] | None  # a cached result (called when its turn comes), or None: to compute


def map_missing(run: Callable[[Iterator[Any]], Iterator[Any]], items: Iterable[tuple[Any, Known, Any]]
                ) -> Iterator[tuple[Any, Any, bool]]:
    """(tag, result, computed) per item (tag, known, task), in order: `known()` where given (a cached result),
    else the next result of `run` over the tasks of the items without one. `run` (a worker pool) starts only at
    the first such item: none when everything is known."""
    source = iter(items)
    queue: deque[tuple[Any, Known]] = deque()
    to_run: deque[Any] = deque()
    ended = False

    def pull() -> bool:
        nonlocal ended
        if ended:
            return False
        try:
            tag, known, task = next(source)
        except StopIteration:
            ended = True
            return False
        queue.append((tag, known))
        if known is None:
            to_run.append(task)
        return True

    def tasks() -> Iterator[Any]:
        while to_run or pull():
            if to_run:
                yield to_run.popleft()

    results: Iterator[Any] | None = None
    while queue or pull():
        tag, known = queue.popleft()
        if known is not None:
            yield tag, known(), False
            continue
        if results is None:
            results = iter(run(tasks()))
        yield tag, next(results), True


class StageCache:
    """The stage caches of one convert (a connection of the driver) and what it reused, per stage and split."""

    def __init__(self, folder: str, max_gb: float) -> None:
        self.cache = ParseCache(folder, max_gb)
        self._ids: dict[str, int] = {}
        self.counts: dict[str, Counter[str]] = {}  # split -> "<stage>_reused" / "<stage>_computed" pieces
        self.bpe: str | None = None  # "reused" or "computed" (None: no codes learned)
        self._filters: dict[Any, bytes] = {}  # a filter job's fingerprint

    def close(self) -> None:
        self.cache.close()

    def _id(self, stage: str) -> int:
        if stage not in self._ids:
            identity = {"stage": stage, "format": FORMAT, "synprep": __version__,
                        **({"pyarrow": pa.__version__} if stage == "features" else {})}
            self._ids[stage] = self.cache.producer(identity)
        return self._ids[stage]

    def get(self, stage: str, key: bytes) -> Any:
        """The stage's value under `key`, decoded (`decode_value`); None when missing, damaged or not decoding (the
        stage is computed again and the entry replaced)."""
        data = self.cache.get(self._id(stage), key)
        if data is None:
            return None
        try:
            return decode_value(stage, data)
        except ValueError:
            return None

    def put(self, stage: str, key: bytes, data: bytes) -> None:
        self.cache.put(self._id(stage), key, data)

    def count(self, split: str, stage: str, reused: bool) -> None:
        self.counts.setdefault(split, Counter())[f"{stage}_{'reused' if reused else 'computed'}"] += 1

    def reused(self, split: str) -> dict[str, Any]:
        """A split's reuse counts for its manifest: pieces whose filter and features were reused or computed, and
        whether the BPE codes were."""
        counts = self.counts.get(split, Counter())
        out: dict[str, Any] = {stage: {"reused": counts[f"{stage}_reused"], "computed": counts[f"{stage}_computed"]}
                               for stage in ("filter", "features")}
        if self.bpe is not None:
            out["bpe"] = self.bpe
        return out

    # the filter
    def filter_key(self, job: Any, items: tuple[list, list]) -> bytes | None:
        """A piece's filter fingerprint; None for a piece that is not plain lines (pre-parsed, TSV)."""
        if not all(isinstance(line, bytes) for side in items for line in side):
            return None
        if job not in self._filters:  # the identifier's signature: its backend, version and candidates
            from ..filter import make_identifier

            identifier = make_identifier(job.filter) if job.filter is not None else None
            self._filters[job] = fingerprint(job.filter.to_dict() if job.filter else None,
                                             identifier.signature() if identifier else None, job.max_chars,
                                             job.normalize)
        return fingerprint(self._filters[job], len(items[0]), b"\n".join(items[0]), b"\n".join(items[1]))

    def filtered(self, pieces: Iterable[tuple[str, Any, tuple[list, list], Any]],
                 run: Callable[[Iterator[Any]], Iterator[Any]]) -> Iterator[dict[str, Any]]:
        """The filter's result of each piece (its split's name, job and lines, the filter task), in order: from the
        stage cache where it holds the piece's fingerprint, else from `run` (a pool started only for a piece not
        held), stored."""

        def items() -> Iterator[tuple[tuple[str, bytes | None], Known, Any]]:
            for split, job, lines, task in pieces:
                key = self.filter_key(job, lines)
                value = self.get("filter", key) if key is not None else None
                known = None if value is None else (lambda value=value: {**value, "seconds": {}})
                yield (split, key), known, task

        for (split, key), result, computed in map_missing(run, items()):
            self.count(split, "filter", not computed)
            if computed and key is not None:
                self.put("filter", key, json.dumps({k: v for k, v in result.items() if k != "seconds"},
                                                   ensure_ascii=False).encode())
            yield result

    # BPE
    def codes(self, settings: dict[str, Any], count_files: list[str], out: str,
              learn: Callable[[], Any]) -> Any:
        """`learn()` (which writes the codes and vocabularies into `out`) unless the stage cache holds the files
        learned from these settings and word counts: then they are written into `out` first (and `learn` finds
        them there). Returns what `learn` returns."""
        digest = hashlib.sha256()
        for path in count_files:
            with open(path, encoding="utf-8") as handle:
                info = json.load(handle)
            digest.update(json.dumps([info.get("src_counts"), info.get("tgt_counts")], ensure_ascii=False).encode())
        key = fingerprint(_with_digests(settings), digest.digest())
        files = self.get("bpe", key)
        if files is not None:
            for name, data in files.items():
                if not os.path.isfile(os.path.join(out, name)):
                    atomic_write(os.path.join(out, name), data)
            self.bpe = "reused"
            return learn()
        before = _files(out)
        result = learn()
        made = {name: file_value(os.path.join(out, name)) for name in sorted(_files(out) - before)}
        if made:
            self.put("bpe", key, json.dumps(made, ensure_ascii=False).encode())
        self.bpe = "computed"
        return result

    # the features
    def features(self, split: str, job: Any, tasks: Iterable[tuple[str, str, str]],
                 run: Callable[[Iterator[Any]], Iterator[Any]]) -> Iterator[tuple[pa.RecordBatch | None, dict]]:
        """The features of each piece (write_shards.features_piece's result), in order: from the stage cache where
        it holds the piece's fingerprint, else from `run` (a pool started only for a piece not held), stored."""
        settings = fingerprint({"features": [asdict(config) for config in job.features], "cut": job.cut,
                                "listed": 1,  # results list the rejected pairs (not those of older entries)
                                "codes": [file_sha256(path) if path else None for path in job.codes],
                                "codes_text": [hashlib.sha256(text.encode()).hexdigest() if text else None
                                               for text in job.codes_text],
                                "vocabularies": [sorted(v) if v is not None else None for v in job.vocabularies]})

        def items() -> Iterator[tuple[bytes, Known, tuple[str, str, str]]]:
            for task in tasks:
                key = fingerprint(settings, task[1].encode("utf-8"), task[2].encode("utf-8"))
                value = self.get("features", key)
                yield key, (None if value is None else (lambda value=value: value)), task

        for key, result, computed in map_missing(run, items()):
            self.count(split, "features", not computed)
            if computed:
                self.put("features", key, encode_batch(*result))
            yield result


def _files(folder: str) -> set[str]:
    return {entry.name for entry in os.scandir(folder) if entry.is_file()} if os.path.isdir(folder) else set()
