"""Validation of a run: the loss and BLEU/chrF (and the switches' measures) of a split under a model
(`evaluate`: validation every eval_interval steps, the test split at the end), and early stopping: the best
value of `best_metric` so far, its step, and the validations since (`EarlyStopping`, saved in every checkpoint).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from synprep.logs import warn_once

from .config.train import TrainConfig
from .dataset import ParallelData
from .decode import decode_split, run_settings
from .loss import cross_entropy_sum, outside_softmax
from .model import Transformer
from .scoring import score
from .switches import decoded
from .vocab import Vocab

log = logging.getLogger("syntrain")

SCORE_KEYS = ("loss", "bleu", "chrf", "bleu_signature", "chrf_signature")  # `evaluate`'s own; the rest: switches'


def scores_text(model: Transformer, result: dict) -> str:
    """The switches' measures in an evaluation's `result`, for a log line ('' when none)."""
    return "".join(outputs.scores_text(result) for outputs in decoded(model.switches))


def evaluate(model: Transformer, data: ParallelData, vocab: Vocab, cfg: TrainConfig, device: torch.device,
             beam: int, sentences: int = 0, progress: bool | str = False, hyps: list[str] | None = None,
             pieces: list[list[str]] | None = None, label_smoothing: float | None = None) -> dict:
    """Validation loss (per target token, over the pairs that fit the model's positions; label-smoothed as the
    run trains, or by `label_smoothing` when given: 0, the plain loss of the final test and `syntrain eval`) and
    BLEU/chrF of `sentences` decoded rows (a source longer than the positions: an empty translation), decoded with
    the run's settings and `beam` (`decode.run_settings`, as the final test's key records them); `progress`: the
    decoding's progress (`decode.decode_split`); `hyps` and `pieces` (lists) get the hypotheses and their pieces."""
    model.eval()
    smoothing = cfg.label_smoothing if label_smoothing is None else label_smoothing
    loss = split_loss(model, data, cfg.max_tokens, device, smoothing)
    rows = data.keep[:sentences] if sentences else data.keep
    pieces = [] if pieces is None else pieces
    settings = run_settings(cfg, beam=beam)
    decoded_hyps = decode_split(model, data, vocab, settings, rows, device, progress, pieces)
    if hyps is not None:
        hyps[:] = decoded_hyps
    metrics = {"loss": round(loss, 4),
               **score(decoded_hyps, data.references(rows), data.tgt_lang, cfg.bleu_tokenize)}
    for outputs in decoded(model.switches):  # measures of the outputs beyond their text
        metrics.update(outputs.scores(pieces, data, rows))
    model.train()
    return metrics


@torch.no_grad()
def split_loss(model: Transformer, data: ParallelData, max_tokens: int, device: torch.device | str,
               label_smoothing: float = 0.0) -> float:
    """The teacher-forced cross-entropy per target token (EOS included) over the pairs of a split that fit the
    model's positions (`label_smoothing`: the validation's; 0: the plain loss `syntrain eval` reports)."""
    total, tokens = 0.0, 0
    loss_rows = data.fitting(data.loss_rows, model.cfg.sizes.max_len)  # a longer pair: no forward pass
    if len(loss_rows) < len(data.loss_rows):
        warn_once(log, f"{data.path}: {len(data.loss_rows) - len(loss_rows)} pair(s) longer than the model's "
                       f"{model.cfg.sizes.max_len} positions left out of the loss")
    for rows in data.batches(max_tokens, shuffle=False, rows=loss_rows):
        batch = data.collate(rows).to(device)
        logits = model(batch.src, batch.tgt_in, batch.inputs).logits
        total += cross_entropy_sum(logits, batch.tgt_out, label_smoothing, outside_softmax(model.cfg)).item()
        tokens += batch.tokens()
    return total / max(tokens, 1)


def valid_metrics(step: int, result: dict) -> dict:
    """The metrics.jsonl values of a validation at `step`: valid_loss, valid_bleu, valid_chrf, valid_<measure>
    of each switch's measures."""
    return {"step": step, "valid_loss": result["loss"], "valid_bleu": result["bleu"], "valid_chrf": result["chrf"],
            **{f"valid_{key}": value for key, value in result.items() if key not in SCORE_KEYS}}


@dataclass
class EarlyStopping:
    """The best validation so far by `metric` (bleu: higher is better; loss: lower), the step best.pt holds, the
    validations since without a better value; `patience` of them end the run (0: never). `stopped_early` says
    why the run ended early ('' while it goes on)."""

    metric: str
    patience: int
    best: float | None = None
    best_step: int | None = None
    bad_evals: int = 0
    stopped_early: str = ""

    @classmethod
    def from_checkpoint(cls, cfg: TrainConfig, ckpt: dict | None) -> EarlyStopping:
        """`cfg`'s early stopping, where the run of `ckpt` left it (a new run: no best yet)."""
        if not ckpt:
            return cls(cfg.best_metric, cfg.patience)
        return cls(cfg.best_metric, cfg.patience, ckpt["best"], ckpt.get("best_step"), ckpt.get("bad_evals", 0))

    def value(self, result: dict) -> float:
        """The value of `metric` in an evaluation's `result`."""
        return result["bleu"] if self.metric == "bleu" else result["loss"]

    def judge(self, result: dict) -> bool:
        """Whether the validation `result` is the best so far (then its value is the best, else one more bad
        validation); the caller sets `best_step`."""
        value = self.value(result)
        improved = self.best is None or (value > self.best if self.metric == "bleu" else value < self.best)
        self.best, self.bad_evals = (value, 0) if improved else (self.best, self.bad_evals + 1)
        return improved

    def patience_over(self) -> bool:
        return bool(self.patience) and self.bad_evals >= self.patience

    def checkpoint_fields(self) -> dict:
        return {"best": self.best, "best_step": self.best_step, "bad_evals": self.bad_evals}
