"""Parse a text file (one sentence per line) into CoNLL-U, streaming, on one or several processes.

Lines are read in batches of `batch_size`; with `workers > 1`, a process pool (each worker loads the model
once) parses them while at most a few batches per worker are in flight, so memory stays bounded. Batches
are written in input order, and every batch is formatted by the same code whatever the number of workers,
so the output is byte-identical to `workers=1`.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..conllu import format_sentence
from ..errors import InputError
from ..textio import open_text_output, read_lines
from . import ParserSpec
from .base import Parser

BATCH_SIZE = 64
IN_FLIGHT_PER_WORKER = 4


@dataclass
class ParseSummary:
    """Counts of a parse run (lines = sentences written)."""

    lines: int = 0
    words: int = 0
    empty: int = 0  # empty lines -> empty sentences
    joined: int = 0  # lines the backend split into several sentences, joined with `parataxis`
    seconds: float = 0.0
    workers: int = 1

    def add(self, other: BatchCounts) -> None:
        self.lines += other.lines
        self.words += other.words
        self.empty += other.empty
        self.joined += other.joined


@dataclass
class BatchCounts:
    lines: int = 0
    words: int = 0
    empty: int = 0
    joined: int = 0


def default_workers() -> int:
    """All the cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def batches(lines: Iterable[str], size: int) -> Iterator[tuple[int, list[str]]]:
    """(1-based number of the first line, lines) in groups of `size`."""
    batch: list[str] = []
    first = 1
    for number, line in enumerate(lines, 1):
        if not batch:
            first = number
        batch.append(line)
        if len(batch) == size:
            yield first, batch
            batch = []
    if batch:
        yield first, batch


def format_batch(parser: Parser, first: int, lines: list[str]) -> tuple[str, BatchCounts]:
    """Parse one batch and format it as CoNLL-U with `# sent_id` = line number and `# text` = the line."""
    counts = BatchCounts(lines=len(lines))
    parts = []
    for number, (line, parsed) in enumerate(zip(lines, parser.parse(lines), strict=True), first):
        sentence = parsed.sentence
        sentence.comments = [f"sent_id = {number}", f"text = {line.strip()}".rstrip()]
        counts.words += len(sentence.words)
        counts.empty += parsed.pieces == 0
        counts.joined += parsed.pieces > 1
        parts.append(format_sentence(sentence))
    return "".join(parts), counts


_worker_parser: Parser | None = None
_worker_error: InputError | None = None


def _init_worker(spec: ParserSpec) -> None:
    global _worker_parser, _worker_error
    try:
        _worker_parser = spec.load()
    except InputError as err:  # reported with the first batch: a failing initializer would be retried forever
        _worker_error = err


def _work(first: int, lines: list[str]) -> tuple[str, BatchCounts] | tuple[None, tuple]:
    if _worker_error is not None:
        err = _worker_error
        return None, (err.message, err.path, err.line, err.sentence)
    assert _worker_parser is not None
    try:
        return format_batch(_worker_parser, first, lines)
    except InputError as err:  # InputError does not survive pickling with its fields
        return None, (err.message, err.path, err.line, err.sentence)


def _pool_context() -> multiprocessing.context.BaseContext:
    # fork is cheap and the parent holds no model or threads yet; elsewhere spawn is the safe choice
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods and sys.platform == "linux" else "spawn")


def parse_file(spec: ParserSpec, input_path: str, output_path: str, workers: int | None = None,
               batch_size: int = BATCH_SIZE) -> ParseSummary:
    """Parse `input_path` (one sentence per line; '-' = stdin; .gz/.xz) into CoNLL-U at `output_path`."""
    spec.check()
    workers = workers or default_workers()
    if batch_size < 1:
        raise InputError(f"batch size must be positive, got {batch_size}")
    summary = ParseSummary(workers=workers)
    start = time.perf_counter()
    out = open_text_output(output_path)
    try:
        if workers == 1:
            parser = spec.load()
            for first, lines in batches(read_lines(input_path), batch_size):
                text, counts = format_batch(parser, first, lines)
                out.write(text)
                summary.add(counts)
        else:
            _parse_parallel(spec, input_path, out, workers, batch_size, summary)
    finally:
        out.flush()
        if output_path != "-":
            out.close()
    summary.seconds = time.perf_counter() - start
    return summary


def _parse_parallel(spec: ParserSpec, input_path: str, out: io.TextIOBase, workers: int, batch_size: int,
                    summary: ParseSummary) -> None:
    if spec.threads is None and spec.backend == "stanza":
        spec = ParserSpec(**{**spec.__dict__, "threads": 1})  # one torch thread per worker: no oversubscription
    with _pool_context().Pool(workers, initializer=_init_worker, initargs=(spec,)) as pool:
        pending: deque = deque()

        def drain_one() -> None:
            text, counts = pending.popleft().get()
            if text is None:
                raise InputError(*counts)
            out.write(text)
            summary.add(counts)

        for first, lines in batches(read_lines(input_path), batch_size):
            pending.append(pool.apply_async(_work, (first, lines)))
            if len(pending) >= workers * IN_FLIGHT_PER_WORKER:
                drain_one()
        while pending:
            drain_one()
