"""Joint BPE learning from word counts (subword-nmt's `learn-joint-bpe-and-vocab`, same bytes).

`synprep convert` counts the words of every piece in its phase-1 workers (`count_words`, reading the text as
subword-nmt reads a file), merges the counts once in piece order (`merge_counts`) and learns from them
(`learn_joint_from_counts`): no serial pass over the token files, and the vocabularies come from the counts,
segmenting each distinct word once instead of every line. The codes and vocabularies are byte-identical to
subword-nmt's on the same text: the joint counts hold the same words in the same (first-seen) order, and
a vocabulary's pieces are first seen in the same order word by word as line by line.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections import Counter
from collections.abc import Iterable, Mapping

from .bpe import Bpe, iter_subword_nmt_lines
from .errors import InputError
from .textio import open_binary


def count_words(text: str, where: str = "<tokens>") -> dict[str, int]:
    """The words of `text` and their counts, first seen first, as subword-nmt's get_vocabulary reads a file
    of that text (its line breaks, words split at single spaces)."""
    counts: Counter[str] = Counter()
    for line in iter_subword_nmt_lines(io.BytesIO(text.encode("utf-8")), where):
        for word in line.strip("\r\n ").split(" "):
            if word:
                counts[word] += 1
    return dict(counts)


def merge_counts(parts: Iterable[Mapping[str, int]]) -> Counter[str]:
    """The counts of several parts of one text, in order: as if the text had been counted at once."""
    total: Counter[str] = Counter()
    for part in parts:
        total.update(part)
    return total


def learn_joint_from_counts(per_input: list[Counter[str]], codes_path: str, symbols: int,
                            vocab_paths: list[str] | None = None, min_frequency: int = 2,
                            total_symbols: bool = False, verbose: bool = False, where: str = "") -> None:
    """`subword-nmt learn-joint-bpe-and-vocab` given each input's word counts (`where`: the inputs, for
    messages): joint codes, then one vocabulary per input."""
    if symbols <= 0:
        raise InputError(f"--symbols must be positive, got {symbols}")
    joint: Counter[str] = Counter()
    for counts in per_input:
        joint += counts
    if not joint:
        raise InputError("no words to learn BPE from (empty input)", where)
    from subword_nmt import learn_bpe  # imports tqdm: only here

    vocab_list = [f"{word} {freq}" for word, freq in joint.items()]
    log = io.StringIO()
    try:
        with open(codes_path, "w", encoding="utf-8") as out, \
                contextlib.redirect_stderr(sys.stderr if verbose else log):
            learn_bpe.learn_bpe(vocab_list, out, symbols, min_frequency, False, is_dict=True,
                                total_symbols=total_symbols)
    except ValueError as error:  # subword-nmt's max() over no pairs: every word is a single character
        sys.stderr.write(log.getvalue())
        raise InputError(f"no symbol pairs to learn BPE from ({error})", where) from None
    except BaseException:
        sys.stderr.write(log.getvalue())
        raise
    if not vocab_paths:
        return
    bpe = Bpe(codes_path)
    for counts, vocab_path in zip(per_input, vocab_paths, strict=False):
        pieces: Counter[str] = Counter()
        for word, count in counts.items():
            for piece in bpe.segment_word(word).split(" "):
                pieces[piece] += count
        with open(vocab_path, "w", encoding="utf-8", newline="\n") as out:
            for piece, freq in sorted(pieces.items(), key=lambda item: item[1], reverse=True):
                out.write(f"{piece} {freq}\n")


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
                min_frequency: int = 2, total_symbols: bool = False, verbose: bool = False) -> None:
    """`subword-nmt learn-joint-bpe-and-vocab`: joint codes, then one vocabulary per input. subword-nmt's own
    stderr (its progress bar, `no pair has frequency >= 2. Stopping`) is shown only if `verbose` or on failure."""
    if symbols <= 0:
        raise InputError(f"--symbols must be positive, got {symbols}")
    learn_joint_from_counts([_word_counts(path) for path in inputs], codes_path, symbols, vocab_paths,
                            min_frequency, total_symbols, verbose, ",".join(inputs))
