"""Multi-head attention: plain heads on the fused kernel, with the syntax switches' hooks (syntrain.switches).

Head layout of a layer: a hook may claim the *front* heads 0..h-1 (explicit attention, its scores scaled and
windowed: Pascal, syntax-directed) and one may claim the *last* head (explicit attention of its own query:
the parse heads); the heads in between are plain (fused `scaled_dot_product_attention`) unless a hook
needs every head's weights (SyncAttn). A hook may also replace the mask per head (PARENT), add a term to the
output projection (double-context syntax-directed heads) and record weights for its loss into the forward's
`records` dict (nothing is kept on the module). The conventions: docs/switches.md, docs/switches-api.md.

Kernels (`kernel`), for a layer whose hooks can all run on FlexAttention (Pascal):
- "math": explicit scores for the hook's heads (any device, attention dropout supported), fused
  `scaled_dot_product_attention` for the other heads.
- "flex": FlexAttention, all heads in one kernel, the hook's `score_mod` inside it (no (B, T, S) prior
  tensor: for long sequences). Compiled (Triton) on CUDA, once per distinct (B, H, T, S) shape: with dynamic
  shapes the compiled backward fails on torch 2.11 (AssertionError "all unwrapped values must be FakeTensor"),
  and after torch's recompile limit a new shape runs the eager reference. Triton needs a head dimension >= 16.
  On CPU the eager reference (slow, inference only: PyTorch has no FlexAttention backward on CPU).
  FlexAttention has no attention-weight dropout, so training with it needs `attention_dropout = 0`.
- "auto" (default): "math". On an H100 the math kernel's Pascal step costs 0.99x (tiny) / 1.02x (base) of a
  vanilla step (benchmarks/bench_train.py), so nothing asks for the compile-per-shape kernel by default.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .switches.base import AttentionHook, Inputs, merge_inputs

KERNELS = ("auto", "math", "flex")


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


def check_hooks(hooks: Sequence[AttentionHook], n_heads: int) -> None:
    """ValueError when the hooks of one attention module do not share its heads (one front and one last
    claim at most, within the heads; a per-head mask only alone)."""
    names = [hook.name for hook in hooks]
    front = [hook for hook in hooks if hook.front]
    last = [hook for hook in hooks if hook.last]
    if len(front) > 1 or len(last) > 1:
        raise ValueError(f"{' and '.join(names)} claim the same heads of a layer")
    heads, parse = sum(hook.front for hook in front), len(last)
    if heads + parse > n_heads:
        raise ValueError(f"{heads} front heads + {parse} parse head do not fit in {n_heads} heads")
    if len(hooks) > 1 and any(type(hook).head_mask is not AttentionHook.head_mask for hook in hooks):
        raise ValueError(f"{' and '.join(names)}: a head with its own mask shares its layer with no other "
                         "syntax head")


class _FlexKernel:
    """`MultiHeadAttention`'s choice of the FlexAttention kernel, and its forward pass on it."""

    def uses_flex(self: MultiHeadAttention, device: torch.device) -> bool:
        """Whether a forward pass on `device` (in the current train/eval mode) runs the FlexAttention kernel."""
        if not self.hooks or self.kernel != "flex" or not all(hook.flex for hook in self.hooks):
            return False  # auto: math (module docstring)
        if device.type == "cuda" and self.head_dim < FLEX_MIN_HEAD_DIM:
            raise ValueError(f"the flex attention kernel needs a head dimension >= {FLEX_MIN_HEAD_DIM} on CUDA "
                             f"(Triton), this model has {self.head_dim}: use kernel 'math'")
        if self.training and self.dropout > 0:
            raise ValueError("the flex attention kernel has no attention dropout: set the model's "
                             "attention_dropout = 0 or use kernel 'math'")
        if device.type != "cuda" and torch.is_grad_enabled():
            raise ValueError("the flex attention kernel runs without gradients off CUDA (PyTorch has no "
                             "FlexAttention backward on CPU): use torch.no_grad() or kernel 'math'")
        return True

    def _flex(self: MultiHeadAttention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
              inputs: Inputs) -> torch.Tensor:
        """All heads through the flex kernel with the hook's score_mod (errors of torch.compile/Triton propagate)."""
        b = q.shape[0]
        if mask is not None and mask.shape[1:3] != (1, 1):
            raise ValueError("the flex attention kernel takes a key-padding mask of shape (B, 1, 1, S)")
        key_valid = None if mask is None else mask[:, 0, 0, :].expand(b, k.shape[2])
        return flex_attention(q, k, v, self.hooks[0].score_mod(self, inputs, key_valid))


class _ExplicitHeads:
    """`MultiHeadAttention`'s heads on the math kernel: explicit attention for the hooks' heads (scaled, windowed,
    their own query, their weights recorded), the fused kernel for the plain ones."""

    def attend(self: MultiHeadAttention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
               scale: torch.Tensor | None = None, window: torch.Tensor | None = None, bias: torch.Tensor | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Explicit attention of some heads: (context, log-weights before dropout); `scale` multiplies the
        scores before the softmax, `bias` is added to them after, `window` (True = inside) masks like `mask`."""
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        if scale is not None:
            scores = scores * scale.to(scores.dtype)
        if bias is not None:
            scores = scores + bias.to(scores.dtype)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        if window is not None:
            scores = scores.masked_fill(~window, float("-inf"))
        log_weights = torch.log_softmax(scores.float(), dim=-1)
        weights = F.dropout(log_weights.exp().to(v.dtype), self.dropout if self.training else 0.0, self.training)
        return weights @ v, log_weights

    def _heads_attention(self: MultiHeadAttention, x: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         mask: torch.Tensor | None, inputs: Inputs, records: dict | None) -> torch.Tensor:
        """The contexts (B, H, T, D) of all heads: front (the front hook's scale/window), middle (fused unless
        every head's weights are needed), last (the last hook's query); the hooks record from the weights."""
        p_drop = self.dropout if self.training else 0.0
        front, last = (self.front.front if self.front else 0), int(self.last is not None)
        if not front and not last and not self.all_weights:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p_drop)
        contexts, log_weights = [], {}
        if front:
            scale, window = self.front.scores(self, x, k.shape[2], mask, inputs)
            context, log_weights["front"] = self.attend(q[:, :front], k[:, :front], v[:, :front], mask, scale, window)
            contexts.append(context)
        middle = slice(front, self.n_heads - last)
        if middle.stop > middle.start:
            if self.all_weights:
                context, log_weights["middle"] = self.attend(q[:, middle], k[:, middle], v[:, middle], mask)
            else:
                context = F.scaled_dot_product_attention(q[:, middle], k[:, middle], v[:, middle], attn_mask=mask,
                                                         dropout_p=p_drop)
            contexts.append(context)
        if last:
            query = self.last.query(self, q[:, -1:])
            bias = self.last.key_bias(self, k[:, -1:])
            context, log_weights["last"] = self.attend(query, k[:, -1:], v[:, -1:], mask, bias=bias)
            contexts.append(context)
        if records is not None:
            for hook in self.hooks:
                hook.record(self, log_weights, records)
        return torch.cat(contexts, dim=1) if len(contexts) > 1 else contexts[0]


class MultiHeadAttention(_FlexKernel, _ExplicitHeads, nn.Module):
    """Self- or cross-attention; `mask` is boolean, True = may attend, broadcastable to (B, H, T, S).
    `hooks`: the switches' parts in this module (module docstring), their parameters registered here."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, hooks: Sequence[AttentionHook] = (),
                 kernel: str = "auto") -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not a multiple of n_heads {n_heads}")
        check_hooks(hooks, n_heads)
        self.n_heads, self.head_dim, self.dropout = n_heads, d_model // n_heads, dropout
        self.kernel = check_kernel(kernel)
        self.query = nn.Linear(d_model, d_model)
        self.key_value = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.hooks = list(hooks)
        for hook in self.hooks:
            hook.attach(self)
        self.front = next((hook for hook in self.hooks if hook.front), None)
        self.last = next((hook for hook in self.hooks if hook.last), None)
        self.all_weights = any(hook.all_weights for hook in self.hooks)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, D)

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

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None, mask: torch.Tensor | None = None,
                cache: dict | None = None, inputs: Inputs | None = None, records: dict | None = None,
                **named: torch.Tensor | None) -> torch.Tensor:
        """x (B, T, C), memory (B, S, C) for cross-attention; `cache` (a dict, filled here) for incremental
        decoding; `inputs` (or ones passed by name) the model inputs the hooks read (their switches declare
        them); `records` gets what the hooks keep for the losses."""
        inputs = merge_inputs(inputs, named)
        b, t, c = x.shape
        q = self._heads(self.query(x))
        k, v = self._keys_values(x, memory, cache)
        for hook in self.hooks:  # a per-head mask (PARENT)
            head_mask = hook.head_mask(self, mask, inputs, (b, self.n_heads, t, k.shape[2]))
            mask = mask if head_mask is None else head_mask
        if "prior" not in inputs and self.uses_flex(x.device):
            y = self._flex(q, k, v, mask, inputs)
        else:
            y = self._heads_attention(x, q, k, v, mask, inputs, records)
        out = self.out(y.transpose(1, 2).reshape(b, t, c))
        for hook in self.hooks:
            extra = hook.extra(self, x, q, k, v, mask, inputs)
            if extra is not None:
                out = out + extra
        return out
