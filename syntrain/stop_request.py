"""A request from outside to stop a training run: SIGTERM (a scheduler preempting the job, `kill`), SIGHUP (its
terminal closed) or Ctrl-C. The first one asks the training loop to stop after the update it is in, save last.pt
and end in one line naming how to resume (exit code 128 + the signal's number, 130 for Ctrl-C); a second one ends
at once, as the signal would without this (the checkpoints already written stay whole: writes are atomic)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Iterator

from synprep.processes import ENDING_SIGNALS, Terminated

log = logging.getLogger("syntrain")
STOP_SIGNALS = (signal.SIGINT, *ENDING_SIGNALS)


class StopRequest:
    """The signal that asked the run to stop (`signum`, 0: none yet)."""

    def __init__(self) -> None:
        self.signum = 0

    @property
    def name(self) -> str:
        """The signal's name (SIGTERM), or Ctrl-C."""
        return "Ctrl-C" if self.signum == signal.SIGINT else signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@contextlib.contextmanager
def stop_requests() -> Iterator[StopRequest]:
    """Within the block, STOP_SIGNALS set the yielded request instead of ending the process; a second signal ends
    it (KeyboardInterrupt for Ctrl-C, `synprep.processes.Terminated` otherwise). Off the main thread, where
    Python cannot set handlers, signals stay as they are; a forked child ends by the signal as by default."""
    request, owner = StopRequest(), os.getpid()

    def handler(signum: int, frame: object) -> None:
        if os.getpid() != owner:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if request.signum:
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise Terminated(signum)
        request.signum = signum
        log.warning(f"syntrain: {request.name}: stopping after this update and saving last.pt (again: stop at once)")

    try:
        previous = {signum: signal.signal(signum, handler) for signum in STOP_SIGNALS}
    except ValueError:  # not the main thread
        yield request
        return
    try:
        yield request
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
