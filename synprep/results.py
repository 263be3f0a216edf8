"""The result objects of the Python API (docs/python-api.md): small dataclasses whose fields are what a command
found, with `text` (what the command prints) as their `repr`, so that a notebook cell shows the command's lines."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class Printed:
    """`repr`: the class name and the command's text (`self.text`)."""

    text: str

    def __repr__(self) -> str:
        return f"{type(self).__name__}:\n{self.text}" if "\n" in self.text else f"{type(self).__name__}: {self.text}"


@dataclass(frozen=True, repr=False)
class AlignResult(Printed):
    """`synprep.align`: sentences read, records written, non-projective trees kept, the drops by reason."""

    output: str
    sentences: int
    written: int
    non_projective: int
    rejected: dict[str, int]
    text: str


@dataclass(frozen=True, repr=False)
class ParserTrainResult(Printed):
    """`synprep.parser_train`: the model written, the seconds of training, the held-out scores (if any)."""

    model: str
    backend: str
    seconds: float
    scores: list[Any]
    warnings: list[str]
    text: str


@dataclass(frozen=True, repr=False)
class ParserEvalResult(Printed):
    """`synprep.parser_eval`: one score object per mode (`.mode`, `.metrics()`: upos, uas, las, ...), and per
    mode the note on sentences whose text differs from the gold text (`notes`)."""

    scores: list[Any]
    notes: dict[str, str]
    text: str


@dataclass(frozen=True, repr=False)
class FilterResult(Printed):
    """`synprep.filter`: the filter's summary (`kept`, `rejected` by reason, the files written)."""

    summary: Any
    text: str


@dataclass(frozen=True, repr=False)
class CacheReport(Printed):
    """`synprep.cache_info`, `cache_verify`, `cache_prune`: the report as data and as the command prints it;
    `ok` False where `synprep cache verify` exits 1."""

    report: dict[str, Any]
    text: str
    ok: bool = True


@dataclass(frozen=True, repr=False)
class SynthResult(Printed):
    """`synprep.synth`: the corpus folder, its pipeline file and the summary."""

    output: str
    pipeline: str
    summary: Any
    text: str


@dataclass(frozen=True, repr=False)
class ChallengeResult(Printed):
    """`synprep.challenge`: the summary (phenomenon -> pairs) and the folder written."""

    output: str
    summary: dict[str, Any]
    text: str


@dataclass(frozen=True, repr=False)
class ValidateResult(Printed):
    """`synprep.validate`: `ok`, the rows and shards checked, the failures (at most `max_failures` listed,
    `failure_count` counted)."""

    ok: bool
    rows: int
    shards: int
    failures: list[Any]
    failure_count: int
    summary: str  # the last line (on stderr where not ok)
    text: str


@dataclass(frozen=True, repr=False)
class ExportResult(Printed):
    """`synprep.export`: the folder written and the export's summary (rows, lines per format, ...)."""

    output: str
    summary: Any
    text: str
