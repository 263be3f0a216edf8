"""Joint BPE learning from word counts (subword-nmt's `learn-joint-bpe-and-vocab`, same bytes).

`synprep convert` counts the words of every piece in its phase-1 workers (`count_words`, reading the text as
subword-nmt reads a file), merges the counts in piece order as it reads them and learns from them
(`learn_joint_from_counts`): no serial pass over the token files, and the vocabularies come from the counts,
segmenting each distinct word once instead of every line. The codes and vocabularies are byte-identical to
subword-nmt's on the same text: the joint counts hold the same words in the same (first-seen) order, and
a vocabulary's pieces are first seen in the same order word by word as line by line. The codes are learnt by
`learn_bpe_codes`, subword-nmt's algorithm step for step (its pruned counts and thresholds included) with
the most frequent pair kept in a heap: the same bytes, several times faster on large vocabularies.
"""

from __future__ import annotations

import contextlib
import heapq
import io
import os
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

from .bpe import Bpe, iter_subword_nmt_lines
from .errors import InputError, WriteError
from .outputs import check_outputs
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


_SPACE = re.compile(r"\s").search  # subword-nmt's replacement pattern treats these characters as boundaries


def learn_bpe_codes(vocab_lines: Iterable[str], outfile: TextIO, num_symbols: int, min_frequency: int = 2,
                    total_symbols: bool = False, progress: bool = False) -> None:
    """subword-nmt's `learn_bpe(vocab_lines, outfile, num_symbols, min_frequency, False, is_dict=True,
    total_symbols=...)`, same bytes, faster: the same pair counts, pruning, thresholds and tie-breaking (the
    largest (count, pair)), with the most frequent pair taken from a heap (stale entries skipped) instead of a
    max() over all counts, and pairs merged in the symbol tuples instead of by a regular expression (kept for
    words with a whitespace character other than a space, where subword-nmt's pattern sees more boundaries).
    Word counts below 1 or `min_frequency` below 1 go to subword-nmt itself. `progress`: a bar over the merges
    on stderr, as subword-nmt shows."""
    from subword_nmt import learn_bpe  # imports tqdm: only here

    learn_codes_from_counts(learn_bpe.get_vocabulary(vocab_lines, is_dict=True), outfile, num_symbols,
                            min_frequency, total_symbols, progress)


def learn_codes_from_counts(counts: dict[str, int], outfile: TextIO, num_symbols: int, min_frequency: int = 2,
                            total_symbols: bool = False, progress: bool = False) -> None:
    """`learn_bpe_codes` of the vocabulary lines whose counts subword-nmt's get_vocabulary(is_dict=True) gives
    as `counts` (words without a space and not starting with a line break; in its order). `counts` is emptied
    once the words are in the learner's own tables, so that they are not held twice while merging."""
    from subword_nmt import learn_bpe  # imports tqdm: only here

    from .progress import progress as progress_bar

    if min_frequency < 1 or any(freq < 1 for freq in counts.values()):
        lines = [f"{word} {freq}" for word, freq in counts.items()]  # the lines these counts were read from
        learn_bpe.learn_bpe(lines, outfile, num_symbols, min_frequency, False, is_dict=True,
                            total_symbols=total_symbols)
        return
    outfile.write("#version: 0.2\n")
    words, freqs, stats, indices = _pair_statistics(counts)
    counts.clear()
    spaced = [bool(_SPACE("".join(word))) for word in words]
    big_stats = defaultdict(int, stats)
    if total_symbols:
        num_symbols -= _character_count(words)
    pairs = _PairHeap()
    threshold = max(stats.values()) / 10  # ValueError without pairs, as in subword-nmt
    with progress_bar("learn BPE", num_symbols, "merges", shown=bool(progress),
                      mininterval=0.5) as bar:  # closed before anything else is said (also on Ctrl-C)
        _merge_loop(num_symbols, min_frequency, outfile, words, freqs, spaced, stats, big_stats, indices, pairs,
                    threshold, bar)


def _merge_loop(num_symbols: int, min_frequency: int, outfile: TextIO, words: list[tuple[str, ...]],
                freqs: list[int], spaced: list[bool], stats: defaultdict, big_stats: defaultdict,
                indices: defaultdict, pairs: _PairHeap, threshold: float, bar: Any) -> None:
    """learn_bpe_codes' merges: subword-nmt's loop, with the most frequent pair taken from `pairs`' heap."""
    from subword_nmt import learn_bpe

    heap = pairs.rebuild(stats)
    most_frequent: tuple[str, str] | None = None
    touched: set[tuple[str, str]] = set()
    entry = pairs.entry
    for i in range(num_symbols):
        if stats:
            most_frequent = pairs.top(heap, stats)
        if not stats or (i and (most_frequent is None or stats[most_frequent] < threshold)):
            learn_bpe.prune_stats(stats, big_stats, threshold)
            stats = defaultdict(int, big_stats)
            best = max(stats.values())
            most_frequent = max(pair for pair, freq in stats.items() if freq == best)
            threshold = stats[most_frequent] * i / (i + 10000.0)
            learn_bpe.prune_stats(stats, big_stats, threshold)
            heap = pairs.rebuild(stats)
        if stats[most_frequent] < min_frequency:
            sys.stderr.write(f"no pair has frequency >= {min_frequency}. Stopping\n")
            break
        outfile.write(f"{most_frequent[0]} {most_frequent[1]}\n")
        _merge_pair(most_frequent, words, freqs, spaced, stats, indices, touched)
        stats[most_frequent] = 0
        if not i % 100:
            learn_bpe.prune_stats(stats, big_stats, threshold)
            heap = pairs.rebuild(stats)
        else:
            for pair in touched:
                freq = stats[pair]
                if freq > 0:
                    heapq.heappush(heap, entry(pair, freq))
        touched.clear()
        bar.update()


def _pair_statistics(counts: Mapping[str, int]) -> tuple[list[tuple[str, ...]], list[int], defaultdict, defaultdict]:
    """subword-nmt's start: the words as symbol tuples (`</w>` on the last), most frequent first, their counts,
    and the count of every symbol pair with the index of the words holding it (word -> occurrences)."""
    vocab = {(*word[:-1], word[-1] + "</w>"): freq for word, freq in counts.items()}
    sorted_vocab = sorted(vocab.items(), key=lambda item: item[1], reverse=True)
    words = [word for word, _ in sorted_vocab]
    freqs = [freq for _, freq in sorted_vocab]
    stats: defaultdict[tuple[str, str], int] = defaultdict(int)
    indices: defaultdict[tuple[str, str], defaultdict[int, int]] = defaultdict(lambda: defaultdict(int))
    for j, word in enumerate(words):
        freq = freqs[j]
        for pair in zip(word, word[1:], strict=False):
            stats[pair] += freq
            indices[pair][j] += 1
    return words, freqs, stats, indices


def _character_count(words: list[tuple[str, ...]]) -> int:
    """`total_symbols`: the word-internal and word-final characters, reported as subword-nmt does."""
    internal = {char for word in words for char in word[:-1]}
    final = {word[-1] for word in words}
    sys.stderr.write(f"Number of word-internal characters: {len(internal)}\n")
    sys.stderr.write(f"Number of word-final characters: {len(final)}\n")
    sys.stderr.write(f"Reducing number of merge operations by {len(internal) + len(final)}\n")
    return len(internal) + len(final)


class _PairHeap:
    """The most frequent pair, as max(stats, key=lambda x: (stats[x], x)), from a heap of (-count, keys) entries:
    a symbol's key sorts the symbols in reverse order, so the heap's smallest entry is max()'s pair."""

    def __init__(self) -> None:
        self.descending: dict[str, tuple[int, ...]] = {}  # symbol -> its reverse-order key

    def entry(self, pair: tuple[str, str], freq: int) -> tuple:
        first, second = pair
        descending = self.descending
        key1 = descending.get(first)
        if key1 is None:
            key1 = descending[first] = (*(-ord(char) for char in first), 1)
        key2 = descending.get(second)
        if key2 is None:
            key2 = descending[second] = (*(-ord(char) for char in second), 1)
        return (-freq, key1, key2, pair)

    def rebuild(self, stats: Mapping[tuple[str, str], int]) -> list[tuple]:
        heap = [self.entry(pair, freq) for pair, freq in stats.items() if freq > 0]
        heapq.heapify(heap)
        return heap

    @staticmethod
    def top(heap: list[tuple], stats: Mapping[tuple[str, str], int]) -> tuple[str, str] | None:
        """The pair max(stats, key=lambda x: (stats[x], x)) returns if its count is positive, else None (entries
        whose count changed since they were pushed are dropped)."""
        get = stats.get
        while heap:
            negative, _, _, pair = heap[0]
            if get(pair) == -negative:
                return pair
            heapq.heappop(heap)
        return None


def _merge_pair(pair: tuple[str, str], words: list[tuple[str, ...]], freqs: list[int], spaced: list[bool],
                stats: defaultdict, indices: defaultdict, touched: set) -> None:
    """subword-nmt's replace_pair then update_pair_statistics, word by word: merge `pair` in the words its
    index lists (count >= 1) and update the pair counts and the index step for step as subword-nmt does (its
    quirks included), noting the pairs whose counts changed in `touched`. The index drops an entry whose count
    falls to 0 (subword-nmt keeps it: the same index read with a default of 0, and memory that does not grow
    with the merges)."""
    first, second = pair
    new = first + second
    listed = indices.pop(pair, {})  # subword-nmt puts an empty index in its place: the defaultdict makes one
    stats[pair] = 0
    add = touched.add
    pattern = None
    for j, count in listed.items():
        if count < 1:
            continue
        old_word = words[j]
        freq = freqs[j]
        n = len(old_word)
        out: list[str] = []
        i = 0
        while True:  # the occurrences of the pair, left to right, not overlapping
            try:
                k = old_word.index(first, i)
            except ValueError:
                break
            if k < n - 1 and old_word[k + 1] == second:
                if k:
                    prev = old_word[k - 1:k + 1]
                    stats[prev] -= freq
                    _decrement(indices, prev, j)
                    add(prev)
                if k < n - 2:
                    if old_word[k + 2] != first or k >= n - 3 or old_word[k + 3] != second:
                        nex = old_word[k + 1:k + 3]
                        stats[nex] -= freq
                        _decrement(indices, nex, j)
                        add(nex)
                out.extend(old_word[i:k])
                out.append(new)
                i = k + 2
            else:
                out.extend(old_word[i:k + 1])
                i = k + 1
        if spaced[j]:  # subword-nmt's own pattern and replacement
            if pattern is None:
                pattern = re.compile(r"(?<!\S)" + re.escape(first + " " + second) + r"(?!\S)")
            word = tuple(pattern.sub(new.replace("\\", "\\\\"), " ".join(old_word)).split(" "))
        else:
            out.extend(old_word[i:])
            word = tuple(out)
        words[j] = word
        n = len(word)
        i = 0
        while True:  # every occurrence of the new symbol, also one made by an earlier merge
            try:
                i = word.index(new, i)
            except ValueError:
                break
            if i:
                prev = word[i - 1:i + 1]
                stats[prev] += freq
                indices[prev][j] += 1
                add(prev)
            if i < n - 1 and word[i + 1] != new:
                nex = word[i:i + 2]
                stats[nex] += freq
                indices[nex][j] += 1
                add(nex)
            i += 1


def _decrement(indices: defaultdict, pair: tuple[str, str], j: int) -> None:
    """One occurrence fewer of `pair` in word j: an entry that reaches 0 goes (its default), and so does a
    pair's index once empty."""
    row = indices[pair]
    count = row.get(j, 0) - 1
    if count:
        row[j] = count
    elif len(row) == 1:
        del indices[pair]
    else:
        del row[j]


def learn_joint_from_counts(per_input: list[Counter[str]], codes_path: str, symbols: int,
                            vocab_paths: list[str] | None = None, min_frequency: int = 2,
                            total_symbols: bool = False, verbose: bool = False, where: str = "",
                            reference: bool = False) -> None:
    """`subword-nmt learn-joint-bpe-and-vocab` given each input's word counts (`where`: the inputs, for
    messages): joint codes, then one vocabulary per input. The codes come from `learn_bpe_codes`, or with
    `reference` from subword-nmt's own learn_bpe (the same bytes, slower)."""
    if symbols <= 0:
        raise InputError(f"--symbols must be positive, got {symbols}")
    for path in [codes_path, *(vocab_paths or [])]:  # before any work: a missing folder found at the end loses it
        folder = os.path.dirname(path) or "."
        if not os.path.isdir(folder):
            raise InputError(f"no such folder to write {os.path.basename(path)} in", folder)
    joint: Counter[str] = Counter()
    for counts in per_input:
        joint += counts
    if not joint:
        raise InputError("no words to learn BPE from (empty input)", where)
    temporary = [f"{path}.tmp-{os.getpid()}" for path in [codes_path, *(vocab_paths or [])]]
    try:  # codes and vocabularies under temporary names, renamed when all are complete: never a partial file
        _learn_into(per_input, joint, temporary, symbols, min_frequency, total_symbols, verbose, where, reference)
        for tmp, path in zip(temporary, [codes_path, *(vocab_paths or [])], strict=True):
            os.replace(tmp, path)
    except OSError as err:
        raise WriteError(f"cannot write: {err.strerror or err}", err.filename or codes_path) from None
    finally:
        for tmp in temporary:
            if os.path.exists(tmp):
                os.remove(tmp)


def _learn_into(per_input: list[Counter[str]], joint: Counter[str], paths: list[str], symbols: int,
                min_frequency: int, total_symbols: bool, verbose: bool, where: str, reference: bool) -> None:
    """The codes into paths[0], the vocabulary of each input into the other paths (learn_joint_from_counts)."""
    codes_path, vocab_paths = paths[0], paths[1:]
    log = io.StringIO()
    try:
        with open(codes_path, "w", encoding="utf-8") as out, \
                contextlib.redirect_stderr(sys.stderr if verbose else log):
            if reference or any(word[0] in "\r\n" for word in joint):  # subword-nmt reads such a word otherwise
                from subword_nmt import learn_bpe  # imports tqdm: only here

                vocab_list = [f"{word} {freq}" for word, freq in joint.items()]
                if reference:
                    learn_bpe.learn_bpe(vocab_list, out, symbols, min_frequency, False, is_dict=True,
                                        total_symbols=total_symbols)
                else:
                    learn_bpe_codes(vocab_list, out, symbols, min_frequency, total_symbols, progress=verbose)
            else:  # the joint counts are what subword-nmt reads from their lines: no lines held beside them
                learn_codes_from_counts(joint, out, symbols, min_frequency, total_symbols, progress=verbose)
    except ValueError:  # subword-nmt's max() over no pairs: every word is a single character
        sys.stderr.write(log.getvalue())
        raise InputError("no symbol pairs to learn BPE from (every word is a single character or whitespace)",
                         where) from None
    except BaseException:
        sys.stderr.write(log.getvalue())
        raise
    with open(codes_path, "rb") as codes:
        merges = sum(1 for _ in codes) - 1
    if merges <= 0:  # codes that `bpe apply` refuses: say so now
        raise InputError(f"no pair of symbols occurs --min-frequency {min_frequency} times: no merges to learn "
                         "(learn from more text, or lower --min-frequency)", where)
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


def word_counts(path: str) -> Counter[str]:
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
    check_outputs({"-o": codes_path, **{f"the vocabulary {path}": path for path in vocab_paths or []}},
                  {f"the input {path}": path for path in inputs})
    learn_joint_from_counts([word_counts(path) for path in inputs], codes_path, symbols, vocab_paths,
                            min_frequency, total_symbols, verbose, ",".join(inputs))
