"""SyncAttn (synchronous syntactic attention): a loss tying the target parse head to the source parse head
through the cross-attention.

C = the head-averaged cross-attention weights of decoder layer `sync_layer` (1-based; 0 = the penultimate),
E and D = the encoder and decoder parse heads' attention (both sides of the parse_head switch, same layer):
D' = softmax(mask(C E C^T)), loss sum of (D' - D)^2 over the unmasked cells (eqs. 7-9), weighted by
`sync_lambda` (0 = off).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..config import option
from . import parse_head
from .base import AttentionHook, Heads, Inputs, ModelOptions, Outputs, Switch
from .registry import register
from .tree_decoding import TreeDecoding

CROSS = "sync_cross"  # record name: C (B, T, S)


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


class MeanCrossWeights(AttentionHook):
    """Records a cross-attention's weights averaged over all its heads (C)."""

    heads = Heads.every()
    ops = ("record",)
    name = "SyncAttn"

    def record(self, attn: nn.Module, log_weights: torch.Tensor, records: dict[str, torch.Tensor]) -> None:
        records[CROSS] = log_weights.exp().mean(dim=1)


@dataclass
class SyncConfig:
    """[model] options of SyncAttn."""

    sync_lambda: float = option(0.0, ge=0, help="weight of the SyncAttn loss (0: off)")
    sync_layer: int = option(0, ge=0, help="1-based decoder layer whose cross-attention is C (0: penultimate)")


def sync_decoder_layer(options: SyncConfig, dec_layers: int) -> int:
    """The 0-based decoder layer of SyncAttn's cross-attention C in a decoder of `dec_layers` layers."""
    return (options.sync_layer or max(dec_layers - 1, 1)) - 1


class SyncAttn(Switch[SyncConfig], name="sync", priority=40, config=SyncConfig, switched_by=("sync_lambda",)):
    """The SyncAttn loss over the parse heads and a decoder cross-attention (`sync_layer` 0: the penultimate
    layer); needs DBSA on both sides (`dbsa_encoder`, `dbsa_decoder`).

    Eqs. 6-9 of the paper that describes DBSA; its parse heads are DBSA's, trained on the sub-word heads `dbsa_rule`
    names (by default the released DBSA rule): D' = softmax(mask(C E C^T)), E = the encoder DBSA head's attention, D =
    the decoder DBSA head's attention (both of layer `dbsa_layer`), C = the cross-attention of decoder layer
    `sync_layer` **averaged over its heads** (as used by the layer: syntax-directed heads included when that layer has
    them); L_sync = sum over the unmasked cells (D' - D)^2, added as lambda_sync L_sync. Masked cells (a later target
    position, a pad query or key) are zero in both. L_sync = 0 when D' = D, > 0 otherwise (tested). Paper values:
    lambda_dep 0.5, l_dep 1, lambda_sync 0.5 (WMT14 En-De; 0.1 En-Ro, 10 Ja-En), l_sync 5 of 6 (the penultimate layer,
    our default `sync_layer = 0`).

    Loss logged as `loss_sync`. Recipes: `pipelines/train/multi30k-syncattn.toml` (lambda_sync 0.5, penultimate decoder
    layer) and `wmt14-en-de-syncattn.toml` (the paper's WMT14 En-De setup: base preset, `sync_layer = 5`)."""

    example = {"dbsa_encoder": True, "dbsa_decoder": True, "sync_lambda": 0.5}

    @classmethod
    def check(cls, cfg: ModelOptions) -> None:
        options = cls.section(cfg)
        if not options.sync_lambda:
            return
        if not parse_head.on_both_sides(cfg):
            raise ValueError(f"sync_lambda > 0 (SyncAttn) needs {parse_head.BOTH_SIDES}")
        cls.check_layers(cfg, "sync_layer", "decoder")
        if TreeDecoding.active(cfg):
            raise ValueError("SyncAttn supervises sub-word heads: not with decoder_target = \"transitions\"")

    def describe(self) -> str:
        layer = sync_decoder_layer(self.options, self.cfg.sizes.dec_layers)
        return f"SyncAttn decoder layer {layer + 1} (lambda {self.options.sync_lambda})"

    def attention_hooks(self, stack: str, layer: int, kind: str) -> list[AttentionHook]:
        if (stack, kind) == ("decoder", "cross") and layer == sync_decoder_layer(self.options,
                                                                                  self.cfg.sizes.dec_layers):
            return [MeanCrossWeights()]
        return []

    loss_names = ("sync",)

    def loss_weights(self) -> dict[str, float]:
        return {"sync": self.options.sync_lambda}

    def losses(self, model: nn.Module, outputs: Outputs, inputs: Inputs) -> dict[str, torch.Tensor]:
        records = outputs.records
        return {"sync": sync_loss(records[parse_head.ENCODER].exp(), records[parse_head.DECODER].exp(),
                                  records[CROSS], outputs.target_valid)}


register(SyncAttn)
