"""Ordered, memory-bounded parallel map over a process pool: the one way stages use every core.

Each worker builds its state once (`setup`, e.g. loading a parser model or BPE codes), then applies
`func(state, task)` to tasks; results come back in input order, with at most a few tasks in flight per
worker so memory stays flat whatever the corpus size. `workers <= 1` runs in-process, same results.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import signal
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

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
        print(f"note: --workers {requested} lowered to {limit} ({WORKERS_PER_CORE} per core of the "
              f"{default_workers()} this process may use)", file=sys.stderr)
    return limit


def pool_context() -> multiprocessing.context.BaseContext:
    """fork on Linux (cheap: workers inherit imports), spawn elsewhere."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods and sys.platform == "linux" else "spawn")


def _init_worker(setup: Callable[..., Any], setup_args: tuple) -> None:
    # Ctrl-C reaches every process of the terminal's group: the parent stops the pool, the workers say nothing
    # (no `Process ForkPoolWorker-N:` traceback).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # An exception here would make the pool restart the worker forever: keep it for the first task.
    try:
        _WORKER["state"], _WORKER["error"] = setup(*setup_args), None
    except Exception as err:  # noqa: BLE001 - re-raised in the parent with the first task
        _WORKER["state"], _WORKER["error"] = None, err


def _run_task(func: Callable[[Any, Any], Any], task: Any) -> Any:
    if _WORKER["error"] is not None:
        raise _WORKER["error"]
    return func(_WORKER["state"], task)


def ordered_map(func: Callable[[Any, Task], Result], tasks: Iterable[Task], workers: int,
                setup: Callable[..., Any], setup_args: tuple = (), in_flight_per_worker: int = 2
                ) -> Iterator[Result]:
    """`func(state, task)` for every task, in order; `state = setup(*setup_args)` once per worker.

    `func` and `setup` must be module-level functions (picklable for spawn). At most WORKERS_PER_CORE processes
    per core, and no more than there are tasks (at least 2 when `workers` > 1)."""
    if workers > 1:
        tasks = iter(tasks)
        head = list(itertools.islice(tasks, capped_workers(workers, note=False)))
        workers, tasks = max(2, len(head)), itertools.chain(head, tasks)
    if workers <= 1:
        state = setup(*setup_args)
        for task in tasks:
            yield func(state, task)
        return
    with pool_context().Pool(workers, initializer=_init_worker, initargs=(setup, setup_args)) as pool:
        pending: deque = deque()
        for task in tasks:
            pending.append(pool.apply_async(_run_task, (func, task)))
            if len(pending) >= workers * in_flight_per_worker:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()
