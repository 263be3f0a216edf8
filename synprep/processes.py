"""Processes of this machine, for locks and workers: a pid with its start time (a recorded pid may have been
reused by another program since), the processes holding a file open, and a worker that dies with its parent.

Linux reads /proc; elsewhere the answers are "unknown" (None, empty) and callers keep their plain behaviour.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Iterator

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def process_start(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot, /proc/PID/stat field 22), None when there is no such
    process or it cannot be known: a pid and its start name one process, a reused pid has another start."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # the command name in (...) may hold spaces
    return fields[19] if len(fields) > 19 else None


def is_running(pid: int, start: str | None) -> bool:
    """Whether `pid` is still the process that started at `start` (without a start: whether the pid exists)."""
    now = process_start(pid)
    if now is not None:
        return start is None or now == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return start is None or not os.path.isdir("/proc")


def holders(path: str) -> list[int]:
    """The processes of this user that have `path` open (Linux: their /proc/PID/fd links), sorted."""
    try:
        target = os.stat(path)
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    found = []
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:  # gone, or another user's
            continue
        for fd in fds:
            try:
                info = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if (info.st_dev, info.st_ino) == (target.st_dev, target.st_ino):
                found.append(pid)
                break
    return sorted(found)


def die_with_parent(parent: int) -> None:
    """Linux: the kernel kills this process when the thread that started it ends, so a driver killed by the
    out-of-memory killer or `kill -9` leaves no worker behind (holding its locks, using memory). Elsewhere
    nothing. `parent`: the pid that started this process (if it is gone already, this process ends now)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the call: the kernel would never tell this process
        os._exit(1)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP received: handled like Ctrl-C (work is stopped, what is finished kept), its exit code
    128 + the signal's number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_code = 128 + signum


ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_RECEIVED: list[int] = []  # the ending signals `signals_interrupt` turned into Terminated in this process


def received_signal() -> int:
    """The ending signal this process received under `signals_interrupt` (0: none). Its Terminated, raised where
    the signal came, may have been turned into another exception on the way (a C extension's import failing
    with its own TypeError), so a command that cleans up after a signal asks here."""
    return _RECEIVED[-1] if _RECEIVED else 0


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP in this process raise `Terminated` (the command ends in one line, as
    after Ctrl-C); a forked child that inherited the handler ends by the signal as it would by default."""
    owner = os.getpid()

    def handler(signum: int, frame: object) -> None:
        if os.getpid() != owner:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        _RECEIVED.append(signum)
        raise Terminated(signum)

    try:
        previous = {signum: signal.signal(signum, handler) for signum in ENDING_SIGNALS}
    except ValueError:  # not the main thread: signals stay as they are
        yield
        return
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Within the block SIGINT, SIGTERM and SIGHUP wait, and come at its end: a handler that runs while this
    process forks runs in Python's at-fork callbacks, which drop the exception it raises (Ctrl-C or SIGTERM
    would be lost). A child forked here starts with them held: it calls `release_signals`."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, *ENDING_SIGNALS})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def release_signals() -> None:
    """In a child forked within `signals_held`: its signals come again."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, *ENDING_SIGNALS})


@contextlib.contextmanager
def main_not_imported() -> Iterator[None]:
    """Processes spawned within the block do not import the program's `__main__` (spawn imports it in every new
    process, to find functions defined there): a script without `if __name__ == "__main__":` would run again in
    it, call this again and end it ("the process ... ended without its result"). For processes whose function
    lives in a module of the packages, which need nothing of the script: they work from any script."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved = {name: main.__dict__[name] for name in ("__file__", "__spec__") if name in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)
