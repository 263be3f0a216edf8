"""Pascal (Bugliarello & Okazaki, 2020): parent-scaled self-attention in the encoder.

In the first `pascal_heads[i]` heads of encoder layer i, the scaled dot-product score s_tj of query t and key j
is multiplied, before the softmax, by the Gaussian density N(j | p_t, sigma^2), where p_t is the middle position
of t's dependency parent (`src_parent_mid`). No extra parameters.

Batches: the prior is built per sentence from that sentence's own parent vector, over absolute key positions
0..S-1 (right padding keeps positions aligned), so a sentence gets the same output alone or in a padded batch.
Rows without a parent (the source EOS, pad queries: parent < 0) and rows dropped by parent ignoring get a
prior of 1 (plain attention). Pad keys are masked after the scaling, as usual.

The prior is a "scale" operation on these heads (syntrain.transformer_layers): "math" computes their scores explicitly;
"flex" runs the whole layer on FlexAttention with the prior computed inside the kernel (`PascalHeads.elementwise`:
no (B, T, S) prior tensor).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from synprep.features import gaussian, parent_prior

from ..columns import BatchColumn
from ..config import option
from .base import AttentionHook, Heads, HeadView, Inputs, ModelOptions, Switch
from .registry import register

NO_PARENT = -1.0  # the parent of EOS and pad (no scaling)
# `src_parent_mid`, positions moved by the source prefix (none without one); EOS, prefix and pad rows: NO_PARENT
PARENT = BatchColumn("src_parent_mid", "src_parent_mid", "src", "parents", pad=NO_PARENT, dtype=np.float32,
                     positional=True)


def prior_rows(parent: torch.Tensor, ignore_prob: float = 0.0, training: bool = False) -> torch.Tensor:
    """(B, T) bool: rows that get the Gaussian prior (a parent, and not dropped by parent ignoring).

    Parent ignoring: in training, each row is set to 1 with probability `ignore_prob` (one draw per sentence
    and query position, shared by the Pascal heads of the layer).
    """
    active = parent >= 0
    if training and ignore_prob > 0:
        active = active & (torch.rand(parent.shape, device=parent.device) >= ignore_prob)
    return active


def pascal_scale(parent: torch.Tensor, n_keys: int, sigma2: float = 1.0, ignore_prob: float = 0.0,
                 training: bool = False) -> torch.Tensor:
    """(B, T) parent positions (< 0: none) -> (B, T, n_keys) the Pascal heads' scale: the parent prior
    N(j | p_t, sigma2) (`synprep.features.parent_prior`) on the rows of `prior_rows`, 1 on the others."""
    active = prior_rows(parent, ignore_prob, training)
    prior = parent_prior(parent.float(), torch.arange(n_keys, device=parent.device, dtype=torch.float32), sigma2)
    return torch.where(active[:, :, None], prior, torch.ones_like(prior))


class PascalHeads(AttentionHook):
    """The front `heads` heads of a self-attention, their scores scaled by the parent prior (input
    "src_parent_mid" (B, T), or a ready "prior" (B, T, S)); on FlexAttention the prior is computed inside the
    kernel (`elementwise`: no (B, T, S) tensor)."""

    ops = ("scale",)
    name = "Pascal heads"

    def __init__(self, heads: int, sigma2: float = 1.0, parent_ignore: float = 0.0) -> None:
        self.heads, self.sigma2, self.parent_ignore = Heads.front(heads), sigma2, parent_ignore

    def _parent(self, inputs: Inputs) -> torch.Tensor:
        parent = inputs.get("src_parent_mid")
        if parent is None:
            raise ValueError("a layer with Pascal heads needs the source parent positions")
        return parent

    def operations(self, attn: nn.Module, view: HeadView) -> dict[str, torch.Tensor]:
        prior = view.inputs.get("prior")
        if prior is None:
            prior = pascal_scale(self._parent(view.inputs), view.k.shape[2], self.sigma2, self.parent_ignore,
                                 attn.training)
        return {"scale": prior[:, None]}

    def elementwise(self, attn: nn.Module, view: HeadView) -> dict[str, Callable]:
        if "prior" in view.inputs:
            return {}  # a ready prior: its tensor is indexed
        parent = self._parent(view.inputs)
        active, center, sigma2 = prior_rows(parent, self.parent_ignore, attn.training), parent.float(), self.sigma2

        def prior(b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
            return torch.where(active[b, q_idx], gaussian(kv_idx - center[b, q_idx], sigma2), 1.0)

        return {"scale": prior}


@dataclass
class PascalConfig:
    """[model] options of the Pascal heads."""

    pascal_heads: list[int] = option(default_factory=list, ge=0, flag=True,
                                     help="Pascal heads per encoder layer (missing layers: 0)")
    pascal_sigma2: float = option(1.0, gt=0, help="variance of the Gaussian parent prior")
    parent_ignore: float = option(0.0, ge=0, le=1, flag=True,
                                  help="probability q of setting a prior row to 1 (training only)")


class Pascal(Switch[PascalConfig], name="pascal", priority=10, config=PascalConfig, switched_by=("pascal_heads",)):
    """Pascal heads (Bugliarello & Okazaki 2020) in the encoder self-attention: a prior centred on each token's
    parent scales their scores; parent ignoring in training.

    `pascal_heads = [h1, h2, ...]` = Pascal heads per encoder layer (`[2]`: two heads of layer 1; `[]`: vanilla). In
    those heads the scaled dot-product scores are multiplied, before the softmax, by N(j | p_t, sigma^2)
    (`pascal_sigma2`, default 1), p_t = `src_parent_mid` of query t. **Parent ignoring** (`parent_ignore` = q): in
    training only, each query row of the prior is set to 1 with probability q (one draw per sentence and row, shared by
    the layer's Pascal heads). The `</s>` row and pad rows have prior 1 (no scaling); pad keys are masked after scaling.
    The prior is built per sentence over absolute key positions, so a sentence gets the same output alone or in a padded
    batch (tested; the reference implementation mixes up sentences when batch size > 1). No extra parameters.

    Recipe: `pipelines/train/multi30k-pascal.toml` (`pascal_heads = [2]`, `parent_ignore = 0.4`) and the paper's GPU
    setups ([Recipes](#recipes)). The Pascal heads' attention kernel (`math` or `flex`) is a training option:
    [syntrain.md](syntrain.md#model)."""

    example = {"pascal_heads": [2], "parent_ignore": 0.3}

    @classmethod
    def check(cls, cfg: ModelOptions) -> None:
        cls.check_layers(cfg, "pascal_heads", "encoder", per_layer_heads=True)

    def describe(self) -> str:
        options = self.options
        return f"pascal heads {options.pascal_heads} (sigma2 {options.pascal_sigma2}, q {options.parent_ignore})"

    columns = (PARENT,)

    def reads(self, training: bool) -> dict[str, str]:
        return {"src_parent_mid": "Pascal attention"}

    def attention_hooks(self, stack: str, layer: int, kind: str) -> list[AttentionHook]:
        heads = self.options.pascal_heads
        if stack != "encoder" or layer >= len(heads) or not heads[layer]:
            return []
        return [PascalHeads(heads[layer], self.options.pascal_sigma2, self.options.parent_ignore)]


register(Pascal)
