"""The Transformer's layers, in one module as a batch runs through them: multi-head attention (`MultiHeadAttention`)
with the syntax switches' hooks, the residual layers built on it (`EncoderLayer`, `DecoderLayer`: attention and
feed-forward, pre- or post-norm: `[model] norm_placement`), and the stacks (`Encoder`, `Decoder`: lists of layers,
each attention module with the hooks of the switches that are on), composed by `syntrain.model.Transformer`. A
stack is an `nn.ModuleList`, so parameters are named `encoder.<i>.*` and `decoder.<i>.*` (the checkpoints' names).

Multi-head attention: plain heads on the fused kernel, and the switches' hooks as operations on the attention
logits of the heads each names (`AttentionHook` in syntrain.switches.base; docs/switches-api.md).

A hook acts on a set of heads (`Heads`: the front n, the last one, every head, or any set) with the operations it
declares in `ops`. Per head, the operations of every hook acting on it compose in this one order (hooks in their
order in the module, the switches' order):

    q'       = query(q)                              "query": the head's own query (parse heads' Q U)
    scores   = q' . k / sqrt(d)
    scores   = scores * scale_1 * scale_2 ...        "scale" (Pascal's prior, syntax-directed Gaussian)
    scores   = scores + bias_1 + bias_2 ...          "bias" (released DBSA's k . b, a tree-distance bias)
    allowed  = (head_mask or the layer's mask)       "head_mask" replaces the layer's mask (PARENT)
               & mask_1 & mask_2 ...                 "mask" narrows it (syntax-directed window)
    log_weights = log_softmax(scores where allowed, -inf elsewhere)    -> "record" (parse heads, SyncAttn)
    context  = dropout(exp(log_weights)) @ v

and the module's output = out(contexts) + each hook's `extra` term (double-context syntax-directed heads). A
tensor an operation gives broadcasts to (B, h, T, S), h = the hook's heads. Everything composes but two hooks
giving one head its query, or its head mask: `check_hooks` refuses those (and heads a module lacks) when the
model is configured. Forward keeps no state on the module: "record" writes into the forward's `records` dict.

Kernels (`kernel`):
- "math": the heads in runs of neighbours acted on by the same hooks. A run no operation touches, or one with only
  biases and masks, goes through the fused `scaled_dot_product_attention` (neighbouring such runs in one call, a
  boolean or float attn_mask per head); the others get explicit scores (any device, attention dropout supported).
- "flex": FlexAttention, all heads in one kernel, its `score_mod` composed from the operations in the order above:
  a tensor is indexed inside it, or a hook computes the value elementwise (`elementwise`: Pascal's prior, no
  (B, T, S) tensor: for long sequences); "query" replaces those heads' queries before the kernel. FlexAttention
  returns no weights, so a layer with "record" runs on "math"; so does one without operations (plain SDPA).
  Compiled (Triton) on CUDA, once per distinct (B, H, T, S) shape: with dynamic shapes the compiled backward
  fails on torch 2.11 (AssertionError "all unwrapped values must be FakeTensor"), and after torch's recompile
  limit a new shape runs the eager reference. Triton needs a head dimension >= 16. On CPU the eager reference
  (slow, inference only: PyTorch has no FlexAttention backward on CPU). FlexAttention has no attention-weight
  dropout, so training with it needs `attention_dropout = 0`.
- "auto" (default): "math". On an H100 the math kernel's Pascal step costs 0.99x (tiny) / 1.02x (base) of a
  vanilla step (benchmarks/bench_train.py), so nothing asks for the compile-per-shape kernel by default.

The module (`MultiHeadAttention`) projects and attends; its collaborators each do one job: `HeadLayout` which
hooks act on which heads (checked when the model is configured), `Composition` a forward's operations composed
in the order above (per run of heads, or as a score_mod), the kernels `math_kernel` (with `explicit_attention`
and `fused_attention`) and `flex_kernel`, and `KeyValueCache` the keys and values kept for incremental decoding.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .switches.active import ActiveSwitches
from .switches.base import (
    BIAS,
    HEAD_MASK,
    MASK,
    OPS,
    QUERY,
    RECORD,
    SCALE,
    AttentionHook,
    HeadView,
    Inputs,
    ModelOptions,
    merge_inputs,
)

KERNELS = ("auto", "math", "flex")
EXPLICIT = (QUERY, SCALE, RECORD)  # operations that need a run's scores computed explicitly (math kernel)
ONE_PER_HEAD = {QUERY: "its query", HEAD_MASK: "its head mask"}  # operations two hooks cannot both give a head

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


class HeadLayout:
    """Which hooks act on which heads of a module of `n_heads` heads: each hook's head indices (`indices`), and
    the runs of neighbouring heads acted on by the same hooks (`runs`: (heads, the acting hooks' positions)).
    ValueError when the hooks cannot compose (module docstring)."""

    def __init__(self, hooks: Sequence[AttentionHook], n_heads: int) -> None:
        self.hooks = list(hooks)
        self.indices = [self._heads(hook, n_heads) for hook in self.hooks]
        for op, what in ONE_PER_HEAD.items():
            owner: dict[int, str] = {}
            for hook, heads in zip(self.hooks, self.indices):
                for head in heads if op in hook.ops else ():
                    if head in owner:
                        raise ValueError(f"{owner[head]} and {hook.name} claim the same heads: both give head {head} "
                                         f"{what} (one hook per head)")
                    owner[head] = hook.name
        acting = [tuple(i for i, hook in enumerate(self.hooks) if hook.ops and head in self.indices[i])
                  for head in range(n_heads)]
        self.runs: list[tuple[slice, tuple[int, ...]]] = []
        start = 0
        for head in range(1, n_heads + 1):
            if head == n_heads or acting[head] != acting[start]:
                self.runs.append((slice(start, head), acting[start]))
                start = head
        self.ops = {op for hook in self.hooks for op in hook.ops}
        self.flex = bool(self.ops) and RECORD not in self.ops  # FlexAttention can run every operation

    @staticmethod
    def _heads(hook: AttentionHook, n_heads: int) -> tuple[int, ...]:
        unknown = set(hook.ops) - set(OPS)
        if unknown:
            raise ValueError(f"{hook.name}: unknown attention operations {sorted(unknown)}; choose from {OPS}")
        try:
            return hook.heads.indices(n_heads)
        except ValueError as error:
            raise ValueError(f"{hook.name}: {error}") from None

    def select(self, i: int) -> slice | list[int]:
        """Hook i's heads as an index of the head dimension (a slice when they are neighbours)."""
        heads = self.indices[i]
        return slice(heads[0], heads[-1] + 1) if heads == tuple(range(heads[0], heads[-1] + 1)) else list(heads)


def check_hooks(hooks: Sequence[AttentionHook], n_heads: int) -> None:
    """ValueError when the hooks of one attention module cannot compose (module docstring)."""
    HeadLayout(hooks, n_heads)


class KeyValueCache:
    """The incremental-decoding cache of one attention module: the keys and values (B, H, S, D) of the positions
    decoded so far (self-attention: each step's appended) or of the memory (cross-attention: projected once)."""

    def __init__(self) -> None:
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def keys_values(self, project: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]], x: torch.Tensor,
                    memory: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys and values of this step: `project(memory)` once, or `project(x)` after the cached ones."""
        if memory is not None and self.k is not None and self.v is not None:
            return self.k, self.v
        k, v = project(x if memory is None else memory)
        if memory is None and self.k is not None and self.v is not None:
            k, v = torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2)
        self.k, self.v = k, v
        return k, v

    def reorder(self, rows: torch.Tensor) -> None:
        """Keep rows `rows` (beam search: the hypotheses that continue)."""
        if self.k is not None and self.v is not None:
            self.k, self.v = self.k[rows], self.v[rows]


# the composition of the hooks' operations (module docstring)

def _part(value: torch.Tensor, heads: tuple[int, ...], run: slice) -> torch.Tensor:
    """The heads `run` of a hook's operation value over its heads `heads` (a value of one head broadcasts)."""
    if value.dim() < 4 or value.shape[1] == 1:
        return value
    start = heads.index(run.start)
    return value[:, start : start + run.stop - run.start]


def _at(value: torch.Tensor, b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor
        ) -> torch.Tensor:
    """Element (b, h, q_idx, kv_idx) of a 4-d value inside a FlexAttention score_mod (dimensions of size 1
    broadcast)."""
    index = [0 if size == 1 else i for size, i in zip(value.shape, (b, h, q_idx, kv_idx))]
    return value[index[0], index[1], index[2], index[3]]


@dataclass
class FlexPart:
    """One hook's operation in a FlexAttention score_mod: `member` (H,) its heads, `position` (H,) a head's index
    among them, `value` a 4-d tensor or a function of (b, position, q_idx, kv_idx)."""

    op: str
    member: torch.Tensor
    position: torch.Tensor
    value: torch.Tensor | Callable

    def at(self, b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        if isinstance(self.value, torch.Tensor):
            return _at(self.value, b, self.position[h], q_idx, kv_idx)
        return self.value(b, self.position[h], q_idx, kv_idx)


def composed_score_mod(parts: Sequence[FlexPart], mask: torch.Tensor | None) -> Callable:
    """The FlexAttention `score_mod` of the operations `parts` and the layer's `mask` (4-d, True = may attend),
    in the order of the module docstring."""
    by_op = {op: [part for part in parts if part.op == op] for op in (SCALE, BIAS, HEAD_MASK, MASK)}

    def score_mod(score: torch.Tensor, b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor,
                  kv_idx: torch.Tensor) -> torch.Tensor:
        for part in by_op[SCALE]:
            score = torch.where(part.member[h], score * part.at(b, h, q_idx, kv_idx), score)
        for part in by_op[BIAS]:
            score = torch.where(part.member[h], score + part.at(b, h, q_idx, kv_idx), score)
        allowed = None if mask is None else _at(mask, b, h, q_idx, kv_idx)
        for part in by_op[HEAD_MASK]:
            own = part.at(b, h, q_idx, kv_idx)
            allowed = torch.where(part.member[h], own, torch.ones_like(own) if allowed is None else allowed)
        for part in by_op[MASK]:
            own = part.at(b, h, q_idx, kv_idx)
            own = torch.where(part.member[h], own, torch.ones_like(own))
            allowed = own if allowed is None else allowed & own
        return score if allowed is None else torch.where(allowed, score, -float("inf"))

    return score_mod


class Composition:
    """The operations of one attention module's hooks in one forward, composed per head in the module
    docstring's order: per run of heads (`run`, the math kernel), or as a FlexAttention score_mod (`flex`). Also
    hands each recording hook its heads' log-weights (`record`). `attn`: the module (the hooks read their
    parameters on it), `views`: each hook's `HeadView`."""

    def __init__(self, attn: MultiHeadAttention, views: Sequence[HeadView]) -> None:
        self.attn, self.layout, self.hooks, self.views = attn, attn.layout, attn.hooks, list(views)
        self._values: list[dict[str, torch.Tensor]] | None = None

    def values(self) -> list[dict[str, torch.Tensor]]:
        """Each hook's operation values in this forward (`AttentionHook.operations`), computed once."""
        if self._values is None:
            self._values = [hook.operations(self.attn, view) if set(hook.ops) - {RECORD} else {}
                            for hook, view in zip(self.hooks, self.views)]
        return self._values

    def explicit(self, acting: tuple[int, ...]) -> bool:
        """Whether a run acted on by the hooks `acting` needs its scores computed explicitly (math kernel)."""
        return any(op in EXPLICIT for i in acting for op in self.hooks[i].ops)

    def run(self, run: slice, acting: tuple[int, ...], mask: torch.Tensor | None) -> dict[str, torch.Tensor | None]:
        """The composed operations of the heads `run` (acted on by the hooks `acting`): query, scale, bias,
        allowed (the layer's `mask` replaced by a head mask, narrowed by masks)."""
        values = self.values()
        composed: dict[str, torch.Tensor | None] = {QUERY: None, SCALE: None, BIAS: None, "allowed": mask}
        parts = [{op: _part(value, self.layout.indices[i], run) for op, value in values[i].items()} for i in acting]
        for part in parts:  # at most one query and one head mask per head (HeadLayout)
            composed[QUERY] = part.get(QUERY, composed[QUERY])
            composed["allowed"] = part.get(HEAD_MASK, composed["allowed"])
        for part in parts:  # then the scales multiply, the biases add up, the masks narrow
            scale, bias, allowed = composed[SCALE], composed[BIAS], composed["allowed"]
            if SCALE in part:
                composed[SCALE] = part[SCALE] if scale is None else scale * part[SCALE]
            if BIAS in part:
                composed[BIAS] = part[BIAS] if bias is None else bias + part[BIAS]
            if MASK in part:
                composed["allowed"] = part[MASK] if allowed is None else allowed & part[MASK]
        return composed

    def flex(self, q: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, Callable]:
        """(the queries with the hooks' own queries in place, the score_mod of every other operation): elementwise
        where a hook computes it so (`AttentionHook.elementwise`), else its tensor indexed."""
        parts = []
        n_heads = q.shape[1]
        for i, (hook, view) in enumerate(zip(self.hooks, self.views)):
            values: dict = hook.elementwise(self.attn, view)
            if set(hook.ops) - set(values):
                values = {**hook.operations(self.attn, view), **values}
            heads = torch.tensor(self.layout.indices[i], device=q.device)
            if QUERY in values:
                q = q.index_copy(1, heads, values.pop(QUERY).to(q.dtype))
            member = torch.zeros(n_heads, dtype=torch.bool, device=q.device).index_fill(0, heads, True)
            position = torch.zeros(n_heads, dtype=torch.long, device=q.device)
            position = position.index_copy(0, heads, torch.arange(len(heads), device=q.device))
            for op, value in values.items():
                if isinstance(value, torch.Tensor):
                    value = value.reshape((1,) * (4 - value.dim()) + tuple(value.shape))
                parts.append(FlexPart(op, member, position, value))
        if mask is not None:
            mask = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))
        return q, composed_score_mod(parts, mask)

    def record(self, log_weights: Sequence[list[torch.Tensor]], records: dict | None) -> None:
        """Each recording hook gets its heads' log-weights (`log_weights[i]`: hook i's, per run)."""
        for hook, weights in zip(self.hooks, log_weights):
            if records is not None and RECORD in hook.ops:
                hook.record(self.attn, torch.cat(weights, dim=1) if len(weights) > 1 else weights[0], records)


# the kernels (module docstring): explicit scores, fused SDPA, FlexAttention

def explicit_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor | None,
                       scale: torch.Tensor | None, bias: torch.Tensor | None, p_drop: float, training: bool
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """Explicit attention of some heads: (context, log-weights before dropout); `scale` multiplies the scores
    q.k / sqrt(d), `bias` is added to them after, `allowed` (True = may attend) masks them."""
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if scale is not None:
        scores = scores * scale.to(scores.dtype)
    if bias is not None:
        scores = scores + bias.to(scores.dtype)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    log_weights = torch.log_softmax(scores.float(), dim=-1)
    weights = F.dropout(log_weights.exp().to(v.dtype), p_drop, training)
    return weights @ v, log_weights


def _attn_mask(run: slice, composed: dict[str, torch.Tensor | None], biased: bool, q: torch.Tensor,
               k: torch.Tensor) -> torch.Tensor:
    """The SDPA attn_mask (B, h, T, S) of the heads `run`: boolean, or with `biased` their bias, -inf where they
    may not attend."""
    size = (q.shape[0], run.stop - run.start, q.shape[2], k.shape[2])
    allowed = composed["allowed"]
    allowed = torch.ones(size, dtype=torch.bool, device=q.device) if allowed is None else allowed.expand(size)
    if not biased:
        return allowed
    bias = torch.zeros((), device=q.device) if composed[BIAS] is None else composed[BIAS]
    return bias.to(q.dtype).expand(size).masked_fill(~allowed, float("-inf"))


def fused_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                    runs: list[tuple[slice, dict[str, torch.Tensor | None]]], p_drop: float) -> torch.Tensor:
    """Neighbouring runs of heads with at most biases and masks, in one fused SDPA call: the layer's mask
    when no run has an operation, else a boolean (no bias) or float attn_mask per head."""
    heads = slice(runs[0][0].start, runs[-1][0].stop)
    attn_mask = mask
    if any(composed[BIAS] is not None or composed["allowed"] is not mask for _, composed in runs):
        biased = any(composed[BIAS] is not None for _, composed in runs)
        attn_mask = torch.cat([_attn_mask(run, composed, biased, q, k) for run, composed in runs], dim=1)
    return F.scaled_dot_product_attention(q[:, heads], k[:, heads], v[:, heads], attn_mask=attn_mask,
                                          dropout_p=p_drop)


def math_kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                composition: Composition, records: dict | None, p_drop: float, training: bool) -> torch.Tensor:
    """The contexts (B, H, T, D) of all heads on the math kernel: each run of heads explicit or fused (module
    docstring); the hooks that record get their heads' log-weights."""
    contexts, fused = [], []
    log_weights: list[list[torch.Tensor]] = [[] for _ in composition.hooks]
    for run, acting in composition.layout.runs:
        composed = composition.run(run, acting, mask)
        if not composition.explicit(acting):
            fused.append((run, composed))
            continue
        if fused:
            contexts.append(fused_attention(q, k, v, mask, fused, p_drop))
            fused = []
        query = q[:, run] if composed[QUERY] is None else composed[QUERY]
        context, weights = explicit_attention(query, k[:, run], v[:, run], composed["allowed"], composed[SCALE],
                                              composed[BIAS], p_drop, training)
        contexts.append(context)
        for i in acting:
            log_weights[i].append(weights)
    if fused:
        contexts.append(fused_attention(q, k, v, mask, fused, p_drop))
    composition.record(log_weights, records)
    return torch.cat(contexts, dim=1) if len(contexts) > 1 else contexts[0]


def flex_kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                composition: Composition) -> torch.Tensor:
    """All heads through FlexAttention, the operations in its score_mod (errors of torch.compile/Triton
    propagate)."""
    q, score_mod = composition.flex(q, mask)
    return flex_attention(q, k, v, score_mod)


class MultiHeadAttention(nn.Module):
    """Self- or cross-attention; `mask` is boolean, True = may attend, broadcastable to (B, H, T, S).
    `hooks`: the switches' operations in this module (module docstring), their parameters registered here.
    The module projects and attends; which heads each hook acts on is its `layout` (`HeadLayout`), a forward's
    operations are composed by a `Composition`, the attention runs on a kernel (plain SDPA, `math_kernel` or
    `flex_kernel`, chosen by `kernel` and `uses_flex`), and decoding keeps keys and values in a
    `KeyValueCache`."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, hooks: Sequence[AttentionHook] = (),
                 kernel: str = "auto") -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not a multiple of n_heads {n_heads}")
        self.layout = HeadLayout(hooks, n_heads)
        self.n_heads, self.head_dim, self.dropout = n_heads, d_model // n_heads, dropout
        self.kernel = check_kernel(kernel)
        self.query = nn.Linear(d_model, d_model)
        self.key_value = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.hooks = list(hooks)
        for hook in self.hooks:
            hook.attach(self)
        # the hooks that add a term to the output (`extra`), found once: a forward asks only those
        self.extras = [i for i, hook in enumerate(self.hooks) if type(hook).extra is not AttentionHook.extra]

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, D)

    def _keys_values(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values (B, H, S, D) of `z` (B, S, C)."""
        k, v = self.key_value(z).split(z.shape[-1], dim=-1)
        return self._heads(k), self._heads(v)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None, mask: torch.Tensor | None = None,
                cache: KeyValueCache | None = None, inputs: Inputs | None = None, records: dict | None = None,
                **named: torch.Tensor | None) -> torch.Tensor:
        """x (B, T, C), memory (B, S, C) for cross-attention; `cache` (filled here) for incremental decoding;
        `inputs` (or ones passed by name) the model inputs the hooks read (their switches declare them);
        `records` gets what the hooks keep for the losses."""
        inputs = merge_inputs(inputs, named) if named else inputs or {}
        b, t, c = x.shape
        q = self._heads(self.query(x))
        if cache is None:
            k, v = self._keys_values(x if memory is None else memory)
        else:
            k, v = cache.keys_values(self._keys_values, x, memory)
        views = [HeadView(x, q[:, heads], k[:, heads], v[:, heads], mask, inputs)
                 for heads in map(self.layout.select, range(len(self.hooks)))]
        if not self.layout.ops:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self._p_drop())
        elif self.uses_flex(x.device):
            y = flex_kernel(q, k, v, mask, Composition(self, views))
        else:
            y = math_kernel(q, k, v, mask, Composition(self, views), records, self._p_drop(), self.training)
        out = self.out(y.transpose(1, 2).reshape(b, t, c))
        for i in self.extras:
            extra = self.hooks[i].extra(self, views[i])
            if extra is not None:
                out = out + extra
        return out

    def _p_drop(self) -> float:
        return self.dropout if self.training else 0.0

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor | None,
               scale: torch.Tensor | None = None, bias: torch.Tensor | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Explicit attention of some heads with this module's dropout (`explicit_attention`): (context,
        log-weights before dropout)."""
        return explicit_attention(q, k, v, allowed, scale, bias, self._p_drop(), self.training)

    def uses_flex(self, device: torch.device) -> bool:
        """Whether a forward pass on `device` (in the current train/eval mode) runs the FlexAttention kernel."""
        if self.kernel != "flex" or not self.layout.flex:
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


# the layers and the stacks

def sinusoids(length: int, d_model: int, layout: str = "interleaved") -> torch.Tensor:
    """(length, d_model) sinusoidal position encodings in one of the layouts of `[model] positions`
    (syntrain.config.core.POSITION_LAYOUTS), each computed in the precision its origin computes it: interleaved
    (syntrain's own) and fairseq (M2M100's) in float32, halves (Marian's) in float64, returned in float32."""
    half = d_model // 2
    if layout == "interleaved":
        position = torch.arange(length, dtype=torch.float32)[:, None]
        rate = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
        table = torch.zeros(length, d_model)
        table[:, 0::2] = torch.sin(position * rate)
        table[:, 1::2] = torch.cos(position * rate)
        return table
    dtype = torch.float32 if layout == "fairseq" else torch.float64
    step = math.log(10000.0) / (half - 1 if layout == "fairseq" else d_model / 2)
    angle = torch.arange(length, dtype=dtype)[:, None] * torch.exp(torch.arange(half, dtype=dtype) * -step)
    table = torch.zeros(length, d_model, dtype=dtype)
    table[:, :half], table[:, half:2 * half] = torch.sin(angle), torch.cos(angle)
    return table.float()


ACTIVATION_MODULES = {"relu": nn.ReLU, "swish": nn.SiLU, "gelu": nn.GELU}


class FeedForward(nn.Sequential):
    """Two linear layers with an activation (`[model] activation`)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float, activation: str = "relu") -> None:
        super().__init__(nn.Linear(d_model, d_ff), ACTIVATION_MODULES[activation](), nn.Dropout(dropout),
                         nn.Linear(d_ff, d_model))


def residual(x: torch.Tensor, norm: nn.Module, post: bool, sublayer: Callable[[torch.Tensor], torch.Tensor]
             ) -> torch.Tensor:
    """One residual block: pre-norm x + sublayer(norm(x)), or post-norm norm(x + sublayer(x))."""
    return norm(x + sublayer(x)) if post else x + sublayer(norm(x))


class EncoderLayer(nn.Module):
    """Self-attention (with its switches' hooks) and feed-forward, pre- or post-norm."""

    def __init__(self, cfg: ModelOptions, hooks: list[AttentionHook] = ()) -> None:
        super().__init__()
        sizes, dropouts = cfg.sizes, cfg.dropouts
        self.norm1, self.norm2 = nn.LayerNorm(sizes.d_model), nn.LayerNorm(sizes.d_model)
        self.attn = MultiHeadAttention(sizes.d_model, sizes.n_heads, dropouts.attn_dropout, hooks)
        self.ff = FeedForward(sizes.d_model, sizes.d_ff, dropouts.ff_dropout, cfg.architecture.activation)
        self.drop = nn.Dropout(dropouts.dropout)
        self.post = cfg.architecture.norm_placement == "post"

    def forward(self, x: torch.Tensor, mask: torch.Tensor, inputs: Inputs | None = None,
                records: dict | None = None) -> torch.Tensor:
        """x (B, S, C) -> (B, S, C)."""
        x = residual(x, self.norm1, self.post,
                     lambda h: self.drop(self.attn(h, mask=mask, inputs=inputs, records=records)))
        return residual(x, self.norm2, self.post, lambda h: self.drop(self.ff(h)))


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention over the encoder output, feed-forward, pre- or post-norm (each attention
    with its switches' hooks)."""

    def __init__(self, cfg: ModelOptions, self_hooks: list[AttentionHook] = (),
                 cross_hooks: list[AttentionHook] = ()) -> None:
        super().__init__()
        sizes, dropouts = cfg.sizes, cfg.dropouts
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(sizes.d_model) for _ in range(3))
        self.self_attn = MultiHeadAttention(sizes.d_model, sizes.n_heads, dropouts.attn_dropout, self_hooks)
        self.cross_attn = MultiHeadAttention(sizes.d_model, sizes.n_heads, dropouts.attn_dropout, cross_hooks)
        self.ff = FeedForward(sizes.d_model, sizes.d_ff, dropouts.ff_dropout, cfg.architecture.activation)
        self.drop = nn.Dropout(dropouts.dropout)
        self.post = cfg.architecture.norm_placement == "post"

    def forward(self, x: torch.Tensor, memory: torch.Tensor, self_mask: torch.Tensor | None, src_mask: torch.Tensor,
                cache: dict | None = None, inputs: Inputs | None = None, records: dict | None = None
                ) -> torch.Tensor:
        """x (B, T, C), memory (B, S, C) -> (B, T, C); `cache` (`KeyValueCache`s by "self", "cross") for decoding."""
        self_cache, cross_cache = (None, None) if cache is None else (cache["self"], cache["cross"])
        x = residual(x, self.norm1, self.post, lambda h: self.drop(
            self.self_attn(h, mask=self_mask, cache=self_cache, inputs=inputs, records=records)))
        x = residual(x, self.norm2, self.post, lambda h: self.drop(
            self.cross_attn(h, memory=memory, mask=src_mask, cache=cross_cache, inputs=inputs, records=records)))
        return residual(x, self.norm3, self.post, lambda h: self.drop(self.ff(h)))


class Encoder(nn.ModuleList):
    """The encoder's layers (`enc_layers`), each self-attention with the hooks the switches give it."""

    def __init__(self, cfg: ModelOptions, switches: ActiveSwitches) -> None:
        super().__init__(EncoderLayer(cfg, switches.attention_hooks("encoder", i, "self"))
                         for i in range(cfg.sizes.enc_layers))

    def forward(self, x: torch.Tensor, mask: torch.Tensor, inputs: Inputs | None = None,
                records: dict | None = None) -> torch.Tensor:
        """x (B, S, C) embedded source -> (B, S, C), before the final norm."""
        for layer in self:
            x = layer(x, mask, inputs, records)
        return x


class Decoder(nn.ModuleList):
    """The decoder's layers (`dec_layers`), self- and cross-attention with the hooks the switches give them."""

    def __init__(self, cfg: ModelOptions, switches: ActiveSwitches) -> None:
        super().__init__(DecoderLayer(cfg, switches.attention_hooks("decoder", i, "self"),
                                      switches.attention_hooks("decoder", i, "cross"))
                         for i in range(cfg.sizes.dec_layers))

    def forward(self, x: torch.Tensor, memory: torch.Tensor, self_mask: torch.Tensor | None, src_mask: torch.Tensor,
                inputs: Inputs | None = None, records: dict | None = None, layers: tuple[int, ...] = (),
                layer_states: dict[int, torch.Tensor] | None = None) -> torch.Tensor:
        """x (B, T, C) embedded decoder input -> (B, T, C), before the final norm; the output of each 1-based
        layer in `layers` goes into `layer_states`."""
        for number, layer in enumerate(self, 1):
            x = layer(x, memory, self_mask, src_mask, inputs=inputs, records=records)
            if number in layers and layer_states is not None:
                layer_states[number] = x
        return x
