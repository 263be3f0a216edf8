"""Reading one side of a parallel corpus: plain text (.gz/.xz), WMT SGML or XML test sets, or CoNLL-U.

Each reader yields one item per segment, in order: raw bytes for text (the filter decodes and counts
invalid UTF-8), the CoNLL-U sentence text for pre-parsed input. Several files of a side are concatenated.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence

from .conllu import format_sentence, read_conllu
from .errors import InputError
from .textio import open_binary

FORMATS = ("text", "sgml", "xml", "conllu")
_SEG = re.compile(rb"<seg[^>]*>(.*)</seg>", re.IGNORECASE)


def detect_format(path: str) -> str:
    """Format from the file name: *.sgm -> sgml, *.xml -> xml, *.conllu -> conllu, else text."""
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
    return "text"


def _text_lines(path: str, lang: str | None = None) -> Iterator[bytes]:
    with open_binary(path) as stream:
        for raw in stream:
            yield raw.rstrip(b"\r\n")


def _sgml_segments(path: str, lang: str | None = None) -> Iterator[bytes]:
    """WMT .sgm: the content of every <seg> line, as sacrebleu reads it (entities left as they are)."""
    with open_binary(path) as stream:
        for raw in stream:
            match = _SEG.search(raw)
            if match:
                yield match.group(1).strip()


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


def _conllu_sentences(path: str, lang: str | None = None) -> Iterator[bytes]:
    for sentence in read_conllu(path):
        yield format_sentence(sentence).encode("utf-8")


_READERS = {"text": _text_lines, "sgml": _sgml_segments, "xml": _xml_segments, "conllu": _conllu_sentences}


def read_side(paths: Sequence[str], fmt: str | None = None, lang: str | None = None) -> Iterator[bytes]:
    """All segments of one side, file after file (format per file from its name unless `fmt` is given);
    `lang` picks the side of a WMT .xml file."""
    for path in paths:
        yield from _READERS[fmt or detect_format(path)](path, lang)


def count_segments(paths: Sequence[str], fmt: str | None = None, lang: str | None = None) -> int:
    """Number of segments of one side (a fast newline count for plain text)."""
    total = 0
    for path in paths:
        kind = fmt or detect_format(path)
        if kind == "text":
            with open_binary(path) as stream:
                newlines, last = 0, b"\n"
                while block := stream.read(1 << 22):
                    newlines += block.count(b"\n")
                    last = block[-1:]
                total += newlines + (last != b"\n")
        else:
            total += sum(1 for _ in _READERS[kind](path, lang))
    return total
