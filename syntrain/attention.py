"""Multi-head attention, with parent-scaled (Pascal) heads as one small explicit branch.

Pascal (Bugliarello & Okazaki, 2020): in the first `pascal_heads` heads of a layer, the scaled dot-product
score s_tj of query t and key j is multiplied, before the softmax, by the Gaussian density
N(j | p_t, sigma^2), where p_t is the middle position of t's dependency parent. No extra parameters.

Batches: the prior is built per sentence from that sentence's own parent vector, over absolute key positions
0..S-1 (right padding keeps positions aligned), so a sentence gets the same output alone or in a padded batch.
Rows without a parent (the source EOS, pad queries: parent < 0) and rows dropped by parent ignoring get a
prior of 1 (plain attention). Pad keys are masked after the scaling, as usual.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def parent_prior(parent: torch.Tensor, n_keys: int, sigma2: float = 1.0, ignore_prob: float = 0.0,
                 training: bool = False) -> torch.Tensor:
    """(B, T) parent positions (< 0: none) -> (B, T, n_keys) prior N(j | p_t, sigma2); rows without a parent = 1.

    Parent ignoring: in training, each row is set to 1 with probability `ignore_prob` (one draw per sentence
    and query position, shared by the Pascal heads of the layer).
    """
    keys = torch.arange(n_keys, device=parent.device, dtype=torch.float32)
    diff = keys[None, None, :] - parent.float()[:, :, None]
    prior = torch.exp(-diff.square() / (2 * sigma2)) / math.sqrt(2 * math.pi * sigma2)
    keep = parent >= 0
    if training and ignore_prob > 0:
        keep = keep & (torch.rand(parent.shape, device=parent.device) >= ignore_prob)
    return torch.where(keep[:, :, None], prior, torch.ones_like(prior))


class MultiHeadAttention(nn.Module):
    """Self- or cross-attention; `mask` is boolean, True = may attend, broadcastable to (B, H, T, S)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, pascal_heads: int = 0,
                 sigma2: float = 1.0, parent_ignore: float = 0.0) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not a multiple of n_heads {n_heads}")
        if not 0 <= pascal_heads <= n_heads:
            raise ValueError(f"pascal_heads must be in 0..{n_heads}, got {pascal_heads}")
        self.n_heads, self.head_dim, self.dropout = n_heads, d_model // n_heads, dropout
        self.pascal_heads, self.sigma2, self.parent_ignore = pascal_heads, sigma2, parent_ignore
        self.query = nn.Linear(d_model, d_model)
        self.key_value = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, D)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None, mask: torch.Tensor | None = None,
                parent: torch.Tensor | None = None, prior: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, T, C), memory (B, S, C) for cross-attention; `parent` (B, T) or a ready `prior` (B, T, S)
        for the Pascal heads."""
        b, t, c = x.shape
        q = self._heads(self.query(x))
        k, v = (self._heads(z) for z in self.key_value(x if memory is None else memory).split(c, dim=-1))
        p_drop = self.dropout if self.training else 0.0
        if self.pascal_heads == 0:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p_drop)
        else:
            h = self.pascal_heads
            if prior is None:
                if parent is None:
                    raise ValueError("a layer with Pascal heads needs the source parent positions")
                prior = parent_prior(parent, k.shape[2], self.sigma2, self.parent_ignore, self.training)
            # Pascal heads: explicit scores, scaled by the parent prior (one per sentence) before the softmax
            scores = (q[:, :h] @ k[:, :h].transpose(-2, -1)) / math.sqrt(self.head_dim)
            scores = scores * prior[:, None].to(scores.dtype)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = F.dropout(torch.softmax(scores.float(), dim=-1).to(v.dtype), p_drop, self.training)
            pascal = weights @ v[:, :h]
            if h == self.n_heads:
                y = pascal
            else:
                rest = F.scaled_dot_product_attention(q[:, h:], k[:, h:], v[:, h:], attn_mask=mask, dropout_p=p_drop)
                y = torch.cat([pascal, rest], dim=1)
        return self.out(y.transpose(1, 2).reshape(b, t, c))
