"""The generic model's [model] options, one dataclass per concept: `ModelSizes` (the sizes), `DropoutRates` (the
dropout of the residual blocks, attention weights and feed-forward activations), `WeightSharing` (one
embedding matrix for several roles), `Architecture` (norm placement, activation, positions, embedding scale,
final norms, output bias: what a pretrained model's family fixes) and `DecoderOutput` (what the decoder predicts);
and the size presets (`PRESETS`). The Transformer reads these parts
(`ModelConfig.sizes`, `.dropouts`, `.sharing`, `.architecture`) and nothing of a switch; a switch reads them through its
`ModelOptions` view of the config. Torch-free: the recipe checks and `--help` import it."""

from __future__ import annotations

from dataclasses import dataclass, fields

from synprep.tables import option


@dataclass
class ModelSizes:
    """The sizes of the model: vocabularies, width, heads, feed-forward width, layers, positions."""

    vocab_size: int = option(0, ge=0, filled=True, help="size of the joint vocabulary (set from the training data)")
    d_model: int = option(256, ge=1, help="model width")
    n_heads: int = option(4, ge=1, help="attention heads per layer")
    d_ff: int = option(1024, ge=1, help="feed-forward width")
    enc_layers: int = option(3, ge=1, help="encoder layers")
    dec_layers: int = option(3, ge=1, help="decoder layers")
    max_len: int = option(512, ge=1, help="positions (longest sequence)")
    src_vocab_size: int = option(0, ge=0, filled=True,
                                 help="size of the source vocabulary when the source has its own (separate "
                                 "BPE per side; set from the training data); 0: the joint vocabulary")


@dataclass
class DropoutRates:
    """The dropout of the model: residual and embedding (`dropout`), attention weights and feed-forward
    activations (each the residual rate unless set)."""

    dropout: float = option(0.1, ge=0, lt=1, flag=True, help="residual and embedding dropout")
    attention_dropout: float | None = option(None, ge=0, lt=1, flag=True,
                                             help="dropout on attention weights (None: same as dropout)")
    activation_dropout: float | None = option(None, ge=0, lt=1, flag=True,
                                              help="dropout after the feed-forward ReLU (None: same as dropout)")

    @property
    def attn_dropout(self) -> float:
        """The attention-weight dropout in effect."""
        return self.dropout if self.attention_dropout is None else self.attention_dropout

    @property
    def ff_dropout(self) -> float:
        """The feed-forward activation dropout in effect (fairseq's `--activation-dropout`)."""
        return self.dropout if self.activation_dropout is None else self.activation_dropout


@dataclass
class WeightSharing:
    """Which weights several roles share: the source, target and output embeddings."""

    share_embeddings: bool = option(True, help="one matrix for source, target and output embeddings (separate "
                                                "vocabularies: for target and output)")
    tie_output: bool | None = option(None, help="the output projection is the target embedding matrix (unset: as "
                                                "share_embeddings)")

    @property
    def output_tied(self) -> bool:
        """Whether the output projection is the target embedding matrix."""
        return self.share_embeddings if self.tie_output is None else self.tie_output


NORM_PLACEMENTS = ("pre", "post")
ACTIVATIONS = ("relu", "swish", "gelu")
# sinusoid layouts: "interleaved" sin/cos alternate, frequencies 10000^(-2i/d) (syntrain's own); "halves" the same
# frequencies, sin in the first half and cos in the second (Marian); "fairseq" halves with frequencies
# 10000^(-i/(d/2 - 1)) (fairseq, M2M100/NLLB)
POSITION_LAYOUTS = ("interleaved", "halves", "fairseq")


@dataclass
class Architecture:
    """How the layers are wired: where the LayerNorms sit, the feed-forward activation, the sinusoid layout and
    offset of the positions, the embedding scale, the final norms of the stacks, the output bias and the prefixes
    of both sides (what a pretrained model's family and language codes fix; the defaults are syntrain's own
    model)."""

    norm_placement: str = option("pre", choices=NORM_PLACEMENTS,
                                 help="LayerNorm before each sub-layer (pre) or after its residual sum (post)")
    activation: str = option("relu", choices=ACTIVATIONS, help="the feed-forward activation (swish = SiLU)")
    positions: str = option("interleaved", choices=POSITION_LAYOUTS,
                            help="the sinusoid layout: interleaved sin/cos, halves (sin then cos, Marian) or "
                                 "fairseq (halves, M2M100/NLLB frequencies)")
    position_offset: int = option(0, ge=0, help="the position of the first token (M2M100/NLLB: its pad id + 1)")
    scale_embeddings: bool = option(True, help="embeddings multiplied by sqrt(d_model) before the positions are "
                                               "added")
    encoder_final_norm: bool = option(True, help="a LayerNorm after the encoder's last layer")
    decoder_final_norm: bool = option(True, help="a LayerNorm after the decoder's last layer")
    output_bias: bool = option(False, help="a bias on the output logits (Marian's final logits bias)")
    start_row: int = option(1, ge=0, help="the embedding row the decoder's start token reads (1: its own; a "
                                          "pretrained model's: the row of the token it starts with, pad or end)")
    output_start: bool = option(True, help="the start token's column is in the loss's softmax (false: left out, "
                                           "as for a pretrained model whose start token is a copy of its pad or "
                                           "end)")
    source_prefix: list[int] = option(default_factory=list, ge=0,
                                      help="ids every source begins with, before its pieces (a multilingual pretrained "
                                           "model's source language code: set from src_lang_code)")
    target_prefix: list[int] = option(default_factory=list, ge=0,
                                      help="ids the decoder input holds after its start token, forced in decoding "
                                           "and left out of the loss (a multilingual pretrained model's target "
                                           "language code: set from tgt_lang_code)")


TEXT = "text"  # the decoder target of the plain model: the target sub-words


@dataclass
class DecoderOutput:
    """What the decoder predicts: its decoder target, TEXT or one a switch declares (`Switch.decoder_targets`),
    which turns that switch on."""

    decoder_target: str = option(TEXT, help="what the decoder predicts: text (the target sub-words) or a decoder "
                                            "target a switch declares, which turns it on (transitions: tree "
                                            "decoding)")


# The parts of the generic model's options, by their name in `ModelConfig` (the switches' sections follow).
CORE_PARTS: dict[str, type] = {"sizes": ModelSizes, "dropouts": DropoutRates, "sharing": WeightSharing,
                               "architecture": Architecture, "output": DecoderOutput}


def fixed_by_pretrained() -> list[str]:
    """The [model] options a pretrained model's config fixes (its sizes, sharing and architecture): a run from
    one (`[model] pretrained`) refuses them, as it refuses a preset."""
    return [spec.name for cls in (ModelSizes, WeightSharing, Architecture) for spec in fields(cls)]


PRESETS: dict[str, dict] = {
    "cpu": dict(d_model=64, n_heads=4, d_ff=256, enc_layers=2, dec_layers=2, dropout=0.1),  # 2 CPU cores, minutes
    "tiny": dict(d_model=256, n_heads=4, d_ff=1024, enc_layers=3, dec_layers=3, dropout=0.1),  # CPU
    "base": dict(d_model=512, n_heads=8, d_ff=2048, enc_layers=6, dec_layers=6, dropout=0.1),  # Vaswani base
}
