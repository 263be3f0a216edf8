"""The training objective of one batch: the label-smoothed translation loss of a forward's `Outputs` plus lambda x
each switch's auxiliary loss (`Transformer.auxiliary_losses`), per target token of the optimizer update."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .batch import Batch
from .switches import Outputs
from .vocab import PAD_ID


def translation_loss(outputs: Outputs, batch: Batch, tokens: int, label_smoothing: float) -> torch.Tensor:
    """The label-smoothed cross-entropy of `outputs.logits` against `batch.tgt_out`, summed and divided by the
    update's `tokens`. When a switch computed only some positions (`outputs.loss_positions`: BiTran's sampled
    prefixes) the loss of those is scaled to all of the batch's target tokens."""
    gold, weight = batch.tgt_out, 1.0
    if outputs.loss_positions is not None:  # only some positions predicted: scaled to all
        gold = gold.masked_fill(~outputs.loss_positions, PAD_ID)
        weight = batch.tokens() / (gold != PAD_ID).sum().clamp(min=1)  # on the device: no sync
    return weight * F.cross_entropy(outputs.logits.float().flatten(0, 1), gold.flatten(), ignore_index=PAD_ID,
                                    label_smoothing=label_smoothing, reduction="sum") / tokens


def objective(model: torch.nn.Module, outputs: Outputs, batch: Batch, tokens: int, label_smoothing: float,
              aux_totals: dict[str, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(the translation loss (`translation_loss`), the objective: it + lambda x each auxiliary loss of `model`'s
    switches (a `Transformer`, unwrapped) / `tokens`) of one batch, in one call; `aux_totals` gets each auxiliary
    loss (unweighted, per target token) added."""
    translation = translation_loss(outputs, batch, tokens, label_smoothing)
    weights, total = model.stages.loss_weights, translation
    if not model.stages.losses:  # no switch gives a loss: nothing to ask
        return translation, total
    for name, value in model.auxiliary_losses(outputs, batch.inputs).items():
        total = total + weights[name] * value / tokens
        if aux_totals is not None:
            aux_totals[name] = aux_totals.get(name, 0.0) + value.detach() / tokens
    return translation, total
