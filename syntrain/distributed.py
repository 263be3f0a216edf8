"""The processes of a run: one per device; under `torchrun` (WORLD_SIZE > 1) rank r of `world` (NCCL on CUDA,
gloo on CPU). Every rank runs the same collectives in the same order; a rank that fails ends the others in one
line (`peer_faults`), and a collective of the training steps waits at most `STEP_TIMEOUT` for the other ranks:
only the waits for rank 0's work alone (validation, checkpoint files: `Processes.wait_for_rank0`) have a long
limit. Progress lines are rank 0's.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

log = logging.getLogger("syntrain.train")  # the trainer's lines, whichever of its modules prints them

STEP_TIMEOUT = datetime.timedelta(minutes=10)  # the collectives of ranks working side by side (the steps)
RANK0_TIMEOUT = datetime.timedelta(hours=2)  # the others waiting while rank 0 validates or writes checkpoints


def processes() -> tuple[int, int]:
    """(world size, rank) of this process: (1, 0) unless started by torchrun (or with its variables set)."""
    return int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))


def training_device(choice: str, local_rank: int = 0) -> torch.device:
    """The device of process `local_rank` for `choice` (auto, cuda, cpu): one GPU per process."""
    if choice not in ("auto", "cuda", "cpu"):
        raise ValueError(f"device must be auto, cuda or cpu, got {choice!r}")
    if choice == "cpu" or (choice == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ValueError("device = cuda but torch sees no CUDA GPU (use device auto or cpu)")
    if local_rank >= torch.cuda.device_count():
        raise ValueError(f"process {local_rank} of this node has no GPU of its own ({torch.cuda.device_count()} "
                         f"visible): start at most one process per GPU, or train with device = cpu")
    return torch.device("cuda", local_rank)


@dataclass(frozen=True)
class Processes:
    """This process's place in the run: its rank of `world`, its device, and the process groups (`own_group`:
    this run opened the default group and closes it; `rank0_group`: gloo, RANK0_TIMEOUT, what `wait_for_rank0`
    waits on when world > 1)."""

    world: int
    rank: int
    device: torch.device
    own_group: bool = False
    rank0_group: Any = None

    @classmethod
    def start(cls, device_choice: str, threads: int) -> Processes:
        """This process's device and, under torchrun, its process groups; `threads`: torch's CPU threads (0:
        torch's default)."""
        world, rank = processes()
        own_group = world > 1 and not dist.is_initialized()
        device = training_device(device_choice, int(os.environ.get("LOCAL_RANK", "0")))
        if device.type == "cuda":
            torch.cuda.set_device(device)
        if own_group:
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=STEP_TIMEOUT)
        if threads:
            torch.set_num_threads(threads)
        rank0_group = dist.new_group(backend="gloo", timeout=RANK0_TIMEOUT) if world > 1 else None
        return cls(world, rank, device, own_group, rank0_group)

    def log(self, message: str) -> None:
        """A progress line on stderr (rank 0)."""
        if self.rank == 0:
            log.info(message)

    def wait_for_rank0(self) -> None:
        """Under DDP, every rank waits here until rank 0 has done its work alone (validation, checkpoint and run
        files): on a group whose time limit is RANK0_TIMEOUT, so that the step collectives keep STEP_TIMEOUT."""
        if self.world > 1:
            dist.barrier(group=self.rank0_group)

    def close(self) -> None:
        """The process group this run opened, closed."""
        if self.own_group:
            dist.destroy_process_group()
        elif self.rank0_group is not None:
            dist.destroy_process_group(self.rank0_group)


@contextlib.contextmanager
def peer_faults(world: int, rank: int) -> Iterator[None]:
    """Under DDP, a collective that fails because another rank ended (its own error says why) or did not
    answer within the time limit ends this rank in one line (ValueError) instead of a traceback."""
    try:
        yield
    except RuntimeError as err:  # gloo raises RuntimeError, NCCL torch.distributed.DistError (a subclass)
        text = str(err)
        if world == 1 or not (isinstance(err, dist.DistError) or "/gloo/" in text):
            raise
        detail = text.split("] ", 1)[-1].split(". This is", 1)[0].splitlines()[0]
        if "imed out" in detail:
            reason = "no answer from the other processes in time (one of them stopped or hangs)"
        elif any(words in detail for words in ("closed by peer", "reset by peer", "Broken pipe")):
            reason = "another process of the run ended (its error is the cause)"
        else:
            reason = "a collective of the processes failed"
        raise ValueError(f"process {rank} of {world}: {reason}: {detail}") from None
