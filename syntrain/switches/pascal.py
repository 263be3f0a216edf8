"""Pascal (Bugliarello & Okazaki, 2020): parent-scaled self-attention in the encoder.

In the first `pascal_heads[i]` heads of encoder layer i, the scaled dot-product score s_tj of query t and key j
is multiplied, before the softmax, by the Gaussian density N(j | p_t, sigma^2), where p_t is the middle position
of t's dependency parent (`src_parent_mid`). No extra parameters.

Batches: the prior is built per sentence from that sentence's own parent vector, over absolute key positions
0..S-1 (right padding keeps positions aligned), so a sentence gets the same output alone or in a padded batch.
Rows without a parent (the source EOS, pad queries: parent < 0) and rows dropped by parent ignoring get a
prior of 1 (plain attention). Pad keys are masked after the scaling, as usual.

Kernels (syntrain.attention): "math" computes these heads' scores explicitly; "flex" runs the whole layer on
FlexAttention with the prior computed inside the kernel by `pascal_score_mod` (no (B, T, S) prior tensor).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from synprep.features import gaussian
from synprep.tables import option

from ..columns import BatchColumn
from .base import AttentionHook, Inputs, ModelOptions, Switch
from .registry import register

NO_PARENT = -1.0  # the parent of EOS and pad (no scaling)
# `src_parent_mid` as is (no BOS on the source: no shift); EOS and pad rows: NO_PARENT
PARENT = BatchColumn("src_parent_mid", "src_parent_mid", "src", "parents", pad=NO_PARENT, dtype=np.float32)


def prior_rows(parent: torch.Tensor, ignore_prob: float = 0.0, training: bool = False) -> torch.Tensor:
    """(B, T) bool: rows that get the Gaussian prior (a parent, and not dropped by parent ignoring).

    Parent ignoring: in training, each row is set to 1 with probability `ignore_prob` (one draw per sentence
    and query position, shared by the Pascal heads of the layer).
    """
    active = parent >= 0
    if training and ignore_prob > 0:
        active = active & (torch.rand(parent.shape, device=parent.device) >= ignore_prob)
    return active


def parent_prior(parent: torch.Tensor, n_keys: int, sigma2: float = 1.0, ignore_prob: float = 0.0,
                 training: bool = False) -> torch.Tensor:
    """(B, T) parent positions (< 0: none) -> (B, T, n_keys) prior N(j | p_t, sigma2); inactive rows = 1."""
    active = prior_rows(parent, ignore_prob, training)
    keys = torch.arange(n_keys, device=parent.device, dtype=torch.float32)
    prior = gaussian(keys[None, None, :] - parent.float()[:, :, None], sigma2)
    return torch.where(active[:, :, None], prior, torch.ones_like(prior))


def pascal_score_mod(parent: torch.Tensor, active: torch.Tensor, key_valid: torch.Tensor | None, n_pascal: int,
                     sigma2: float) -> Callable:
    """FlexAttention `score_mod`: heads h < n_pascal scale score(b, h, t, j) by the prior of `parent_prior`;
    pad keys (key_valid[b, j] False) get -inf."""
    center = parent.float()

    def score_mod(score: torch.Tensor, b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor,
                  kv_idx: torch.Tensor) -> torch.Tensor:
        prior = torch.where(active[b, q_idx], gaussian(kv_idx - center[b, q_idx], sigma2), 1.0)
        score = torch.where(h < n_pascal, score * prior, score)
        if key_valid is not None:
            score = torch.where(key_valid[b, kv_idx], score, -float("inf"))
        return score

    return score_mod


class PascalHeads(AttentionHook):
    """The front `heads` heads of a self-attention, scaled by the parent prior (input "src_parent_mid" (B, T), or a
    ready "prior" (B, T, S))."""

    flex = True
    name = "Pascal heads"

    def __init__(self, heads: int, sigma2: float = 1.0, parent_ignore: float = 0.0) -> None:
        self.front, self.sigma2, self.parent_ignore = heads, sigma2, parent_ignore

    def _parent(self, inputs: Inputs) -> torch.Tensor:
        parent = inputs.get("src_parent_mid")
        if parent is None:
            raise ValueError("a layer with Pascal heads needs the source parent positions")
        return parent

    def scores(self, attn: nn.Module, x: torch.Tensor, n_keys: int, mask: torch.Tensor | None, inputs: Inputs
               ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        prior = inputs.get("prior")
        if prior is None:
            prior = parent_prior(self._parent(inputs), n_keys, self.sigma2, self.parent_ignore, attn.training)
        return prior[:, None], None

    def score_mod(self, attn: nn.Module, inputs: Inputs, key_valid: torch.Tensor | None) -> Callable:
        parent = self._parent(inputs)
        active = prior_rows(parent, self.parent_ignore, attn.training)
        return pascal_score_mod(parent, active, key_valid, self.front, self.sigma2)


@dataclass
class PascalConfig:
    """[model] options of the Pascal heads."""

    pascal_heads: list[int] = option(default_factory=list, ge=0, flag=True,
                                     help="Pascal heads per encoder layer (missing layers: 0)")
    pascal_sigma2: float = option(1.0, gt=0, help="variance of the Gaussian parent prior")
    parent_ignore: float = option(0.0, ge=0, le=1, flag=True,
                                  help="probability q of setting a prior row to 1 (training only)")


class Pascal(Switch[PascalConfig], name="pascal", config=PascalConfig, switched_by=("pascal_heads",)):
    """Pascal heads in the encoder self-attention."""

    example = {"pascal_heads": [2], "parent_ignore": 0.3}

    @classmethod
    def check(cls, cfg: ModelOptions) -> None:
        cls.check_layer_list(cfg, "pascal_heads", "encoder")

    def describe(self) -> str:
        options = self.options
        return f"pascal heads {options.pascal_heads} (sigma2 {options.pascal_sigma2}, q {options.parent_ignore})"

    columns = (PARENT,)

    def batch_columns(self, training: bool) -> dict[str, str]:
        return {"src_parent_mid": "Pascal attention"}

    def attention_hooks(self, stack: str, layer: int, kind: str) -> list[AttentionHook]:
        heads = self.options.pascal_heads
        if stack != "encoder" or layer >= len(heads) or not heads[layer]:
            return []
        return [PascalHeads(heads[layer], self.options.pascal_sigma2, self.options.parent_ignore)]


register(Pascal)
