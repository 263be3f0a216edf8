"""What a run folder says about itself: OUT/config.toml, the run's resolved configuration (recipe + flags +
defaults, and the synprep signature of its training data: a recipe that `syntrain run --resume --out OUT` reads
back), and OUT/train.log, everything the run printed to stderr. `start_run_folder` is a run's first write, after
every check has passed: a run refused at its start leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import io
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
from .config import CONFIG_FILE, DATA_KEYS, LOG_FILE, TrainConfig, train_keys, trainer_filled

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
        for line in self.held:
            self.write(line + "\n")
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
        if log.file is not None:
            log.file.write(f"{prog}: error: {' '.join(str(err).split())}\n")
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
    from .checkpoints import clear_run

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


def resumed_step(out: str) -> int | None:
    """The step of OUT/last.pt, read without loading its tensors (None when there is none or it is unreadable:
    the trainer reports that, naming the file)."""
    path = os.path.join(out, "last.pt")
    if not os.path.isfile(path):
        return None
    import torch

    try:
        ckpt = torch.load(path, map_location="cpu", mmap=True, weights_only=False)
        return int(ckpt["step"])
    except Exception:  # noqa: BLE001
        return None
