"""Transformer encoder-decoder (Vaswani et al., 2017) with optional Pascal heads in the encoder.

Pre-norm residual blocks (LayerNorm before each sub-layer, a final LayerNorm per stack: the tensor2tensor /
fairseq `--*-normalize-before` variant, which trains without tuning on small data), sinusoidal positions,
embeddings scaled by sqrt(d_model), optionally one embedding matrix shared by source, target and output
(the vocabulary is joint).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from synprep.tables import config_from_dict

from .attention import MultiHeadAttention, check_kernel
from .data import PAD_ID


@dataclass
class ModelConfig:
    """Sizes and options; `pascal_heads[i]` = Pascal heads in encoder layer i (missing = 0)."""

    vocab_size: int = 0
    d_model: int = 256
    n_heads: int = 4
    d_ff: int = 1024
    enc_layers: int = 3
    dec_layers: int = 3
    dropout: float = 0.1
    attention_dropout: float | None = None  # dropout on attention weights (None: same as `dropout`)
    share_embeddings: bool = True
    max_len: int = 512
    pascal_heads: list[int] = field(default_factory=list)
    pascal_sigma2: float = 1.0
    parent_ignore: float = 0.0  # probability q of setting a Pascal prior row to 1 (training only)

    def to_dict(self) -> dict:
        """Plain values (stored in checkpoints)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> ModelConfig:
        """Build from a dict, rejecting unknown keys and values of the wrong type with their names."""
        return config_from_dict(cls, values, "model")

    @property
    def attn_dropout(self) -> float:
        """The attention-weight dropout in effect."""
        return self.dropout if self.attention_dropout is None else self.attention_dropout


PRESETS: dict[str, dict] = {
    "tiny": dict(d_model=256, n_heads=4, d_ff=1024, enc_layers=3, dec_layers=3, dropout=0.1),  # CPU
    "base": dict(d_model=512, n_heads=8, d_ff=2048, enc_layers=6, dec_layers=6, dropout=0.1),  # Vaswani base
}


def sinusoids(length: int, d_model: int) -> torch.Tensor:
    """(length, d_model) sinusoidal position encodings."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    rate = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(length, d_model)
    table[:, 0::2] = torch.sin(position * rate)
    table[:, 1::2] = torch.cos(position * rate)
    return table


class FeedForward(nn.Sequential):
    """Two linear layers with a ReLU."""

    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(dropout), nn.Linear(d_ff, d_model))


class EncoderLayer(nn.Module):
    """Self-attention (with `pascal_heads` Pascal heads) and feed-forward, pre-norm."""

    def __init__(self, cfg: ModelConfig, pascal_heads: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attn_dropout, pascal_heads, cfg.pascal_sigma2,
                                       cfg.parent_ignore)
        self.ff = FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, parent: torch.Tensor | None) -> torch.Tensor:
        """x (B, S, C) -> (B, S, C)."""
        x = x + self.drop(self.attn(self.norm1(x), mask=mask, parent=parent))
        return x + self.drop(self.ff(self.norm2(x)))


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention over the encoder output, feed-forward, pre-norm."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(cfg.d_model) for _ in range(3))
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attn_dropout)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attn_dropout)
        self.ff = FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, self_mask: torch.Tensor | None, src_mask: torch.Tensor,
                cache: dict | None = None) -> torch.Tensor:
        """x (B, T, C), memory (B, S, C) -> (B, T, C); `cache` ({"self": {}, "cross": {}}) for decoding."""
        self_cache, cross_cache = (None, None) if cache is None else (cache["self"], cache["cross"])
        x = x + self.drop(self.self_attn(self.norm1(x), mask=self_mask, cache=self_cache))
        x = x + self.drop(self.cross_attn(self.norm2(x), memory=memory, mask=src_mask, cache=cross_cache))
        return x + self.drop(self.ff(self.norm3(x)))


class Transformer(nn.Module):
    """Encoder-decoder; `forward` returns logits (B, T, V)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        if cfg.vocab_size <= 0:
            raise ValueError("ModelConfig.vocab_size must be set (the size of the joint vocabulary)")
        if len(cfg.pascal_heads) > cfg.enc_layers:
            raise ValueError(f"pascal_heads lists {len(cfg.pascal_heads)} layers, the encoder has {cfg.enc_layers}")
        self.cfg = cfg
        heads = list(cfg.pascal_heads) + [0] * (cfg.enc_layers - len(cfg.pascal_heads))
        self.src_embed = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=PAD_ID)
        self.tgt_embed = self.src_embed if cfg.share_embeddings else nn.Embedding(cfg.vocab_size, cfg.d_model,
                                                                                  padding_idx=PAD_ID)
        self.register_buffer("positions", sinusoids(cfg.max_len, cfg.d_model), persistent=False)
        self.drop = nn.Dropout(cfg.dropout)
        self.encoder = nn.ModuleList(EncoderLayer(cfg, h) for h in heads)
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.dec_layers))
        self.enc_norm, self.dec_norm = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.output = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.apply(self._init)
        if cfg.share_embeddings:
            self.output.weight = self.src_embed.weight

    def set_attention_kernel(self, kernel: str) -> None:
        """'auto', 'math' or 'flex' for the encoder layers with Pascal heads (see attention.py)."""
        check_kernel(kernel)
        for layer in self.encoder:
            layer.attn.kernel = kernel

    def _init(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=self.cfg.d_model ** -0.5)
            nn.init.zeros_(module.weight[PAD_ID])

    def _embed(self, table: nn.Embedding, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        end = start + ids.shape[1]
        if end > self.cfg.max_len:
            raise ValueError(f"sequence of length {end} exceeds max_len {self.cfg.max_len}")
        return self.drop(table(ids) * math.sqrt(self.cfg.d_model) + self.positions[start:end])

    def encode(self, src: torch.Tensor, parent: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S) ids, parent (B, S) positions -> (memory (B, S, C), source mask (B, 1, 1, S))."""
        src_mask = (src != PAD_ID)[:, None, None, :]
        x = self._embed(self.src_embed, src)
        for layer in self.encoder:
            x = layer(x, src_mask, parent)
        return self.enc_norm(x), src_mask

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """tgt_in (B, T) ids -> logits (B, T, V)."""
        t = tgt_in.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool, device=tgt_in.device).tril()
        self_mask = causal[None, None] & (tgt_in != PAD_ID)[:, None, None, :]
        x = self._embed(self.tgt_embed, tgt_in)
        for layer in self.decoder:
            x = layer(x, memory, self_mask, src_mask)
        return self.output(self.dec_norm(x))

    def new_cache(self) -> list[dict]:
        """An empty incremental-decoding cache (per decoder layer: self-attention keys/values so far,
        cross-attention keys/values of the memory)."""
        return [{"self": {}, "cross": {}} for _ in self.decoder]

    @staticmethod
    def reorder_cache(cache: list[dict], rows: torch.Tensor) -> None:
        """Keep cache rows `rows` (beam search: the hypotheses that continue). Cross-attention entries stay:
        a sentence's beam rows share one memory."""
        for layer in cache:
            layer["self"]["k"], layer["self"]["v"] = layer["self"]["k"][rows], layer["self"]["v"][rows]

    def decode_step(self, last: torch.Tensor, step: int, memory: torch.Tensor, src_mask: torch.Tensor,
                    cache: list[dict]) -> torch.Tensor:
        """Incremental decoding: the token ids `last` (B, 1) at target position `step`, earlier positions read
        from `cache` -> logits (B, V) for the next token. Equals decode()'s last row (tested)."""
        x = self._embed(self.tgt_embed, last, start=step)
        for layer, layer_cache in zip(self.decoder, cache):
            x = layer(x, memory, None, src_mask, layer_cache)
        return self.output(self.dec_norm(x))[:, -1]

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, parent: torch.Tensor | None = None) -> torch.Tensor:
        """Teacher-forced logits (B, T, V)."""
        memory, src_mask = self.encode(src, parent)
        return self.decode(tgt_in, memory, src_mask)


def build_model(preset: str = "tiny", **overrides: object) -> Transformer:
    """A Transformer from a preset name and ModelConfig overrides (vocab_size is required)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    return Transformer(ModelConfig.from_dict({**PRESETS[preset], **overrides}))
