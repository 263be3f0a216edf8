"""The layers of the Transformer's stacks (residual blocks, pre- or post-norm: `[model] norm_placement`) and the
stacks themselves: `Encoder` and `Decoder`, each a list of layers with the attention hooks of the switches that are
on (syntrain.attention), composed by `syntrain.model.Transformer`. A stack is an `nn.ModuleList`, so parameters are
named `encoder.<i>.*` and `decoder.<i>.*` (the checkpoints' names)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from .attention import MultiHeadAttention
from .config.model import ModelConfig
from .switches import AttentionHook, Inputs
from .switches.active import ActiveSwitches


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

    def __init__(self, cfg: ModelConfig, hooks: list[AttentionHook] = ()) -> None:
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

    def __init__(self, cfg: ModelConfig, self_hooks: list[AttentionHook] = (),
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

    def __init__(self, cfg: ModelConfig, switches: ActiveSwitches) -> None:
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

    def __init__(self, cfg: ModelConfig, switches: ActiveSwitches) -> None:
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
