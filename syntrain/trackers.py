"""Experiment trackers of a run (rank 0): TensorBoard (OUT/tensorboard/, on by default where the tensorboard
package is installed) and Weights & Biases (`wandb_project`; `WANDB_MODE=offline` logs without network). Both
get the scalars of every metrics.jsonl line at its step; W&B also the run's configuration (config.toml)."""

from __future__ import annotations

import importlib.util
import os
import tomllib
from typing import Any

TENSORBOARD_DIR = "tensorboard"
SKIPPED = ("step", "epoch")


def tensorboard_installed() -> bool:
    return importlib.util.find_spec("tensorboard") is not None


def wandb_installed() -> bool:
    return importlib.util.find_spec("wandb") is not None


class Trackers:
    """The trackers a run's configuration asks for, opened in its run folder `out` (config.toml written)."""

    def __init__(self, out: str, tensorboard: bool, wandb_project: str, name: str, resumed: bool) -> None:
        self.tensorboard: Any = None
        self.wandb: Any = None
        if tensorboard and tensorboard_installed():
            from torch.utils.tensorboard import SummaryWriter

            self.tensorboard = SummaryWriter(os.path.join(out, TENSORBOARD_DIR))
        if wandb_project:
            import wandb

            with open(os.path.join(out, "config.toml"), "rb") as stream:
                config = tomllib.load(stream)
            self.wandb = wandb.init(project=wandb_project, name=name, dir=out, config=config,
                                    job_type="resume" if resumed else "train")

    def __bool__(self) -> bool:
        return self.tensorboard is not None or self.wandb is not None

    def log(self, values: dict[str, Any]) -> None:
        """The numbers of one metrics.jsonl line (not its step), at its step."""
        scalars = {key: value for key, value in values.items()
                   if isinstance(value, int | float) and key not in SKIPPED}
        if not scalars:
            return
        if self.tensorboard is not None:
            for key, value in scalars.items():
                self.tensorboard.add_scalar(key, value, values["step"])
        if self.wandb is not None:
            self.wandb.log(scalars, step=values["step"])

    def close(self) -> None:
        if self.tensorboard is not None:
            self.tensorboard.close()
        if self.wandb is not None:
            self.wandb.finish()
