"""The core [model] options (`ModelSizes`): what the generic model reads. Its own module so that both the model
(syntrain.model) and the switches (their `ModelOptions` view of the config) import it without a loop."""

from __future__ import annotations

from dataclasses import dataclass

from synprep.tables import option


@dataclass
class ModelSizes:
    """The generic [model] options: sizes, dropout, embeddings."""

    vocab_size: int = option(0, ge=0, filled=True, help="size of the joint vocabulary (set from the training data)")
    d_model: int = option(256, ge=1, help="model width")
    n_heads: int = option(4, ge=1, help="attention heads per layer")
    d_ff: int = option(1024, ge=1, help="feed-forward width")
    enc_layers: int = option(3, ge=1, help="encoder layers")
    dec_layers: int = option(3, ge=1, help="decoder layers")
    dropout: float = option(0.1, ge=0, lt=1, flag=True, help="residual and embedding dropout")
    attention_dropout: float | None = option(None, ge=0, lt=1, flag=True,
                                             help="dropout on attention weights (None: same as dropout)")
    activation_dropout: float | None = option(None, ge=0, lt=1, flag=True,
                                              help="dropout after the feed-forward ReLU (None: same as dropout)")
    share_embeddings: bool = option(True, help="one matrix for source, target and output embeddings (separate "
                                                "vocabularies: for target and output)")
    max_len: int = option(512, ge=1, help="positions (longest sequence)")
    src_vocab_size: int = option(0, ge=0, filled=True,
                                 help="size of the source vocabulary when the source has its own (separate "
                                 "BPE per side; set from the training data); 0: the joint vocabulary")

    @property
    def attn_dropout(self) -> float:
        """The attention-weight dropout in effect."""
        return self.dropout if self.attention_dropout is None else self.attention_dropout

    @property
    def ff_dropout(self) -> float:
        """The feed-forward activation dropout in effect (fairseq's `--activation-dropout`)."""
        return self.dropout if self.activation_dropout is None else self.activation_dropout
