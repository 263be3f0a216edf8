"""Multi-head attention, with the syntax mechanisms as small explicit branches of one module.

Head layout of a layer: the *front* heads 0..h-1 are Pascal heads (encoder self-attention) or syntax-directed
heads (decoder cross-attention); the *parse head* (DBSA / LISA) is the last head; the heads in between are
plain (fused `scaled_dot_product_attention`). See docs/switches.md for the conventions. A PARENT
head (tree decoding, decoder self-attention) is head 0 and attends only to itself and its parents in the
generated graph (a mask; no parameters).

Pascal (Bugliarello & Okazaki, 2020): in the first `pascal_heads` heads of a layer, the scaled dot-product
score s_tj of query t and key j is multiplied, before the softmax, by the Gaussian density
N(j | p_t, sigma^2), where p_t is the middle position of t's dependency parent. No extra parameters.

Batches: the prior is built per sentence from that sentence's own parent vector, over absolute key positions
0..S-1 (right padding keeps positions aligned), so a sentence gets the same output alone or in a padded batch.
Rows without a parent (the source EOS, pad queries: parent < 0) and rows dropped by parent ignoring get a
prior of 1 (plain attention). Pad keys are masked after the scaling, as usual.

Kernels for a layer with Pascal heads (`kernel`):
- "math": explicit scores for the Pascal heads (any device, attention dropout supported), fused
  `scaled_dot_product_attention` for the other heads.
- "flex": FlexAttention, all heads in one kernel, the prior computed inside it by a `score_mod` (no (B, T, S)
  prior tensor: for long sequences). Compiled (Triton) on CUDA, once per distinct (B, H, T, S) shape: with
  dynamic shapes the compiled backward fails on torch 2.11 (AssertionError "all unwrapped values must be
  FakeTensor"), and after torch's recompile limit a new shape runs the eager reference. Triton needs a head
  dimension >= 16. On CPU the eager reference (slow, inference only: PyTorch has no FlexAttention backward on
  CPU). FlexAttention has no attention-weight dropout, so training with it needs `attention_dropout = 0`.
- "auto" (default): "math". On an H100 the math kernel's Pascal step costs 0.99x (tiny) / 1.02x (base) of a
  vanilla step (benchmarks/bench_train.py), so nothing asks for the compile-per-shape kernel by default.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from synprep.features import gaussian

KERNELS = ("auto", "math", "flex")
PARSE_SCORES = ("", "dot", "biaffine")  # parse head: none, LISA (dot product), DBSA (bi-affine Q U K^T)


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


_compiled_flex: Callable | None = None
FLEX_MIN_HEAD_DIM = 16  # Triton's FlexAttention kernel: "embedding dimension ... must be at least 16"


def flex_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, score_mod: Callable) -> torch.Tensor:
    """torch's FlexAttention: compiled once per process on CUDA, the eager reference elsewhere."""
    global _compiled_flex
    from torch.nn.attention.flex_attention import flex_attention as flex

    if not q.is_cuda:
        with warnings.catch_warnings():  # the eager reference on purpose (no CPU backward, see above)
            warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
            return flex(q, k, v, score_mod=score_mod)
    if _compiled_flex is None:  # static shapes: dynamic=True breaks the compiled backward on torch 2.11
        _compiled_flex = torch.compile(flex, dynamic=False)
    return _compiled_flex(q, k, v, score_mod=score_mod)


def check_kernel(kernel: str) -> str:
    """`kernel` if it is one of KERNELS, else a ValueError naming the choices."""
    if kernel not in KERNELS:
        raise ValueError(f"unknown attention kernel {kernel!r}; choose from {', '.join(KERNELS)}")
    return kernel


@functools.cache
def flex_available() -> bool:
    """FlexAttention exists in this torch build (2.5+)."""
    try:
        import torch.nn.attention.flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


class MultiHeadAttention(nn.Module):
    """Self- or cross-attention; `mask` is boolean, True = may attend, broadcastable to (B, H, T, S).

    Branches (all off by default): `pascal_heads` front heads scaled by the parent prior; `directed_heads`
    front heads of a cross-attention with Chen et al.'s syntax-directed window (`double_context`: as extra
    contexts next to all the global heads, eq. 14, else replacing the front heads' contexts); a last parse
    head (`parse_scores` "dot" or "biaffine") whose log-attention is kept in `parse_log_weights` for the
    DBSA/LISA losses; `record_mean` keeps the head-averaged attention weights in `mean_weights` (SyncAttn's C).
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, pascal_heads: int = 0,
                 sigma2: float = 1.0, parent_ignore: float = 0.0, kernel: str = "auto", directed_heads: int = 0,
                 directed_n: float = 4.0, double_context: bool = False, parse_scores: str = "",
                 record_mean: bool = False, parent_head: bool = False) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not a multiple of n_heads {n_heads}")
        if pascal_heads and directed_heads:
            raise ValueError("a layer has either Pascal or syntax-directed front heads")
        if parse_scores not in PARSE_SCORES:
            raise ValueError(f"parse_scores must be one of {PARSE_SCORES}, got {parse_scores!r}")
        parse = int(bool(parse_scores))
        front = pascal_heads if pascal_heads else 0 if double_context else directed_heads
        if not 0 <= pascal_heads <= n_heads or not 0 <= directed_heads <= n_heads or front + parse > n_heads:
            raise ValueError(f"{max(pascal_heads, directed_heads)} front heads + {parse} parse head do not fit "
                             f"in {n_heads} heads")
        self.n_heads, self.head_dim, self.dropout = n_heads, d_model // n_heads, dropout
        self.pascal_heads, self.sigma2, self.parent_ignore = pascal_heads, sigma2, parent_ignore
        self.directed_heads, self.directed_n, self.double_context = directed_heads, directed_n, double_context
        self.parse_scores, self.record_mean = parse_scores, record_mean
        if parent_head and (pascal_heads or directed_heads or parse_scores or record_mean):
            raise ValueError("a PARENT head shares its layer with no other syntax head")
        self.parent_head = parent_head
        self.kernel = check_kernel(kernel)
        self.query = nn.Linear(d_model, d_model)
        self.key_value = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)
        if directed_heads:  # eq. 5: p_i = S * sigmoid(v^T tanh(W h_i)), one v per syntax-directed head
            self.align_hidden = nn.Linear(d_model, d_model)
            self.align_out = nn.Linear(d_model, directed_heads, bias=False)
            if double_context:  # eq. 14: L_cs c_s next to the global heads' output projection
                self.directed_out = nn.Linear(directed_heads * self.head_dim, d_model)
        if parse_scores == "biaffine":  # DBSA eq. 4: softmax(Q U K^T / sqrt(d_k)); U starts as the identity
            self.parse_bilinear = nn.Parameter(torch.eye(self.head_dim))
        self.parse_log_weights: torch.Tensor | None = None
        self.mean_weights: torch.Tensor | None = None

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, D)

    def uses_flex(self, device: torch.device) -> bool:
        """Whether a forward pass on `device` (in the current train/eval mode) runs the FlexAttention kernel."""
        if self.pascal_heads == 0 or self.kernel == "math" or self.parse_scores or self.record_mean:
            return False
        dropout_active = self.training and self.dropout > 0
        if self.kernel == "flex":
            if device.type == "cuda" and self.head_dim < FLEX_MIN_HEAD_DIM:
                raise ValueError(f"the flex attention kernel needs a head dimension >= {FLEX_MIN_HEAD_DIM} on CUDA "
                                 f"(Triton), this model has {self.head_dim}: use kernel 'math'")
            if dropout_active:
                raise ValueError("the flex attention kernel has no attention dropout: set the model's "
                                 "attention_dropout = 0 or use kernel 'math'")
            if device.type != "cuda" and torch.is_grad_enabled():
                raise ValueError("the flex attention kernel runs without gradients off CUDA (PyTorch has no "
                                 "FlexAttention backward on CPU): use torch.no_grad() or kernel 'math'")
            return True
        return False  # auto: math (module docstring)

    def _keys_values(self, x: torch.Tensor, memory: torch.Tensor | None, cache: dict | None
                     ) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values (B, H, S, D); with a decoding `cache`, self-attention appends x's to the cached ones
        and cross-attention projects `memory` once."""
        if cache is not None and memory is not None and "k" in cache:
            return cache["k"], cache["v"]
        k, v = (self._heads(z) for z in self.key_value(x if memory is None else memory).split(x.shape[-1], dim=-1))
        if cache is not None:
            if memory is None and "k" in cache:
                k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        return k, v

    def _flex(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
              parent: torch.Tensor) -> torch.Tensor:
        """All heads through the flex kernel (errors of torch.compile/Triton propagate)."""
        b = q.shape[0]
        if mask is not None and mask.shape[1:3] != (1, 1):
            raise ValueError("the flex attention kernel takes a key-padding mask of shape (B, 1, 1, S)")
        key_valid = None if mask is None else mask[:, 0, 0, :].expand(b, k.shape[2])
        active = prior_rows(parent, self.parent_ignore, self.training)
        return flex_attention(q, k, v, pascal_score_mod(parent, active, key_valid, self.pascal_heads, self.sigma2))

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                scale: torch.Tensor | None = None, window: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """Explicit attention of some heads: (context, log-weights before dropout); `scale` multiplies the
        scores before the softmax (Pascal, syntax-directed), `window` (True = inside) masks like `mask`."""
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        if scale is not None:
            scores = scores * scale.to(scores.dtype)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        if window is not None:
            scores = scores.masked_fill(~window, float("-inf"))
        log_weights = torch.log_softmax(scores.float(), dim=-1)
        weights = F.dropout(log_weights.exp().to(v.dtype), self.dropout if self.training else 0.0, self.training)
        return weights @ v, log_weights

    def _directed(self, x: torch.Tensor, distances: torch.Tensor | None, mask: torch.Tensor | None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        """Scale and window (B, h, T, S) of the syntax-directed heads: each head predicts an aligned source
        position p in [0, n - 1] (n = source sub-words without EOS) and reads the interpolated row M[p]."""
        if distances is None or mask is None:
            raise ValueError("syntax-directed heads need the source syntax distances and the source mask")
        n_src = (mask.reshape(mask.shape[0], -1).sum(-1) - 1).clamp(min=1) - 1  # last sub-word position
        gate = torch.sigmoid(self.align_out(torch.tanh(self.align_hidden(x)))).transpose(1, 2)  # (B, h, T)
        rows, nearest = distance_rows(distances, n_src.to(gate.dtype)[:, None, None] * gate)
        scale, window = syntax_directed_prior(rows, nearest, self.directed_n)
        return scale, window

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None, mask: torch.Tensor | None = None,
                parent: torch.Tensor | None = None, prior: torch.Tensor | None = None, cache: dict | None = None,
                distances: torch.Tensor | None = None, parent_mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, T, C), memory (B, S, C) for cross-attention; `parent` (B, T) or a ready `prior` (B, T, S)
        for the Pascal heads (the flex kernel takes `parent` and a key-padding mask (B, 1, 1, S) only);
        `distances` (B, S, S) sub-word syntax distances for syntax-directed heads; `cache` (a dict, filled
        here) for incremental decoding; `parent_mask` (B, T, S) the PARENT head's mask (itself and parents)."""
        b, t, c = x.shape
        q = self._heads(self.query(x))
        k, v = self._keys_values(x, memory, cache)
        p_drop = self.dropout if self.training else 0.0
        if self.parent_head:
            if parent_mask is None:
                raise ValueError("a PARENT head needs the generated graph (parent_mask)")
            others = (torch.ones_like(parent_mask)[:, None] if mask is None else mask.expand(b, 1, t, k.shape[2]))
            head_mask = torch.cat([parent_mask[:, None], others.expand(b, self.n_heads - 1, t, k.shape[2])], dim=1)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=head_mask, dropout_p=p_drop)
            return self.out(y.transpose(1, 2).reshape(b, t, c))
        h = self.pascal_heads
        if h and prior is None and parent is None:
            raise ValueError("a layer with Pascal heads needs the source parent positions")
        self.parse_log_weights = self.mean_weights = None
        front = h or (0 if self.double_context else self.directed_heads)
        parse = int(bool(self.parse_scores))
        if not front and not parse and not self.record_mean and not self.directed_heads:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p_drop)
            return self.out(y.transpose(1, 2).reshape(b, t, c))
        y = None
        if h and prior is None and self.uses_flex(x.device):
            y = self._flex(q, k, v, mask, parent)
        if y is None:
            contexts, log_weights = [], []
            scale = window = None
            if h:
                if prior is None:
                    prior = parent_prior(parent, k.shape[2], self.sigma2, self.parent_ignore, self.training)
                scale = prior[:, None]
            elif self.directed_heads:
                scale, window = self._directed(x, distances, mask)
            if front:  # Pascal or (single-context) syntax-directed heads
                context, log_w = self._attend(q[:, :front], k[:, :front], v[:, :front], mask, scale, window)
                contexts.append(context)
                log_weights.append(log_w)
            middle = slice(front, self.n_heads - parse)
            if middle.stop > middle.start:
                if self.record_mean:
                    context, log_w = self._attend(q[:, middle], k[:, middle], v[:, middle], mask)
                    log_weights.append(log_w)
                else:
                    context = F.scaled_dot_product_attention(q[:, middle], k[:, middle], v[:, middle],
                                                             attn_mask=mask, dropout_p=p_drop)
                contexts.append(context)
            if parse:
                query = q[:, -1:] @ self.parse_bilinear if self.parse_scores == "biaffine" else q[:, -1:]
                context, log_w = self._attend(query, k[:, -1:], v[:, -1:], mask)
                self.parse_log_weights = log_w[:, 0]
                contexts.append(context)
                log_weights.append(log_w)
            if self.record_mean:
                self.mean_weights = torch.cat(log_weights, dim=1).exp().mean(dim=1)
            y = torch.cat(contexts, dim=1) if len(contexts) > 1 else contexts[0]
        out = self.out(y.transpose(1, 2).reshape(b, t, c))
        if self.directed_heads and self.double_context:  # eq. 14: global and syntax-directed contexts
            n = self.directed_heads
            context, _ = self._attend(q[:, :n], k[:, :n], v[:, :n], mask, scale, window)
            out = out + self.directed_out(context.transpose(1, 2).reshape(b, t, -1))
        return out
