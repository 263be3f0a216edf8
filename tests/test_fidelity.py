"""Fidelity to the papers' released preprocessing (docs/fidelity.md).

Each released rule is written again here, small and independent, from the authors' code as it reads (not by
calling synprep.features): Pascal's `scripts/bpe_tags_mean.py` / `bpe_tags_root.py` (e-bug/pascal), DBSA's
`scripts/bpe_dependency.py: incremental_bpe_dependency` (de9uch1/dbsa), and tree decoding's
`parsing/corpus.py: ConllSent.arc_std` + `combine_bpe_transitions` (borgr/nematus, branch generation; root kept).
They work on the sub-word line as the released scripts do (a piece ending in `@@` continues its word) and write
what the scripts write; synprep's features (and `synprep export`'s lines) must equal them on every sentence of the
shared UD test treebanks, with BPE codes of few merges learned on each treebank (words split often). Skipped when
../shared is absent. The counts are printed (pytest -s) and asserted: every sentence compared, all equal.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from synprep import export
from synprep.bpe import Bpe
from synprep.bpe_learn import learn_joint
from synprep.conllu import read_conllu, to_tree
from synprep.featurize import FeatureConfig, featurize
from synprep.trees import is_projective

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
TREEBANKS = sorted((SHARED / "data" / "ud").glob("*/*-test.conllu"))
MERGES = 1000  # few merges: most words of a treebank's test set split into several pieces
CONTINUES = "@@"


# ------------------------------------------------------------------ the released rules, written from their code


def _words(bpe_tokens: list[str]) -> list[list[int]]:
    """0-based piece positions of each word (pieces ending in @@ continue it), as the released scripts group them."""
    words, current = [], []
    for i, piece in enumerate(bpe_tokens):
        current.append(i)
        if not piece.endswith(CONTINUES):
            words.append(current)
            current = []
    return words


def released_dbsa(word_heads: list[int], bpe_tokens: list[str]) -> list[int]:
    """incremental_bpe_dependency: 1-based head per piece; a continuing piece -> the next piece (i + 2 for the
    0-based i), a word's last piece -> the first piece of the head word, the root's last piece -> itself."""
    first = [positions[0] + 1 for positions in _words(bpe_tokens)]  # 1-based first piece of each word
    out, word = [], 0
    for i, piece in enumerate(bpe_tokens):
        if piece.endswith(CONTINUES):
            out.append(i + 2)
        else:
            head = word_heads[word]
            out.append(i + 1 if head == 0 else first[head - 1])
            word += 1
    return out


def released_pascal(word_heads: list[int], bpe_tokens: list[str], mean: bool) -> str:
    """tags_to_bpe of bpe_tags_mean.py (mean) / bpe_tags_root.py (first): per piece, str() of the mean (or the
    first, as a float) 0-based position of its word's head word's pieces (the root word: its own)."""
    words = _words(bpe_tokens)
    tags = []
    for index, positions in enumerate(words):
        head = word_heads[index] - 1 if word_heads[index] else index
        value = str(np.mean(words[head])) if mean else str(float(words[head][0]))
        tags += [value] * len(positions)
    return " ".join(tags)


def released_arc_std(heads: list[int], labels: list[str]) -> list[tuple[str, str]]:
    """ConllSent.arc_std: the arc-standard oracle, ending with the root's R; raises on a non-projective tree."""
    stack: list[tuple[int, int, str]] = []  # (1-based id, head, label)
    out, cursor, n = [], 0, len(heads)

    def later_dependent() -> bool:
        return any(h == stack[-1][0] for h in heads[cursor:])

    while not (len(stack) == 1 and cursor == n):
        if len(stack) < 2:
            stack.append((cursor + 1, heads[cursor], labels[cursor]))
            out.append(("SHFT", str(cursor)))
            cursor += 1
        elif stack[-2][1] == stack[-1][0]:
            out.append(("L", stack.pop(-2)[2]))
        elif stack[-1][1] == stack[-2][0] and not later_dependent():
            out.append(("R", stack.pop()[2]))
        elif cursor < n:
            stack.append((cursor + 1, heads[cursor], labels[cursor]))
            out.append(("SHFT", str(cursor)))
            cursor += 1
        else:
            raise ValueError("Not a valid projective tree.")
    out.append(("R", stack.pop()[2]))
    return out


def released_combined(transitions: list[tuple[str, str]], bpe_tokens: list[str]) -> str:
    """combine_bpe_transitions without split actions: SHIFT -> the word's pieces, L/R -> `<action><label>@@|`."""
    pieces, line = iter(bpe_tokens), []
    for action, value in transitions:
        if action == "SHFT":
            while True:
                piece = next(pieces)
                line.append(piece)
                if not piece.endswith(CONTINUES):
                    break
        else:
            line.append(action + value + "@@|")
    return " ".join(line)


def test_released_rules_on_their_own_example():
    """The example of bpe_dependency.py's comment (`Thi@@ s is an ex@@ am@@ ple .`), and the rules' shapes."""
    pieces = "Thi@@ s is an ex@@ am@@ ple .".split()
    heads = [4, 4, 4, 0, 4]
    assert released_dbsa(heads, pieces) == [2, 5, 5, 5, 6, 7, 7, 5]
    assert export.dbsa_line(heads, [0, 0, 1, 2, 3, 3, 3, 4], release="2020") == "2 5 5 5 6 7 7 5"
    assert export.dbsa_line(heads, [0, 0, 1, 2, 3, 3, 3, 4]) == "1 4 4 4 5 6 6 4"  # master b0cdef6: 0-based
    assert released_pascal(heads, pieces, mean=True) == " ".join(["5.0"] * 4 + ["5.0"] * 3 + ["5.0"])
    assert released_combined(released_arc_std(heads, ["nsubj", "cop", "det", "root", "punct"]), pieces) == (
        "Thi@@ s is an ex@@ am@@ ple Ldet@@| Lcop@@| Lnsubj@@| . Rpunct@@| Rroot@@|")


# ------------------------------------------------------------------ every sentence of the shared treebanks


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("fidelity")


def _features(path: Path, workdir: Path):
    sentences = list(read_conllu(str(path)))
    trees = [to_tree(sentence, str(path)) for sentence in sentences]
    text = workdir / (path.stem + ".tok")
    text.write_text("\n".join(" ".join(t.tokens) for t in trees) + "\n", encoding="utf-8")
    codes = workdir / (path.stem + ".codes")
    learn_joint([str(text)], str(codes), MERGES)
    config = FeatureConfig(("parents", "transitions", "labels", "dbsa"), root="keep", non_projective="keep")
    return sentences, trees, featurize(trees, config, Bpe(str(codes)).segment_word)


@pytest.mark.slow
@pytest.mark.skipif(not TREEBANKS, reason="../shared/data/ud not present")
@pytest.mark.parametrize("path", TREEBANKS, ids=lambda p: p.parent.name)
def test_features_equal_the_released_rules_on_every_sentence(path, workdir):
    sentences, trees, columns = _features(path, workdir)
    multiword = sum(bool(sentence.multiword) for sentence in sentences)
    counts = {rule: [0, 0] for rule in ("dbsa", "pascal_mean", "pascal_first", "transitions_keep")}
    split = 0

    def compare(rule: str, ours: object, theirs: object) -> None:
        counts[rule][0] += 1
        counts[rule][1] += ours == theirs

    for i, tree in enumerate(trees):
        record = columns.record(i)
        pieces = record["subwords"]
        split += len(pieces) > len(tree)
        compare("dbsa", [int(h) + 1 for h in record["dbsa_head"]], released_dbsa(tree.heads, pieces))
        compare("pascal_mean", export.pascal_line(tree.heads, record["subword_token"]),
                released_pascal(tree.heads, pieces, mean=True))
        compare("pascal_first", " ".join(repr(float(p)) for p in record["parent_first"]),
                released_pascal(tree.heads, pieces, mean=False))
        if is_projective(tree.heads):
            ours = " ".join(export.released_transition(item) for item in record["transitions"])
            compare("transitions_keep", ours, released_combined(released_arc_std(tree.heads, tree.labels), pieces))
        else:
            assert record["transitions"] is None
            with pytest.raises(ValueError):
                released_arc_std(tree.heads, tree.labels)
    print(f"\n{path.parent.name} ({len(trees)} sentences, {multiword} with a multiword token, {split} with a split "
          "word): "
          + ", ".join(f"{rule} {equal}/{compared}" for rule, (compared, equal) in counts.items()))
    assert split > len(trees) // 2  # the codes split words often
    for rule, (compared, equal) in counts.items():
        assert compared and equal == compared, (rule, compared, equal)
