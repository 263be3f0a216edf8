"""Property tests of the syntax features on random trees, against independent brute-force definitions."""

from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synprep import features as F
from synprep.trees import find_cycle, is_projective, lift_projective

LABELS = ["nsubj", "obj", "det", "amod", "compound:prt", "obl", "advmod"]


@st.composite
def random_trees(draw, max_tokens=10):
    """Any tree: nodes in random order, each attached to an earlier one."""
    n = draw(st.integers(1, max_tokens))
    order = draw(st.permutations(range(1, n + 1)))
    heads = [0] * n
    for k, node in enumerate(order[1:], 1):
        heads[node - 1] = order[draw(st.integers(0, k - 1))]
    return heads


@st.composite
def projective_trees(draw, max_tokens=12):
    """Projective trees (root arc included): every subtree covers a contiguous span."""
    n = draw(st.integers(1, max_tokens))
    heads = [0] * n

    def build(lo, hi, parent):  # tokens lo..hi (1-based) form consecutive subtrees of `parent`
        while lo <= hi:
            end = draw(st.integers(lo, hi)) if parent else hi
            root = draw(st.integers(lo, end))
            heads[root - 1] = parent
            build(lo, root - 1, root)
            build(root + 1, end, root)
            lo = end + 1

    build(1, n, 0)
    return heads


@st.composite
def pieces_for(draw, n):
    """Random BPE-like sub-words for n tokens."""
    out = []
    for t in range(n):
        k = draw(st.integers(1, 3))
        out.append([f"w{t}p{i}@@" for i in range(k - 1)] + [f"w{t}p{k - 1}"])
    return out


def brute_projective(heads):
    """Definition: for every arc (root arc 0 -> r included), the words strictly between its ends
    are descendants of its head."""
    n = len(heads)

    def ancestors(v):
        seen = []
        while v:
            seen.append(v)
            v = heads[v - 1]
        return seen + [0]

    for d in range(1, n + 1):
        h = heads[d - 1]
        for w in range(min(h, d) + 1, max(h, d)):
            if h not in ancestors(w):
                return False
    return True


def bfs_distances(heads):
    n = len(heads)
    adj = [[] for _ in range(n)]
    for d, h in enumerate(heads):
        if h:
            adj[d].append(h - 1)
            adj[h - 1].append(d)
    out = np.zeros((n, n), dtype=int)
    for s in range(n):
        dist = {s: 0}
        queue = deque([s])
        while queue:
            v = queue.popleft()
            for w in adj[v]:
                if w not in dist:
                    dist[w] = dist[v] + 1
                    queue.append(w)
        for t, value in dist.items():
            out[s, t] = value
    return out


def test_paper_example():
    heads = [2, 0, 4, 2, 2]
    labels = ["nsubj", "root", "det", "obj", "compound:prt"]
    pieces = [["Jo@@", "hn"], ["put"], ["the"], ["co@@", "al@@", "s"], ["out"]]
    sequence = F.to_transitions(heads, labels, pieces)
    assert " ".join(sequence) == (
        "Jo@@ hn put LEFT-ARC:nsubj the co@@ al@@ s LEFT-ARC:det RIGHT-ARC:obj out RIGHT-ARC:compound:prt")
    assert F.to_transitions(heads, labels, pieces, "keep")[-1] == "RIGHT-ARC:root"
    subwords, owner, back_heads, back_labels = F.from_transitions(sequence)
    assert subwords == [p for ps in pieces for p in ps]
    assert owner == [0, 0, 1, 2, 3, 3, 3, 4]
    assert back_heads == heads and back_labels == labels


def test_parent_mid_of_two_pieces():
    # token 0 has 6 pieces (0..5); its head, token 1, has pieces at 6 and 7
    owner = [0] * 6 + [1, 1]
    heads = [2, 0]
    assert F.parent_mid(heads, owner).tolist() == [6.5] * 8
    assert F.parent_first(heads, owner).tolist() == [6] * 8
    # three pieces at 6, 7, 8 -> 7 (the Pascal paper's example)
    assert F.parent_mid([2, 0], [0] * 6 + [1] * 3)[0] == 7.0


@given(projective_trees(), st.data())
@settings(max_examples=300, deadline=None)
def test_transitions_roundtrip_projective(heads, data):
    labels = [data.draw(st.sampled_from(LABELS)) for _ in heads]
    pieces = data.draw(pieces_for(len(heads)))
    for root in ("drop", "keep"):
        sequence = F.to_transitions(heads, labels, pieces, root)
        assert sequence is not None
        subwords, owner, back_heads, back_labels = F.from_transitions(sequence, root)
        assert back_heads == heads
        assert subwords == [p for ps in pieces for p in ps]
        assert owner == [t for t, ps in enumerate(pieces) for _ in ps]
        root_token = heads.index(0)
        expected = list(labels)
        if root == "drop":
            expected[root_token] = F.DROPPED_ROOT_LABEL
        assert back_labels == expected
        # sequence length: every sub-word once plus one arc per dependent (+ the root arc with keep)
        assert len(sequence) == len(subwords) + len(heads) - 1 + (root == "keep")


@given(random_trees())
@settings(max_examples=400, deadline=None)
def test_encodable_iff_projective(heads):
    projective = brute_projective(heads)
    assert is_projective(heads) == projective
    pieces = [[f"t{i}"] for i in range(len(heads))]
    labels = ["dep"] * len(heads)
    for root in ("drop", "keep"):
        assert (F.to_transitions(heads, labels, pieces, root) is not None) == projective


@given(random_trees())
@settings(max_examples=300, deadline=None)
def test_lift_gives_projective_tree_with_ancestor_heads(heads):
    lifted = lift_projective(heads)
    assert brute_projective(lifted)
    assert not find_cycle(lifted) and lifted.count(0) == 1
    for d, (original, new) in enumerate(zip(heads, lifted), 1):
        v, ancestors = original, set()
        while v:
            ancestors.add(v)
            v = heads[v - 1]
        assert new == original or new in ancestors, (d, heads, lifted)
    if brute_projective(heads):
        assert lifted == heads


@given(random_trees(max_tokens=14))
@settings(max_examples=300, deadline=None)
def test_distances_match_bfs_and_are_a_tree_metric(heads):
    dist = F.tree_distances(heads).astype(int)
    assert dist.dtype == int and (dist == bfs_distances(heads)).all()
    n = len(heads)
    assert (dist == dist.T).all() and (np.diag(dist) == 0).all()
    arcs = {(d, h - 1) for d, h in enumerate(heads) if h} | {(h - 1, d) for d, h in enumerate(heads) if h}
    for i in range(n):
        for j in range(n):
            assert (dist[i, j] == 1) == ((i, j) in arcs)
    assert (dist[:, None, :] <= dist[:, :, None] + dist[None, :, :]).all()  # d(i,k) <= d(i,j) + d(j,k)


def test_distances_cap_at_255():
    chain = [0] + list(range(1, 300))  # token k+1 depends on token k: a 300-deep chain
    dist = F.tree_distances(chain)
    assert dist.dtype == np.uint8 and dist[0, 299] == 255 and dist[0, 200] == 200


def test_strip_subtypes():
    assert F.strip_subtypes(["compound:prt", "nsubj", "obl:tmod"]) == ["compound", "nsubj", "obl"]


@pytest.mark.parametrize("sequence, message", [
    (["a", "LEFT-ARC:x"], "two items"),
    (["a@@"], "unfinished token"),
    (["a", "b"], "2 items on the stack"),
    (["a@@", "RIGHT-ARC:x", "b"], "unfinished token"),
])
def test_from_transitions_rejects_invalid_sequences(sequence, message):
    with pytest.raises(ValueError, match=message):
        F.from_transitions(sequence)


def brute_parent_positions(heads, owner):
    """Definition: the positions of the head token's sub-words (root: its own); mean and first."""
    mid, first = [], []
    for token in owner:
        parent = heads[token] - 1 if heads[token] else token
        span = [i for i, t in enumerate(owner) if t == parent]
        mid.append(sum(span) / len(span))
        first.append(span[0])
    return mid, first


@given(st.lists(st.tuples(random_trees(max_tokens=12), st.lists(st.integers(1, 3), min_size=12, max_size=12)),
                min_size=1, max_size=6))
@settings(max_examples=200, deadline=None)
def test_forest_features_match_per_tree_definitions(trees):
    """The batched (forest) variants over several trees = the brute-force definitions tree by tree."""
    heads = [h for tree, _ in trees for h in tree]
    sizes = [len(tree) for tree, _ in trees]
    owners = [[t for t in range(len(tree)) for _ in range(counts[t])] for tree, counts in trees]
    offsets = np.cumsum([0] + sizes)
    global_owner = [offsets[k] + t for k, owner in enumerate(owners) for t in owner]
    mid, first = F.forest_parent_positions(heads, sizes, global_owner)
    expected = [brute_parent_positions(tree, owner) for (tree, _), owner in zip(trees, owners)]
    assert mid.dtype == np.float32 and first.dtype == np.int16
    assert mid.tolist() == [m for e in expected for m in e[0]]
    assert first.tolist() == [f for e in expected for f in e[1]]
    dist = F.forest_tree_distances(heads, sizes)
    assert dist.dtype == np.uint8
    assert dist.tolist() == [d for tree, _ in trees for d in bfs_distances(tree).ravel().tolist()]
    for (tree, _), owner in zip(trees, owners):  # the one-tree functions are the same computation
        assert F.parent_mid(tree, owner).tolist() == brute_parent_positions(tree, owner)[0]


@pytest.mark.parametrize("block_bytes", [None, 1, 8 * 4 * 200 + 1])
@pytest.mark.parametrize("sizes", [[70], [5, 130, 64, 1], [200, 65]])
def test_forest_distances_of_long_trees(sizes, block_bytes, monkeypatch):
    """Trees longer than 64 tokens need several 64-bit words per ancestor set; the XORs are made a block of
    rows at a time (one row, a few rows, all rows) with the same result."""
    if block_bytes is not None:
        monkeypatch.setattr(F, "_DISTANCE_BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng(sum(sizes))
    trees = []
    for n in sizes:
        order = rng.permutation(n) + 1
        heads = [0] * n
        for k in range(1, n):  # deep and wide: attach to one of the last few nodes
            heads[order[k] - 1] = int(order[rng.integers(max(0, k - 3), k)])
        trees.append(heads)
    dist = F.forest_tree_distances([h for t in trees for h in t], sizes)
    expected = [np.minimum(bfs_distances(t), 255).ravel() for t in trees]
    assert (dist == np.concatenate(expected)).all()
    assert len(F.forest_tree_distances([], [])) == 0 and F.tree_distances([]).shape == (0, 0)
    # empty trees (sentences with no token) among others
    assert F.forest_tree_distances([2, 0, 2], [0, 3, 0]).tolist() == bfs_distances([2, 0, 2]).ravel().tolist()
    mid, first = F.forest_parent_positions([0, 1], [0, 1, 0, 1], [0, 1])
    assert mid.tolist() == [0.0, 0.0] and first.tolist() == [0, 0]


@given(st.lists(random_trees(), min_size=1, max_size=6))
@settings(max_examples=300, deadline=None)
def test_forest_projective_matches_definition(trees):
    from synprep.trees import forest_projective

    found = forest_projective([h for t in trees for h in t], [len(t) for t in trees])
    assert found.tolist() == [brute_projective(t) for t in trees]
    assert forest_projective([], [0, 0]).tolist() == [True, True]
