"""Decoding a split: its rows through the search (syntrain.search) and their pieces to text
(syntrain.postprocess), with the settings its hypotheses depend on (`DecodeSettings`). The run's final test,
`syntrain eval`, `syntrain compare` and `syntrain translate` decode through `decode_split` / `decode_split_nbest`,
by default with the run's own settings (`run_settings`), so that one checkpoint gives one set of hypotheses.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import torch

from synprep.logs import warn_once

from .dataset import ParallelData
from .model import Transformer
from .postprocess import postprocessor
from .search import beam_search_nbest, greedy
from .vocab import Vocab

log = logging.getLogger("syntrain")
Ranked = list[tuple[float, str]]  # (length-normalized log-probability, translation), best first


@dataclass(frozen=True)
class DecodeSettings:
    """What a split's hypotheses depend on besides the checkpoint and the split: the beam (1 = greedy), the
    length penalty (alpha), the batches (`max_tokens`: a sentence's output may end at a length set by the longest
    source of its batch, and other batch shapes round differently) and the torch CPU threads (0: torch's default;
    other thread counts sum in another order). The run's final test, `syntrain eval`, `syntrain compare` and
    `syntrain translate` decode with these, by default the run's own (`run_settings`)."""

    beam: int = 4
    length_penalty: float = 0.6
    max_tokens: int = 4096
    threads: int = 0

    def key(self, device: str | torch.device = "cpu") -> dict:
        """The settings as recorded beside hypotheses: threads as torch uses them here, and the device."""
        threads = self.threads or torch.get_num_threads()
        return {**asdict(self), "threads": threads, "device": torch.device(device).type}

    def apply(self) -> None:
        """Set torch's CPU threads (when `threads` is not 0)."""
        if self.threads:
            torch.set_num_threads(self.threads)


def run_settings(train_config: Any, beam: int | None = None, length_penalty: float | None = None,
                 max_tokens: int | None = None, threads: int | None = None) -> DecodeSettings:
    """The decoding settings of a run's final test (its [train] `test_beam`, `length_penalty`, `max_tokens`,
    `threads`), each replaced by the value given (not None)."""
    own = DecodeSettings(train_config.test_beam, train_config.length_penalty, train_config.max_tokens,
                         train_config.threads)
    given = {"beam": beam, "length_penalty": length_penalty, "max_tokens": max_tokens, "threads": threads}
    return replace(own, **{name: value for name, value in given.items() if value is not None})


def settings_text(key: dict) -> str:
    """Decoding settings (`DecodeSettings.key`) in words, for a log line."""
    return (f"beam {key['beam']}, length penalty {key['length_penalty']:g}, max_tokens {key['max_tokens']}, "
            f"{key['threads']} thread(s) on {key['device']}")


@torch.no_grad()
def decode_split_nbest(model: Transformer, data: ParallelData, vocab: Vocab, settings: DecodeSettings, nbest: int,
                       rows: Sequence[int] | None = None, device: str | torch.device = "cpu",
                       progress: bool | str = False, pieces: list[list[str]] | None = None) -> list[Ranked]:
    """Per row (default: all, in row order) the `nbest` translations with their length-normalized
    log-probabilities, best first (beam search), decoded with `settings` (threads set first). nbest = 0: only the
    best, greedy when the beam is 1 (score 0.0). A row whose source is longer than the model's positions
    (`max_len`) is not decoded: an empty list. `progress` (True, or the label of the lines): a bar of sentences on
    stderr when it is a terminal, else a line at the progress interval (`synprep.progress`); `pieces` (a list)
    gets the best output's pieces per row (also those that are not text: see `DecodedOutputs.text`)."""
    from synprep.progress import progress as counter

    settings.apply()
    beam, alpha = settings.beam, settings.length_penalty
    model.eval()
    rows = np.asarray(data.keep if rows is None else rows)
    position = {int(r): i for i, r in enumerate(rows)}
    out: list[Ranked] = [[] for _ in rows]
    best: list[list[str]] = [[] for _ in rows]
    text = postprocessor(data, model.switches)
    label = progress if isinstance(progress, str) else "translating"
    bar = counter(label, len(rows), "sent", shown=None if progress else False)
    fits = data.fitting(rows, model.cfg.sizes.max_len, target=False)
    if len(fits) < len(rows):
        warn_once(log, f"{data.path}: {len(rows) - len(fits)} source(s) longer than the model's "
                       f"{model.cfg.sizes.max_len} positions: not translated (an empty translation each)")
    bar.update(len(rows) - len(fits))
    for batch_rows in data.batches(settings.max_tokens, shuffle=False, rows=fits):
        batch = data.collate(batch_rows).to(device)
        inputs = batch.decoding_inputs()
        if nbest or beam > 1:
            hyps = beam_search_nbest(model, batch.src, inputs, beam, alpha, max(nbest, 1), vocab)
        else:
            hyps = [[(0.0, ids)] for ids in greedy(model, batch.src, inputs, vocab)]
        for row, ranked in zip(batch_rows, hyps):
            out[position[int(row)]] = [(score, text(vocab.decode(ids))) for score, ids in ranked]
            best[position[int(row)]] = vocab.decode(ranked[0][1])
        bar.update(len(batch_rows))
    bar.close()
    if pieces is not None:
        pieces[:] = best
    return out


def decode_split(model: Transformer, data: ParallelData, vocab: Vocab, settings: DecodeSettings,
                 rows: Sequence[int] | None = None, device: str | torch.device = "cpu", progress: bool | str = False,
                 pieces: list[list[str]] | None = None) -> list[str]:
    """The best translation of each of `rows` (default: all) of a split, in row order: `decode_split_nbest` with
    nbest 0, the one way a split is decoded for its scores ("" for a source longer than the model's positions)."""
    ranked = decode_split_nbest(model, data, vocab, settings, 0, rows, device, progress, pieces)
    return [best[0][1] if best else "" for best in ranked]
