"""`synprep parser eval`: UPOS, UAS and LAS of a parser against a gold CoNLL-U treebank, for every backend.

Two inputs, as in the CoNLL 2018 shared task:
- gold tokenization: each gold sentence's words, space-separated, are parsed pre-tokenized; word i of the
  output is word i of the gold sentence, and the scores are accuracies;
- raw text: each gold sentence's `# text` is parsed as one line (gold sentence boundaries, the parser's own
  tokenization). System and gold words are aligned by character offsets: the text of a sentence without its
  whitespace is the same on both sides, so a word is a span of that string; two words align when their
  spans are equal. Inside multiword tokens (words that share one span, e.g. Spanish `del` = `de el`) the
  words of the overlapping tokens are aligned by the longest common subsequence of their lowercased forms.
  Precision, recall and F1 are computed over aligned words (F1 is reported), as the shared task's
  evaluation does; the implementation is this module's own.
UAS counts a word whose head is the aligned counterpart of the gold head (or both roots); LAS also needs
the universal part of the label (`nmod:poss` -> `nmod`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import NamedTuple

from ..conllu import DEPREL, FORM, HEAD, MISC, UPOS, ConlluSentence, read_conllu
from ..errors import InputError
from ..progress import progress
from .base import Parser

MODES = ("gold", "raw")


class Word(NamedTuple):
    """One syntactic word: its character span in the sentence without whitespace, and what is scored."""

    start: int
    end: int
    multiword: bool  # part of a multiword token (several words share the span)
    form: str
    upos: str
    head: int  # 0 = root, else 1-based index of the head word
    deprel: str  # universal part only


@dataclass
class Scores:
    """Counts over a treebank; `f1` turns a count of correct words into F1 (= accuracy with gold tokens)."""

    mode: str
    sentences: int = 0
    gold_words: int = 0
    system_words: int = 0
    aligned: int = 0
    upos: int = 0
    uas: int = 0
    las: int = 0
    gold_tokens: int = 0
    system_tokens: int = 0
    matched_tokens: int = 0
    seconds: float = 0.0  # parsing time (model loading excluded)
    mismatched: list[str] = field(default_factory=list)  # sentences whose characters differ (none aligned)

    def f1(self, correct: int) -> float:
        total = self.gold_words + self.system_words
        return 100.0 * 2 * correct / total if total else 0.0

    def metrics(self) -> dict[str, float]:
        """Percentages: tokens and words (F1 of segmentation), UPOS, UAS, LAS."""
        tokens = self.gold_tokens + self.system_tokens
        return {"tokens": 100.0 * 2 * self.matched_tokens / tokens if tokens else 0.0,
                "words": self.f1(self.aligned), "upos": self.f1(self.upos), "uas": self.f1(self.uas),
                "las": self.f1(self.las)}

    def format(self) -> str:
        m = self.metrics()
        what = "gold tokenization" if self.mode == "gold" else "raw text"
        line = f"{what:17s}  UPOS {m['upos']:5.2f}  UAS {m['uas']:5.2f}  LAS {m['las']:5.2f}"
        if self.mode == "raw":
            line += f"  (F1; tokens {m['tokens']:5.2f}, words {m['words']:5.2f})"
        rate = self.sentences / self.seconds if self.seconds else 0.0
        return line + f"  [{self.sentences} sentences, {rate:.0f}/s]"


def sentence_words(sentence: ConlluSentence) -> tuple[list[Word], list[tuple[int, int]], str]:
    """The words of a sentence with their spans, the token spans (multiword ranges count once) and the
    characters of the sentence without whitespace."""
    ranges = {first: (last, cols[FORM]) for first, last, cols in sentence.multiword}
    words: list[Word] = []
    tokens: list[tuple[int, int]] = []
    chars: list[str] = []
    offset = 0
    i = 1
    n = len(sentence.words)
    while i <= n:
        last, surface = ranges.get(i, (i, sentence.words[i - 1][FORM]))
        chars.append("".join(surface.split()))
        span = (offset, offset + len(chars[-1]))
        tokens.append(span)
        for j in range(i, last + 1):
            cols = sentence.words[j - 1]
            head = int(cols[HEAD]) if cols[HEAD].isdigit() else 0
            words.append(Word(span[0], span[1], last > i, cols[FORM], cols[UPOS], head,
                              cols[DEPREL].split(":")[0]))
        offset = span[1]
        i = last + 1
    return words, tokens, "".join(chars)


def _lcs(gold: list[Word], system: list[Word]) -> list[tuple[int, int]]:
    """Index pairs of a longest common subsequence of lowercased forms."""
    g = [w.form.lower() for w in gold]
    s = [w.form.lower() for w in system]
    table = [[0] * (len(s) + 1) for _ in range(len(g) + 1)]
    for i in range(len(g) - 1, -1, -1):
        for j in range(len(s) - 1, -1, -1):
            table[i][j] = table[i + 1][j + 1] + 1 if g[i] == s[j] else max(table[i + 1][j], table[i][j + 1])
    pairs, i, j = [], 0, 0
    while i < len(g) and j < len(s):
        if g[i] == s[j]:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def align(gold: list[Word], system: list[Word]) -> list[tuple[int, int]]:
    """(gold index, system index) of aligned words (0-based), by character spans; LCS inside multiword tokens."""
    pairs: list[tuple[int, int]] = []
    gi = si = 0
    while gi < len(gold) and si < len(system):
        g, s = gold[gi], system[si]
        if g.multiword or s.multiword:  # the region of tokens overlapping a multiword token
            end, gj, sj = max(g.end, s.end), gi, si
            while True:
                moved = False
                while gj < len(gold) and gold[gj].start < end:
                    end, gj, moved = max(end, gold[gj].end), gj + 1, True
                while sj < len(system) and system[sj].start < end:
                    end, sj, moved = max(end, system[sj].end), sj + 1, True
                if not moved:
                    break
            pairs += [(gi + a, si + b) for a, b in _lcs(gold[gi:gj], system[si:sj])]
            gi, si = gj, sj
        elif (g.start, g.end) == (s.start, s.end):
            pairs.append((gi, si))
            gi, si = gi + 1, si + 1
        else:
            gi, si = gi + (g.end <= s.end), si + (s.end <= g.end)
    return pairs


def score_sentence(scores: Scores, gold: ConlluSentence, system: ConlluSentence, by_index: bool = False) -> None:
    """Add one sentence's counts to `scores` (`by_index`: word i = word i, for gold tokenization)."""
    gold_words, gold_tokens, gold_chars = sentence_words(gold)
    system_words, system_tokens, system_chars = sentence_words(system)
    scores.sentences += 1
    scores.gold_words += len(gold_words)
    scores.system_words += len(system_words)
    scores.gold_tokens += len(gold_tokens)
    scores.system_tokens += len(system_tokens)
    if by_index and len(gold_words) == len(system_words):
        pairs = [(i, i) for i in range(len(gold_words))]
        scores.matched_tokens += len(gold_tokens)
    elif gold_chars != system_chars:
        scores.mismatched.append(gold.sent_id or str(scores.sentences))  # other characters: nothing aligns
        return
    else:
        pairs = align(gold_words, system_words)
        scores.matched_tokens += len(set(gold_tokens) & set(system_tokens))
    scores.aligned += len(pairs)
    to_gold = {s: g for g, s in pairs}
    for g, s in pairs:
        gw, sw = gold_words[g], system_words[s]
        scores.upos += gw.upos == sw.upos
        head_ok = (gw.head == 0 and sw.head == 0) or (sw.head > 0 and to_gold.get(sw.head - 1) == gw.head - 1)
        scores.uas += head_ok
        scores.las += head_ok and gw.deprel == sw.deprel


def gold_text(sentence: ConlluSentence) -> str:
    """The sentence's `# text`, else its tokens joined by spaces (none where MISC has SpaceAfter=No)."""
    if sentence.text is not None:
        return sentence.text
    ranges = {first: (last, cols) for first, last, cols in sentence.multiword}
    parts, i = [], 1
    while i <= len(sentence.words):
        last, cols = ranges.get(i, (i, sentence.words[i - 1]))
        parts.append(cols[FORM] + ("" if "SpaceAfter=No" in cols[MISC].split("|") else " "))
        i = last + 1
    return "".join(parts).strip()


def read_gold(gold_path: str) -> list[ConlluSentence]:
    """The gold treebank's sentences, read once (a named pipe or `<(command)` can be read only once)."""
    gold = list(read_conllu(gold_path))
    if not gold:
        raise InputError("no sentences in the gold treebank", gold_path)
    return gold


def evaluate(parser: Parser, gold_path: str | list[ConlluSentence], mode: str, batch_size: int = 256) -> Scores:
    """Parse the gold treebank's sentences (a path, or the sentences `read_gold` read) with `parser` (built
    pre-tokenized for mode `gold`) and score them."""
    if mode not in MODES:
        raise InputError(f"unknown evaluation mode {mode!r} (choose from {', '.join(MODES)})")
    if (mode == "gold") != parser.pretokenized:
        raise InputError(f"mode {mode!r} needs a parser built with pretokenized={mode == 'gold'}")
    gold = read_gold(gold_path) if isinstance(gold_path, str) else gold_path
    if mode == "gold":
        lines = [" ".join("_".join(cols[FORM].split()) for cols in s.words) for s in gold]
    else:
        lines = [" ".join(gold_text(s).split()) for s in gold]
    scores = Scores(mode)
    with progress(f"parser eval: {mode}", len(gold), "sent", leave=False) as counter:  # also parser train's held-out
        for first in range(0, len(gold), batch_size):
            start = time.perf_counter()
            parsed = parser.parse(lines[first:first + batch_size])
            scores.seconds += time.perf_counter() - start
            for sentence, line in zip(gold[first:first + batch_size], parsed, strict=True):
                score_sentence(scores, sentence, line.sentence, by_index=mode == "gold")
            counter.update(len(parsed))
    return scores


def evaluate_model(spec_args: dict[str, object], gold_path: str, modes: tuple[str, ...] = MODES) -> list[Scores]:
    """Scores of one model (ParserSpec keyword arguments without `pretokenized`) in each mode; a model
    without a tokenizer is scored from gold tokens only."""
    from . import ParserSpec

    gold = read_gold(gold_path)  # once for every mode
    results = []
    for mode in modes:
        spec = ParserSpec(**spec_args, pretokenized=mode == "gold")  # type: ignore[arg-type]
        try:
            parser = spec.load()
        except InputError as err:
            if mode == "raw" and "tokeniz" in str(err):  # no tokenizer model: gold tokens only
                continue
            raise
        results.append(evaluate(parser, gold, mode))
    return results
