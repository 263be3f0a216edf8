"""`synprep convert`, phase 1 in the driver: the work folder's pieces and the store of parsed sentences.

The driver reads each split's pieces in input order, sends them to the filter workers, plans which kept lines a
piece parses (the first occurrence in the convert of each side's parser input: `ParsedSentences`), sends those
to the parse workers, and writes each piece with the trees of its repeated lines copied from the piece that
parsed them: OUT/.work/<split>/piece-KKKKK-JJJ.{src.conllu,tgt.conllu,store.npz[,src.spare,tgt.spare],json}.
The .json, written last, marks the piece done: a resumed run reads the finished pieces' store entries instead.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np
from tqdm import tqdm

from ..bpe_learn import count_words
from ..errors import InputError
from ..parse import ParserSpec
from ..textio import atomic_write, tsv_field
from .filter_parse import (
    ParseJob,
    all_parsers,
    filter_setups,
    filter_split_piece,
    parse_lines,
    parse_setup,
    probe_parsers,
)
from .inputs import SIDES, input_pieces, piece_prefix
from .parse_cache import ParseCache, Result
from .pipeline import PipelineConfig, SplitConfig
from .stage_cache import StageCache
from .treestore import ERROR, JOINED, SPARE, TreeStore, entries_array, text_key

OPEN_PIECES = 32  # piece files kept open while repeated lines are copied from them

Entries = list[list[tuple[bytes, tuple[int, int, int, int]]]]  # per side: (key, location) of new store entries


@dataclass
class Piece:
    """A piece in flight through phase 1 (held by the driver from reading to writing)."""

    prefix: str
    index: int  # in the convert's list of pieces (all splits): store locations name pieces by it
    first_id: int
    items: tuple[list, list]
    split: int = 0  # the split's number in phase 1's list
    filtered: dict[str, Any] = field(default_factory=dict)
    plan: list[list[tuple[bytes, bool, bool]] | None] = field(default_factory=lambda: [None, None])
    # per parsed side, per kept row: (key, first in this convert, parsed by this piece)
    cached: list[dict[bytes, Result]] = field(default_factory=lambda: [{}, {}])  # from the parse cache, per side
    parsing: list[list[tuple[bytes, str]]] = field(default_factory=lambda: [[], []])  # key, line of lines to parse
    cache_counts: list[dict[str, int]] = field(default_factory=lambda: [{}, {}])  # hits, misses, damaged
    cache_seconds: float = 0.0  # the driver's time in the parse cache


class ParsePhase:
    """Phase 1 for all splits (train first), sharing one store of parsed sentences and the workers."""

    def __init__(self, config: PipelineConfig, work: str, mapper: Callable, dedupe: bool,
                 cache: str | None = None, stages: StageCache | None = None) -> None:
        self.config = config
        self.stages = stages  # the filter's stage cache (None: the filter runs on every piece)
        self.work = work
        self.map = mapper
        self.sentences = ParsedSentences(work, dedupe)
        parsed = config.src_parser is not None or config.tgt_parser is not None
        self.cached = CachedParses(cache, config.parse.cache_max_gb) if cache and parsed else None
        self.reused: set[tuple[str, int, int]] = set()  # pieces a --resume found done: their timings are not ours

    def run(self, jobs: list[tuple[SplitConfig, ParseJob]], bar: tqdm,
            finished: Callable[[SplitConfig, list[tuple[int, int]], float], None]) -> dict[str, list[tuple[int, int]]]:
        """Filter each piece (workers), plan which lines to parse (here, in input order: a side's text parsed by an
        earlier row of this convert is not parsed again), parse (workers), then write each piece with the trees of
        the repeated lines copied from the piece that parsed them. The splits' pieces go through one filter pool
        and one parse pool in turn (no worker waits for a small split to end); the parse pool starts, and the
        parsers load, only when a piece has a line to parse (none with every line in the parse cache).
        `finished(split, pieces, seconds)` is called as each split's last piece is written, in order. Returns each
        split's (shard, piece) list."""
        pieces: dict[str, list[tuple[int, int]]] = {split.name: [] for split, _ in jobs}
        waiting: deque[Piece] = deque()  # filtered in flight
        planned: deque[Piece] = deque()  # parsed in flight
        outstanding = [0] * len(jobs)  # pieces read and not yet written, per split
        read: list[float] = []  # when each split's reading began (its length: the splits begun)
        ended = [False] * len(jobs)  # every piece of the split read
        done: list[int] = []  # the splits reported finished

        def tasks() -> Iterator[tuple[int, tuple]]:
            for k, (split, job) in enumerate(jobs):
                read.append(time.perf_counter())
                work = os.path.join(self.work, split.name)
                os.makedirs(work, exist_ok=True)
                for shard, piece, task in input_pieces(split, self.config):
                    pieces[split.name].append((shard, piece))
                    prefix = piece_prefix(work, shard, piece)
                    index = self.sentences.files.add(prefix)
                    if os.path.isfile(prefix + ".json"):
                        bar.update(len(task[1][0]))
                        self.reused.add((split.name, shard, piece))
                        self.sentences.load(prefix, job)
                    else:
                        waiting.append(Piece(prefix, index, *task, split=k))
                        outstanding[k] += 1
                        yield k, task
                ended[k] = True

        def run_filter(pieces: Iterator[tuple[int, tuple]]) -> Iterator[dict[str, Any]]:
            return self.map(filter_split_piece, pieces, filter_setups, (tuple(job for _, job in jobs),), any(parsers))

        def plans() -> Iterator[tuple[list[str], list[str]]]:
            results = run_filter(tasks()) if self.stages is None else self.stages.filtered(
                ((jobs[k][0].name, jobs[k][1], task[1], (k, task)) for k, task in tasks()), run_filter)
            for filtered in results:
                item = waiting.popleft()
                item.filtered = filtered
                job = jobs[item.split][1]
                lines = self.sentences.plan(item, job)
                if self.cached is not None:  # lines an earlier convert parsed are taken from the parse cache
                    lines = self.cached.take(item, job, lines)
                planned.append(item)
                yield lines

        def report() -> None:  # the splits whose last piece is written, in order
            while len(done) < len(jobs) and ended[len(done)] and not outstanding[len(done)]:
                split = jobs[len(done)][0]
                finished(split, pieces[split.name], time.perf_counter() - read[len(done)])
                done.append(len(done))

        parsers = all_parsers([job for _, job in jobs])
        if self.cached is not None:
            self.cached.open()  # checked before any piece
        try:
            for parsed in self._parsed(plans(), parsers):
                item = planned.popleft()
                job = jobs[item.split][1]
                if self.cached is not None:
                    self.cached.store(item, job, parsed)
                write_piece(item, job, parsed, self.sentences)
                bar.update(item.filtered["input_pairs"])
                outstanding[item.split] -= 1
                report()
            for k in range(len(jobs)):  # splits with no piece to work on (all done by an earlier run)
                ended[k] = True
            report()
        finally:
            self.sentences.close()
            if self.cached is not None:
                self.cached.close()
        return pieces

    def _parsed(self, plans: Iterator[tuple[list[str], list[str]]], parsers: tuple[ParserSpec | None, ...]
                ) -> Iterator[dict[str, Any]]:
        """Each piece's parse results, in order: nothing parsed (no pool started, no parser loaded) until the
        first piece with a line to parse; from there on every piece goes through the parse pool."""
        for lines in plans:
            if any(lines):
                probe_parsers(parsers)
                job = ParseJob(None, parsers, False, 0)  # type: ignore[arg-type]
                yield from self.map(parse_lines, itertools.chain([lines], plans), parse_setup, (job,))
                return
            yield {"sides": [[], []], "seconds": {}}


class ParsedSentences:
    """Per side, where the tree of each distinct parser input of the convert lies (a TreeStore over the written
    pieces), which inputs pieces in flight will parse (claimed), and reading a stored tree back."""

    def __init__(self, work: str, dedupe: bool) -> None:
        self.work = work
        self.dedupe = dedupe  # False: every row is parsed (the same shards, slower)
        self.stores = {side: TreeStore() for side in SIDES}  # parsed text -> where its tree is (all splits)
        self.claimed: dict[str, set[bytes]] = {side: set() for side in SIDES}  # parsed by pieces in flight
        self.files = PieceFiles()

    def plan(self, item: Piece, job: ParseJob) -> tuple[list[str], list[str]]:
        """Per parsed side, each kept row's key and whether this piece parses it; the lines to parse."""
        lines: list[list[str]] = [[], []]
        for s, side in enumerate(SIDES):
            if job.parsers[s] is None:
                continue
            store, claimed = self.stores[side], self.claimed[side]
            rows = []
            normalized = item.filtered["normalized"][s]  # [normalize] applied by the filter step, else None
            for j, i in enumerate(item.filtered["kept"]):
                line = normalized[j] if normalized else item.items[s][i].decode("utf-8")  # what the parser is given
                key = text_key(line)
                first = key not in claimed and store.find(key) is None
                if first:
                    claimed.add(key)
                if first or not self.dedupe:
                    lines[s].append(line)
                rows.append((key, first, first or not self.dedupe))
            item.plan[s] = rows
        return lines[0], lines[1]

    def side_results(self, item: Piece, s: int, parsed: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """(block without sent_id or error message, flags) of every kept row of one side."""
        if item.plan[s] is None:
            return item.filtered["preparsed"][s]
        mine = iter(parsed)
        here: dict[bytes, tuple[str, int]] = {}
        out = []
        for key, first, parse in item.plan[s]:
            result = next(mine) if parse else item.cached[s].get(key) or here.get(key) or self.fetch(SIDES[s], key)
            if first:
                here[key] = result
            out.append(result)
        return out

    def fetch(self, side: str, key: bytes) -> tuple[str, int]:
        """The block (without sent_id) or error message an earlier piece stored for a key, and its flags."""
        location = self.stores[side].find(key)
        if location is None:
            raise InputError("the work folder lost a parsed sentence (changed since the run stopped?): run again "
                             "with --overwrite", self.work)
        piece, offset, length, flags = location
        if flags & ERROR:
            return self.stores[side].errors[key], flags & (ERROR | JOINED)
        return self.files.block(side, piece, offset, length, flags), flags & JOINED

    def remember(self, entries: Entries, errors: list[dict[str, str]]) -> None:
        """A written piece's entries go into the store (its claims are settled)."""
        for s, side in enumerate(SIDES):
            for key, location in entries[s]:
                self.stores[side].add(key, location, errors[s].get(key.hex()))
                self.claimed[side].discard(key)

    def load(self, prefix: str, job: ParseJob) -> None:
        """The store entries of a piece an earlier run finished (--resume)."""
        path = prefix + ".store.npz"
        if not os.path.isfile(path) or not any(job.parsers):
            return
        with open(prefix + ".json", encoding="utf-8") as handle:
            errors = json.load(handle).get("store_errors", {})
        with np.load(path) as saved:
            for side in SIDES:
                if side in saved.files:
                    self.stores[side].add_array(saved[side])
                    for key, message in errors.get(side, {}).items():
                        self.stores[side].errors.setdefault(bytes.fromhex(key), message)

    def close(self) -> None:
        self.files.close()


class CachedParses:
    """The parse cache (synprep.convert.parse_cache) seen from phase 1's driver: the lines a piece would parse that the
    cache holds are taken from it, and what the workers parsed is stored (one transaction per piece)."""

    def __init__(self, folder: str, max_gb: float) -> None:
        self.folder, self.max_gb = folder, max_gb
        self.cache: ParseCache | None = None
        self.parsers: dict[ParserSpec, int] = {}  # the cache's id of each parser (its model hashed once)

    def open(self) -> None:
        self.cache = ParseCache(self.folder, self.max_gb)

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
            self.cache = None

    def _parser(self, spec: ParserSpec) -> int:
        assert self.cache is not None
        if spec not in self.parsers:
            self.parsers[spec] = self.cache.parser(spec)
        return self.parsers[spec]

    def take(self, item: Piece, job: ParseJob, lines: tuple[list[str], list[str]]) -> tuple[list[str], list[str]]:
        """The lines a piece would parse (per side) that the parse cache holds are taken from it; returns the lines
        left to parse."""
        return tuple(self._take(item, s, job, lines[s]) if item.plan[s] is not None else lines[s]  # type: ignore
                     for s in range(2))

    def _take(self, item: Piece, s: int, job: ParseJob, lines: list[str]) -> list[str]:
        started = time.perf_counter()
        assert self.cache is not None and item.plan[s] is not None
        wanted = [(key, line) for (key, _, parse), line in zip((r for r in item.plan[s] if r[2]), lines)]
        found = self.cache.lookup(self._parser(job.parsers[s]), dict(wanted))  # type: ignore[arg-type]
        item.cached[s] = found.found
        item.plan[s] = [(key, first, parse and key not in found.found) for key, first, parse in item.plan[s]]
        item.parsing[s] = [(key, line) for key, line in wanted if key not in found.found]
        distinct = len(dict(wanted))
        item.cache_counts[s] = {"cache_hits": len(found.found), "cache_misses": distinct - len(found.found),
                                "cache_damaged": len(found.damaged)}
        item.cache_seconds += time.perf_counter() - started
        return [line for _, line in item.parsing[s]]

    def store(self, item: Piece, job: ParseJob, parsed: dict[str, Any]) -> None:
        """The parse cache stores what the workers parsed for a piece (and notes its hits as used)."""
        started = time.perf_counter()
        assert self.cache is not None
        for s in range(2):
            if item.plan[s] is not None:
                new = {key: (key, line, result) for (key, line), result in zip(item.parsing[s], parsed["sides"][s])}
                self.cache.record(self._parser(job.parsers[s]), new.values(),  # type: ignore[arg-type]
                                  item.cached[s])
        item.cache_seconds += time.perf_counter() - started


class PieceFiles:
    """The pieces of the convert, in input order (store locations name a piece by its index), and the blocks
    stored in their files; the OPEN_PIECES most recently read files are kept open."""

    def __init__(self) -> None:
        self.prefixes: list[str] = []
        self.handles: dict[str, BinaryIO] = {}  # the most recently used last

    def add(self, prefix: str) -> int:
        """A piece of the convert: its index in store locations."""
        self.prefixes.append(prefix)
        return len(self.prefixes) - 1

    def block(self, side: str, piece: int, offset: int, length: int, flags: int) -> str:
        """A stored CoNLL-U block without its sent_id: in a piece's CoNLL-U, or in its spare file (SPARE)."""
        path = f"{self.prefixes[piece]}.{side}.{'spare' if flags & SPARE else 'conllu'}"
        handle = self.handles.pop(path, None) or open(path, "rb")  # noqa: SIM115 - closed in close()
        self.handles[path] = handle
        if len(self.handles) > OPEN_PIECES:
            self.handles.pop(next(iter(self.handles))).close()
        handle.seek(offset)
        block = handle.read(length).decode("utf-8")
        if not flags & SPARE:  # the written block starts with its row's sent_id
            block = block[block.index("\n") + 1:]
        return block

    def close(self) -> None:
        while self.handles:
            self.handles.popitem()[1].close()


@dataclass
class _Assembled:
    """A piece's files, per side: the CoNLL-U of its kept rows, the spare blocks, the new store entries."""

    rejected: list[list]
    ids: list[int] = field(default_factory=list)
    out: list[list[bytes]] = field(default_factory=lambda: [[], []])
    spare: list[list[bytes]] = field(default_factory=lambda: [[], []])
    tokens: list[list[str]] = field(default_factory=lambda: [[], []])
    entries: Entries = field(default_factory=lambda: [[], []])
    errors: list[dict[str, str]] = field(default_factory=lambda: [{}, {}])


def write_piece(item: Piece, job: ParseJob, parsed: dict[str, Any], sentences: ParsedSentences) -> None:
    """Assemble a piece (in input order: the pieces holding its repeated lines are written) and write it:
    CoNLL-U per side, the blocks parsed here but not written (spare), the new store entries, then the .json."""
    results = [sentences.side_results(item, s, parsed["sides"][s]) for s in range(2)]
    done = _assemble(item, job, results)
    info = _piece_info(item, job, parsed, results, done)
    for s, side in enumerate(SIDES):
        atomic_write(f"{item.prefix}.{side}.conllu", b"".join(done.out[s]))
        if done.spare[s]:
            atomic_write(f"{item.prefix}.{side}.spare", b"".join(done.spare[s]))
    _save_entries(item.prefix, done.entries)
    atomic_write(item.prefix + ".json", json.dumps(info, ensure_ascii=False).encode("utf-8"))
    sentences.remember(done.entries, done.errors)


def _assemble(item: Piece, job: ParseJob, results: list[list[tuple[str, int]]]) -> _Assembled:
    """Each kept row's blocks: written with its sent_id when both trees are sound, else rejected as invalid_tree
    (a side's sound tree kept as spare when first parsed here, for the later rows that repeat it)."""
    done = _Assembled(list(item.filtered["rejected"]))
    sizes, spare_sizes = [0, 0], [0, 0]
    for j, i in enumerate(item.filtered["kept"]):
        pair = [results[0][j], results[1][j]]
        bad = next((s for s in range(2) if pair[s][1] & ERROR), None)
        if bad is not None:
            done.rejected.append([item.first_id + i, "invalid_tree", f"{SIDES[bad]}: {pair[bad][0]}",
                                  *(_row_text(item, s, i, j) for s in range(2))])
        else:
            done.ids.append(item.first_id + i)
        for s in range(2):
            block, flags = pair[s]
            first = item.plan[s] is not None and item.plan[s][j][1]
            if bad is None:
                data = f"# sent_id = {item.first_id + i}\n{block}".encode()
                location = (item.index, sizes[s], len(data), flags)
                done.out[s].append(data)
                sizes[s] += len(data)
                if job.write_tokens:
                    done.tokens[s].append(" ".join(_block_forms(block)) + "\n")
            elif flags & ERROR:
                location = (item.index, -1, 0, flags)
                if first:
                    done.errors[s][item.plan[s][j][0].hex()] = block
            else:  # parsed, but the other side's tree is broken: kept for the later rows that repeat it
                data = block.encode()
                location = (item.index, spare_sizes[s], len(data), flags | SPARE)
                if first:
                    done.spare[s].append(data)
                    spare_sizes[s] += len(data)
            if first:
                done.entries[s].append((item.plan[s][j][0], location))
    done.rejected.sort(key=lambda r: r[0])
    return done


def _piece_info(item: Piece, job: ParseJob, parsed: dict[str, Any], results: list[list[tuple[str, int]]],
                done: _Assembled) -> dict[str, Any]:
    """A piece's .json: its ids, rejections, counts, timings, store errors and (learning BPE) word counts."""
    rejected = done.rejected
    return {
        "first_id": item.first_id, "input_pairs": item.filtered["input_pairs"], "ids": done.ids, "rejected": rejected,
        "rejected_counts": dict(Counter(r[1] for r in rejected)),
        "joined_lines": sum(bool(flags & JOINED) for side in results for _, flags in side),
        "seconds": {**item.filtered["seconds"], "parse": parsed["seconds"].get("parse", 0.0),
                    **({"parse_cache": item.cache_seconds} if item.cache_seconds else {})},
        "sentences": {side: {"distinct": sum(r[1] for r in item.plan[s]),
                             "repeated": sum(not r[1] for r in item.plan[s]), **item.cache_counts[s]}
                      for s, side in enumerate(SIDES) if item.plan[s] is not None},
        "store_errors": {side: done.errors[s] for s, side in enumerate(SIDES) if done.errors[s]},
        **({f"{side}_counts": count_words("".join(done.tokens[s])) for s, side in enumerate(SIDES)}
           if job.write_tokens else {})}


def _row_text(item: Piece, s: int, i: int, j: int) -> str:
    texts, normalized = item.filtered["preparsed_texts"][s], item.filtered["normalized"][s]
    if texts is not None:
        return texts[j]
    return tsv_field(normalized[j] if normalized else item.items[s][i])


def _block_forms(block: str) -> list[str]:
    """The token forms of a CoNLL-U block written from a token-level tree (no multiword ranges)."""
    return [line.split("\t", 2)[1] for line in block.split("\n") if line and line[0] != "#"]


def _save_entries(prefix: str, entries: Entries) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, **{side: entries_array(entries[s]) for s, side in enumerate(SIDES)})
    atomic_write(prefix + ".store.npz", buffer.getvalue())
