"""The invariants on every sentence of the shared UD treebanks (skipped when ../shared is absent)."""

from pathlib import Path

import conllu
import numpy as np
import pytest

from synprep import features as F
from synprep.bpe import Bpe
from synprep.bpe_learn import learn_joint
from synprep.conllu import read_conllu, to_tree
from synprep.featurize import FeatureConfig, sentence_features
from synprep.trees import is_projective

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
TREEBANKS = sorted((SHARED / "data" / "ud").glob("*/*.conllu"))
pytestmark = pytest.mark.skipif(not TREEBANKS, reason="../shared/data/ud not present")


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ud")
    texts = []
    for path in TREEBANKS:
        if "dev" in path.name:
            text = tmp / (path.stem + ".tok")
            text.write_text("\n".join(" ".join(to_tree(s).tokens).replace("\u00a0", "_")
                                      for s in read_conllu(str(path))) + "\n", encoding="utf-8")
            texts.append(str(text))
    codes = tmp / "codes"
    learn_joint(texts, str(codes), 2000)
    return Bpe(str(codes))


@pytest.mark.slow
@pytest.mark.parametrize("path", TREEBANKS, ids=lambda p: p.name)
def test_invariants_on_every_sentence(path, bpe):
    config = FeatureConfig(("parents", "distances", "transitions", "labels"), "drop", "lift")
    counts = {"sentences": 0, "non_projective": 0, "multiword": 0}
    for sentence in read_conllu(str(path)):
        tree = to_tree(sentence, str(path))
        record = sentence_features(tree, config, bpe.segment_word)
        n, subwords, owner = len(tree), record["subwords"], record["subword_token"]
        counts["sentences"] += 1
        counts["multiword"] += bool(sentence.multiword)
        # sub-words cover the tokens in order, none contains whitespace
        assert owner == sorted(owner) and set(owner) == set(range(n))
        assert not any(ch.isspace() for piece in subwords for ch in piece)
        # parent_mid / parent_first point at the parent's sub-words (the root at its own)
        for position, token in enumerate(owner):
            parent = tree.heads[token] - 1 if tree.heads[token] else token
            span = [i for i, t in enumerate(owner) if t == parent]
            assert record["parent_mid"][position] == pytest.approx(np.mean(span))
            assert record["parent_first"][position] == span[0]
        dist = record["distances"].reshape(n, n)
        assert (dist == dist.T).all() and not dist.diagonal().any()
        for d, h in enumerate(tree.heads):
            if h:
                assert dist[d, h - 1] == 1
        if record["projective"]:
            back = F.from_transitions(record["transitions"], "drop")
            assert back[0] == subwords and back[1] == owner and back[2] == tree.heads
        else:
            counts["non_projective"] += 1
            lifted = F.from_transitions(record["transitions"], "drop")[2]
            assert is_projective(lifted)
    blocks = sum(line.startswith("1\t") for line in path.read_text(encoding="utf-8").splitlines())
    assert counts["sentences"] == blocks >= 500  # every sentence of the file (the smallest shared ones have 500)
    print(path.name, counts)


@pytest.mark.slow
@pytest.mark.parametrize("path", TREEBANKS[:2], ids=lambda p: p.name)
def test_reader_agrees_with_conllu_library(path):
    with open(path, encoding="utf-8") as handle:
        reference = list(conllu.parse_incr(handle))
    ours = list(read_conllu(str(path)))
    assert len(ours) == len(reference)
    for mine, theirs in zip(ours, reference):
        words = [t for t in theirs if isinstance(t["id"], int)]
        assert [w[1] for w in mine.words] == [t["form"] for t in words]
        assert [int(w[6]) for w in mine.words] == [t["head"] for t in words]
        assert mine.sent_id == theirs.metadata.get("sent_id")
        surface = {t["id"][0]: t["form"] for t in theirs if isinstance(t["id"], tuple) and t["id"][1] == "-"}
        assert {first: cols[1] for first, _, cols in mine.multiword} == surface
