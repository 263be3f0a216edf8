"""Parse a text file (one sentence per line) into CoNLL-U, streaming, on one or several processes.

Lines are read in batches of `batch_size`; with `workers > 1`, a process pool (each worker loads the model
once) parses them while at most a few batches per worker are in flight, so memory stays bounded. Batches
are written in input order, and every batch is formatted by the same code whatever the number of workers,
so the output is byte-identical to `workers=1`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..conllu import format_sentence
from ..errors import InputError
from ..options import MAX_LINE_CHARS
from ..outputs import check_outputs
from ..parallel import default_workers, ordered_map
from ..progress import progress as progress_bar
from ..textio import atomic_output, read_lines
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
    skipped: int = 0  # lines longer than max_chars -> empty sentences with `# skipped = ...`
    seconds: float = 0.0
    workers: int = 1
    parse_seconds: float = 0.0  # the workers' time parsing and formatting (no model loading, no waiting for input)

    @property
    def rate(self) -> float:
        """Sentences per second of one worker while it parses (a rate that stdin's pauses do not dilute)."""
        return self.lines / self.parse_seconds if self.parse_seconds else 0.0

    def set_workers(self, workers: int) -> None:
        """The processes that really parse (after the per-core cap and the number of batches)."""
        self.workers = workers

    def add(self, other: BatchCounts) -> None:
        self.parse_seconds += other.seconds
        self.lines += other.lines
        self.words += other.words
        self.empty += other.empty
        self.joined += other.joined
        self.skipped += other.skipped


@dataclass
class BatchCounts:
    lines: int = 0
    words: int = 0
    empty: int = 0
    joined: int = 0
    skipped: int = 0
    seconds: float = 0.0  # spent on the batch by its worker


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


def format_batch(parser: Parser, first: int, lines: list[str], max_chars: int = MAX_LINE_CHARS
                 ) -> tuple[str, BatchCounts]:
    """Parse one batch and format it as CoNLL-U with `# sent_id` = line number and `# text` = the line. A line
    longer than `max_chars` is not parsed (bounded work per line): an empty sentence with `# skipped = ...`."""
    counts = BatchCounts(lines=len(lines))
    parts = []
    too_long = [len(line) > max_chars for line in lines]
    parsed_lines = parser.parse(["" if long else line for line, long in zip(lines, too_long)])
    for number, (line, parsed, long) in enumerate(zip(lines, parsed_lines, too_long, strict=True), first):
        sentence = parsed.sentence
        sentence.comments = [f"sent_id = {number}", f"text = {line.strip()}".rstrip()]
        if long:
            sentence.comments.append(f"skipped = longer than {max_chars} characters")
            counts.skipped += 1
            counts.empty -= 1
        counts.words += len(sentence.words)
        counts.empty += parsed.pieces == 0
        counts.joined += parsed.pieces > 1
        parts.append(format_sentence(sentence))
    return "".join(parts), counts


def _load_parser(spec: ParserSpec, max_chars: int = MAX_LINE_CHARS) -> tuple[Parser, int]:
    return spec.load(), max_chars


def _format_task(state: tuple[Parser, int], task: tuple[int, list[str]]) -> tuple[str, BatchCounts]:
    parser, max_chars = state
    started = time.perf_counter()
    text, counts = format_batch(parser, *task, max_chars=max_chars)
    counts.seconds = time.perf_counter() - started
    return text, counts


def parse_file(spec: ParserSpec, input_path: str, output_path: str, workers: int | None = None,
               batch_size: int = BATCH_SIZE, progress: bool | None = None, max_chars: int = MAX_LINE_CHARS
               ) -> ParseSummary:
    """Parse `input_path` (one sentence per line; '-' = stdin; .gz/.xz) into CoNLL-U at `output_path`.
    `progress`: a tqdm bar (lines) on stderr; None = only when stderr is a terminal."""
    spec.check()
    check_outputs({"-o": output_path}, {"the input (-i)": input_path, "the model (--model)": spec.model,
                                        "the model folder (--model-dir)": spec.model_dir})
    if spec.backend in ("udpipe", "spacy-udpipe"):  # an unusable model is one error, before any worker starts
        from .udpipe import check_udpipe_model

        check_udpipe_model(spec.model)
    workers = workers or default_workers()
    if batch_size < 1:
        raise InputError(f"batch size must be positive, got {batch_size}")
    summary = ParseSummary(workers=workers)
    start = time.perf_counter()
    if spec.threads is None and spec.backend == "stanza" and workers > 1:
        spec = ParserSpec(**{**spec.__dict__, "threads": 1})  # one torch thread per worker: no oversubscription
    bar = progress_bar("parse", unit="lines", shown=progress, lines=False)  # None: on a terminal or in a notebook
    try:
        tasks = batches(read_lines(input_path), batch_size)
        with atomic_output(output_path) as out:
            for text, counts in ordered_map(_format_task, tasks, workers, _load_parser, (spec, max_chars),
                                            IN_FLIGHT_PER_WORKER, started=summary.set_workers):
                out.write(text)
                summary.add(counts)
                bar.update(counts.lines)
    finally:
        bar.close()
    summary.seconds = time.perf_counter() - start
    return summary
