"""A batch: the padded tensors of some rows of a split (`Batch`, made by `ParallelData.collate`), and where a
length-sorted split is cut into token-count batches (`batch_bounds`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

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
