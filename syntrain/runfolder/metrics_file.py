"""OUT/metrics.jsonl: one JSON object per line for every logged value (training loss windows, validations, the
test score), each with its step; rank 0 writes it, and hands each line's numbers to the run's trackers
(TensorBoard, Weights & Biases: syntrain.trackers). A resumed run first drops the lines of the steps after its
checkpoint: it trains them again.
"""

from __future__ import annotations

import json
import os
from typing import Any

from synprep.textio import atomic_write, json_text

from ..trackers import Trackers
from .files import METRICS


def truncate_metrics(path: str, step: int) -> None:
    """Keep the metrics.jsonl lines of steps <= `step` (and any unreadable line is dropped)."""
    if not os.path.isfile(path):
        return
    kept = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                values = json.loads(line)
            except ValueError:
                continue
            if isinstance(values, dict) and values.get("step", 0) <= step:
                kept.append(line if line.endswith("\n") else line + "\n")
    atomic_write(path, "".join(kept).encode("utf-8"))


class MetricsLog:
    """The metrics of a run: OUT/metrics.jsonl and the trackers. Only rank 0 writes (`open_metrics_log` gives
    the other ranks one that writes nothing)."""

    def __init__(self, file: Any = None, trackers: Trackers | None = None) -> None:
        self.file, self.trackers = file, trackers

    def write(self, values: dict[str, Any]) -> None:
        """One line of metrics.jsonl (and its numbers to the trackers)."""
        if self.file:
            try:
                self.file.write(json_text(values) + "\n")
                self.file.flush()
            except OSError as err:  # a full disk: one line naming the file, not "<output>"
                from synprep.errors import InputError

                raise InputError(f"cannot write: {err.strerror or err}", self.file.name) from None
        if self.trackers:
            self.trackers.log(values)

    def close(self) -> None:
        if self.file:
            self.file.close()
        if self.trackers:
            self.trackers.close()


def open_metrics_log(out: str, rank: int, resumed_step: int | None, header: dict[str, Any], tensorboard: bool,
                     wandb_project: str, name: str) -> MetricsLog:
    """The run's metrics (rank 0; the others: one that writes nothing): metrics.jsonl opened for appending (a
    resumed run, `resumed_step` not None, drops the lines after its checkpoint; a new one starts with `header`,
    the switches' data report, at step 0) and the trackers asked for."""
    if rank != 0:
        return MetricsLog()
    path = os.path.join(out, METRICS)
    if resumed_step is not None:
        truncate_metrics(path, resumed_step)  # a resumed run redoes the steps after its checkpoint
    file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed by MetricsLog.close)
    if header and resumed_step is None:
        file.write(json_text({"step": 0, **header}) + "\n")
    return MetricsLog(file, Trackers(out, tensorboard, wandb_project, name, resumed=resumed_step is not None))
