"""Joint BPE (subword-nmt): learning codes + vocabularies, and a fast applier.

`Bpe` loads codes with `subword_nmt.apply_bpe.BPE` and reproduces its `encode` exactly (same merges in
the same order; tested against it on every word of UD EWT and random words) with the inner loops moved
to C string operations, behind a word cache. So `synprep bpe apply` is byte-identical to
`subword-nmt apply-bpe` and faster (benchmarks/bench_align.py). Glossaries use subword-nmt's own code.
"""

from __future__ import annotations

import gzip
import io
import lzma
import re
import zlib
from collections.abc import Callable, Iterator, Sequence
from itertools import chain, repeat
from typing import BinaryIO, Protocol

from subword_nmt import apply_bpe

from .errors import InputError
from .options import BPE_SEPARATOR
from .outputs import check_outputs
from .textio import atomic_output, decode_line, open_binary

SEPARATOR = BPE_SEPARATOR
# subword-nmt reads text through codecs.StreamReader, whose lines end at every str.splitlines()
# boundary (\r, \x0b, \x0c, \x1c-\x1e, \x85, \u2028, \u2029), not only at '\n'. We mirror it.
_EXTRA_LINE_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
# Whitespace inside a token (UD allows `10 000`) would split one token into two sub-word items.
WHITESPACE_IN_TOKEN = re.compile(r"\s")
TOKEN_SPACE = "\u2581"  # '▁' replaces whitespace inside a token in `subwords`
_NO_MERGE = 1 << 62


def iter_subword_nmt_lines(stream: BinaryIO, path: str) -> Iterator[str]:
    """Lines exactly as subword-nmt's codecs reader splits them, with UTF-8 errors located."""
    for lineno, raw in enumerate(stream, 1):
        line = decode_line(raw, path, lineno)
        if _EXTRA_LINE_BREAKS.search(line):
            yield from line.splitlines(keepends=True)
        else:
            yield line


_COUNT = re.compile("[0-9]+")  # a vocabulary count: ASCII digits (str.isdigit() also takes '²', which int() refuses)
_END_OF_WORD = "</w>"


def _checked_lines(path: str, what: str) -> Iterator[tuple[int, str]]:
    """(line number, line without its line end) of a codes or vocabulary file, UTF-8 checked; a last line without
    a line end is an error: subword-nmt ends every line it writes with one, so the file was cut short."""
    with open_binary(path) as stream:
        for lineno, raw in enumerate(stream, 1):
            if not raw.endswith(b"\n"):
                raise InputError(f"the last line has no line end: a cut-off {what} file? (subword-nmt ends every "
                                 "line with one)", path, lineno)
            yield lineno, decode_line(raw, path, lineno).strip("\r\n ")


def _basic_symbol(symbol: str) -> bool:
    """A symbol before any merge: one character, the end-of-word mark (codes 0.1) or a character with it (0.2)."""
    return len(symbol) == 1 or symbol == _END_OF_WORD or (len(symbol) == 5 and symbol.endswith(_END_OF_WORD))


def read_codes(path: str) -> str:
    """The text of a subword-nmt codes file, checked line by line (errors name the file and the line): an optional
    '#version: 0.1|0.2' first line, then merges of exactly two symbols, each a character (with '</w>') or the result
    of an earlier merge, so a line cut in the middle or damaged is found; at least one merge; every line ended."""
    lines, merged = [], set()
    for lineno, line in _checked_lines(path, "BPE codes"):
        lines.append(line)
        if lineno == 1 and line.startswith("#version:"):
            if line.split(":", 1)[1].strip() not in ("0.1", "0.2"):
                raise InputError(f"unknown BPE codes version {line[9:].strip()!r} (subword-nmt writes 0.1 or 0.2)",
                                 path, lineno)
            continue
        pair = line.split(" ")
        if len(pair) != 2 or not all(pair):
            raise InputError("not a BPE codes file (each line must hold exactly two symbols)", path, lineno)
        for symbol in pair:
            if symbol not in merged and not _basic_symbol(symbol):
                raise InputError(f"symbol {symbol!r} is neither a character nor made by an earlier merge: a damaged "
                                 "or cut-off codes file?", path, lineno)
        merged.add(pair[0] + pair[1])
    if not lines:
        raise InputError("empty BPE codes file (learn codes with synprep bpe learn)", path)
    if not merged:
        raise InputError("no merges in the BPE codes file (only the version line): learn codes from more text or "
                         "with a lower minimum frequency", path)
    return "".join(line + "\n" for line in lines)


def read_vocabulary(path: str, threshold: int | None) -> set[str]:
    """subword-nmt vocabulary file ('piece count' lines, counts in ASCII digits, every line ended), filtered by
    frequency threshold."""
    vocabulary, lineno = set(), 0
    for lineno, line in _checked_lines(path, "vocabulary"):
        parts = line.split(" ")
        if len(parts) != 2 or not parts[0] or not _COUNT.fullmatch(parts[1]):
            raise InputError("not a vocabulary file (expected 'piece count', the count in digits 0-9)", path, lineno)
        if threshold is None or int(parts[1]) >= threshold:
            vocabulary.add(parts[0])
    if not lineno:
        raise InputError("empty vocabulary file (write one with synprep bpe learn --vocab-prefix)", path)
    return vocabulary


def check_separator(separator: str) -> None:
    """The BPE separator marks a piece that continues: it must be non-empty and hold no whitespace (output pieces
    are space-separated), or pieces could not be told apart or joined back."""
    if not separator or WHITESPACE_IN_TOKEN.search(separator):
        raise InputError(f"the BPE separator must be non-empty and hold no whitespace, got {separator!r}")


def check_glossaries(glossaries: Sequence[str]) -> None:
    """Each glossary entry is a regular expression (subword-nmt matches them as one alternation)."""
    for entry in glossaries:
        try:
            re.compile(entry)
        except re.error as err:
            raise InputError(f"glossary {entry!r} is not a regular expression: {err}") from None
    try:
        re.compile("^({})$".format("|".join(glossaries)))
    except re.error as err:
        raise InputError(f"the glossaries {list(glossaries)!r} do not combine into one regular expression: {err}"
                         ) from None


CACHE_WORDS = 100_000  # words per cache of a Bpe before it starts afresh (a WMT corpus has 1M+ distinct words)


class _PiecesCache(dict):
    """word -> tuple of its sub-words, filled on first use; emptied when it holds CACHE_WORDS words."""

    def __init__(self, segment_word: Callable[[str], str]) -> None:
        super().__init__()
        self._segment_word = segment_word

    def __missing__(self, word: str) -> tuple[str, ...]:
        if len(self) >= CACHE_WORDS:
            self.clear()
        pieces = self[word] = tuple(self._segment_word(word).split(" "))
        return pieces


def merge_word(bpe: apply_bpe.BPE, rank_pair: dict[int, tuple[str, str]], word: str, separator: str) -> list[str]:
    """subword-nmt's `encode` (same merges, same order, same result), with the inner loops in C:
    the lowest-ranked pair is found with map/min, and all its occurrences are merged left to
    right with str.replace on the space-joined symbols (words never contain spaces). `rank_pair`: the
    inverse of `bpe.bpe_codes`."""
    if len(word) == 1:
        return [word]
    symbols = list(word) + ["</w>"] if bpe.version == (0, 1) else list(word[:-1]) + [word[-1] + "</w>"]
    rank_of = bpe.bpe_codes.get
    while len(symbols) > 1:
        best = min(map(rank_of, zip(symbols, symbols[1:]), repeat(_NO_MERGE)))
        if best == _NO_MERGE:
            break
        first, second = rank_pair[best]
        if first != second:
            pattern, merged = f" {first} {second} ", f" {first}{second} "
            text = " " + " ".join(symbols) + " "
            # one pass misses a match right after another (the shared space was consumed)
            text = text.replace(pattern, merged)
            if pattern in text:
                text = text.replace(pattern, merged)
            symbols = text[1:-1].split(" ")
        else:  # overlapping pairs (x x x -> xx x): left to right, as subword-nmt does
            out, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == first and symbols[i + 1] == second:
                    out.append(first + second)
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            symbols = out
    if symbols[-1] == "</w>":
        symbols.pop()
    elif symbols[-1].endswith("</w>"):
        symbols[-1] = symbols[-1][:-4]
    if bpe.vocab:
        symbols = apply_bpe.check_vocab_and_split(tuple(symbols), bpe.bpe_codes_reverse, bpe.vocab, separator)
    return symbols


class Bpe:
    """Apply learned BPE codes to words, lines and token lists."""

    def __init__(self, codes_path: str, vocabulary: set[str] | None = None, merges: int = -1,
                 separator: str = SEPARATOR, glossaries: list[str] | None = None) -> None:
        check_separator(separator)
        if glossaries:
            check_glossaries(glossaries)
        self._bpe = apply_bpe.BPE(io.StringIO(read_codes(codes_path)), merges, separator, vocabulary, glossaries)
        self.codes_path = codes_path
        self.separator = separator
        self.options = (merges, separator, tuple(glossaries) if glossaries else None)  # to rebuild it elsewhere
        self._cache: dict[str, str] = {}
        self._pieces = _PiecesCache(self.segment_word)
        self._rank_pair = {rank: pair for pair, rank in self._bpe.bpe_codes.items()}
        self._fast = not glossaries  # glossaries go through subword-nmt's own code path

    def segment_word(self, word: str) -> str:
        """The sub-words of one (non-empty, space-free) word, joined by spaces."""
        pieces = self._cache.get(word)
        if pieces is None:
            if self._fast:
                merged = merge_word(self._bpe, self._rank_pair, word, self.separator)
                sep = self.separator + " "
                pieces = sep.join(merged)
            else:
                pieces = " ".join(self._bpe.segment_tokens([word]))
            if len(self._cache) >= CACHE_WORDS:  # bounded: the frequent words come back at once
                self._cache.clear()
            self._cache[word] = pieces
        return pieces

    def segment_line(self, line: str) -> str:
        """Exactly `subword_nmt.apply_bpe.BPE.process_line`, with the word cache."""
        stripped = line.strip("\r\n ")
        lead = len(line) - len(line.lstrip("\r\n "))
        out = line[:lead] if lead else ""
        segment = self.segment_word
        out += " ".join([segment(word) for word in stripped.split(" ") if word])
        trail = len(line) - len(line.rstrip("\r\n "))
        if trail and trail != len(line):
            out += line[-trail:]
        return out

    @property
    def vocabulary(self) -> set[str] | None:
        """The vocabulary filter given at construction, if any."""
        return self._bpe.vocab

    def segment_tokens(self, tokens: Sequence[str]) -> tuple[list[str], list[int]]:
        """BPE a tree's tokens: (sub-words, 0-based token index of each sub-word)."""
        return align_subwords(tokens, self.segment_word)


def split_tokens(tokens: Sequence[str], segment_word: Callable[[str], str] | None = None
                 ) -> list[Sequence[str]]:
    """The sub-words of each token (whitespace inside a token becomes '▁'; an empty token is '▁').

    With `segment_word=None` every token is its own sub-word (no BPE). Do not modify the sequences:
    with a `Bpe.segment_word` they are the codes' cached tuples."""
    if WHITESPACE_IN_TOKEN.search("".join(tokens)) or not all(tokens):
        tokens = [WHITESPACE_IN_TOKEN.sub(TOKEN_SPACE, token) or TOKEN_SPACE for token in tokens]
    if segment_word is None:
        return [[token] for token in tokens]
    codes = getattr(segment_word, "__self__", None)
    if isinstance(codes, Bpe) and segment_word == codes.segment_word:  # cached tuples: no split per token
        return list(map(codes._pieces.__getitem__, tokens))
    if hasattr(codes, "pieces_of") and segment_word == codes.segment_word:  # a sub-word scheme's cutter
        return codes.pieces_of(tokens)
    return list(map(str.split, map(segment_word, tokens), repeat(" ")))


def align_subwords(tokens: Sequence[str], segment_word: Callable[[str], str] | None = None
                   ) -> tuple[list[str], list[int]]:
    """Sub-words of `tokens` (see `split_tokens`) and their 0-based token indices."""
    pieces = split_tokens(tokens, segment_word)
    owner: list[int] = []
    for index, token_pieces in enumerate(pieces):
        owner += [index] * len(token_pieces)
    return list(chain.from_iterable(pieces)), owner


class Cutter(Protocol):
    """A sub-word scheme's cutter other than BPE codes (`synprep.subwords.TokenCutter` and the like)."""

    path: str

    def segment_word(self, word: str) -> str: ...

    def segment_line(self, line: str) -> str: ...

    def pieces_of(self, words: Sequence[str]) -> list[tuple[str, ...]]: ...


def subword_file(bpe: Bpe | Cutter | None) -> str | None:
    """The file a segmenter was loaded from: BPE codes, or a scheme's model (None: none)."""
    if bpe is None:
        return None
    return bpe.codes_path if isinstance(bpe, Bpe) else (bpe.path or None)


def apply_file(bpe: Bpe | Cutter, input_path: str, output_path: str) -> int:
    """`subword-nmt apply-bpe` over a file ('-' = stdin/stdout), or with a sentencepiece / hf-tokenizer cutter each
    token of each line cut on its own; returns the number of lines."""
    check_outputs({"-o": output_path}, {"the input (-i)": input_path, "the BPE codes (--codes)": subword_file(bpe)})
    count = 0
    stream = open_binary(input_path)
    with atomic_output(output_path) as out:
        try:
            for line in iter_subword_nmt_lines(stream, input_path):
                out.write(bpe.segment_line(line))
                count += 1
        except (EOFError, lzma.LZMAError, zlib.error, gzip.BadGzipFile) as err:  # truncated .gz/.xz input
            raise InputError(f"cannot read input (truncated or corrupt?): {err}", input_path) from None
    return count
