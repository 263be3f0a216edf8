"""Token-level dependency trees: the structure, cycle and projectivity checks, pseudo-projective lifting.

`heads` are CoNLL-U style everywhere: 1-based head token, 0 for the root.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class Tree:
    """A sentence of surface tokens with its dependency tree."""

    tokens: list[str]
    heads: list[int]
    labels: list[str]
    sent_id: str | None = None
    text: str | None = None

    def __len__(self) -> int:
        return len(self.tokens)


def find_cycle(heads: Sequence[int]) -> list[int]:
    """The 1-based nodes of a cycle in `heads`, or [] when every node reaches the root."""
    state = [0] * (len(heads) + 1)  # 0 new, 1 on the current path, 2 reaches the root
    state[0] = 2
    for start in range(1, len(heads) + 1):
        path = []
        v = start
        while state[v] == 0:
            state[v] = 1
            path.append(v)
            v = heads[v - 1]
            if not 0 <= v <= len(heads):
                return []  # out of range is reported by the caller
        if state[v] == 1:
            return path[path.index(v):]
        for node in path:
            state[node] = 2
    return []


def crossing_arcs(heads: Sequence[int]) -> np.ndarray:
    """Boolean matrix over arcs (dependent i -> heads[i], the root arc 0 -> root included): arcs i, j cross."""
    n = len(heads)
    if n < 2:
        return np.zeros((n, n), dtype=bool)
    dep = np.arange(1, n + 1)
    head = np.asarray(heads)
    lo = np.minimum(dep, head)
    hi = np.maximum(dep, head)
    # a, b cross when exactly one endpoint of b lies strictly inside a
    lo_a, hi_a, lo_b, hi_b = lo[:, None], hi[:, None], lo[None, :], hi[None, :]
    return ((lo_a < lo_b) & (lo_b < hi_a) & (hi_a < hi_b)) | ((lo_b < lo_a) & (lo_a < hi_b) & (hi_b < hi_a))


def forest_arrays(heads: Sequence[int] | np.ndarray, sizes: Sequence[int] | np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Several trees as one forest: (global 0-based parent of every token, the root its own parent;
    first global token of each tree; tree of each token). `heads` are the trees' 1-based heads, concatenated."""
    head = np.asarray(heads, dtype=np.int64)
    size = np.asarray(sizes, dtype=np.int64)
    offset = np.cumsum(size) - size
    tree = np.repeat(np.arange(len(size)), size)
    own = np.arange(len(head))
    parent = np.where(head > 0, offset[tree] + head - 1, own)
    return parent, offset, tree


def forest_projective(heads: Sequence[int] | np.ndarray, sizes: Sequence[int] | np.ndarray) -> np.ndarray:
    """`is_projective` of several trees at once (`heads` concatenated, `sizes` tokens per tree).

    No two arcs cross (the root arc included) exactly when every subtree covers a contiguous span:
    for every token, (last - first + 1) of its descendants-or-self = their number."""
    parent, offset, tree = forest_arrays(heads, sizes)
    own = np.arange(len(parent))
    is_root = parent == own
    below, ancestor, up = own, parent, ~is_root  # walk every token up to its root, pairing it with each ancestor
    ancestors, descendants = [own[:0]], [own[:0]]
    while True:
        below, ancestor = below[up], ancestor[up]
        if not len(ancestor):
            break
        ancestors.append(ancestor)
        descendants.append(below)
        up = ~is_root[ancestor]
        ancestor = parent[ancestor]
    pair_ancestor, pair_below = np.concatenate(ancestors), np.concatenate(descendants)
    first = own.copy()  # every token is its own descendant
    last = own.copy()
    np.minimum.at(first, pair_ancestor, pair_below)
    np.maximum.at(last, pair_ancestor, pair_below)
    count = np.bincount(pair_ancestor, minlength=len(own)) + 1
    gapped = last - first + 1 != count
    return np.bincount(tree[gapped], minlength=len(offset)) == 0


def is_projective(heads: Sequence[int]) -> bool:
    """True when no two arcs cross (the root arc included)."""
    return bool(forest_projective(heads, [len(heads)])[0])


def lift_projective(heads: Sequence[int]) -> list[int]:
    """Pseudo-projective lifting: re-attach the dependent of the shortest crossing arc to its
    grandparent until no arcs cross. Lifted heads are always ancestors of the original heads.

    Arcs from the root token are never lifted (their grandparent is the artificial root, and the
    tree keeps a single root); some other arc always crosses, so this terminates with a projective tree.
    """
    lifted = list(heads)
    while True:
        crossing = crossing_arcs(lifted).any(axis=1)
        candidates = [i for i in np.flatnonzero(crossing)
                      if lifted[i] != 0 and lifted[lifted[i] - 1] != 0]
        if not candidates:
            return lifted
        shortest = min(candidates, key=lambda i: (abs(lifted[i] - (i + 1)), i))
        lifted[shortest] = lifted[lifted[shortest] - 1]
