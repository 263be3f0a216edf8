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


def wandb_login_problem() -> str | None:
    """Why wandb would not start a run here, found offline (before the run folder is made), or None: not
    logged in is no WANDB_API_KEY (or WANDB_IDENTITY_TOKEN_FILE) and no entry for the W&B host in the netrc file,
    where wandb looks (`NETRC`, else ~/.netrc, else ~/_netrc); WANDB_MODE=offline or disabled needs no login."""
    import netrc
    from urllib.parse import urlparse

    if os.environ.get("WANDB_MODE", "").lower() in ("offline", "dryrun", "disabled") or \
            os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return None
    host = urlparse(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname or "api.wandb.ai"
    path = os.path.expanduser(os.environ.get("NETRC") or "~/.netrc")
    if not os.environ.get("NETRC") and not os.path.exists(path) and os.path.exists(os.path.expanduser("~/_netrc")):
        path = os.path.expanduser("~/_netrc")
    try:
        entry = netrc.netrc(path).authenticators(host) if os.path.isfile(path) else None
    except (netrc.NetrcParseError, OSError, UnicodeDecodeError) as err:
        return f"wandb cannot read its login from {path}: {' '.join(str(err).split())}"
    if entry and entry[2]:
        return None
    return (f"wandb is not logged in to {host} (no WANDB_API_KEY, no entry in {path}): run `wandb login`, or set "
            "WANDB_MODE=offline to log locally")


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
