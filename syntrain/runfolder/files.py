"""The files of a run folder: which files make a run, listing and clearing them, keeping the last N step checkpoints.

A run folder holds `last.pt`, `best.pt`, `vocab.json` (+ `vocab.src.json`: a source vocabulary of its own),
`metrics.jsonl`, `config.toml`, `train.log`, with
`--keep-last N` also `checkpoint_<step>.pt` (the N most recent), and with `--tensorboard` a `tensorboard/` folder.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import time

LAST, BEST, METRICS = "last.pt", "best.pt", "metrics.jsonl"
RUN_FILES = (LAST, BEST, "vocab.json", "vocab.src.json", METRICS, "config.toml",
             "train.log")
STEP_CHECKPOINT = re.compile(r"checkpoint_(\d+)\.pt$")


def default_run_dir(name: str, root: str = "runs") -> str:
    """`runs/<name>-<YYYYmmdd-HHMMSS>`: a fresh folder per run when no --out is given."""
    return os.path.join(root, f"{name}-{time.strftime('%Y%m%d-%H%M%S')}")


def step_checkpoint(step: int) -> str:
    """The name of the kept checkpoint of `step` (`--keep-last`)."""
    return f"checkpoint_{step}.pt"


def step_checkpoints(out: str) -> list[str]:
    """The `checkpoint_<step>.pt` files of a run folder, oldest step first."""
    found = [(int(m.group(1)), path) for path in glob.glob(os.path.join(out, "checkpoint_*.pt"))
             if (m := STEP_CHECKPOINT.search(os.path.basename(path)))]
    return [path for _, path in sorted(found)]


def existing_run_files(out: str) -> list[str]:
    """Names of the files of an earlier run in `out` (empty when there is none)."""
    names = [name for name in RUN_FILES if os.path.exists(os.path.join(out, name))]
    names += [os.path.basename(path) for path in step_checkpoints(out)]
    if os.path.isdir(os.path.join(out, "tensorboard")):
        names.append("tensorboard/")
    return names


def clear_run(out: str) -> None:
    """Delete the files of an earlier run in `out` (only those; other files stay)."""
    for name in existing_run_files(out):
        path = os.path.join(out, name)
        shutil.rmtree(path) if name.endswith("/") else os.remove(path)


def prune_step_checkpoints(out: str, keep: int) -> None:
    """Keep the `keep` most recent `checkpoint_<step>.pt` files of `out`, delete the older ones."""
    for path in step_checkpoints(out)[:-keep] if keep > 0 else []:
        os.remove(path)
