"""Where a training run stands: its step, epoch and position in the epoch, its trained time (`TrainedClock`),
the RNG states; what a checkpoint saves of them and a resumed run reads back. Its best and patience are
`validation.EarlyStopping`'s."""

from __future__ import annotations

import contextlib
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch


class TrainedClock:
    """A run's trained time: the seconds of its training steps over all its sessions; validation and checkpoint
    writing (`paused`) are not counted, they are kept apart (`valid_seconds`). The one definition that
    `max_minutes` budgets and that the checkpoint's `elapsed_s`, metrics.jsonl's `elapsed_s`, train.log and
    --resume report. Set-up (data, model) and the final test scoring are outside it."""

    def __init__(self, before: float = 0.0, valid_before: float = 0.0) -> None:
        self.before, self.valid_before = before, valid_before  # seconds of the earlier sessions
        self.restart()

    def restart(self) -> None:
        """This session's clock starts now."""
        self.start, self.paused, self.paused_at = time.time(), 0.0, None

    def seconds(self) -> float:
        """Trained seconds of the whole run so far."""
        now = self.paused_at if self.paused_at is not None else time.time()
        return self.before + now - self.start - self.paused

    def valid_seconds(self) -> float:
        """Seconds of validation and checkpoint writing of the whole run so far."""
        return self.valid_before + self.paused + (time.time() - self.paused_at if self.paused_at is not None else 0.0)

    @contextlib.contextmanager
    def pause(self) -> Any:
        """Time spent inside is not trained time."""
        self.paused_at = time.time()
        try:
            yield
        finally:
            self.paused, self.paused_at = self.paused + time.time() - self.paused_at, None


@dataclass
class RunState:
    """The optimizer updates done (`step`), the epoch and the batches of it done (`position`, this rank's), and
    the trained time."""

    step: int = 0
    epoch: int = 0
    position: int = 0
    clock: TrainedClock = field(default_factory=TrainedClock)

    @classmethod
    def from_checkpoint(cls, ckpt: dict | None) -> RunState:
        """Where the run of `ckpt` stood (a new run: at the start)."""
        if not ckpt:
            return cls()
        return cls(ckpt["step"], ckpt["epoch"], ckpt["position"],
                   TrainedClock(float(ckpt.get("elapsed_s", 0.0)), float(ckpt.get("valid_s", 0.0))))

    def advance(self, batches: int) -> None:
        """One optimizer update over `batches` batches done."""
        self.step, self.position = self.step + 1, self.position + batches

    def next_epoch(self) -> None:
        self.epoch, self.position = self.epoch + 1, 0


def format_eta(step: int, first_step: int, elapsed: float, max_steps: int, max_minutes: float = 0.0,
               before: float = 0.0, trained: float | None = None) -> str:
    """Time left as H:MM:SS: to `max_steps` at the pace of this session's steps (`elapsed` seconds), or to
    `max_minutes` if sooner (the budget of the whole run: `trained` seconds so far, by default `before` seconds
    trained in earlier sessions + `elapsed`)."""
    left = (max_steps - step) * elapsed / (step - first_step) if step > first_step else math.inf
    if max_minutes:
        left = min(left, max(max_minutes * 60 - (before + elapsed if trained is None else trained), 0.0))
    if math.isinf(left):
        return "?"
    seconds = round(left)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def trained_text(clock: TrainedClock) -> str:
    """The trained time of a run for its log lines, saying that validation is not in it."""
    return (f"{clock.seconds() / 60:.1f} min trained (what max_minutes counts; validation and checkpoints: "
            f"{clock.valid_seconds() / 60:.1f} min more)")


def rng_state() -> dict:
    """This process's RNG states (torch, numpy, Python, CUDA): each rank's dropout stream goes on after a resume."""
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
