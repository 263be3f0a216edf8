"""Syntax-directed attention (Chen et al., 2017) in the decoder cross-attention.

Each of the `directed_heads[i]` heads of decoder layer i's cross-attention predicts an aligned source position
p_i = n * sigmoid(v^T tanh(W h_i)) (eq. 5; n = the last source sub-word position) and reads row M[p] of the
sub-word syntax distances (batch feature "distances"): scores are scaled by exp(-M[p][j]^2 / 2 sigma^2) with
sigma = n / 2 and masked outside the window M[round(p)][j] <= n (eqs. 10-11). Single context: these heads'
contexts replace the front heads'; double context (eq. 14): they are computed next to all the global heads
and added through their own output projection.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..config import option
from .base import AttentionHook, Heads, HeadView, ModelOptions, Switch
from .registry import register


def distance_rows(distances: torch.Tensor, position: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows M[p] of the (B, S, S) syntax distances at continuous positions p (B, H, T) -> (interpolated,
    nearest), each (B, H, T, S).

    Interpolated: linear between rows floor(p) and floor(p) + 1, so the Gaussian scaling built from it has a
    gradient with respect to p (and W, v). Nearest: row round(p), for the window (it always holds the
    sub-word at p itself at distance 0; an interpolated row can have every key beyond n)."""
    b, s, _ = distances.shape
    low = position.detach().floor().clamp(0, s - 1)
    frac = (position - low)[..., None]
    low = low.long()
    high = (low + 1).clamp(max=s - 1)
    table = distances.float()

    def rows(index: torch.Tensor) -> torch.Tensor:
        return torch.gather(table, 1, index.reshape(b, -1, 1).expand(-1, -1, s)).view(*index.shape, s)

    low_rows, high_rows = rows(low), rows(high)
    nearest = torch.where(frac >= 0.5, high_rows, low_rows)
    return low_rows + frac * (high_rows - low_rows), nearest


def syntax_directed_prior(rows: torch.Tensor, nearest: torch.Tensor, n: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Chen et al. eqs. 10-11: (scaling exp(-M[p][j]^2 / 2 sigma^2) with sigma = n / 2 on the interpolated
    rows, window M[round(p)][j] <= n)."""
    sigma2 = (n / 2) ** 2
    return torch.exp(rows * rows * (-0.5 / sigma2)), nearest <= n


class DirectedHeads(AttentionHook):
    """`count` syntax-directed heads of a cross-attention, the front ones (parameters align_hidden, align_out,
    directed_out). Single context: a "scale" and a "mask" (the window) on those heads; double context: no
    operation on the layer's heads, their own attention over the same heads' queries, keys and values added to
    the output (`extra`)."""

    name = "syntax-directed heads"

    def __init__(self, count: int, n: float, double_context: bool) -> None:
        self.count, self.n, self.double_context = count, n, double_context
        self.heads = Heads.front(count)
        self.ops = () if double_context else ("scale", "mask")

    def attach(self, attn: nn.Module) -> None:
        d_model = attn.n_heads * attn.head_dim
        attn.align_hidden = nn.Linear(d_model, d_model)  # eq. 5: p_i = S * sigmoid(v^T tanh(W h_i))
        attn.align_out = nn.Linear(d_model, self.count, bias=False)  # one v per syntax-directed head
        if self.double_context:  # eq. 14: L_cs c_s next to the global heads' output projection
            attn.directed_out = nn.Linear(self.count * attn.head_dim, d_model)

    def operations(self, attn: nn.Module, view: HeadView) -> dict[str, torch.Tensor]:
        """Scale and window (B, h, T, S): each head's aligned position p in [0, n - 1] (n = source sub-words
        without EOS) reads the interpolated row M[p]."""
        distances = view.inputs.get(DISTANCES)
        if distances is None or view.mask is None:
            raise ValueError("syntax-directed heads need the source syntax distances and the source mask")
        n_src = (view.mask.reshape(view.mask.shape[0], -1).sum(-1) - 1).clamp(min=1) - 1  # last sub-word position
        gate = torch.sigmoid(attn.align_out(torch.tanh(attn.align_hidden(view.x)))).transpose(1, 2)  # (B, h, T)
        rows, nearest = distance_rows(distances, n_src.to(gate.dtype)[:, None, None] * gate)
        scale, window = syntax_directed_prior(rows, nearest, self.n)
        return {"scale": scale, "mask": window}

    def extra(self, attn: nn.Module, view: HeadView) -> torch.Tensor | None:
        if not self.double_context:
            return None
        ops = self.operations(attn, view)  # eq. 14: global and syntax-directed contexts
        context, _ = attn.attend(view.q, view.k, view.v, view.mask & ops["mask"], ops["scale"])
        return attn.directed_out(context.transpose(1, 2).reshape(*view.x.shape[:2], -1))


DISTANCES = "distances"  # the shared batch column (syntrain.columns): sub-word syntax distances (B, S, S)


@dataclass
class DirectedConfig:
    """[model] options of syntax-directed attention."""

    directed_heads: list[int] = option(default_factory=list, ge=0,
                                       help="syntax-directed heads per decoder layer's cross-attention")
    directed_n: float = option(4.0, gt=0, help="window: syntax distance <= n; Gaussian sigma = n / 2")
    double_context: bool = option(False, help="eq. 14: syntax-directed contexts next to the global heads")


class Directed(Switch[DirectedConfig], name="directed", priority=20, config=DirectedConfig,
               switched_by=("directed_heads",)):
    """Syntax-directed attention (Chen et al. 2017): heads of the decoder cross-attention read the source syntax
    distances around an aligned position, single or double context.

    Adapted to the cross-attention of the decoder layers and heads listed in `directed_heads`, e.g. `[0, 2]` = the first
    2 heads of decoder layer 2. Each such head predicts an aligned source position p_i = (n - 1) * sigmoid(v^T tanh(W
    h_i)) (eq. 5; h_i = the layer's normalized decoder state, W shared by the layer's heads, one v per head; n = source
    sub-words without `</s>`, so p_i lies on a real sub-word), takes the syntax-distance row M[p_i], multiplies the
    scaled dot-product scores by exp(-M[p_i][j]^2 / 2 sigma^2), sigma = n/2 with `directed_n` = 4 (eq. 10), and attends
    only to keys with M[p_i][j] <= n (eq. 11). Continuous p_i: the scaling uses the **linear interpolation between rows
    floor(p_i) and floor(p_i) + 1** (W and v get gradients through it, tested); the window uses the nearest row
    round(p_i), which always holds p_i's own sub-word at distance 0 (an interpolated row can lie beyond n everywhere).
    **Sub-words**: a sub-word takes its token's row and column, so pieces of one token are at distance 0
    (`synprep.features.subword_distances`, the same rule as `per_subword`). **`</s>`** row and column are 0: `</s>`
    stays inside every window, unscaled (the usual attention sink); pad keys are masked. **Single context**
    (`double_context = false`, SDAtt): the heads' contexts replace the global ones. **Double context** (eq. 14): all
    heads stay global, and the syntax-directed contexts of `directed_heads` heads (same queries, keys, values) enter
    through their own output projection L_cs added to the layer's output. With all distances 0 the single-context heads
    are plain heads (tested equal to vanilla).

    Shards: `src_heads` (shard format 2 stores no distances: the trainer makes them per batch with
    `synprep.features.forest_tree_distances`; format-1 shards' stored `src_distances` are still read). Recipes:
    `pipelines/train/multi30k-directed.toml` (single context, `directed_heads = [0, 2]`, `directed_n = 4`) and
    `multi30k-directed-double.toml` (the same with `double_context = true`)."""

    example = {"directed_heads": [0, 2], "double_context": True}

    @classmethod
    def check(cls, cfg: ModelOptions) -> None:
        cls.check_layers(cfg, "directed_heads", "decoder", per_layer_heads=True)

    def describe(self) -> str:
        options = self.options
        kind = "double" if options.double_context else "single"
        return f"syntax-directed heads {options.directed_heads} ({kind} context, n {options.directed_n})"


    def reads(self, training: bool) -> dict[str, str]:
        return {DISTANCES: "syntax-directed attention"}

    def attention_hooks(self, stack: str, layer: int, kind: str) -> list[AttentionHook]:
        heads = self.options.directed_heads
        if (stack, kind) != ("decoder", "cross") or layer >= len(heads) or not heads[layer]:
            return []
        return [DirectedHeads(heads[layer], self.options.directed_n, self.options.double_context)]


register(Directed)
