"""A batch: the padded tensors of some rows of a split (`Batch`, made by `syntrain.dataset.Collator`), and how
a split's rows are grouped into token-count batches of similar lengths (`Bucketing`, cutting where
`batch_bounds` says)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from .shapes import padded_length
from .vocab import PAD_ID


@dataclass
class Batch:
    """Padded tensors of one batch; `index` = row numbers in the dataset; `inputs`: the model inputs of the
    switches by batch column name; `supervision`: those of them that only the losses read (not
    decoding)."""

    src: torch.Tensor  # (B, S) ids, subwords + EOS
    tgt_in: torch.Tensor  # (B, T) BOS + subwords
    tgt_out: torch.Tensor  # (B, T) subwords + EOS
    index: np.ndarray | None
    inputs: dict[str, torch.Tensor] = field(default_factory=dict)
    target_tokens: int = -1  # non-pad tgt_out entries, counted at collation (-1: count when asked)
    supervision: tuple[str, ...] = ()

    def _map(self, apply: Callable[[torch.Tensor], torch.Tensor]) -> Batch:
        return Batch(apply(self.src), apply(self.tgt_in), apply(self.tgt_out), self.index,
                     {name: apply(value) for name, value in self.inputs.items()}, self.tokens(), self.supervision)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        """The same batch on `device` (`non_blocking` copies from pinned memory overlap the running step)."""
        return self._map(lambda x: x.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> Batch:
        """The same batch in page-locked memory (for non-blocking copies to a GPU)."""
        return self._map(lambda x: x.pin_memory())

    def decoding_inputs(self) -> dict[str, torch.Tensor]:
        """The model inputs decoding reads: every input but the supervision (which only the losses read; a
        target-side input that decoding reads is among them)."""
        return {name: value for name, value in self.inputs.items() if name not in self.supervision}

    def tokens(self) -> int:
        """Target tokens (the loss normalizer); known without touching the device once collated."""
        if self.target_tokens < 0:
            self.target_tokens = int((self.tgt_out != PAD_ID).sum())
        return self.target_tokens


def batch_bounds(lengths: np.ndarray, max_tokens: int) -> list[int]:
    """Where to cut rows sorted by length (non-decreasing `lengths`) so that each batch holds as many rows as
    fit in rows x longest <= max_tokens (at least one), filled in order: the greedy row-by-row cut, computed
    per run of equal lengths (a few hundred steps, not one per row)."""
    change = np.flatnonzero(np.diff(lengths)) + 1
    starts = np.concatenate([[0], change]).tolist()
    ends = np.concatenate([change, [len(lengths)]]).tolist()
    bounds: list[int] = []
    open_rows = 0  # rows in the batch being filled
    for start, end, length in zip(starts, ends, lengths[starts].tolist(), strict=True):
        cap = max(1, max_tokens // length)  # rows of this length a batch can hold
        if open_rows >= cap:
            bounds.append(start)
            open_rows = 0
        taken = min(end - start, cap - open_rows)
        open_rows += taken
        rest = end - start - taken
        if rest:  # the open batch is full: batches of `cap` rows, the last one stays open
            bounds.extend(range(start + taken, end, cap))
            open_rows = rest - (len(range(start + taken, end, cap)) - 1) * cap
    return bounds


class Bucketing:
    """Where a split's rows go: token-count batches of rows of similar lengths (`batches`) and the padded shape
    of a batch (`shape`). `src_len`, `tgt_len`: each row's positions (sub-words + EOS, + BOS/EOS). `ladder`:
    batch lengths padded to the shape ladder of `syntrain.shapes` (capped at `ladder_limit` when > 0), the
    padding counted against `max_tokens`."""

    def __init__(self, src_len: np.ndarray, tgt_len: np.ndarray) -> None:
        self.src_len, self.tgt_len = src_len, tgt_len
        self.length = np.maximum(src_len, tgt_len)  # the longer side of each row
        self.ladder, self.ladder_limit = False, 0

    def longest(self, rows: np.ndarray) -> int:
        """Positions of the longest of `rows` (the longer side): the least a batch must hold."""
        return int(self.length[rows].max()) if len(rows) else 0

    def batches(self, rows: np.ndarray, max_tokens: int, seed: int = 0, epoch: int = 0, shuffle: bool = True
                ) -> list[np.ndarray]:
        """`rows` grouped so that rows x longest side <= max_tokens, similar lengths together.

        Shuffle, then stable-sort by length (bucketing with random order inside a length), cut into batches,
        shuffle the batches; the order depends only on (seed, epoch), so a resumed run sees the same batches.
        """
        rng = np.random.default_rng([seed, epoch])
        rows = np.asarray(rows)
        rows = rng.permutation(rows) if shuffle else rows.copy()
        rows = rows[np.argsort(self.length[rows], kind="stable")]
        lengths = self.length[rows]
        if self.ladder and len(rows):  # padding counts against max_tokens (rungs keep the order)
            rungs, index = np.unique(lengths, return_inverse=True)
            lengths = np.array([self.padded(int(n)) for n in rungs])[index]
        batches = np.split(rows, batch_bounds(lengths, max_tokens)) if len(rows) else []
        if shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return batches

    def padded(self, longest: int) -> int:
        """The padded length of a batch side whose longest row has `longest` positions (the ladder's rung when
        `ladder` is on, else `longest`)."""
        return padded_length(longest, self.ladder_limit) if self.ladder else longest

    def shape(self, rows: Sequence[int]) -> tuple[int, int, int]:
        """(rows, source length, target length) of the batch of `rows`."""
        return len(rows), self.padded(int(self.src_len[rows].max())), self.padded(int(self.tgt_len[rows].max()))
