"""The syntax features, as pure functions over a tree's arrays (CONTRACT.md "Per-sentence features").

Shared by `synprep align`, `synprep convert`, `synprep validate` and the trainer: never reimplement one.
`heads` are 1-based (0 = root); `subword_token` maps each sub-word to its 0-based token; positions are
0-based sub-word positions without BOS/EOS.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .options import BPE_SEPARATOR, NON_PROJECTIVE_POLICIES, ROOT_POLICIES  # noqa: F401 (re-exported)
from .trees import forest_arrays

LEFT_ARC = "LEFT-ARC:"
RIGHT_ARC = "RIGHT-ARC:"
DROPPED_ROOT_LABEL = "root"  # label given to the root by from_transitions under root policy `drop`
# How a transition sequence's sub-words show where a token ends (CONTRACT.md "Arc-standard transitions"): the
# sub-word scheme's (marker, marker kind) (`synprep.subwords.load.marker_of`). `end`: a piece ending in the marker
# continues its token (subword-nmt '@@', the default); `start`: a piece beginning with it starts a token
# (SentencePiece '▁', 'Ġ'); `continue`: a piece beginning with it continues the open token (WordPiece '##').
# Kind `none` shows no boundary.
BOUNDARY_KINDS = ("end", "start", "continue")


def check_boundary_kind(marker: str, kind: str) -> None:
    """ValueError unless pieces marked so show token boundaries (a transition sequence can be read back)."""
    if kind not in BOUNDARY_KINDS or not marker:
        raise ValueError(f"marker kind {kind!r}{f' ({marker!r})' if marker else ''}: token boundaries cannot be read "
                         f"from the pieces (transitions need a marker of kind {', '.join(BOUNDARY_KINDS)})")


def joins_token(piece: str, marker: str = BPE_SEPARATOR, kind: str = "end") -> bool:
    """The first of the two classes of sub-words (`TransitionState.allowed`): `end`: the piece ends in the marker
    (its token goes on after it); `start`: it lacks the marker, `continue`: it has it (it continues the token
    before it). Every other piece ends (`end`) or starts (`start`, `continue`) a token."""
    if kind == "end":
        return piece.endswith(marker)
    return piece.startswith(marker) == (kind == "continue")


def token_marked(pieces: Sequence[str], marker: str = BPE_SEPARATOR, kind: str = "end") -> bool:
    """Whether one token's pieces show its bounds under the rule (marker, kind), so that `from_transitions` reads
    the token back: only the last piece ends without the marker (`end`), only the first piece starts with it
    (`start`), every piece but the first starts with it (`continue`)."""
    if not pieces:
        return False
    return all(joins_token(piece, marker, kind) == (i < len(pieces) - 1 if kind == "end" else i > 0)
               for i, piece in enumerate(pieces))


def _subword_layout(heads: Sequence[int] | np.ndarray, sizes: Sequence[int] | np.ndarray,
                    subword_owner: Sequence[int] | np.ndarray) -> tuple[np.ndarray, ...]:
    """(parent token, tree of each token, owner token of each sub-word, sub-words per token, first global
    sub-word of each tree, position of each token's first sub-word within its tree) of several trees (arguments
    as `forest_parent_positions`)."""
    parent, offset, tree = forest_arrays(heads, sizes)
    owner = np.asarray(subword_owner, dtype=np.int64)
    count = np.bincount(owner, minlength=len(parent))
    ends = np.cumsum(count)
    starts = np.concatenate(([0], ends))[offset]
    return parent, tree, owner, count, starts, ends - count - starts[tree]


def forest_parent_positions(heads: Sequence[int] | np.ndarray, sizes: Sequence[int] | np.ndarray,
                            subword_owner: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(parent_mid, parent_first) of the sub-words of several trees at once, concatenated.

    `heads`: the trees' 1-based heads, concatenated; `sizes`: tokens per tree; `subword_owner`: the global
    0-based token (index into the concatenated tokens) of every sub-word, the sub-words of each tree together
    and in tree order. Positions are within each tree's sub-words (0-based)."""
    parent, tree, owner, count, starts, first = _subword_layout(heads, sizes, subword_owner)
    parent_of_subword = parent[owner]
    first_of_parent = first[parent_of_subword]
    middle = first_of_parent + (count[parent_of_subword] - 1) / 2.0
    return middle.astype(np.float32), first_of_parent.astype(np.int16)


def forest_parent_mid(heads: Sequence[int] | np.ndarray, sizes: Sequence[int] | np.ndarray,
                      subword_owner: Sequence[int] | np.ndarray) -> np.ndarray:
    """`parent_mid` of several trees at once (arguments as `forest_parent_positions`), float32."""
    return forest_parent_positions(heads, sizes, subword_owner)[0]


def forest_parent_first(heads: Sequence[int] | np.ndarray, sizes: Sequence[int] | np.ndarray,
                        subword_owner: Sequence[int] | np.ndarray) -> np.ndarray:
    """`parent_first` of several trees at once (arguments as `forest_parent_positions`), int16."""
    return forest_parent_positions(heads, sizes, subword_owner)[1]


def parent_positions(heads: Sequence[int], subword_token: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(parent_mid, parent_first) in one pass; see the two functions below."""
    return forest_parent_positions(heads, [len(heads)], subword_token)


def parent_mid(heads: Sequence[int], subword_token: Sequence[int]) -> np.ndarray:
    """Pascal: per sub-word, the mean position of its head token's sub-words (root: its own)."""
    return parent_positions(heads, subword_token)[0]


def parent_first(heads: Sequence[int], subword_token: Sequence[int]) -> np.ndarray:
    """LISA/SISA: per sub-word, the position of its head token's first sub-word (root: its own)."""
    return parent_positions(heads, subword_token)[1]


DBSA_RULES = ("next_piece", "parent_first")  # sub-word heads of the DBSA parse heads (syntrain's `dbsa_rule`)


def forest_dbsa_heads(heads: Sequence[int] | np.ndarray, sizes: Sequence[int] | np.ndarray,
                      subword_owner: Sequence[int] | np.ndarray) -> np.ndarray:
    """`dbsa_head` of several trees at once (arguments as `forest_parent_positions`), int16.

    The sub-word heads DBSA trains on (Deguchi et al., 2019, as their released preprocessing builds them): a
    piece that is not its word's last points to the next piece of its word; a word's last piece points to
    the first piece of the head word; the root word's last piece points to itself."""
    parent, tree, owner, count, starts, first = _subword_layout(heads, sizes, subword_owner)
    position = np.arange(len(owner)) - starts[tree[owner]] if len(owner) else np.zeros(0, np.int64)
    last = position == first[owner] + count[owner] - 1
    is_root = parent[owner] == owner
    head = np.where(last, np.where(is_root, position, first[parent[owner]]), position + 1)
    return head.astype(np.int16)


def dbsa_heads(heads: Sequence[int], subword_token: Sequence[int]) -> np.ndarray:
    """DBSA: per sub-word, the position of its head sub-word (`forest_dbsa_heads`, one sentence)."""
    return forest_dbsa_heads(heads, [len(heads)], subword_token)


def forest_depths(heads: Sequence[int] | np.ndarray, sizes: Sequence[int] | np.ndarray) -> np.ndarray:
    """Per token of several trees (arguments as `forest_arrays`): the number of arcs from it to its tree's root
    (the root: 0), int64. Every token walks up at once, one arc per step (at most the longest path)."""
    parent = forest_arrays(heads, sizes)[0]
    depth = np.zeros(len(parent), np.int64)
    node = np.arange(len(parent))
    for _ in range(len(parent)):  # a tree has no cycle: done after its height; the bound guards bad heads
        up = parent[node] != node
        if not up.any():
            break
        depth += up
        node = np.where(up, parent[node], node)
    return depth


def forest_subword_depths(heads: Sequence[int] | np.ndarray, sizes: Sequence[int] | np.ndarray,
                          subword_owner: Sequence[int] | np.ndarray) -> np.ndarray:
    """`depth` of the sub-words of several trees at once (arguments as `forest_parent_positions`), int16: per
    sub-word, the depth of its word (`forest_depths`; the root word's pieces: 0)."""
    return forest_depths(heads, sizes)[np.asarray(subword_owner, dtype=np.int64)].astype(np.int16)


def forest_ancestor_bits(heads: Sequence[int] | np.ndarray, sizes: Sequence[int] | np.ndarray
                         ) -> np.ndarray:
    """Per token of several trees, the bit set of its ancestors-or-self, by pointer jumping:
    uint64 words (tokens x ceil(longest tree / 64)), bit k of word w = token 64 w + k of the same tree."""
    parent, offset, tree = forest_arrays(heads, sizes)
    n = len(parent)
    local = np.arange(n) - offset[tree]
    words = max(1, -(-int(np.max(sizes, initial=0)) // 64))
    bits = np.zeros((n, words), dtype=np.uint64)
    bits[np.arange(n), local >> 6] = np.left_shift(np.uint64(1), (local & 63).astype(np.uint64))
    jump = parent
    for _ in range(n.bit_length() + 1):  # depth < n: enough doublings for any tree (a cycle cannot hang)
        bits |= bits[jump]
        further = jump[jump]
        if np.array_equal(further, jump):  # every jump has reached its root
            break
        jump = further
    return bits


def forest_tree_distances(heads: Sequence[int] | np.ndarray, sizes: Sequence[int] | np.ndarray) -> np.ndarray:
    """`tree_distances` of several trees at once: each tree's matrix row-major flattened, concatenated.

    The path between two tokens is the symmetric difference of their ancestors-or-self sets, so the
    distance is a popcount of the XOR of two bit sets. The XORs are made a block of rows at a time
    (`_DISTANCE_BLOCK_BYTES`): a tree of N tokens holds N x N x N/64 words of them, 2 GB at N = 2,500."""
    size = np.asarray(sizes, dtype=np.int64)
    bits = forest_ancestor_bits(heads, size)
    n = len(bits)
    if not n:
        return np.zeros(0, dtype=np.uint8)
    offset = np.cumsum(size) - size
    row_size = np.repeat(size, size)  # each token's row has as many cells as its tree has tokens
    row_end = np.cumsum(row_size)
    row_first = np.repeat(offset, size)  # the first token of each token's tree
    out = np.empty(int(row_end[-1]), dtype=np.uint8)
    rows_per_block = max(1, _DISTANCE_BLOCK_BYTES // (8 * bits.shape[1] * int(size.max())))
    for first in range(0, n, rows_per_block):
        last = min(n, first + rows_per_block)
        start = int(row_end[first - 1]) if first else 0
        block_size = row_size[first:last]
        block_end = row_end[first:last] - start
        # the cells of token i's row hold j = first token of its tree, ..., its last
        right = np.arange(int(block_end[-1])) - np.repeat(block_end - block_size - row_first[first:last], block_size)
        pair = np.repeat(bits[first:last], block_size, axis=0)
        np.bitwise_xor(pair, bits[right], out=pair)
        out[start:start + len(pair)] = _popcount_capped(pair)
    return out


_DISTANCE_BLOCK_BYTES = 1 << 25  # at most 32 MiB of bit-set XORs at a time


def _popcount_capped(pair: np.ndarray) -> np.ndarray:
    """Set bits per row of uint64 words, capped at 255 (uint8)."""
    counts = np.bitwise_count(pair)  # uint8 per word
    if counts.shape[1] == 1:  # trees of at most 64 tokens: distances < 64
        return counts.reshape(-1)
    dist = counts[:, 0].astype(np.uint16)
    for word in range(1, counts.shape[1]):
        dist += counts[:, word]
    return np.minimum(dist, 255).astype(np.uint8)


def tree_distances(heads: Sequence[int]) -> np.ndarray:
    """Number of arcs on the tree path between every two tokens (Chen et al.), capped at 255, uint8."""
    n = len(heads)
    return forest_tree_distances(heads, [n]).reshape(n, n)


def per_subword(token_values: Sequence | np.ndarray, subword_token: Sequence[int] | np.ndarray) -> np.ndarray:
    """A value per token (e.g. a label id) -> one per sub-word: every piece takes its token's value."""
    return np.asarray(token_values)[np.asarray(subword_token, dtype=np.int64)]


def subword_distances(distances: Sequence[int] | np.ndarray, subword_token: Sequence[int] | np.ndarray
                      ) -> np.ndarray:
    """Token x token syntax distances (flattened or square) -> sub-word x sub-word (uint8).

    A sub-word takes its token's row and column (as `per_subword`), so the pieces of one token are at
    distance 0 from each other and at their token's distance from every other piece."""
    matrix = np.asarray(distances, dtype=np.uint8)
    n = int(round(np.sqrt(matrix.size)))
    if n * n != matrix.size:
        raise ValueError(f"distances of size {matrix.size} are not a square matrix")
    rows = per_subword(matrix.reshape(n, n), subword_token)
    return per_subword(rows.T, subword_token).T


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
    (a non-projective tree). `pieces[t]` are the sub-words of token t. The sequence is the same under every
    boundary rule; it is read back (`from_transitions`) under the rule of the pieces when every token's pieces show
    its bounds (`token_marked`, which featurize checks)."""
    if root not in ROOT_POLICIES:
        raise ValueError(f"root policy must be one of {ROOT_POLICIES}, got {root!r}")
    n = len(heads)
    pending = [0] * (n + 1)  # dependents of each token (1-based) not yet attached
    for head in heads:
        pending[head] += 1
    stack: list[int] = []  # below the top item, which is held in `top`
    out: list[str] = []
    for top in range(1, n + 1):  # SHIFT = emit the token's sub-words, then reduce while an arc applies
        out += pieces[top - 1]
        while stack:
            below = stack[-1]
            if heads[below - 1] == top:  # LEFT-ARC: s1 <- s0
                out.append(LEFT_ARC + labels[below - 1])
                stack.pop()
                pending[top] -= 1
            elif heads[top - 1] == below and not pending[top]:  # RIGHT-ARC: s1 -> s0
                out.append(RIGHT_ARC + labels[top - 1])
                top = stack.pop()
                pending[top] -= 1
            else:
                break
        stack.append(top)
    if len(stack) > 1:
        return None
    if root == "keep" and stack:
        out.append(RIGHT_ARC + labels[stack[0] - 1])
    return out


class TransitionState:
    """The arc-standard transition system read one item at a time: THE implementation, shared by
    `from_transitions`, the trainer's graph (`transition_edges`) and constrained decoding (`allowed`).

    Items: a sub-word (SHIFT; which token it belongs to is read by the boundary rule (`marker`, `kind`): `end`: the
    piece after one ending in the marker continues its token; `start`: a piece beginning with the marker starts a
    token, one without it continues the token of the sub-word just before; `continue`: a piece beginning with the
    marker continues the token of the sub-word just before, one without it starts a token), `LEFT-ARC:<l>` (s1
    becomes a dependent of s0), `RIGHT-ARC:<l>` (s0 becomes a dependent of s1); under root policy `keep` a final
    `RIGHT-ARC:<root label>` with one word on the stack. `push` returns the edges of the generated graph the
    item adds (Choshen & Abend, section 3): an arc x = `*-ARC:l` with head word H and dependent word D adds
    H -> D, x -> D and H -> x, all labelled l, where an edge from/to a word is from/to each of its sub-words
    (the root arc adds R -> x). Edges are (parent, child, label) with 0-based item positions; `graph` False:
    no edges are built (`push` returns []), for the inverse alone. What completes the sequence from a state:
    `finish` checks the end, `items_to_finish` counts the items still needed, `allowed` constrains decoding.
    """

    def __init__(self, root: str = "drop", marker: str = BPE_SEPARATOR, kind: str = "end", graph: bool = True
                 ) -> None:
        if root not in ROOT_POLICIES:
            raise ValueError(f"root policy must be one of {ROOT_POLICIES}, got {root!r}")
        check_boundary_kind(marker, kind)
        self.root, self.marker, self.kind, self.graph = root, marker, kind, graph
        self.subwords: list[str] = []
        self.subword_token: list[int] = []
        self.heads: list[int] = []  # per token (1-based heads, 0 = none yet / root)
        self.labels: list[str] = []
        self.pieces: list[list[int]] = []  # per token: the item positions of its sub-words
        self.stack: list[int] = []  # token indices, top last
        self.open_token = False  # `end`: the last sub-word ends in the marker, so its token goes on
        self.after_piece = False  # the last item is a sub-word (`start`, `continue`: its token may go on)
        self.rooted = False
        self.length = 0  # items read

    def copy(self) -> TransitionState:
        """An independent copy (beam search: hypotheses that share a prefix)."""
        other = TransitionState.__new__(TransitionState)
        other.__dict__.update(self.__dict__)
        for name in ("subwords", "subword_token", "heads", "labels", "stack"):
            setattr(other, name, list(getattr(self, name)))
        other.pieces = [list(p) for p in self.pieces]
        return other

    def push(self, item: str) -> list[tuple[int, int, str]]:
        """Read one item; the graph edges it adds. ValueError (naming the item's position) if invalid."""
        position = self.length
        if self.rooted:
            raise ValueError(f"item {position} ({item!r}) after the root arc")
        is_left = item.startswith(LEFT_ARC)
        if is_left or item.startswith(RIGHT_ARC):
            label = item[len(LEFT_ARC):] if is_left else item[len(RIGHT_ARC):]
            if self.open_token:
                raise ValueError(f"item {position}: arc inside an unfinished token")
            self.after_piece = False
            if len(self.stack) < 2:
                if not is_left and self.root == "keep" and len(self.stack) == 1:
                    self.labels[self.stack[0]] = label
                    self.rooted = True
                    self.length += 1
                    return [(p, position, label) for p in self.pieces[self.stack[0]]] if self.graph else []
                raise ValueError(f"item {position}: {item} needs two items on the stack")
            dependent = self.stack.pop(-2) if is_left else self.stack.pop()
            head = self.stack[-1]  # LEFT: s1 <- s0; RIGHT: s1 -> s0; either way the new top
            self.heads[dependent] = head + 1
            self.labels[dependent] = label
            self.length += 1
            if not self.graph:
                return []
            heads, dependents = self.pieces[head], self.pieces[dependent]
            return ([(h, d, label) for h in heads for d in dependents] + [(position, d, label) for d in dependents]
                    + [(h, position, label) for h in heads])
        if self.kind == "end":
            new_token = not self.open_token
        else:
            new_token = not joins_token(item, self.marker, self.kind)
            if not (new_token or self.after_piece):
                raise ValueError(f"item {position} ({item!r}): a piece that continues a token after "
                                 f"{'an arc' if position else 'nothing'}")
        if new_token:
            self.stack.append(len(self.heads))
            self.heads.append(0)
            self.labels.append(DROPPED_ROOT_LABEL)
            self.pieces.append([])
        self.subwords.append(item)
        self.subword_token.append(len(self.heads) - 1)
        self.pieces[-1].append(position)
        self.open_token = self.kind == "end" and item.endswith(self.marker)
        self.after_piece = True
        self.length += 1
        return []

    def finish(self) -> None:
        """ValueError unless the items read so far are a complete sequence."""
        if self.open_token:
            raise ValueError("sequence ends inside an unfinished token")
        if len(self.stack) > 1:
            raise ValueError(f"sequence ends with {len(self.stack)} items on the stack")
        if self.root == "keep" and self.stack and not self.rooted:
            raise ValueError("root policy keep: the final root arc is missing")

    def items_to_finish(self) -> int:
        """The fewest items that complete the sequence from here (sub-words, arcs, the root arc; the end not
        counted): an unfinished token (`end`: the last sub-word ends in the marker) ends with its next sub-word, an
        empty sequence needs one (a tree has a word), then one arc per word but the last, the root arc (`keep`)."""
        words = len(self.stack)
        keep_root = int(self.root == "keep" and not self.rooted)
        if not words:
            return 1 + keep_root
        return int(self.open_token) + words - 1 + keep_root

    def allowed(self, steps_left: int) -> tuple[bool, bool, bool, bool, bool]:
        """What may come next so that at most `steps_left` items, the end of the sequence included, complete a
        valid tree: (a sub-word of the first class of `joins_token`, any other sub-word, LEFT-ARC, RIGHT-ARC, end).
        The first class: `end`: a piece ending in the marker (its token needs one more piece), `start` / `continue`:
        a piece that continues the token of the sub-word just before (only right after a sub-word); the other:
        `end`: a piece that ends a token, `start` / `continue`: a piece that starts one. The end needs exactly one
        word on the stack (and the root arc under `keep`)."""
        if self.rooted:
            return False, False, False, False, True
        words = len(self.stack)
        keep_root = int(self.root == "keep")
        if self.open_token:  # finish the token: ends it -> words stay; continues -> one more sub-word after
            need_end = max(words - 1, 0) + keep_root + 1
            return need_end + 1 < steps_left, need_end < steps_left, False, False, False
        new_word = words + keep_root + 1  # a new word: then `words` arcs, the root arc, the end
        if self.kind == "end":  # a piece ending in the marker starts a word that needs one more piece
            first = new_word + 1 < steps_left
        else:  # a piece continuing the last word: then its arcs, the root arc, the end
            first = self.after_piece and max(words - 1, 0) + keep_root + 1 < steps_left
        arc = words >= 2 and (words - 2) + keep_root + 1 < steps_left
        root_arc = keep_root and words == 1 and 1 < steps_left  # the root arc, then the end
        end = words == 1 and not keep_root
        return first, new_word < steps_left, arc, arc or bool(root_arc), end


def transition_edges(sequence: Sequence[str], root: str = "drop", marker: str = BPE_SEPARATOR, kind: str = "end"
                     ) -> tuple[np.ndarray, list[str]]:
    """The generated graph of a (prefix of a) transition sequence: (int64 (E, 3) rows (parent, child, step),
    labels), positions = 0-based item positions, step = the position of the item that added the edge. The
    graph after reading the first n items = the rows with step < n (edges are only ever added). Sub-words are read
    by the boundary rule (`marker`, `kind`: `TransitionState`)."""
    state = TransitionState(root, marker, kind)
    rows: list[tuple[int, int, int]] = []
    labels: list[str] = []
    for step, item in enumerate(sequence):
        for parent, child, label in state.push(item):
            rows.append((parent, child, step))
            labels.append(label)
    return np.asarray(rows, dtype=np.int64).reshape(-1, 3), labels


def from_transitions(sequence: Sequence[str], root: str = "drop", marker: str = BPE_SEPARATOR, kind: str = "end"
                     ) -> tuple[list[str], list[int], list[int], list[str]]:
    """Exact inverse of `to_transitions`: (sub-words, subword_token, heads, labels).

    Sub-words are read by the boundary rule (`marker`, `kind`: `TransitionState`; by default subword-nmt's: a
    sub-word ending in '@@' continues its token). Raises ValueError on an invalid sequence.
    """
    state = TransitionState(root, marker, kind, graph=False)
    for item in sequence:
        state.push(item)
    state.finish()
    return state.subwords, state.subword_token, state.heads, state.labels


def gaussian(diff: Any, sigma2: float = 1.0) -> Any:
    """Pascal's prior: the density of N(0, sigma2) at `diff` (a key position minus the parent middle position).
    Plain arithmetic, so numpy arrays and torch tensors (autograd, compiled kernels) both work."""
    return math.e ** (diff * diff * (-0.5 / sigma2)) * (1.0 / math.sqrt(2 * math.pi * sigma2))


def parent_prior(parent_mid: Any, keys: Any, sigma2: float = 1.0) -> Any:
    """Pascal's parent prior: prior[..., t, j] = N(keys[j] | parent_mid[..., t], sigma2), from the parent middle
    positions (..., T) at the key positions (S,) (e.g. 0..S-1); numpy arrays or torch tensors (`gaussian`)."""
    return gaussian(keys[None, :] - parent_mid[..., None], sigma2)
