"""The syntax features, as pure functions over a tree's arrays (CONTRACT.md "Per-sentence features").

Shared by `synprep align`, `synprep convert`, `synprep validate` and the trainer: never reimplement one.
`heads` are 1-based (0 = root); `subword_token` maps each sub-word to its 0-based token; positions are
0-based sub-word positions without BOS/EOS.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

LEFT_ARC = "LEFT-ARC:"
RIGHT_ARC = "RIGHT-ARC:"
ROOT_POLICIES = ("drop", "keep")
NON_PROJECTIVE_POLICIES = ("drop", "lift", "keep")
DROPPED_ROOT_LABEL = "root"  # label given to the root by from_transitions under root policy `drop`


def _token_spans(subword_token: Sequence[int], n_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """First sub-word position and number of sub-words of every token."""
    owner = np.asarray(subword_token, dtype=np.int64)
    count = np.bincount(owner, minlength=n_tokens)
    first = np.cumsum(count) - count
    return first, count


def _parent_token(heads: Sequence[int]) -> np.ndarray:
    """0-based parent token of each token; the root is its own parent (Pascal)."""
    head = np.asarray(heads, dtype=np.int64)
    return np.where(head > 0, head - 1, np.arange(len(head)))


def parent_positions(heads: Sequence[int], subword_token: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(parent_mid, parent_first) in one pass; see the two functions below."""
    first, count = _token_spans(subword_token, len(heads))
    parent_of_subword = _parent_token(heads)[np.asarray(subword_token, dtype=np.int64)]
    first_of_parent = first[parent_of_subword]
    middle = first_of_parent + (count[parent_of_subword] - 1) / 2.0
    return middle.astype(np.float32), first_of_parent.astype(np.int16)


def parent_mid(heads: Sequence[int], subword_token: Sequence[int]) -> np.ndarray:
    """Pascal: per sub-word, the mean position of its head token's sub-words (root: its own)."""
    return parent_positions(heads, subword_token)[0]


def parent_first(heads: Sequence[int], subword_token: Sequence[int]) -> np.ndarray:
    """LISA/SISA: per sub-word, the position of its head token's first sub-word (root: its own)."""
    return parent_positions(heads, subword_token)[1]


def ancestor_matrix(heads: Sequence[int]) -> np.ndarray:
    """A[i, k] is True when token k is token i or one of its ancestors (by pointer jumping)."""
    n = len(heads)
    rows = np.arange(n)
    jump = _parent_token(heads)
    reach = np.zeros((n, n), dtype=bool)
    reach[rows, rows] = True
    reach[rows, jump] = True
    while True:
        wider = reach | reach[jump]
        if np.array_equal(wider, reach):
            return reach
        reach = wider
        jump = jump[jump]


def tree_distances(heads: Sequence[int]) -> np.ndarray:
    """Number of arcs on the tree path between every two tokens (Chen et al.), capped at 255, uint8."""
    n = len(heads)
    if n == 0:
        return np.zeros((0, 0), dtype=np.uint8)
    reach = ancestor_matrix(heads).astype(np.int32)  # integer matmul: exact, and no BLAS thread pool per call
    depth = reach.sum(axis=1) - 1
    common = reach @ reach.T  # ancestors-or-self shared by i and j = depth(lca) + 1
    dist = depth[:, None] + depth[None, :] - 2 * (common - 1)
    return np.minimum(dist, 255).astype(np.uint8)


def strip_subtypes(labels: Sequence[str]) -> list[str]:
    """`compound:prt` -> `compound`."""
    return [label.split(":", 1)[0] for label in labels]


def token_pieces(subwords: Sequence[str], subword_token: Sequence[int], n_tokens: int) -> list[list[str]]:
    """The sub-words of each token, in order."""
    pieces: list[list[str]] = [[] for _ in range(n_tokens)]
    for piece, token in zip(subwords, subword_token, strict=False):
        pieces[token].append(piece)
    return pieces


def to_transitions(heads: Sequence[int], labels: Sequence[str], pieces: Sequence[Sequence[str]],
                   root: str = "drop") -> list[str] | None:
    """Arc-standard static oracle with SHIFT = the token's sub-words; None if not encodable
    (a non-projective tree). `pieces[t]` are the sub-words of token t."""
    if root not in ROOT_POLICIES:
        raise ValueError(f"root policy must be one of {ROOT_POLICIES}, got {root!r}")
    n = len(heads)
    pending = [0] * (n + 1)  # dependents of each token (1-based) not yet attached
    for head in heads:
        pending[head] += 1
    stack: list[int] = []
    out: list[str] = []
    next_token = 1
    while True:
        if len(stack) >= 2:
            s0, s1 = stack[-1], stack[-2]
            if heads[s1 - 1] == s0:
                out.append(LEFT_ARC + labels[s1 - 1])
                del stack[-2]
                pending[s0] -= 1
                continue
            if heads[s0 - 1] == s1 and pending[s0] == 0:
                out.append(RIGHT_ARC + labels[s0 - 1])
                stack.pop()
                pending[s1] -= 1
                continue
        if next_token > n:
            break
        out.extend(pieces[next_token - 1])
        stack.append(next_token)
        next_token += 1
    if len(stack) > 1:
        return None
    if root == "keep" and stack:
        out.append(RIGHT_ARC + labels[stack[0] - 1])
    return out


def from_transitions(sequence: Sequence[str], root: str = "drop", separator: str = "@@"
                     ) -> tuple[list[str], list[int], list[int], list[str]]:
    """Exact inverse of `to_transitions`: (sub-words, subword_token, heads, labels).

    A sub-word ending in `separator` continues its token. Raises ValueError on an invalid sequence.
    """
    if root not in ROOT_POLICIES:
        raise ValueError(f"root policy must be one of {ROOT_POLICIES}, got {root!r}")
    subwords: list[str] = []
    subword_token: list[int] = []
    heads: list[int] = []
    labels: list[str] = []
    stack: list[int] = []
    open_token = False  # the last sub-word continues its token
    rooted = False
    for position, item in enumerate(sequence):
        if rooted:
            raise ValueError(f"item {position} ({item!r}) after the root arc")
        is_left = item.startswith(LEFT_ARC)
        if is_left or item.startswith(RIGHT_ARC):
            label = item[len(LEFT_ARC):] if is_left else item[len(RIGHT_ARC):]
            if open_token:
                raise ValueError(f"item {position}: arc inside an unfinished token")
            if len(stack) < 2:
                if not is_left and root == "keep" and len(stack) == 1:
                    labels[stack[0]] = label
                    rooted = True
                    continue
                raise ValueError(f"item {position}: {item} needs two items on the stack")
            dependent = stack.pop(-2) if is_left else stack.pop()
            heads[dependent] = stack[-1] + 1  # LEFT: s1 <- s0; RIGHT: s1 -> s0; either way the new top
            labels[dependent] = label
            continue
        if not open_token:
            stack.append(len(heads))
            heads.append(0)
            labels.append(DROPPED_ROOT_LABEL)
        subwords.append(item)
        subword_token.append(len(heads) - 1)
        open_token = item.endswith(separator)
    if open_token:
        raise ValueError("sequence ends inside an unfinished token")
    if len(stack) > 1:
        raise ValueError(f"sequence ends with {len(stack)} items on the stack")
    if root == "keep" and stack and not rooted:
        raise ValueError("root policy keep: the final root arc is missing")
    return subwords, subword_token, heads, labels
