"""Dependency parsing backends behind one interface (`Parser`), the parallel file runner and UDPipe training.

Backends import their library lazily, so `import synprep.parse` is cheap and a missing optional library
only matters when its backend is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..callables import make_callable
from ..errors import InputError
from ..options import MAX_LINE_CHARS, PARSER_BACKENDS
from .base import JOIN_LABEL, ParsedLine, Parser

BACKENDS = PARSER_BACKENDS

if TYPE_CHECKING:
    from .runner import ParseSummary

__all__ = ["BACKENDS", "JOIN_LABEL", "ParsedLine", "Parser", "ParserSpec", "parse"]


@dataclass(frozen=True)
class ParserSpec:
    """Everything needed to build a parser; small and picklable, so each worker process can load its own."""

    backend: str
    model: str | None = None  # model file (udpipe, spacy-udpipe) or pipeline name/path (spacy)
    model_dir: str | None = None  # stanza model folder
    lang: str | None = None
    pretokenized: bool = False
    threads: int | None = None  # torch threads per process (stanza)
    gpu: bool = False  # stanza: run on the GPU (CUDA) when there is one

    def check(self) -> None:
        """Fail early, naming the option, when the backend lacks an argument it needs."""
        if self.backend not in BACKENDS:
            raise InputError(f"unknown parser backend {self.backend!r} (choose from {', '.join(BACKENDS)})")
        needs = {"udpipe": ["model"], "spacy": ["model"], "spacy-udpipe": ["model", "lang"],
                 "stanza": ["model_dir", "lang"]}[self.backend]
        for name in needs:
            if not getattr(self, name):
                raise InputError(f"--{name.replace('_', '-')} is required with --backend {self.backend}")

    def model_path(self) -> str:
        """The model's file or folder (stanza: the language's folder of the model folder when there is one;
        "" for none); an installed spaCy package's name is no path."""
        import os

        if self.backend == "stanza":
            folder = os.path.join(self.model_dir or "", self.lang or "")
            return folder if self.model_dir and self.lang and os.path.isdir(folder) else self.model_dir or ""
        return self.model or ""

    def signature(self) -> dict[str, object]:
        """What identifies this parser in a dataset's signature (without loading it): backend, model name,
        sha256 of the model (`path_sha256`: a file, or a folder's files; None for an installed spaCy package),
        pretokenized."""
        import os

        from ..textio import path_sha256

        target = (self.model_dir if self.backend == "stanza" else self.model) or ""
        path = self.model_path()
        digest = path_sha256(path) if path and os.path.exists(path) else None
        return {"backend": self.backend, "model": os.path.basename(os.path.normpath(target)) if target else "",
                "sha256": digest, "pretokenized": self.pretokenized}

    def load(self) -> Parser:
        """Load the backend and its model (slow: once per process)."""
        self.check()
        if self.backend == "udpipe":
            from .udpipe import UDPipeParser

            return UDPipeParser(self.model, self.pretokenized)
        if self.backend == "stanza":
            from .stanza import StanzaParser

            return StanzaParser(self.model_dir, self.lang, self.pretokenized, self.threads, self.gpu)
        if self.backend == "spacy-udpipe":
            from .spacy_udpipe import SpacyUDPipeParser

            return SpacyUDPipeParser(self.model, self.lang, self.pretokenized)
        from .spacy import SpacyParser

        return SpacyParser(self.model, self.pretokenized)


def parse(input: str, output: str, backend: str, *, model: str | None = None, model_dir: str | None = None,
          lang: str | None = None, pretokenized: bool = False, workers: int = 0, batch_size: int = 64,
          max_chars: int = MAX_LINE_CHARS) -> ParseSummary:
    """`synprep parse`: one sentence per input line -> CoNLL-U (`-` = stdin/stdout), in order."""
    from ..arguments import check_arguments
    from .runner import parse_file

    checked = check_arguments("synprep parse", input=input, output=output, backend=backend, model=model,
                              model_dir=model_dir, lang=lang, pretokenized=pretokenized, workers=workers,
                              batch_size=batch_size, max_chars=max_chars)
    spec = ParserSpec(*(checked[name] for name in ("backend", "model", "model_dir", "lang", "pretokenized")))
    return parse_file(spec, checked["input"], checked["output"], checked["workers"] or None, checked["batch_size"],
                      max_chars=checked["max_chars"])


make_callable(__name__, parse)  # synprep.parse(...) is synprep.parse.parse(...) (docs/python-api.md)
