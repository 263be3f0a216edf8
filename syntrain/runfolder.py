"""What a run folder says about itself: OUT/config.toml, the run's resolved configuration (recipe + flags +
defaults, and the synprep signature of its training data: a recipe that `syntrain run --resume --out OUT` reads
back), and OUT/train.log, everything the run printed to stderr. `start_run_folder` is a run's first write, after
every check has passed: a run refused at its start leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shlex
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any, TextIO

import tomli_w

from synprep.textio import atomic_write

from . import __version__
from .config.sections import trainer_filled
from .config.train import CONFIG_FILE, DATA_KEYS, LOG_FILE, TrainConfig, train_keys

SESSION_ONLY = ("overwrite",)  # [train] keys that describe one command, not the run


class RunLog(io.TextIOBase):
    """stderr, and OUT/train.log from `attach` on (with what was printed before it); a progress bar's
    carriage-return updates leave only their last state in the file."""

    def __init__(self, stream: TextIO) -> None:
        self.stream, self.file, self.pending, self.partial, self.held = stream, None, [], "", []

    def hold(self, line: str) -> None:
        """A warning about the configuration, printed once the run has started (a run refused at its start
        ends in its one error line only)."""
        self.held.append(line)

    def write(self, text: str) -> int:
        self.stream.write(text)
        self.partial += text
        *lines, self.partial = self.partial.split("\n")
        for line in lines:
            self._keep(line.rsplit("\r", 1)[-1] + "\n")
        return len(text)

    def _keep(self, line: str) -> None:
        if self.file is None:
            self.pending.append(line)
        else:
            self.file.write(line)
            self.file.flush()

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", "utf-8")

    def attach(self, path: str, append: bool) -> None:
        """From now on also write to `path` (appending on a resumed run), starting with what was printed so far."""
        self.file = open(path, "a" if append else "w", encoding="utf-8")  # noqa: SIM115 (closed by `close`)
        self.file.writelines(self.pending)
        self.file.flush()
        self.pending = []
        for line in self.held:  # through logging: on this stderr (the handler's), so in the file too
            logging.getLogger(__name__).warning(line)
        self.held = []

    def close(self) -> None:
        if self.file is not None:
            if self.partial:
                self._keep(self.partial.rsplit("\r", 1)[-1] + "\n")
            self.file.close()
            self.file = None


@contextlib.contextmanager
def logged_run(prog: str = "syntrain") -> Iterator[RunLog]:
    """sys.stderr teed into the run's train.log for the duration (the file is attached by `start_run_folder`);
    an error that ends the run is its last line there too."""
    original = sys.stderr
    log = RunLog(original)
    sys.stderr = log
    try:
        yield log
    except Exception as err:
        if log.file is not None:  # Ctrl-C that keeps the run's work (Interrupted) is not an error
            from synprep.errors import Interrupted

            kind = "" if isinstance(err, Interrupted) else "error: "
            log.file.write(f"{prog}: {kind}{' '.join(str(err).split())}\n")
        raise
    finally:
        sys.stderr = original
        log.close()


def _plain(value: Any) -> Any:
    """A value TOML can hold: None dropped from tables and lists, tuples as lists."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value if v is not None]
    return value


def config_text(cfg: TrainConfig, model_config: dict[str, Any], signature: dict[str, Any]) -> str:
    """config.toml: the resolved configuration as a recipe ([data], [model], [train]) and the training data's
    synprep signature ([synprep], not read back)."""
    filled = trainer_filled()
    tables = {"data": {key: os.path.abspath(getattr(cfg, name)) if getattr(cfg, name) else ""
                       for key, name in DATA_KEYS.items()},
              "model": {"preset": cfg.preset, **{k: v for k, v in model_config.items() if k not in filled}},
              "train": {key: getattr(cfg, key) for key in train_keys() if key not in SESSION_ONLY} |
              {"out": os.path.abspath(cfg.out)},
              "synprep": {"signature": signature}}
    command = shlex.join(["syntrain", *sys.argv[1:]])
    header = (f"# The configuration of this run (recipe + flags + defaults), written by syntrain {__version__} on "
              f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n# command: {command}\n# `syntrain run --resume --out RUN` "
              "continues the run from it; `syntrain run RUN/config.toml --out NEW` repeats it.\n\n")
    return header + tomli_w.dumps(_plain(tables))


def start_run_folder(cfg: TrainConfig, model_config: Any, signature: dict[str, Any], vocab: Any, rank: int,
                     world: int) -> None:
    """A run's first write, after every check: an earlier run's files deleted (overwrite), the folder made,
    vocab.json (a new run: `vocab` not None), config.toml, and train.log attached to the stderr of `logged_run`."""
    from .runfiles import clear_run

    if rank == 0:
        if cfg.overwrite and not cfg.resume:
            clear_run(cfg.out)
        os.makedirs(cfg.out, exist_ok=True)
        if vocab is not None:
            vocab.save(os.path.join(cfg.out, "vocab.json"))
        model = model_config if isinstance(model_config, dict) else asdict(model_config)
        atomic_write(os.path.join(cfg.out, CONFIG_FILE), config_text(cfg, model, signature).encode("utf-8"))
        if isinstance(sys.stderr, RunLog):
            sys.stderr.attach(os.path.join(cfg.out, LOG_FILE), append=cfg.resume)
    if world > 1:
        import torch.distributed as dist

        dist.barrier()


RESUMABLE = ("model", "optimizer", "scheduler", "step", "epoch", "position", "rng", "vocab", "model_config")
# [train] keys a resumed run may change (the budget, evaluation, logging, the machine); every other key, the
# [model] table, the preset and the training data must be the run's
SESSION_KEYS = ("max_steps", "max_minutes", "eval_interval", "eval_sentences", "eval_beam", "test_beam",
                "length_penalty", "log_interval", "threads", "device", "attention", "precision", "keep_last",
                "patience", "best_metric", "tensorboard", "wandb_project", "verify_shards", "shape_ladder", "compile",
                "name", "out", "resume", "overwrite", "valid", "test", "data", "bundle", "bleu_tokenize")


_HELD: set[str] = set()  # run folders this process holds the lock of (the command line, then the trainer)


@contextlib.contextmanager
def run_folder_lock(out: str) -> Iterator[None]:
    """One `syntrain run` at a time per run folder (fresh, --resume or --overwrite): the writer lock of synprep
    convert (synprep.shards.WriterLock) on OUT/.lock, held for the whole run (taken again by the same process:
    a no-op). A folder made only to hold the lock is removed again when the run is refused before its first
    write."""
    from synprep.shards import LOCK, WriterLock

    key = os.path.realpath(out)
    if key in _HELD:
        yield
        return
    refuse_dataset_folder(out)
    made = not os.path.exists(out)
    lock = WriterLock(out, "another syntrain run is writing this run folder")
    lock.acquire()
    _HELD.add(key)
    try:
        yield
    finally:
        _HELD.discard(key)
        lock.release()
        if made and os.path.isdir(out) and os.listdir(out) == [LOCK]:
            os.remove(os.path.join(out, LOCK))
            os.rmdir(out)


def refuse_dataset_folder(out: str) -> None:
    """A ValueError when the run folder `out` would be a synprep dataset or split folder or lie inside one:
    `synprep convert --overwrite` of the dataset deletes the folder, checkpoints and all, and the run's files
    would sit among the shards (the rule of synprep.outputs)."""
    from synprep.errors import InputError
    from synprep.outputs import check_outputs

    try:
        check_outputs({"--out": out}, {}, runs=True)
    except InputError as err:
        raise ValueError(str(err)) from None

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
    return ckpt if isinstance(ckpt, dict) and all(key in ckpt for key in RESUMABLE) else None


def resume_point(out: str) -> tuple[str, dict] | None:
    """The checkpoint `--resume` continues from: OUT/last.pt, or when it is missing or damaged the newest complete
    one of checkpoint_<step>.pt and best.pt. None when OUT holds no earlier run (a resume then starts the run);
    a ValueError when OUT holds a run but no complete checkpoint (a resume never starts over an earlier run)."""
    from .runfiles import existing_run_files, step_checkpoints

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
    from .runfiles import step_checkpoints

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
    from .config.core import PRESETS
    from .config.resolve import split_signature

    stored = ckpt.get("train_config") or {}
    refused, applied = [], []
    fingerprint = ckpt.get("data_fingerprint")
    if fingerprint and fingerprint != data_fingerprint(cfg.data):
        refused.append(f"the training data {cfg.data} is not the run's (other shards than at the start)")
    elif ckpt.get("signature") and ckpt["signature"] != split_signature(cfg.data):
        refused.append(f"the training data {cfg.data} was not made as the run's (synprep signatures differ)")
    if stored.get("preset", cfg.preset) != cfg.preset:
        refused.append(f"preset {stored['preset']} -> {cfg.preset}")
    model = {**PRESETS.get(cfg.preset, {}), **cfg.model}
    recorded = ckpt.get("model_config") or {}
    refused += [f"model.{key} {recorded[key]!r} -> {value!r}" for key, value in model.items()
                if key in recorded and _plain(recorded[key]) != _plain(value)]
    for key, value in asdict(cfg).items():
        if key in ("model", "preset") or key not in stored or _plain(stored[key]) == _plain(value):
            continue
        if key in DATA_KEYS.values() and value and stored[key] and os.path.abspath(value) == os.path.abspath(
                stored[key]):
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
    (the checkpoint's `elapsed_s`: validation and checkpoint writing not counted, train.TrainedClock)."""
    if ckpt.get("stopped_early") and cfg.patience and ckpt.get("bad_evals", 0) >= cfg.patience:
        return f"it stopped early at step {ckpt['step']} ({ckpt['stopped_early']}; --patience 0 trains on)"
    if ckpt["step"] >= cfg.max_steps:
        return f"step {ckpt['step']} of max_steps {cfg.max_steps}"
    elapsed = float(ckpt.get("elapsed_s", 0.0))
    if cfg.max_minutes and elapsed / 60 >= cfg.max_minutes:
        return f"{elapsed / 60:.1f} of max_minutes {cfg.max_minutes:g} trained, validation not counted"
    return None
