"""Run folders and checkpoint files: which files make a run, keeping the last N step checkpoints, averaging.

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

import torch

RUN_FILES = ("last.pt", "best.pt", "vocab.json", "vocab.src.json", "metrics.jsonl", "config.toml",
             "train.log")
STEP_CHECKPOINT = re.compile(r"checkpoint_(\d+)\.pt$")


def default_run_dir(name: str, root: str = "runs") -> str:
    """`runs/<name>-<YYYYmmdd-HHMMSS>`: a fresh folder per run when no --out is given."""
    return os.path.join(root, f"{name}-{time.strftime('%Y%m%d-%H%M%S')}")


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


def run_identity(ckpt: dict) -> dict:
    """What makes checkpoints steps of one run: its folder, training data (signature and shards) and seed."""
    stored = ckpt.get("train_config") or {}
    out = stored.get("out")
    return {"run folder": os.path.abspath(out) if isinstance(out, str) and out else None,
            "training data": (ckpt.get("signature"), ckpt.get("data_fingerprint"), ckpt.get("dataset")),
            "seed": stored.get("seed")}


def average_checkpoints(paths: list[str], force: bool = False) -> dict:
    """The checkpoint of the last path with its model weights replaced by the mean over all paths (as fairseq's
    average_checkpoints.py); the optimizer state is dropped. All must share model configuration and vocabulary,
    and (unless `force`) be checkpoints of one run: its folder, training data and seed."""
    from synprep.textio import regular_file

    if not paths:
        raise ValueError("no checkpoints to average")
    total: dict[str, torch.Tensor] = {}
    base: dict = {}
    for path in paths:
        regular_file(path, "the checkpoint")
        try:
            ckpt = torch.load(path, map_location="cpu", weights_only=False)
        except Exception as error:  # pickle/zip errors of all kinds
            raise ValueError(f"{path}: not a readable checkpoint ({type(error).__name__}: {error})") from None
        if not isinstance(ckpt, dict) or "model" not in ckpt or "model_config" not in ckpt:
            raise ValueError(f"{path}: not a syntrain checkpoint")
        if base and (ckpt["model_config"] != base["model_config"] or ckpt.get("vocab") != base.get("vocab")
                     or ckpt.get("src_vocab") != base.get("src_vocab")):
            raise ValueError(f"{path}: another model configuration or vocabulary than {paths[0]}")
        if base and not force:
            differ = [what for what, value in run_identity(ckpt).items() if value != run_identity(base)[what]]
            if differ:
                raise ValueError(f"{path}: a checkpoint of another run than {paths[0]} (its {' and '.join(differ)} "
                                 "differ): average the checkpoints of one run, or --force")
        for name, tensor in ckpt["model"].items():
            value = tensor.double() if tensor.is_floating_point() else tensor
            total[name] = total[name] + value if name in total and tensor.is_floating_point() else value
        base = ckpt
    model = {name: (value / len(paths)).to(base["model"][name].dtype) if value.is_floating_point() else value
             for name, value in total.items()}
    averaged = {key: value for key, value in base.items() if key not in ("optimizer", "scheduler", "rng")}
    return {**averaged, "model": model, "averaged_from": [os.path.abspath(p) for p in paths]}


def save_checkpoint(state: dict, path: str) -> None:
    """torch.save under a temporary name, then rename: a full disk or a kill leaves the previous file intact and
    no partial one; a write error is one line naming the file."""
    import torch

    from synprep.errors import InputError
    from synprep.textio import replaceable

    tmp = path + ".tmp" if replaceable(path) else path  # a device (/dev/null) is written in place, never replaced
    try:
        torch.save(state, tmp)
        if tmp != path:
            os.replace(tmp, path)
    except (OSError, RuntimeError) as err:  # torch reports a full disk as a RuntimeError of its zip writer
        if tmp != path and os.path.exists(tmp):
            os.remove(tmp)
        reason = getattr(err, "strerror", None) or "write failed (disk full?)"
        raise InputError(f"cannot write the checkpoint: {reason}", path) from None
