"""Resuming a run from its folder: the checkpoint `--resume` continues from (last.pt, else the newest complete
one), a lost best.pt found or re-created, the checks that a resumed run is the run (its data, model and
optimization settings), and whether it has anything left to do under its budget.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from ..config.train import DATA_KEYS, TrainConfig
from .checkpoints import field_problem
from .config_file import toml_plain
from .files import existing_run_files, step_checkpoints

RESUMABLE = ("model", "optimizer", "scheduler", "step", "epoch", "position", "rng", "vocab", "model_config", "best")


def checkpoint_problem(ckpt: object) -> str | None:
    """What makes `ckpt` (a loaded checkpoint) not one to resume from, in words, or None."""
    if not isinstance(ckpt, dict):
        return f"not a table but {type(ckpt).__name__}"
    missing = [key for key in RESUMABLE if key not in ckpt]
    if missing:
        return f"no {missing[0]}"
    if (problem := field_problem(ckpt)) is not None:
        return problem
    rngs = ckpt["rng"] if isinstance(ckpt["rng"], list) else [ckpt["rng"]]
    if not rngs or not all(isinstance(rng, dict) and {"torch", "numpy", "python"} <= set(rng) for rng in rngs):
        return "rng is not the random states of a run"
    return None


# [train] keys a resumed run may change (the budget, evaluation, logging, the machine); every other key, the
# [model] table, the preset and the training data must be the run's
SESSION_KEYS = ("max_steps", "max_minutes", "eval_interval", "eval_sentences", "eval_beam", "test_beam",
                "length_penalty", "log_interval", "threads", "device", "attention", "precision", "keep_last",
                "patience", "best_metric", "tensorboard", "wandb_project", "verify_shards", "shape_ladder", "compile",
                "name", "out", "resume", "overwrite", "valid", "test", "data", "bundle", "bleu_tokenize")


@dataclass(frozen=True)
class Resumed:
    """The checkpoint a resumed run continues from: its file (`path`), its dict, what the resume changes (notes
    for the log), and on rank 0 a lost best.pt (`lost_best`: what is lost, the file holding its weights or None)."""

    path: str
    ckpt: dict
    notes: tuple[str, ...] = ()
    lost: tuple[str, str | None] | None = None


def _readable_state(path: str) -> dict | None:
    """A checkpoint's dict when it is complete enough to resume from (tensors memory-mapped, not loaded)."""
    from synprep.textio import regular_file

    if not os.path.isfile(path):
        return None
    import torch

    try:
        regular_file(path)
        ckpt = torch.load(path, map_location="cpu", mmap=True, weights_only=False)
    except Exception:  # noqa: BLE001 (any damage: the next candidate)
        return None
    return ckpt if checkpoint_problem(ckpt) is None else None


def resume_point(out: str) -> tuple[str, dict] | None:
    """The checkpoint `--resume` continues from: OUT/last.pt, or when it is missing or damaged the newest complete
    one of checkpoint_<step>.pt and best.pt. None when OUT holds no earlier run (a resume then starts the run);
    a ValueError when OUT holds a run but no complete checkpoint (a resume never starts over an earlier run)."""
    last = os.path.join(out, "last.pt")
    if (state := _readable_state(last)) is not None:
        return last, state
    found = [(int(state["step"]), path, state) for path in [*step_checkpoints(out), os.path.join(out, "best.pt")]
             if (state := _readable_state(path)) is not None]
    if found:
        _, path, state = max(found, key=lambda item: item[0])
        return path, state
    earlier = existing_run_files(out)
    if not earlier:
        return None
    damaged = "damaged" if os.path.exists(last) else "missing"
    raise ValueError(f"{last}: {damaged}, and no other complete checkpoint in {out} (it holds {', '.join(earlier)}):"
                     " --resume continues only from a checkpoint; --overwrite starts the run again")


def lost_best(out: str, resumed: str, ckpt: dict) -> tuple[str, str | None] | None:
    """When a resumed run's OUT/best.pt is missing, damaged or not the best its checkpoint records (a write that
    failed, a disk that filled): (what is lost, in words; the file that holds the best weights: the checkpoint
    resumed from when it was the best, a kept checkpoint_<step>.pt of the best step, else None). None: best.pt
    is whole."""
    best = os.path.join(out, "best.pt")
    if os.path.abspath(resumed) == os.path.abspath(best):
        return None
    step = int(ckpt["step"])
    best_step = step if ckpt.get("best") is None else ckpt.get("best_step")  # no validation: best = last
    state = _readable_state(best)
    if state is not None and (best_step is None or int(state["step"]) == best_step):
        return None
    what = f"{best} is " + ("missing or damaged" if state is None else f"of step {int(state['step'])}")
    if best_step is None:
        return f"{what} (the run's best step is not recorded)", None
    what += f" (the run's best is step {best_step})"
    if best_step == step:
        return what, resumed
    kept = [path for path in step_checkpoints(out) if (found := _readable_state(path)) and found["step"] == best_step]
    return what, (kept[0] if kept else None)


def restore_file(source: str, path: str) -> None:
    """A copy of `source` as `path`, whole or not at all (a temporary name renamed); a failed write is one line
    naming `path` and the cause."""
    from synprep.textio import atomic_copy

    atomic_copy(source, path)


def data_fingerprint(path: str) -> str:
    """The content of a split as one hash: sha256 over its manifest's shard hashes and row counts (a split
    reconverted from another corpus, or with other codes, has another fingerprint; a moved one the same)."""
    import hashlib
    import json

    from synprep.shards import load_manifest

    shards = [(shard.get("sha256", ""), shard.get("rows")) for shard in load_manifest(path).shards]
    return hashlib.sha256(json.dumps(shards).encode()).hexdigest()


def resume_changes(cfg: TrainConfig, ckpt: dict, path: str) -> tuple[list[str], list[str]]:
    """What a resumed run's configuration changes against its checkpoint: (refused: changes of the data, model,
    preset or optimization, one phrase each; applied: changes of the budget, evaluation, logging or machine)."""
    from ..config.core import PRESETS
    from ..config.resolve import split_signature

    stored = ckpt.get("train_config") or {}
    refused, applied = [], []
    fingerprint = ckpt.get("data_fingerprint")
    if fingerprint and fingerprint != data_fingerprint(cfg.data):
        refused.append(f"the training data {cfg.data} is not the run's (other shards than at the start)")
    elif ckpt.get("signature") and ckpt["signature"] != split_signature(cfg.data):
        refused.append(f"the training data {cfg.data} was not made as the run's (synprep signatures differ)")
    if stored.get("preset", cfg.preset) != cfg.preset and not cfg.pretrained:
        refused.append(f"preset {stored['preset']} -> {cfg.preset}")
    model = {**({} if cfg.pretrained else PRESETS.get(cfg.preset, {})), **cfg.model}  # pretrained: no preset
    recorded = ckpt.get("model_config") or {}
    refused += [f"model.{key} {recorded[key]!r} -> {value!r}" for key, value in model.items()
                if key in recorded and toml_plain(recorded[key]) != toml_plain(value)]
    for key, value in asdict(cfg).items():
        if key in ("model", "preset") or key not in stored or toml_plain(stored[key]) == toml_plain(value):
            continue
        paths = (*DATA_KEYS.values(), "pretrained")
        if key in paths and value and stored[key] and os.path.abspath(value) == os.path.abspath(stored[key]):
            continue
        (applied if key in SESSION_KEYS else refused).append(f"{key} {stored[key]!r} -> {value!r}")
    return refused, [item for item in applied if not item.startswith(("resume ", "out ", "data "))]


def check_resume(cfg: TrainConfig, path: str, ckpt: dict) -> list[str]:
    """Refuse a resume whose configuration changes what the run is (one line naming the first change and how to
    go on); returns the note on what it does change (the budget, evaluation, the machine)."""
    refused, applied = resume_changes(cfg, ckpt, path)
    if refused:
        more = f" (and {len(refused) - 1} more change(s))" if len(refused) > 1 else ""
        raise ValueError(f"--resume {cfg.out}: {refused[0]}{more}; a resumed run keeps its data, model and "
                         "optimization settings (only the budget, evaluation, logging and machine may change): "
                         "start a new run with --out NEW")
    return [f"syntrain: resumed with {', '.join(applied)} (the data, model and optimization settings are the "
            "run's)"] if applied else []


def finished_reason(cfg: TrainConfig, ckpt: dict) -> str | None:
    """Why a run whose checkpoint is `ckpt` has nothing left to do under `cfg`'s budget (None: it goes on).
    The budget counts over the whole run: max_steps the steps, max_minutes the trained time of every session
    (the checkpoint's `elapsed_s`: validation and checkpoint writing not counted, run_state.TrainedClock)."""
    if ckpt.get("stopped_early") and cfg.patience and ckpt.get("bad_evals", 0) >= cfg.patience:
        return f"it stopped early at step {ckpt['step']} ({ckpt['stopped_early']}; --patience 0 trains on)"
    if ckpt["step"] >= cfg.max_steps:
        return f"step {ckpt['step']} of max_steps {cfg.max_steps}"
    elapsed = float(ckpt.get("elapsed_s", 0.0))
    if cfg.max_minutes and elapsed / 60 >= cfg.max_minutes:
        return f"{elapsed / 60:.1f} of max_minutes {cfg.max_minutes:g} trained, validation not counted"
    return None
