"""Reading one side of a parallel corpus: plain text (.gz/.xz), WMT SGML or XML test sets, CoNLL-U, or one column
of a TSV file (ParaCrawl, Tatoeba, CCMatrix: one pair a line, the sides in columns; a row without the column is a
`BadRow`, which convert counts as a `bad_row` rejection).

Each reader yields one item per segment, in order: raw bytes for text (the filter decodes and counts
invalid UTF-8), an unparsed `ConlluBlock` (the sentence's lines, file and line number) for pre-parsed input:
convert parses each sentence once, in its workers. Several files of a side are concatenated, in one pass.
"""

from __future__ import annotations

import lzma
import re
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from ..errors import InputError
from ..options import INPUT_FORMATS
from ..textio import open_binary, read_line_blocks

FORMATS = INPUT_FORMATS
_SEG = re.compile(rb"<seg[^>]*>(.*)</seg>", re.IGNORECASE)


class BadRow(bytes):
    """A TSV row without the column asked for (the whole line, for rejected.tsv) and what is wrong with it."""

    detail: str

    @classmethod
    def make(cls, line: bytes, detail: str) -> BadRow:
        row = cls(line)
        row.detail = detail
        return row

    def __reduce__(self) -> tuple:  # keep the detail across processes (pickle)
        return (BadRow.make, (bytes(self), self.detail))


def detect_format(path: str) -> str:
    """Format from the file name: *.sgm -> sgml, *.xml -> xml, *.conllu -> conllu, *.tsv -> tsv, else text."""
    name = path.lower()
    for suffix in (".gz", ".xz"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    if name.endswith(".sgm") or name.endswith(".sgml"):
        return "sgml"
    if name.endswith(".xml"):
        return "xml"
    if name.endswith(".conllu"):
        return "conllu"
    if name.endswith(".tsv"):
        return "tsv"
    return "text"


def _text_lines(path: str, lang: str | None = None) -> Iterator[bytes]:
    with open_binary(path) as stream:
        for raw in stream:
            yield raw.rstrip(b"\r\n")


def _sgml_segments(path: str, lang: str | None = None) -> Iterator[bytes]:
    """WMT .sgm: the content of every <seg> line, as sacrebleu reads it (entities left as they are). A file with
    lines but no <seg> is an error (not SGML: `format = "sgml"` on plain text would give an empty split)."""
    lines = segments = 0
    with open_binary(path) as stream:
        for raw in stream:
            lines += 1
            match = _SEG.search(raw)
            if match:
                segments += 1
                yield match.group(1).strip()
    if lines and not segments:
        raise InputError(f"no <seg> element in its {lines} line(s): not WMT SGML (format = \"sgml\"); for one "
                         "sentence a line use format = \"text\"", path)


def _xml_segments(path: str, lang: str | None = None) -> Iterator[bytes]:
    """WMT21+ .xml (source and references in one file): the <seg>s of every document's block in `lang`
    (<src> or the first <ref> with that lang attribute; without `lang`: the <src> block), in order."""
    try:
        with open_binary(path) as stream:
            root = ET.parse(stream).getroot()
    except ET.ParseError as err:
        raise InputError(f"not well-formed XML: {err}", path) from None
    for doc in root.iter("doc"):
        blocks = [b for b in list(doc.iter("src")) + list(doc.iter("ref")) if lang is None or b.get("lang") == lang]
        if not blocks:
            continue
        block = blocks[0]
        for seg in block.iter("seg"):
            yield (seg.text or "").strip().encode("utf-8")


class ConlluBlock(NamedTuple):
    """One sentence of a CoNLL-U file, unparsed: its lines (comments included), the file, its first line."""

    lines: tuple[str, ...]
    path: str
    line: int


def _conllu_sentences(path: str, lang: str | None = None) -> Iterator[ConlluBlock]:
    """The sentences of a CoNLL-U file, cut at blank lines (not parsed: the workers parse them)."""
    current: list[str] = []
    start = lineno = 0
    for block in read_line_blocks(path):
        for line in block:
            lineno += 1
            if line:
                if not current:
                    start = lineno
                current.append(line)
            elif current:
                yield ConlluBlock(tuple(current), path, start)
                current = []
    if current:
        yield ConlluBlock(tuple(current), path, start)


def _tsv_cells(path: str, column: int) -> Iterator[bytes]:
    """Column `column` (0-based) of every line of a TSV file; a line without it is a BadRow."""
    with open_binary(path) as stream:
        for lineno, raw in enumerate(stream, 1):
            line = raw.rstrip(b"\r\n")
            cells = line.split(b"\t")
            if len(cells) > column:
                yield cells[column]
            else:
                yield BadRow.make(line, f"{path}:{lineno}: {len(cells)} column(s), no column {column}")


_READERS = {"text": _text_lines, "sgml": _sgml_segments, "xml": _xml_segments, "conllu": _conllu_sentences}


def read_side(paths: Sequence[str], fmt: str | None = None, lang: str | None = None, column: int = 0
              ) -> Iterator[bytes | ConlluBlock]:
    """All segments of one side, file after file (format per file from its name unless `fmt` is given);
    `lang` picks the side of a WMT .xml file, `column` the side of a TSV file."""
    for path in paths:
        try:
            kind = fmt or detect_format(path)
            yield from _tsv_cells(path, column) if kind == "tsv" else _READERS[kind](path, lang)
        except (OSError, EOFError, lzma.LZMAError, zlib.error) as err:  # truncated .gz/.xz, unreadable file
            raise InputError(f"cannot read input (truncated or corrupt?): {err}", path) from None
