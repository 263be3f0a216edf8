"""Ordered, memory-bounded parallel map over a process pool: the one way stages use every core.

Each worker builds its state once (`setup`, e.g. loading a parser model or BPE codes), then applies
`func(state, task)` to tasks; results come back in input order, with at most a few tasks in flight per
worker so memory stays flat whatever the corpus size. `workers <= 1` runs in-process, same results.

A worker that dies (the kernel's out-of-memory killer, `kill -9`) ends the map with `WorkerLost` naming the
signal: `concurrent.futures` notices a dead worker, where `multiprocessing.Pool` would replace it and wait for
its lost task for ever. Workers die with the process that started them (Linux: PR_SET_PDEATHSIG), so none is
left running, or holding a lock, after the driver is killed.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import os
import signal
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from .errors import InputError
from .processes import ENDING_SIGNALS, die_with_parent, release_signals, signals_held

log = logging.getLogger(__name__)

Task = TypeVar("Task")
Result = TypeVar("Result")

_WORKER: dict[str, Any] = {}


def default_workers() -> int:
    """All cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


WORKERS_PER_CORE = 4  # more processes than this per core only share the cores and cost memory


def capped_workers(requested: int, note: bool = True) -> int:
    """`requested` local processes, at most WORKERS_PER_CORE per core this process may use; a larger number is
    lowered (with a note on stderr when `note`)."""
    limit = WORKERS_PER_CORE * default_workers()
    if requested <= limit:
        return requested
    if note:
        log.info(f"note: --workers {requested} lowered to {limit} ({WORKERS_PER_CORE} per core of the "
              f"{default_workers()} this process may use)")
    return limit


def pool_context() -> multiprocessing.context.BaseContext:
    """fork on Linux (cheap: workers inherit imports), spawn elsewhere."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods and sys.platform == "linux" else "spawn")


class WorkerLost(InputError):
    """A worker process died while the map ran (killed by a signal: out of memory, `kill -9`)."""

    def __reduce__(self) -> tuple:
        return (WorkerLost, (self.message,))


def _init_worker(setup: Callable[..., Any], setup_args: tuple, parent: int) -> None:
    die_with_parent(parent)
    # Ctrl-C reaches every process of the terminal's group: the parent stops the pool, the workers say nothing
    # (no `Process ForkPoolWorker-N:` traceback).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for signum in ENDING_SIGNALS:  # the driver's handlers (SIGTERM/SIGHUP -> one line) are not the workers'
        signal.signal(signum, signal.SIG_DFL)
    release_signals()  # held while the driver forked this process
    # An exception here would break the pool (every task lost, no message of ours): keep it for the first task.
    try:
        _WORKER["state"], _WORKER["error"] = setup(*setup_args), None
    except Exception as err:  # noqa: BLE001 - re-raised in the parent with the first task
        _WORKER["state"], _WORKER["error"] = None, err


def _run_task(func: Callable[[Any, Any], Any], task: Any) -> Any:
    if _WORKER["error"] is not None:
        raise _WORKER["error"]
    return func(_WORKER["state"], task)


def ordered_map(func: Callable[[Any, Task], Result], tasks: Iterable[Task], workers: int,
                setup: Callable[..., Any], setup_args: tuple = (), in_flight_per_worker: int = 2,
                started: Callable[[int], None] | None = None) -> Iterator[Result]:
    """`func(state, task)` for every task, in order; `state = setup(*setup_args)` once per worker.

    `func` and `setup` must be module-level functions (picklable for spawn). At most WORKERS_PER_CORE processes
    per core (a larger `workers` is lowered with a note on stderr), and no more than there are tasks (at least 2
    when `workers` > 1); `started` is told how many processes work (1: this one)."""
    if workers > 1:
        tasks = iter(tasks)
        head = list(itertools.islice(tasks, capped_workers(workers)))
        workers, tasks = max(2, len(head)), itertools.chain(head, tasks)
    if started is not None:
        started(max(1, workers))
    if workers <= 1:
        state = setup(*setup_args)
        for task in tasks:
            yield func(state, task)
        return
    pool = ProcessPoolExecutor(workers, mp_context=pool_context(), initializer=_init_worker,
                               initargs=(setup, setup_args, os.getpid()))
    # the workers, to name the signal that killed one and to stop them on an error (Python < 3.14 has no public
    # way: ProcessPoolExecutor._processes, read defensively)
    processes: list = []
    done = False
    try:
        pending: deque = deque()
        for task in tasks:
            if len(processes) < workers:  # submit may fork a worker: signals wait until it is made
                with signals_held():
                    pending.append(pool.submit(_run_task, func, task))
                processes = list((getattr(pool, "_processes", None) or {}).values())  # spawn starts them as tasks come
            else:
                pending.append(pool.submit(_run_task, func, task))
            if len(pending) >= workers * in_flight_per_worker:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
        done = True
    except BrokenProcessPool:  # also raised by submit once the pool knows
        raise WorkerLost(f"a worker process {_death(processes)}") from None
    finally:
        # an error, Ctrl-C or a consumer that stopped early: no worker keeps running
        results = getattr(pool, "_result_queue", None)  # (internals, read defensively; shutdown forgets it)
        pool.shutdown(wait=done, cancel_futures=not done)
        if not done:
            for process in processes:
                if process.is_alive():
                    process.kill()
                process.join(5)
            _end_result_pipe(results)


def _end_result_pipe(results: Any) -> None:  # noqa: ANN401 (a multiprocessing SimpleQueue or None)
    """After the workers were killed: a worker killed while it wrote a result left part of a message in the result
    pipe, and the pool's manager thread waits in `recv` for the rest, forever (the interpreter's exit joins that
    thread: the command printed its error and hung). With every worker gone, this process's copy of the pipe's
    write end is its last: closed, the read ends (EOF), and the thread marks the pool broken and ends."""
    writer = getattr(results, "_writer", None)
    if writer is not None and not writer.closed:
        writer.close()


def _death(processes: list) -> str:
    """How a worker died: 'was killed by SIGKILL (...)' from the first one killed (the others are stopped with
    SIGTERM after it)."""
    codes = []
    for process in processes:
        process.join(1)
        if process.exitcode not in (None, 0):
            codes.append(process.exitcode)
    code = next((c for c in codes if c != -signal.SIGTERM), codes[0] if codes else None)
    if code is None:
        return "died"
    if code > 0:
        return f"ended with exit status {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    why = " (the out-of-memory killer sends it: fewer --workers need less memory)" if name == "SIGKILL" else ""
    return f"was killed by {name}{why}"
