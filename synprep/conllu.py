"""CoNLL-U reading and writing, and the contract's word -> token collapse.

A hand-written reader: it is ~10x faster than the `conllu` library on UD EWT (see
benchmarks/bench_align.py) and keeps the line numbers that error messages need. It is checked against
the `conllu` library on every shared treebank in the tests.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import repeat
from operator import eq

import numpy as np

from .errors import InputError
from .textio import atomic_output, read_line_blocks, read_lines
from .trees import Tree, find_cycle

COLUMNS = 10
ID, FORM, LEMMA, UPOS, XPOS, FEATS, HEAD, DEPREL, DEPS, MISC = range(COLUMNS)
_EMPTY_NODE_ID = re.compile("[0-9]+[.][0-9]+")  # enhanced UD's empty nodes: N.M, two integers
_WHITESPACE = re.compile(r"\s")


def _number(text: str) -> bool:
    """Whether an ID or HEAD field is a non-negative integer in ASCII digits (str.isdigit() also takes '²')."""
    return text.isascii() and text.isdigit()


def _label_problem(label: str) -> str | None:
    """Why a DEPREL cannot be used (transitions are space-separated `LEFT-ARC:<label>` items), or None."""
    if not label:
        return "empty DEPREL"
    if _WHITESPACE.search(label):
        return f"DEPREL {label!r} holds whitespace (UD labels never do; transitions are space-separated)"
    return None


@dataclass
class ConlluSentence:
    """One CoNLL-U sentence at word level, as read (empty nodes dropped)."""

    words: list[list[str]]  # 10 columns per syntactic word, IDs 1..n
    multiword: list[tuple[int, int, list[str]]] = field(default_factory=list)  # (first, last, columns)
    comments: list[str] = field(default_factory=list)  # without the leading '#'
    index: int = 0  # 0-based sentence index in the file
    line: int = 0  # 1-based line of the sentence's first line
    word_lines: list[int] = field(default_factory=list)  # 1-based line of each word

    @property
    def sent_id(self) -> str | None:
        return _comment_value(self.comments, "sent_id")

    @property
    def text(self) -> str | None:
        return _comment_value(self.comments, "text")


def _sentence_label(comments: list[str], index: int) -> str:
    """How errors name a sentence: its sent_id, else '#<1-based ordinal>'."""
    return _comment_value(comments, "sent_id") or f"#{index + 1}"


def _comment_value(comments: list[str], key: str) -> str | None:
    for comment in comments:
        name, sep, value = comment.partition("=")
        if sep and name.strip() == key:
            return value.strip()
    return None


def read_conllu(path: str) -> Iterator[ConlluSentence]:
    """Stream the sentences of a CoNLL-U file ('-' = stdin; .gz/.xz), checking the format line by line."""
    return parse_conllu_lines(read_lines(path), path)


def read_conllu_chunks(path: str, sentences_per_chunk: int = 512) -> Iterator[tuple[list[str], int, int]]:
    """Cut a CoNLL-U file at sentence boundaries, unparsed, for parallel workers:
    (lines, number of the first line, index of the first sentence). A chunk starts at the first line of
    every `sentences_per_chunk`-th sentence (the first chunk at line 1); blank lines stay with the chunk
    before them."""
    chunk: list[str] = []
    first_line, first_index, sentences, in_sentence = 1, 0, 0, False  # sentences: seen so far
    lineno = 0  # lines before the current block
    for block in read_line_blocks(path):
        nonempty = np.fromiter(map(len, block), dtype=np.int64, count=len(block)) > 0
        after_blank = np.empty_like(nonempty)
        after_blank[0] = not in_sentence
        np.logical_not(nonempty[:-1], out=after_blank[1:])
        starts = np.flatnonzero(nonempty & after_blank)  # first lines of sentences
        ordinals = sentences + np.arange(len(starts))
        cuts = starts[(ordinals % sentences_per_chunk == 0) & (ordinals > 0)].tolist()
        begin = 0
        for cut in cuts:
            chunk += block[begin:cut]
            yield chunk, first_line, first_index
            chunk, first_line, first_index = [], lineno + cut + 1, first_index + sentences_per_chunk
            begin = cut
        chunk += block[begin:]
        sentences += len(starts)
        in_sentence = bool(nonempty[-1])
        lineno += len(block)
    if sentences:
        yield chunk, first_line, first_index
    else:
        raise InputError("empty CoNLL-U file (no sentence)", path, lineno or None)


def parse_conllu_text(text: str, path: str = "<text>") -> list[ConlluSentence]:
    """The sentences of CoNLL-U held in a string (e.g. a parser's output)."""
    return list(parse_conllu_lines(text.replace("\r\n", "\n").split("\n"), path, allow_empty=True))


def parse_conllu_lines(lines: Iterable[str], path: str, allow_empty: bool = False, first_line: int = 1,
                       first_index: int = 0) -> Iterator[ConlluSentence]:
    """Sentences from CoNLL-U lines (without line ends); `path` names the source in errors.
    A chunk of a file passes its first line number and the index of its first sentence. A sentence without words
    (comments only; see `_check_sentence` for the placeholders of empty input lines) and a file without sentences
    are errors, unless `allow_empty` (a parser's output, where an empty input line gives an empty sentence)."""
    words: list[list[str]] = []
    multiword: list[tuple[int, int, list[str]]] = []
    comments: list[str] = []
    word_lines: list[int] = []
    multiword_lines: list[int] = []
    start = 0
    index = first_index
    lineno = 0
    for lineno, line in enumerate(lines, first_line):  # lines come without line ends (read_lines strips \r\n)
        if not line:
            if words or comments or multiword:
                _check_sentence(multiword, multiword_lines, len(words), path, comments, index, start, allow_empty)
                yield ConlluSentence(words, multiword, comments, index, start, word_lines)
                index += 1
                words, multiword, comments, word_lines, multiword_lines = [], [], [], [], []
            continue
        if not words and not comments and not multiword:
            start = lineno
        if line[0] == "#":
            if words or multiword:
                raise InputError("comment line inside a sentence", path, lineno)
            comments.append(line[1:].strip())
            continue
        cols = line.split("\t")
        if len(cols) != COLUMNS:
            raise InputError(f"expected {COLUMNS} tab-separated columns, found {len(cols)}", path, lineno,
                             _sentence_label(comments, index))
        wid = cols[ID]
        if _number(wid):
            if int(wid) != len(words) + 1:
                raise InputError(f"word ID {wid} out of sequence (expected {len(words) + 1})", path,
                                 lineno, _sentence_label(comments, index))
            problem = _label_problem(cols[DEPREL])
            if problem:
                raise InputError(problem, path, lineno, _sentence_label(comments, index))
            words.append(cols)
            word_lines.append(lineno)
        elif "-" in wid:
            first, _, last = wid.partition("-")
            if not (_number(first) and _number(last)) or int(first) != len(words) + 1 \
                    or int(last) < int(first):
                raise InputError(f"bad multiword token ID {wid!r}", path, lineno, _sentence_label(comments, index))
            if multiword and int(first) <= multiword[-1][1]:
                raise InputError(f"multiword token {wid} overlaps {multiword[-1][0]}-{multiword[-1][1]}", path,
                                 lineno, _sentence_label(comments, index))
            multiword.append((int(first), int(last), cols))
            multiword_lines.append(lineno)
        elif "." in wid:
            if not _EMPTY_NODE_ID.fullmatch(wid):
                raise InputError(f"bad empty node ID {wid!r} (expected N.M, two integers)", path, lineno,
                                 _sentence_label(comments, index))
            continue  # empty node (enhanced UD): ignored
        else:
            raise InputError(f"bad word ID {wid!r}", path, lineno, _sentence_label(comments, index))
    if words or comments or multiword:
        _check_sentence(multiword, multiword_lines, len(words), path, comments, index, start, allow_empty)
        yield ConlluSentence(words, multiword, comments, index, start, word_lines)
        index += 1
    if index == first_index and not allow_empty:
        raise InputError("empty CoNLL-U file (no sentence)", path, lineno or None)


def _check_sentence(multiword: list[tuple[int, int, list[str]]], lines: list[int], n: int, path: str,
                    comments: list[str], index: int, start: int, allow_empty: bool) -> None:
    """A sentence has words, and every multiword range ends at one of them (`1-5` over three words is an error, not a
    token that silently swallows them). A sentence without words is accepted with `allow_empty` and where it stands
    for an input line with nothing to parse: `# text =` with no text, or `# skipped = ...` (what `synprep parse`
    writes to keep one sentence per line)."""
    if not n and not allow_empty and _comment_value(comments, "text") != "" \
            and _comment_value(comments, "skipped") is None:
        raise InputError("sentence without words (comments only)" if not multiword else "sentence without words",
                         path, start, _sentence_label(comments, index))
    for (_, last, cols), line in zip(multiword, lines):
        if last > n:
            raise InputError(f"multiword token {cols[ID]} covers words past the last word ({n})", path, line,
                             _sentence_label(comments, index))


def word_heads(sentence: ConlluSentence, path: str) -> list[int]:
    """The word-level heads, validated: integers, in range, one root, no cycle."""
    n = len(sentence.words)
    try:  # fast path for the valid sentences that make up nearly all input
        heads = [int(word[HEAD]) for word in sentence.words]
        valid = heads.count(0) == 1 and all(0 <= h <= n and h != i for i, h in enumerate(heads, 1)) \
            and all(_number(word[HEAD]) for word in sentence.words)
    except ValueError:
        valid = False
    if not valid or not n:
        if n:
            _raise_head_error(sentence, path)
        return []
    cycle = find_cycle(heads)
    if cycle:
        raise InputError(f"cycle through words {' -> '.join(map(str, cycle))}", path,
                         _word_lines(sentence)[cycle[0] - 1], _sentence_label(sentence.comments, sentence.index))
    return heads


def _word_lines(sentence: ConlluSentence) -> list[int | None]:
    """Line number of every word (sentences built in memory, e.g. parser output, may have none)."""
    n = len(sentence.words)
    return sentence.word_lines if len(sentence.word_lines) == n else [sentence.line or None] * n


def _raise_head_error(sentence: ConlluSentence, path: str) -> None:
    """Find the first bad head of an invalid sentence and raise the error that names it."""
    n = len(sentence.words)
    label = _sentence_label(sentence.comments, sentence.index)
    roots = 0
    for i, (word, lineno) in enumerate(zip(sentence.words, _word_lines(sentence)), 1):
        head = word[HEAD]
        if not _number(head):
            raise InputError(f"head {head!r} is not a non-negative integer", path, lineno, label)
        value = int(head)
        if value > n:
            raise InputError(f"head {value} out of range (sentence has {n} words)", path, lineno, label)
        if value == i:
            raise InputError(f"word {value} is its own head", path, lineno, label)
        if value == 0:
            roots += 1
            if roots > 1:
                raise InputError("more than one root (head 0)", path, lineno, label)
    raise InputError("no root (no word with head 0)", path, sentence.line, label)


def token_spans(sentence: ConlluSentence, heads: list[int]) -> list[tuple[int, int, int]]:
    """Per surface token: its first and last 1-based word and the word whose head and label it takes
    (CONTRACT.md: the word of a multiword span highest in the tree, the first on ties)."""
    n = len(sentence.words)
    if not sentence.multiword:
        return [(w, w, w) for w in range(1, n + 1)]
    depth = _depths(heads)
    ends = {first: last for first, last, _ in sentence.multiword}
    spans, w = [], 1
    while w <= n:
        last = min(ends.get(w, w), n)
        spans.append((w, last, min(range(w, last + 1), key=lambda v: (depth[v - 1], v))))
        w = last + 1
    return spans


def to_tree(sentence: ConlluSentence, path: str = "<input>") -> Tree:
    """Collapse multiword tokens into surface tokens (CONTRACT.md "Tokens and trees")."""
    heads = word_heads(sentence, path)
    words = sentence.words
    if not sentence.multiword:
        return Tree([w[FORM] for w in words], heads, [w[DEPREL] for w in words],
                    sentence.sent_id, sentence.text)
    forms = {first: cols[FORM] for first, _, cols in sentence.multiword}
    word_token = [0] * (len(words) + 1)  # 1-based word -> 1-based token
    tokens: list[str] = []
    rep_word: list[int] = []  # the word whose head and label the token takes
    for first, last, top in token_spans(sentence, heads):
        tokens.append(forms.get(first, words[first - 1][FORM]))
        rep_word.append(top)
        for v in range(first, last + 1):
            word_token[v] = len(tokens)
    token_heads = [word_token[heads[v - 1]] if heads[v - 1] else 0 for v in rep_word]
    labels = [words[v - 1][DEPREL] for v in rep_word]
    return Tree(tokens, token_heads, labels, sentence.sent_id, sentence.text)


_WORD_IDS = [str(i) for i in range(1, 257)]  # "1", "2", ...: the ID column of a sentence without multiword tokens


def _word_ids(n: int) -> list[str]:
    while len(_WORD_IDS) < n:
        _WORD_IDS.extend(str(i) for i in range(len(_WORD_IDS) + 1, 2 * len(_WORD_IDS) + 1))
    return _WORD_IDS[:n]


def chunk_trees(lines: list[str], path: str, first_line: int = 1, first_index: int = 0) -> list[Tree]:
    """The trees of a chunk of CoNLL-U lines (as cut by `read_conllu_chunks`), in order: the same trees
    and the same errors as `parse_conllu_lines` + `to_tree`, faster.

    Plain sentences (IDs 1..n, 10 columns, integer heads, one root, no cycle: nearly all input) are read
    column-wise, their cycles checked for the whole chunk at once; any other sentence (multiword tokens,
    empty nodes, anything invalid) goes through `parse_conllu_lines` + `to_tree`, which raise the errors.
    """
    spans: list[tuple[int, int]] = []  # (first line, end) of each sentence, 0-based in `lines`
    start = -1
    for i, line in enumerate(lines):
        if line:
            if start < 0:
                start = i
        elif start >= 0:
            spans.append((start, i))
            start = -1
    if start >= 0:
        spans.append((start, len(lines)))
    trees: list[Tree | None] = []
    heads_all: list[int] = []
    sizes: list[int] = []
    fast: list[int] = []  # positions in `trees` of the sentences read column-wise
    for a, end in spans:
        w = a
        while w < end and lines[w][0] == "#":
            w += 1
        n = end - w
        tree = None
        if n:
            words = lines[w:end]
            cols = "\t".join(words).split("\t")
            if len(cols) == COLUMNS * n and cols[ID::COLUMNS] == _word_ids(n) \
                    and list(map(str.count, words, repeat("\t", n))).count(COLUMNS - 1) == n:
                head_texts, labels = cols[HEAD::COLUMNS], cols[DEPREL::COLUMNS]
                if _number("".join(head_texts)) and "" not in labels and not _WHITESPACE.search("".join(labels)):
                    try:
                        heads = list(map(int, head_texts))
                    except ValueError:
                        heads = []
                    if heads and heads.count(0) == 1 and max(heads) <= n \
                            and not any(map(eq, heads, range(1, n + 1))):
                        comments = [line[1:].strip() for line in lines[a:w]]
                        tree = Tree(cols[FORM::COLUMNS], heads, labels,
                                    _comment_value(comments, "sent_id"), _comment_value(comments, "text"))
                        fast.append(len(trees))
                        heads_all += heads
                        sizes.append(n)
        trees.append(tree)
    if fast:  # cycles: after enough pointer doublings every word must have reached its tree's root
        head = np.asarray(heads_all, dtype=np.int64)
        size = np.asarray(sizes, dtype=np.int64)
        offset = np.repeat(np.cumsum(size) - size, size)
        jump = np.where(head > 0, offset + head - 1, np.arange(len(head)))
        for _ in range(int(size.max()).bit_length()):
            jump = jump[jump]
        stuck = head[jump] != 0
        if stuck.any():
            for k in np.unique(np.repeat(np.arange(len(size)), size)[stuck]):
                trees[fast[k]] = None
    out: list[Tree] = []
    for k, (tree, (a, end)) in enumerate(zip(trees, spans, strict=True)):
        if tree is None:
            sentence = next(parse_conllu_lines(lines[a:end], path, False, first_line + a, first_index + k))
            tree = to_tree(sentence, path)
        out.append(tree)
    return out


def _depths(heads: list[int]) -> list[int]:
    """Depth of each word (root = 0) of a validated tree."""
    depth = [-1] * len(heads)
    for start in range(len(heads)):
        path = []
        v = start + 1
        while v and depth[v - 1] < 0:
            path.append(v)
            v = heads[v - 1]
        base = depth[v - 1] if v else -1
        for node in reversed(path):
            base += 1
            depth[node - 1] = base
    return depth


def read_trees(path: str) -> Iterator[Tree]:
    """Token-level trees of a CoNLL-U file, validated."""
    for sentence in read_conllu(path):
        yield to_tree(sentence, path)


def format_sentence(sentence: ConlluSentence) -> str:
    """One sentence as CoNLL-U text (ending with the blank line)."""
    lines = [f"# {c}" if c else "#" for c in sentence.comments]
    spans = {first: cols for first, _, cols in sentence.multiword}
    for i, cols in enumerate(sentence.words, 1):
        if i in spans:
            lines.append("\t".join(spans[i]))
        lines.append("\t".join(cols))
    return "\n".join(lines) + "\n\n"


def tree_to_sentence(tree: Tree, index: int = 0) -> ConlluSentence:
    """A token-level tree as a CoNLL-U sentence (unknown columns as '_')."""
    comments = []
    if tree.sent_id is not None:
        comments.append(f"sent_id = {tree.sent_id}")
    if tree.text is not None:
        comments.append(f"text = {tree.text}")
    words = [[str(i), tok, "_", "_", "_", "_", str(head), label, "_", "_"]
             for i, (tok, head, label) in enumerate(zip(tree.tokens, tree.heads, tree.labels, strict=False), 1)]
    return ConlluSentence(words, [], comments, index)


def write_conllu(sentences: Iterable[ConlluSentence | Tree], path: str) -> int:
    """Write sentences (word-level or token-level trees) as CoNLL-U; returns the count."""
    count = 0
    with atomic_output(path) as out:
        for item in sentences:
            count += 1
            sentence = tree_to_sentence(item) if isinstance(item, Tree) else item
            out.write(format_sentence(sentence))
    return count
