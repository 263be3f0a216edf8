"""Joint BPE (subword-nmt): learning codes + vocabularies, and a fast applier.

`Bpe` wraps `subword_nmt.apply_bpe.BPE` (the merge algorithm is subword-nmt's own) and adds a
word -> segmentation cache in front of it, so `synprep bpe apply` is byte-identical to
`subword-nmt apply-bpe` while skipping its per-word overhead on repeated words.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from subword_nmt import apply_bpe, learn_bpe

from .errors import InputError
from .textio import decode_line, open_binary, open_text_output

SEPARATOR = "@@"
# subword-nmt reads text through codecs.StreamReader, whose lines end at every str.splitlines()
# boundary (\r, \x0b, \x0c, \x1c-\x1e, \x85, \u2028, \u2029), not only at '\n'. We mirror it.
_EXTRA_LINE_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
# Whitespace inside a token (UD allows `10 000`) would split one token into two sub-word items.
WHITESPACE_IN_TOKEN = re.compile(r"\s")
TOKEN_SPACE = "\u2581"  # '▁' replaces whitespace inside a token in `subwords`


def iter_subword_nmt_lines(stream: BinaryIO, path: str) -> Iterator[str]:
    """Lines exactly as subword-nmt's codecs reader splits them, with UTF-8 errors located."""
    for lineno, raw in enumerate(stream, 1):
        line = decode_line(raw, path, lineno)
        if _EXTRA_LINE_BREAKS.search(line):
            yield from line.splitlines(keepends=True)
        else:
            yield line


def _check_codes(path: str) -> None:
    """Fail early, with file and line, when `path` is not a subword-nmt codes file."""
    with open_binary(path) as stream:
        for lineno, raw in enumerate(stream, 1):
            line = decode_line(raw, path, lineno).strip("\r\n ")
            if lineno == 1 and line.startswith("#version:"):
                continue
            if len(line.split(" ")) != 2:
                raise InputError("not a BPE codes file (each line must hold exactly two symbols)",
                                 path, lineno)


def read_vocabulary(path: str, threshold: int | None) -> set[str]:
    """subword-nmt vocabulary file ('piece count' lines), filtered by frequency threshold."""
    vocabulary = set()
    with open_binary(path) as stream:
        for lineno, raw in enumerate(stream, 1):
            parts = decode_line(raw, path, lineno).strip("\r\n ").split(" ")
            if len(parts) != 2 or not parts[1].isdigit():
                raise InputError("not a vocabulary file (expected 'piece count')", path, lineno)
            if threshold is None or int(parts[1]) >= threshold:
                vocabulary.add(parts[0])
    return vocabulary


class Bpe:
    """Apply learned BPE codes to words, lines and token lists."""

    def __init__(self, codes_path: str, vocabulary: set[str] | None = None, merges: int = -1,
                 separator: str = SEPARATOR, glossaries: list[str] | None = None) -> None:
        _check_codes(codes_path)
        with open(codes_path, encoding="utf-8") as codes:
            self._bpe = apply_bpe.BPE(codes, merges, separator, vocabulary, glossaries)
        self.codes_path = codes_path
        self.separator = separator
        self._cache: dict[str, str] = {}

    def segment_word(self, word: str) -> str:
        """The sub-words of one (non-empty, space-free) word, joined by spaces."""
        pieces = self._cache.get(word)
        if pieces is None:
            pieces = self._cache[word] = " ".join(self._bpe.segment_tokens([word]))
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

    def segment_tokens(self, tokens: Iterable[str]) -> tuple[list[str], list[int]]:
        """BPE a tree's tokens: (sub-words, 0-based token index of each sub-word)."""
        return align_subwords(tokens, self.segment_word)


def align_subwords(tokens: Iterable[str], segment_word: object = None) -> tuple[list[str], list[int]]:
    """Sub-words of `tokens` (whitespace inside a token becomes '▁') and their token indices.

    With `segment_word=None` every token is its own sub-word (no BPE).
    """
    subwords: list[str] = []
    owner: list[int] = []
    for index, token in enumerate(tokens):
        if WHITESPACE_IN_TOKEN.search(token) or not token:
            token = WHITESPACE_IN_TOKEN.sub(TOKEN_SPACE, token) or TOKEN_SPACE
        pieces = segment_word(token).split(" ") if segment_word is not None else [token]  # type: ignore[operator]
        subwords.extend(pieces)
        owner.extend([index] * len(pieces))
    return subwords, owner


def apply_file(bpe: Bpe, input_path: str, output_path: str) -> int:
    """`subword-nmt apply-bpe` over a file ('-' = stdin/stdout); returns the number of lines."""
    count = 0
    stream = open_binary(input_path)
    out = open_text_output(output_path)
    try:
        for line in iter_subword_nmt_lines(stream, input_path):
            out.write(bpe.segment_line(line))
            count += 1
    finally:
        out.flush()
        if output_path != "-":
            out.close()
    return count


def _word_counts(path: str) -> Counter[str]:
    """subword-nmt's get_vocabulary (word frequencies), reading with our UTF-8 checks."""
    counts: Counter[str] = Counter()
    with open_binary(path) as stream:
        for line in iter_subword_nmt_lines(stream, path):
            for word in line.strip("\r\n ").split(" "):
                if word:
                    counts[word] += 1
    return counts


def learn_joint(inputs: list[str], codes_path: str, symbols: int, vocab_paths: list[str] | None = None,
                min_frequency: int = 2, total_symbols: bool = False) -> None:
    """`subword-nmt learn-joint-bpe-and-vocab`: joint codes, then one vocabulary per input."""
    if symbols <= 0:
        raise InputError(f"--symbols must be positive, got {symbols}")
    per_input = [_word_counts(path) for path in inputs]
    joint: Counter[str] = Counter()
    for counts in per_input:
        joint += counts
    if not joint:
        raise InputError("no words to learn BPE from (empty input)", ",".join(inputs))
    vocab_list = [f"{word} {freq}" for word, freq in joint.items()]
    with open(codes_path, "w", encoding="utf-8") as out:
        learn_bpe.learn_bpe(vocab_list, out, symbols, min_frequency, False, is_dict=True,
                            total_symbols=total_symbols)
    if not vocab_paths:
        return
    bpe = Bpe(codes_path)
    for path, vocab_path in zip(inputs, vocab_paths, strict=False):
        counts: Counter[str] = Counter()
        with open_binary(path) as stream:
            for line in iter_subword_nmt_lines(stream, path):
                for piece in bpe.segment_line(line).strip("\r\n ").split(" "):
                    if piece:
                        counts[piece] += 1
        with open(vocab_path, "w", encoding="utf-8", newline="\n") as out:
            for piece, freq in sorted(counts.items(), key=lambda item: item[1], reverse=True):
                out.write(f"{piece} {freq}\n")
