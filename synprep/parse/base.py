"""The parser interface every backend implements: a batch of lines in, one sentence per line out, in order.

Backends only turn non-empty lines into the sentences their library produced; this base class enforces the
one-line-one-sentence rule for all of them:
- an empty (or whitespace-only) line gives an empty sentence (no words), never a shift of later lines;
- when a backend splits a line into several sentences, they are joined into one tree: the root of every
  later sentence is attached to the root of the first with the label `parataxis`, the UD relation for
  side-by-side clauses ("He left. She stayed."). Such lines are counted (`ParsedLine.pieces > 1`).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import NamedTuple

from ..conllu import DEPREL, HEAD, ID, ConlluSentence
from ..errors import InputError
from ..textio import file_sha256

JOIN_LABEL = "parataxis"


class ParsedLine(NamedTuple):
    """The one sentence of an input line, and how many sentences the backend made of it."""

    sentence: ConlluSentence
    pieces: int


class Parser(ABC):
    """A dependency parser backend. Subclasses load their model in `__init__` (once per process)."""

    name: str = "parser"

    def __init__(self, pretokenized: bool = False) -> None:
        self.pretokenized = pretokenized

    @abstractmethod
    def parse_lines(self, lines: list[str]) -> list[list[ConlluSentence]]:
        """For each non-empty, stripped line: the sentences the library made of it (word rows, multiword ranges).

        With `pretokenized`, tokens are separated by single spaces and must be kept as they are.
        """

    def model_signature(self) -> str:
        """What identifies the model (name and content hash); part of a dataset's signature."""
        return "unknown"

    def signature(self) -> str:
        """Everything that determines this parser's output, e.g. `udpipe|model:en.udpipe@1a2b..|pretok:no`."""
        return f"{self.name}|model:{self.model_signature()}|pretok:{'yes' if self.pretokenized else 'no'}"

    def parse(self, lines: list[str]) -> list[ParsedLine]:
        """One sentence per input line, in order (empty lines give empty sentences)."""
        texts = [self.prepare(line) for line in lines]
        wanted = [text for text in texts if text]
        try:
            parsed = iter(self.parse_lines(wanted) if wanted else [])
        except Exception as err:  # noqa: BLE001 - a backend library failing on some input: one clear error
            raise InputError(f"the {self.name} parser failed on a batch of {len(wanted)} lines "
                             f"({type(err).__name__}: {err})") from None
        result = []
        for text in texts:
            if not text:
                result.append(ParsedLine(ConlluSentence([]), 0))
                continue
            pieces = next(parsed)
            result.append(ParsedLine(join_sentences(pieces), len(pieces)))
        return result

    def prepare(self, line: str) -> str:
        """The text handed to the backend: the line without outer whitespace (tokens single-spaced if pretokenized)."""
        return " ".join(line.split()) if self.pretokenized else line.strip()


def join_sentences(pieces: list[ConlluSentence]) -> ConlluSentence:
    """Join several sentences into one tree: later roots become `parataxis` dependents of the first root."""
    if len(pieces) == 1:
        sentence = pieces[0]
        return ConlluSentence(sentence.words, sentence.multiword, [])
    words: list[list[str]] = []
    multiword: list[tuple[int, int, list[str]]] = []
    first_root = 0
    for piece in pieces:
        offset = len(words)
        for first, last, cols in piece.multiword:
            cols = list(cols)
            cols[ID] = f"{first + offset}-{last + offset}"
            multiword.append((first + offset, last + offset, cols))
        for cols in piece.words:
            cols = list(cols)
            cols[ID] = str(int(cols[ID]) + offset)
            head = int(cols[HEAD]) if cols[HEAD].isdigit() else 0
            if head:
                cols[HEAD] = str(head + offset)
            elif not first_root:
                first_root = int(cols[ID])
            else:
                cols[HEAD], cols[DEPREL] = str(first_root), JOIN_LABEL
            words.append(cols)
    return ConlluSentence(words, multiword, [])


def file_signature(path: str) -> str:
    """`name@sha256-prefix` of a model file (or folder name for directories)."""
    if not os.path.isfile(path):
        return os.path.basename(os.path.normpath(path))
    return f"{os.path.basename(path)}@{file_sha256(path)[:12]}"
