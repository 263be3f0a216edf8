"""Transformer encoder-decoder (Vaswani et al., 2017) with the syntax switches of docs/switches.md:
Pascal heads (encoder), syntax-directed cross-attention heads (decoder), DBSA parse heads (encoder and/or
decoder), SyncAttn (a loss over DBSA and cross-attention weights), a LISA parse head (encoder) and S&H
dependency-label embeddings (source). All off by default.

Tree decoding (Choshen & Abend; docs/tree-decoding.md): `target = "transitions"` (the decoder produces
arc-standard transitions: alone = Linearized), `parent_layers` (PARENT heads), `gcn_layers` (gated GCN over the
generated graph), `bidirectional` (BiTran: every generated token attends to every generated token; training
re-encodes every prefix). The generated graph comes as (E, 5) edge rows (`syntrain.data`); a position p sees
the edges with step <= limit[p]: p itself (one pass, causal) or the prefix end (BiTran).

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

from synprep.tables import config_from_dict, option

from .attention import MultiHeadAttention, check_kernel
from .data import PAD_ID, TARGETS


@dataclass
class ModelConfig:
    """Sizes and options; `pascal_heads[i]` = Pascal heads in encoder layer i (missing = 0)."""

    vocab_size: int = 0
    d_model: int = option(256, ge=1, help="model (embedding) dimension; a multiple of n_heads")
    n_heads: int = option(4, ge=1, help="attention heads per layer")
    d_ff: int = option(1024, ge=1, help="feed-forward inner dimension")
    enc_layers: int = option(3, ge=1, help="encoder layers")
    dec_layers: int = option(3, ge=1, help="decoder layers")
    dropout: float = option(0.1, ge=0, lt=1, help="dropout on embeddings and residual branches")
    attention_dropout: float | None = option(None, ge=0, lt=1, help="dropout on attention weights (unset: dropout)")
    activation_dropout: float | None = option(None, ge=0, lt=1,
                                              help="dropout after the feed-forward ReLU (unset: dropout)")
    share_embeddings: bool = True
    max_len: int = option(512, ge=1, help="positions (sub-words per sentence, BOS/EOS included)")
    pascal_heads: list[int] = option(default_factory=list, ge=0,
                                     help="Pascal heads per encoder layer, e.g. [2, 0, 1] (missing layers: 0)")
    pascal_sigma2: float = option(1.0, gt=0, help="variance of the Pascal parent prior (Gaussian)")
    parent_ignore: float = option(0.0, ge=0, le=1, help="probability q of ignoring a Pascal prior row (training only)")
    # syntax-directed attention (Chen et al. 2017): heads per decoder layer's cross-attention (missing = 0)
    directed_heads: list[int] = field(default_factory=list)
    directed_n: float = 4.0  # window: syntax distance <= n; Gaussian sigma = n / 2
    double_context: bool = False  # eq. 14: syntax-directed contexts next to the global heads (not replacing)
    # DBSA (Deguchi et al. 2019): the last head of layer `dbsa_layer` (1-based) learns dependency heads
    dbsa_encoder: bool = False
    dbsa_decoder: bool = False
    dbsa_layer: int = 1
    dbsa_lambda: float = 0.5
    # SyncAttn (synchronous syntactic attention): needs DBSA on both sides; 0 = off
    sync_lambda: float = 0.0
    sync_layer: int = 0  # decoder layer (1-based) whose cross-attention is C; 0 = the penultimate one
    # LISA-style baseline: the last head of encoder layer `lisa_layer` (1-based; 0 = off), dot-product scores
    lisa_layer: int = 0
    lisa_lambda: float = 1.0
    # S&H baseline (Sennrich & Haddow 2016): dependency-label embeddings in the last dimensions of the source
    label_embedding: int = 0  # 10 in the Pascal paper's baseline; 0 = off
    source_labels: list[str] = field(default_factory=list)  # label vocabulary (built from the training data)
    # tree decoding (Choshen & Abend): the decoder produces arc-standard transitions (text = sub-words)
    target: str = "text"
    parent_layers: list[int] = field(default_factory=list)  # 1-based decoder layers with a PARENT head (head 0)
    gcn_layers: int = 0  # gated GCN layers over the generated graph above the decoder embeddings (paper: 2)
    gcn_labeled: bool = True  # False: the `unlabeled` ablation (one bias for every arc label)
    gcn_gated: bool = True  # False: the `ungated` ablation (gate = 1)
    bidirectional: bool = False  # BiTran: generated tokens attend to all generated tokens (re-encodes prefixes)
    bidirectional_prefixes: int = 0  # training: 0 = exact (every prefix), k = k sampled prefixes per sentence
    transition_root: str = "drop"  # root policy of the training transitions (filled by the trainer)
    arc_labels: list[str] = field(default_factory=list)  # labels of the arc tokens (filled by the trainer)

    def to_dict(self) -> dict:
        """Plain values (stored in checkpoints)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> ModelConfig:
        """Build from a dict, rejecting unknown keys and values of the wrong type with their names."""
        return config_from_dict(cls, values, "model")

    @property
    def sync_decoder_layer(self) -> int:
        """The 0-based decoder layer of SyncAttn's cross-attention C."""
        return (self.sync_layer or max(self.dec_layers - 1, 1)) - 1

    def check(self) -> None:
        """ValueError naming the option when the switches do not fit the model."""
        if len(self.pascal_heads) > self.enc_layers:
            raise ValueError(f"pascal_heads lists {len(self.pascal_heads)} layers, the encoder has {self.enc_layers}")
        if len(self.directed_heads) > self.dec_layers:
            raise ValueError(f"directed_heads lists {len(self.directed_heads)} layers, the decoder has "
                             f"{self.dec_layers}")
        if (self.dbsa_encoder or self.dbsa_decoder) and not 1 <= self.dbsa_layer <= min(self.enc_layers,
                                                                                        self.dec_layers):
            raise ValueError(f"dbsa_layer {self.dbsa_layer} is not a layer of the model (1-based)")
        if not 0 <= self.lisa_layer <= self.enc_layers:
            raise ValueError(f"lisa_layer {self.lisa_layer} is not an encoder layer (1-based; 0 = off)")
        if self.lisa_layer and self.dbsa_encoder and self.lisa_layer == self.dbsa_layer:
            raise ValueError("LISA and encoder DBSA both use the last head of the same layer: choose another "
                             "lisa_layer")
        if self.sync_lambda and not (self.dbsa_encoder and self.dbsa_decoder):
            raise ValueError("sync_lambda > 0 (SyncAttn) needs dbsa_encoder and dbsa_decoder")
        if self.sync_lambda and not 0 <= self.sync_layer <= self.dec_layers:
            raise ValueError(f"sync_layer {self.sync_layer} is not a decoder layer (1-based; 0 = penultimate)")
        if not 0 <= self.label_embedding < self.d_model:
            raise ValueError(f"label_embedding must be in 0..{self.d_model - 1}, got {self.label_embedding}")
        if self.target not in TARGETS:
            raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {self.target!r}")
        tree = bool(self.parent_layers or self.gcn_layers or self.bidirectional)
        if tree and self.target != "transitions":
            raise ValueError("parent_layers, gcn_layers and bidirectional decode trees: set target = \"transitions\"")
        if any(not 1 <= layer <= self.dec_layers for layer in self.parent_layers):
            raise ValueError(f"parent_layers {self.parent_layers}: decoder layers are 1..{self.dec_layers}")
        if self.target == "transitions" and (self.dbsa_decoder or self.sync_lambda):
            raise ValueError("decoder DBSA / SyncAttn supervise sub-word heads: not with target = \"transitions\"")
        if self.gcn_layers < 0 or self.bidirectional_prefixes < 0:
            raise ValueError("gcn_layers and bidirectional_prefixes must be >= 0")

    def switches(self) -> str:
        """The syntax switches that are on, in one line (run header, `syntrain env --checkpoint`)."""
        on = []
        if any(self.pascal_heads):
            on.append(f"pascal heads {self.pascal_heads} (sigma2 {self.pascal_sigma2}, q {self.parent_ignore})")
        if any(self.directed_heads):
            kind = "double" if self.double_context else "single"
            on.append(f"syntax-directed heads {self.directed_heads} ({kind} context, n {self.directed_n})")
        sides = [side for side, flag in (("encoder", self.dbsa_encoder), ("decoder", self.dbsa_decoder)) if flag]
        if sides:
            on.append(f"DBSA {'+'.join(sides)} layer {self.dbsa_layer} (lambda {self.dbsa_lambda})")
        if self.sync_lambda:
            on.append(f"SyncAttn decoder layer {self.sync_decoder_layer + 1} (lambda {self.sync_lambda})")
        if self.lisa_layer:
            on.append(f"LISA encoder layer {self.lisa_layer} (lambda {self.lisa_lambda})")
        if self.label_embedding:
            on.append(f"S&H label embeddings {self.label_embedding} ({len(self.source_labels)} labels)")
        if self.target == "transitions":
            parts = [f"target transitions (root {self.transition_root}, {len(self.arc_labels)} arc labels)"]
            if self.parent_layers:
                parts.append(f"PARENT head in decoder layers {self.parent_layers}")
            if self.gcn_layers:
                kind = ("" if self.gcn_labeled else "unlabeled ") + ("gated" if self.gcn_gated else "ungated")
                parts.append(f"GCN {self.gcn_layers} layers ({kind})")
            if self.bidirectional:
                parts.append("BiTran " + (f"(approximation: {self.bidirectional_prefixes} sampled prefixes)"
                                          if self.bidirectional_prefixes else "(exact: every prefix)"))
            if len(parts) == 1:
                parts.append("linearized")
            on.append(", ".join(parts))
        return "; ".join(on) or "none (vanilla)"

    @property
    def uses_graph(self) -> bool:
        """The decoder reads the generated graph (PARENT, GCN)."""
        return bool(self.parent_layers or self.gcn_layers)

    @property
    def recomputes_prefix(self) -> bool:
        """Decoding re-runs the decoder over the whole prefix at each step (no incremental cache)."""
        return self.uses_graph or self.bidirectional

    def batch_features(self, training: bool) -> dict[str, str]:
        """Batch features the switches need (see data.FEATURE_COLUMNS) -> the switch that needs each;
        `training` adds the supervision of the auxiliary losses."""
        need = {}
        if any(self.directed_heads):
            need["distances"] = "syntax-directed attention"
        if self.label_embedding:
            need["labels"] = "S&H label embeddings"
        if training and (self.dbsa_encoder or self.lisa_layer):
            need["src_heads"] = "DBSA (encoder)" if self.dbsa_encoder else "LISA"
        if training and self.dbsa_decoder:
            need["tgt_heads"] = "DBSA (decoder)"
        return need

    def loss_weights(self) -> dict[str, float]:
        """Auxiliary loss name -> its lambda (names as `Transformer.syntax_losses` returns them)."""
        return {"dep_src": self.dbsa_lambda, "dep_tgt": self.dbsa_lambda, "lisa": self.lisa_lambda,
                "sync": self.sync_lambda}

    @property
    def attn_dropout(self) -> float:
        """The attention-weight dropout in effect."""
        return self.dropout if self.attention_dropout is None else self.attention_dropout

    @property
    def ff_dropout(self) -> float:
        """The feed-forward activation dropout in effect (fairseq's `--activation-dropout`)."""
        return self.dropout if self.activation_dropout is None else self.activation_dropout


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
    """Self-attention (Pascal heads, a parse head) and feed-forward, pre-norm."""

    def __init__(self, cfg: ModelConfig, pascal_heads: int, parse_scores: str = "") -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attn_dropout, pascal_heads, cfg.pascal_sigma2,
                                       cfg.parent_ignore, parse_scores=parse_scores)
        self.ff = FeedForward(cfg.d_model, cfg.d_ff, cfg.ff_dropout)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, parent: torch.Tensor | None) -> torch.Tensor:
        """x (B, S, C) -> (B, S, C)."""
        x = x + self.drop(self.attn(self.norm1(x), mask=mask, parent=parent))
        return x + self.drop(self.ff(self.norm2(x)))


class GatedGCN(nn.Module):
    """Labeled, gated graph convolution layers with residual connections (Choshen & Abend, section 4):
    h_v <- h_v + ReLU(sum over u in N(v) of g_uv (W_dir(u,v) h_u + b_lab(u,v))),
    g_uv = sigmoid(h_u . w_dir(u,v) + b'_lab(u,v)); directions self (u = v), from a parent (u -> v) and from a
    child (v -> u); weights per direction, biases per label (0 = self, 1 = unseen, 2... the arc labels).
    `labeled` False: one bias for every arc label; `gated` False: g = 1. An edge is used by node v when its
    step <= limit[v] (the graph generated so far)."""

    def __init__(self, d_model: int, n_labels: int, layers: int, labeled: bool = True, gated: bool = True
                 ) -> None:
        super().__init__()
        self.labeled, self.gated, self.d_model = labeled, gated, d_model
        self.weight = nn.ModuleList(nn.Linear(d_model, 3 * d_model, bias=False) for _ in range(layers))
        self.bias = nn.ModuleList(nn.Embedding(n_labels, d_model) for _ in range(layers))
        if gated:
            self.gate = nn.ModuleList(nn.Linear(d_model, 3, bias=False) for _ in range(layers))
            self.gate_bias = nn.ModuleList(nn.Embedding(n_labels, 1) for _ in range(layers))

    def forward(self, h: torch.Tensor, graph: torch.Tensor, limit: torch.Tensor) -> torch.Tensor:
        """h (B, T, C), graph (E, 5) (batch, parent, child, label, step), limit (B, T) -> (B, T, C)."""
        b, t, c = h.shape
        batch, parent, child, label, step = graph.unbind(1)
        if not self.labeled:
            label = torch.ones_like(label)
        # each edge sends a message parent -> child (direction 1) and child -> parent (direction 2)
        rows = torch.cat([batch, batch])
        source, target = torch.cat([parent, child]), torch.cat([child, parent])
        direction = torch.cat([torch.ones_like(parent), torch.full_like(child, 2)])
        labels = torch.cat([label, label])
        visible = (torch.cat([step, step]) <= limit[rows, target]).to(h.dtype)
        self_label = torch.zeros((b, t), dtype=torch.long, device=h.device)
        for i, weight in enumerate(self.weight):
            projected = weight(h).view(b, t, 3, c)
            if self.gated:
                gates = self.gate[i](h)  # (B, T, 3)
                self_gate = torch.sigmoid(gates[..., 0] + self.gate_bias[i](self_label)[..., 0])[..., None]
                edge_gate = torch.sigmoid(gates[rows, source, direction] + self.gate_bias[i](labels)[:, 0])[:, None]
            else:
                self_gate, edge_gate = 1.0, 1.0
            total = self_gate * (projected[:, :, 0] + self.bias[i](self_label))
            messages = edge_gate * (projected[rows, source, direction] + self.bias[i](labels)) * visible[:, None]
            total = total.index_put((rows, target), messages.to(total.dtype), accumulate=True)
            h = h + torch.relu(total)
        return h


def parent_mask(graph: torch.Tensor, limit: torch.Tensor) -> torch.Tensor:
    """PARENT head: (B, T, T) True where query t may attend to key j: j = t, or j is a parent of t in the
    graph generated so far (an edge j -> t with step <= limit[t])."""
    b, t = limit.shape
    batch, parent, child, _, step = graph.unbind(1)
    visible = step <= limit[batch, child]
    mask = torch.zeros((b, t, t), dtype=torch.bool, device=limit.device)
    mask[batch[visible], child[visible], parent[visible]] = True
    return mask | torch.eye(t, dtype=torch.bool, device=limit.device)[None]


class DecoderLayer(nn.Module):
    """Causal self-attention (a parse head or a PARENT head), cross-attention over the encoder output
    (syntax-directed heads, recorded mean weights), feed-forward, pre-norm."""

    def __init__(self, cfg: ModelConfig, directed_heads: int = 0, parse_scores: str = "",
                 record_cross: bool = False, parent_head: bool = False) -> None:
        super().__init__()
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(cfg.d_model) for _ in range(3))
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attn_dropout, parse_scores=parse_scores,
                                            parent_head=parent_head)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attn_dropout, directed_heads=directed_heads,
                                             directed_n=cfg.directed_n, double_context=cfg.double_context,
                                             record_mean=record_cross)
        self.ff = FeedForward(cfg.d_model, cfg.d_ff, cfg.ff_dropout)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, self_mask: torch.Tensor | None, src_mask: torch.Tensor,
                cache: dict | None = None, distances: torch.Tensor | None = None,
                parents: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, T, C), memory (B, S, C) -> (B, T, C); `cache` ({"self": {}, "cross": {}}) for decoding;
        `distances` (B, S, S) for syntax-directed heads; `parents` (B, T, T) the PARENT head's mask."""
        self_cache, cross_cache = (None, None) if cache is None else (cache["self"], cache["cross"])
        x = x + self.drop(self.self_attn(self.norm1(x), mask=self_mask, cache=self_cache, parent_mask=parents))
        x = x + self.drop(self.cross_attn(self.norm2(x), memory=memory, mask=src_mask, cache=cross_cache,
                                          distances=distances))
        return x + self.drop(self.ff(self.norm3(x)))


class Transformer(nn.Module):
    """Encoder-decoder; `forward` returns logits (B, T, V)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        if cfg.vocab_size <= 0:
            raise ValueError("ModelConfig.vocab_size must be set (the size of the joint vocabulary)")
        cfg.check()
        self.cfg = cfg
        heads = list(cfg.pascal_heads) + [0] * (cfg.enc_layers - len(cfg.pascal_heads))
        directed = list(cfg.directed_heads) + [0] * (cfg.dec_layers - len(cfg.directed_heads))
        enc_parse = [""] * cfg.enc_layers
        if cfg.dbsa_encoder:
            enc_parse[cfg.dbsa_layer - 1] = "biaffine"
        if cfg.lisa_layer:
            enc_parse[cfg.lisa_layer - 1] = "dot"
        dec_parse = [""] * cfg.dec_layers
        if cfg.dbsa_decoder:
            dec_parse[cfg.dbsa_layer - 1] = "biaffine"
        self.src_embed = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=PAD_ID)
        self.tgt_embed = self.src_embed if cfg.share_embeddings else nn.Embedding(cfg.vocab_size, cfg.d_model,
                                                                                  padding_idx=PAD_ID)
        if cfg.label_embedding:  # ids: 0 = none (EOS, pad), 1 = a label unseen in training, 2... source_labels
            self.label_embed = nn.Embedding(len(cfg.source_labels) + 2, cfg.label_embedding, padding_idx=0)
        self.register_buffer("positions", sinusoids(cfg.max_len, cfg.d_model), persistent=False)
        self.drop = nn.Dropout(cfg.dropout)
        self.encoder = nn.ModuleList(EncoderLayer(cfg, h, p) for h, p in zip(heads, enc_parse))
        self.decoder = nn.ModuleList(DecoderLayer(cfg, d, p, bool(cfg.sync_lambda) and i == cfg.sync_decoder_layer,
                                                  i + 1 in cfg.parent_layers)
                                     for i, (d, p) in enumerate(zip(directed, dec_parse)))
        if cfg.gcn_layers:  # label ids: 0 = self, 1 = unseen, 2... arc_labels
            self.gcn = GatedGCN(cfg.d_model, len(cfg.arc_labels) + 2, cfg.gcn_layers, cfg.gcn_labeled, cfg.gcn_gated)
        self.sampled_positions: torch.Tensor | None = None  # BiTran approximation: the positions with a loss
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
            nn.init.zeros_(module.weight[PAD_ID])  # PAD_ID = 0 = also the label embedding's "none"

    def _embed(self, table: nn.Embedding, ids: torch.Tensor, start: int = 0, labels: torch.Tensor | None = None
               ) -> torch.Tensor:
        end = start + ids.shape[1]
        if end > self.cfg.max_len:
            raise ValueError(f"sequence of length {end} exceeds max_len {self.cfg.max_len}")
        x = table(ids)
        if labels is not None:  # S&H: label embeddings replace the last `label_embedding` dimensions
            x = torch.cat([x[..., : -self.cfg.label_embedding], self.label_embed(labels)], dim=-1)
        return self.drop(x * math.sqrt(self.cfg.d_model) + self.positions[start:end])

    def encode(self, src: torch.Tensor, parent: torch.Tensor | None = None, labels: torch.Tensor | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S) ids, parent (B, S) positions, labels (B, S) label ids (S&H) -> (memory (B, S, C),
        source mask (B, 1, 1, S))."""
        src_mask = (src != PAD_ID)[:, None, None, :]
        if self.cfg.label_embedding and labels is None:
            raise ValueError("S&H label embeddings need the source labels")
        x = self._embed(self.src_embed, src, labels=labels if self.cfg.label_embedding else None)
        for layer in self.encoder:
            x = layer(x, src_mask, parent)
        return self.enc_norm(x), src_mask

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor,
               distances: torch.Tensor | None = None, graph: torch.Tensor | None = None) -> torch.Tensor:
        """tgt_in (B, T) ids -> logits (B, T, V); `distances` (B, S, S) for syntax-directed heads, `graph` (E, 5)
        the generated graph (PARENT, GCN). BiTran: only the last non-pad position's logits are a prediction."""
        return self.output(self.decode_hidden(tgt_in, memory, src_mask, distances, graph))

    def decode_hidden(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor,
                      distances: torch.Tensor | None = None, graph: torch.Tensor | None = None) -> torch.Tensor:
        """The decoder's normalized output states (B, T, C) (see `decode`)."""
        b, t = tgt_in.shape
        valid = tgt_in != PAD_ID
        positions = torch.arange(t, device=tgt_in.device)
        if self.cfg.bidirectional:  # M_bi: every generated token sees every generated token (the non-pad prefix)
            self_mask = valid[:, None, None, :]
            limit = (valid.sum(1) - 1)[:, None].expand(b, t)
        else:
            causal = torch.ones(t, t, dtype=torch.bool, device=tgt_in.device).tril()
            self_mask = causal[None, None] & valid[:, None, None, :]
            limit = positions[None].expand(b, t)
        x = self._embed(self.tgt_embed, tgt_in)
        parents = None
        if self.cfg.uses_graph:
            if graph is None:
                raise ValueError("PARENT heads and the GCN need the generated graph of the target transitions")
            if self.cfg.gcn_layers:
                x = self.gcn(x, graph, limit)
            if self.cfg.parent_layers:
                parents = parent_mask(graph, limit)
        for layer in self.decoder:
            x = layer(x, memory, self_mask, src_mask, distances=distances,
                      parents=parents if layer.self_attn.parent_head else None)
        return self.dec_norm(x)

    def prefix_logits(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor,
                      distances: torch.Tensor | None = None, graph: torch.Tensor | None = None) -> torch.Tensor:
        """BiTran teacher forcing (B, T, V): the prediction at input position p comes from a pass over the
        prefix 0..p alone (its own graph, bidirectional attention), one pass per prefix, batched as B x T rows
        (cost O(T) passes). In training with `bidirectional_prefixes` = k, only k sampled prefixes per
        sentence are computed (the approximation); `sampled_positions` (B, T) then marks them (others: zeros)."""
        b, t = tgt_in.shape
        valid = tgt_in != PAD_ID
        chosen = valid
        self.sampled_positions = None
        if self.training and self.cfg.bidirectional_prefixes:
            noise = torch.rand((b, t), device=tgt_in.device).masked_fill(~valid, 2.0)
            rank = noise.argsort(1).argsort(1)
            chosen = valid & (rank < self.cfg.bidirectional_prefixes)
            self.sampled_positions = chosen
        rows_b, rows_p = chosen.nonzero(as_tuple=True)
        positions = torch.arange(t, device=tgt_in.device)
        row_tgt = tgt_in[rows_b].masked_fill(positions[None] > rows_p[:, None], PAD_ID)
        row_graph = None
        if graph is not None and self.cfg.uses_graph:
            pairs = (graph[:, 0:1] == rows_b[None]) & (graph[:, 4:5] <= rows_p[None])
            edge, row = pairs.nonzero(as_tuple=True)
            row_graph = graph[edge].clone()
            row_graph[:, 0] = row
        hidden = self.decode_hidden(row_tgt, memory[rows_b], src_mask[rows_b],
                                    None if distances is None else distances[rows_b], row_graph)
        last = self.output(hidden[torch.arange(len(rows_b), device=hidden.device), rows_p])
        out = torch.zeros((b, t, last.shape[-1]), dtype=last.dtype, device=last.device)
        return out.index_put((rows_b, rows_p), last)

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
                    cache: list[dict], distances: torch.Tensor | None = None) -> torch.Tensor:
        """Incremental decoding: the token ids `last` (B, 1) at target position `step`, earlier positions read
        from `cache` -> logits (B, V) for the next token. Equals decode()'s last row (tested)."""
        x = self._embed(self.tgt_embed, last, start=step)
        for layer, layer_cache in zip(self.decoder, cache):
            x = layer(x, memory, None, src_mask, layer_cache, distances)
        return self.output(self.dec_norm(x))[:, -1]

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, parent: torch.Tensor | None = None,
                distances: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                graph: torch.Tensor | None = None) -> torch.Tensor:
        """Teacher-forced logits (B, T, V); the attention weights the auxiliary losses need are kept in the
        layers until the next forward (see `syntax_losses`). BiTran: `prefix_logits`."""
        memory, src_mask = self.encode(src, parent, labels)
        if self.cfg.bidirectional:
            return self.prefix_logits(tgt_in, memory, src_mask, distances, graph)
        return self.decode(tgt_in, memory, src_mask, distances, graph)

    def syntax_losses(self, src_head: torch.Tensor | None, tgt_head: torch.Tensor | None, tgt_in: torch.Tensor
                      ) -> dict[str, torch.Tensor]:
        """The auxiliary losses of the last forward, unweighted sums over the batch (names as in
        `ModelConfig.loss_weights`): DBSA/LISA -log A[t, head(t)] over rows with a head (>= 0), SyncAttn
        sum (D' - D)^2 over the unmasked cells."""
        cfg, losses = self.cfg, {}
        if cfg.dbsa_encoder:
            losses["dep_src"] = dependency_loss(self.encoder[cfg.dbsa_layer - 1].attn.parse_log_weights, src_head)
        if cfg.lisa_layer:
            losses["lisa"] = dependency_loss(self.encoder[cfg.lisa_layer - 1].attn.parse_log_weights, src_head)
        if cfg.dbsa_decoder:
            losses["dep_tgt"] = dependency_loss(self.decoder[cfg.dbsa_layer - 1].self_attn.parse_log_weights,
                                                tgt_head)
        if cfg.sync_lambda:
            losses["sync"] = sync_loss(self.encoder[cfg.dbsa_layer - 1].attn.parse_log_weights.exp(),
                                       self.decoder[cfg.dbsa_layer - 1].self_attn.parse_log_weights.exp(),
                                       self.decoder[cfg.sync_decoder_layer].cross_attn.mean_weights, tgt_in != PAD_ID)
        return losses


def dependency_loss(log_weights: torch.Tensor, head: torch.Tensor | None) -> torch.Tensor:
    """DBSA eq. 5 / LISA: sum of -log A[t, head(t)] over the rows t with a head (head >= 0); log_weights
    (B, T, S), head (B, T) positions, -1 = no loss for that row."""
    if head is None:
        raise ValueError("the dependency loss needs the heads of the batch (src_head / tgt_head)")
    supervised = head >= 0
    picked = log_weights.gather(-1, head.clamp(min=0)[..., None])[..., 0]
    return -torch.where(supervised, picked, torch.zeros_like(picked)).sum()


def sync_loss(encoder: torch.Tensor, decoder: torch.Tensor, cross: torch.Tensor, tgt_valid: torch.Tensor
              ) -> torch.Tensor:
    """SyncAttn eqs. 7-9: D' = softmax(mask(C E C^T)), sum of (D' - D)^2 over the unmasked cells.

    encoder E (B, S, S), decoder D (B, T, T), cross C (B, T, S), tgt_valid (B, T) non-pad target inputs.
    Masked cells (a later or a pad key, a pad query) are zero in both D' and D."""
    t = decoder.shape[-1]
    causal = torch.ones(t, t, dtype=torch.bool, device=decoder.device).tril()
    allowed = causal[None] & tgt_valid[:, None, :] & tgt_valid[:, :, None]
    mapped = (cross.float() @ encoder.float() @ cross.float().transpose(1, 2)).masked_fill(~allowed, -1e9)
    target = torch.softmax(mapped, dim=-1) * allowed  # (a pad query row: uniform, then zeroed)
    return ((target - decoder.float() * allowed) ** 2).sum()


def build_model(preset: str = "tiny", **overrides: object) -> Transformer:
    """A Transformer from a preset name and ModelConfig overrides (vocab_size is required)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    return Transformer(ModelConfig.from_dict({**PRESETS[preset], **overrides}))
