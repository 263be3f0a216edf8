"""The training objective of one batch: the label-smoothed translation loss of a forward's `Outputs` plus lambda x
each switch's auxiliary loss (`Transformer.auxiliary_losses`), per target token of the optimizer update."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .batch import Batch
from .switches import ModelOptions, Outputs
from .vocab import BOS_ID, PAD_ID


def outside_softmax(cfg: ModelOptions) -> tuple[int, ...]:
    """The output ids the loss's softmax leaves out: the start token when `[model] output_start` is false (a
    pretrained model's start token, a copy of its pad or end row: syntrain.pretrained)."""
    return () if cfg.architecture.output_start else (BOS_ID,)


class _OutsideCrossEntropy(torch.autograd.Function):
    """`cross_entropy_sum` with columns left out, forward and backward written out: the log-partition of the kept
    columns is the whole one less the outside columns' share (`log1p`; an outside column is a copy of a kept
    one, so its share stays below one half), the smoothing term reads the kept columns' sum, and the gradient is
    the kept columns' softmax less the (smoothed) target, zero in the outside columns. No copy of the logits
    without those columns is made: one (N, V) temporary each way, as `F.cross_entropy`'s."""

    @staticmethod
    def forward(ctx: Any, flat: torch.Tensor, gold: torch.Tensor, smoothing: float, columns: torch.Tensor
                ) -> torch.Tensor:
        left_out = flat.index_select(-1, columns)
        whole = torch.logsumexp(flat, -1)
        kept = whole + torch.log1p(-torch.exp(left_out - whole[:, None]).sum(-1))
        loss = kept - flat.gather(-1, gold[:, None]).squeeze(-1)
        classes = flat.shape[-1] - len(columns)
        if smoothing:
            loss = (1 - smoothing) * loss + smoothing * (kept - (flat.sum(-1) - left_out.sum(-1)) / classes)
        valid = gold != PAD_ID
        ctx.save_for_backward(flat, gold, kept, valid, columns)
        ctx.smoothing, ctx.classes = smoothing, classes
        return torch.where(valid, loss, 0.0).sum()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, None, None, None]:
        flat, gold, kept, valid, columns = ctx.saved_tensors
        out = torch.exp(flat - kept[:, None])
        if ctx.smoothing:
            out.sub_(ctx.smoothing / ctx.classes)
        out.index_fill_(-1, columns, 0.0)
        out.scatter_add_(-1, gold[:, None], torch.full_like(kept[:, None], ctx.smoothing - 1))
        return out.mul_((valid * grad)[:, None]), None, None, None


def cross_entropy_sum(logits: torch.Tensor, gold: torch.Tensor, label_smoothing: float = 0.0,
                      outside: tuple[int, ...] = ()) -> torch.Tensor:
    """The (label-smoothed) cross-entropy of `logits` (..., V) against `gold` summed over the non-pad targets;
    the columns `outside` are left out of the softmax and of the smoothing (never a target): exactly
    `F.cross_entropy` over the other columns (`_OutsideCrossEntropy`)."""
    flat, gold = logits.float().flatten(0, -2), gold.flatten()
    if not outside:
        return F.cross_entropy(flat, gold, ignore_index=PAD_ID, label_smoothing=label_smoothing, reduction="sum")
    columns = torch.tensor(outside, device=flat.device)
    return _OutsideCrossEntropy.apply(flat, gold, float(label_smoothing), columns)


def translation_loss(outputs: Outputs, batch: Batch, tokens: int, label_smoothing: float,
                     outside: tuple[int, ...] = ()) -> torch.Tensor:
    """The label-smoothed cross-entropy of `outputs.logits` against `batch.tgt_out`, summed and divided by the
    update's `tokens`. When a switch computed only some positions (`outputs.loss_positions`: BiTran's sampled
    prefixes) the loss of those is scaled to all of the batch's target tokens. `outside`: `outside_softmax`."""
    gold, weight = batch.tgt_out, 1.0
    if outputs.loss_positions is not None:  # only some positions predicted: scaled to all
        gold = gold.masked_fill(~outputs.loss_positions, PAD_ID)
        weight = batch.tokens() / (gold != PAD_ID).sum().clamp(min=1)  # on the device: no sync
    if not outside:
        return weight * F.cross_entropy(outputs.logits.float().flatten(0, 1), gold.flatten(), ignore_index=PAD_ID,
                                        label_smoothing=label_smoothing, reduction="sum") / tokens
    return weight * cross_entropy_sum(outputs.logits, gold, label_smoothing, outside) / tokens


def objective(model: torch.nn.Module, outputs: Outputs, batch: Batch, tokens: int, label_smoothing: float,
              aux_totals: dict[str, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(the translation loss (`translation_loss`, its softmax without the ids `outside_softmax` of the model's
    config leaves out), the objective: it + lambda x each auxiliary loss of `model`'s switches (a `Transformer`,
    unwrapped) / `tokens`) of one batch, in one call; `aux_totals` gets each auxiliary loss (unweighted, per
    target token) added."""
    translation = translation_loss(outputs, batch, tokens, label_smoothing, outside_softmax(model.cfg))
    weights, total = model.stages.loss_weights, translation
    if not model.stages.losses:  # no switch gives a loss: nothing to ask
        return translation, total
    for name, value in model.auxiliary_losses(outputs, batch.inputs).items():
        total = total + weights[name] * value / tokens
        if aux_totals is not None:
            aux_totals[name] = aux_totals.get(name, 0.0) + value.detach() / tokens
    return translation, total
