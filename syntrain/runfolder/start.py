"""A run folder from its name to its first write: the default name (runs/<name>-<time>), the writer lock (one
`syntrain run` per folder), the refusal of an earlier run there (unless resuming or overwriting) and of a dataset
folder, and `start_run_folder`, the first write after every check has passed: a run refused at its start leaves
nothing behind.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import asdict, replace
from typing import Any

from synprep.textio import atomic_write

from ..config.train import CONFIG_FILE, LOG_FILE, TrainConfig
from .config_file import config_text
from .files import BEST, LAST, clear_run, default_run_dir, existing_run_files, step_checkpoints
from .train_log import attach_run_log


def named_run(cfg: TrainConfig) -> TrainConfig:
    """`cfg` with its run folder named where none is given: runs/<name, or the data's folder>-<YYYYmmdd-HHMMSS>."""
    if cfg.out:
        return cfg
    return replace(cfg, out=default_run_dir(cfg.name or os.path.basename(os.path.dirname(os.path.abspath(cfg.data)))
                                            or "run"))


def prepare_run_dir(cfg: TrainConfig, rank: int, world: int, stack: contextlib.ExitStack) -> TrainConfig:
    """Name the run folder when none is given (rank 0's name for all ranks); take its writer lock (rank 0, for
    the whole run: on `stack`); refuse an earlier run there unless resuming or overwriting (not both:
    `TrainConfig` refuses them)."""
    if not cfg.out:
        name = [named_run(cfg).out]
        if world > 1:  # one name for all ranks
            import torch.distributed as dist

            dist.broadcast_object_list(name, src=0)
        cfg = replace(cfg, out=name[0])
    if rank == 0:
        stack.enter_context(run_folder_lock(cfg.out))
    earlier = existing_run_files(cfg.out)
    if earlier and not cfg.resume:
        if not cfg.overwrite:
            raise ValueError(f"{cfg.out}: holds an earlier run ({', '.join(earlier)}); --resume continues it, "
                             "--overwrite deletes it, or choose another --out")
    return cfg  # the folder is made (and an earlier run deleted) by start_run_folder, after every check


def start_run_folder(cfg: TrainConfig, model_config: Any, signature: dict[str, Any], vocab: Any, rank: int,
                     world: int) -> None:
    """A run's first write, after every check: an earlier run's files deleted (overwrite), the folder made,
    vocab.json (a new run: `vocab` not None), config.toml, and train.log attached to the run log of `logged_run`."""
    if rank == 0:
        if cfg.overwrite and not cfg.resume:
            clear_run(cfg.out)
        os.makedirs(cfg.out, exist_ok=True)
        if vocab is not None:
            vocab.save(os.path.join(cfg.out, "vocab.json"))
        model = model_config if isinstance(model_config, dict) else asdict(model_config)
        atomic_write(os.path.join(cfg.out, CONFIG_FILE), config_text(cfg, model, signature).encode("utf-8"))
        attach_run_log(os.path.join(cfg.out, LOG_FILE), append=cfg.resume)
    if world > 1:
        import torch.distributed as dist

        dist.barrier()


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
    made = missing_folders(out)
    lock = WriterLock(out, "another syntrain run is writing this run folder")
    try:
        lock.acquire()  # (a signal while it makes the folder: the folder goes too)
        _HELD.add(key)
        yield
    finally:
        _HELD.discard(key)
        lock.release()
        if made and os.path.isdir(out) and set(os.listdir(out)) <= {LOCK}:
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(out, LOCK))
            for folder in made:  # the run folder, then the folders made above it (runs/), while empty
                with contextlib.suppress(OSError):
                    os.rmdir(folder)


def remove_unstarted_run(out: str, made: bool) -> None:
    """A new run stopped (a signal, Ctrl-C) before its first checkpoint leaves nothing `--resume` could start
    from: what it wrote is removed (the whole folder when the run made it, the run's files otherwise), so the
    same command starts again; a run with a checkpoint is kept (`--resume` continues it)."""
    import shutil

    from synprep.shards import LOCK

    from .source import SOURCE_DIR

    if not os.path.isdir(out) or step_checkpoints(out) or any(
            os.path.exists(os.path.join(out, name)) for name in (LAST, BEST)):
        return
    names = [name for name in os.listdir(out) if name != LOCK] if made else \
        [*existing_run_files(out), SOURCE_DIR, "wandb"]
    for name in names:
        path = os.path.join(out, name.rstrip("/"))
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            os.remove(path)


def missing_folders(path: str) -> list[str]:
    """`path` and each of its parent folders that do not exist yet, deepest first."""
    missing, path = [], os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        missing.append(path)
        path = os.path.dirname(path)
    return missing


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
