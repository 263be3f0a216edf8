"""`--engine ray`: the same ordered map as `parallel.ordered_map`, on Ray actors (local or a cluster).

Each actor builds its state once (e.g. loads the parser), tasks go round-robin to actors, results come
back in input order with a bounded number in flight, so the output is the local engine's, byte for byte.
Ray is an optional extra: `pip install synprep[ray]`. On a cluster (`--ray-address`), the driver (where
`synprep convert` runs) reads the inputs and writes OUT; each task carries its piece (lines, or parsed CoNLL-U)
and the BPE codes travel with the job, so worker nodes need no shared storage: only the parser models at the
same paths (pre-parsed CoNLL-U input needs none).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..errors import InputError
from ..parallel import WorkerLost

TASKS_PER_NODE: Counter = Counter()  # Ray node id -> tasks it ran in this process (to check the spread)
CONNECT_SECONDS = 30.0  # how long `--ray-address` may take to accept a connection (SYNPREP_RAY_CONNECT_SECONDS)


def connect_seconds() -> float:
    """The connect step's bound: SYNPREP_RAY_CONNECT_SECONDS when set (a positive number), else CONNECT_SECONDS."""
    try:
        value = float(os.environ.get("SYNPREP_RAY_CONNECT_SECONDS", CONNECT_SECONDS))
    except ValueError:
        return CONNECT_SECONDS
    return value if 0 < value < float("inf") else CONNECT_SECONDS


def check_reachable(address: str, seconds: float | None = None) -> None:
    """A Ray head at `address` (HOST:PORT or ray://HOST:PORT; `auto` is not checked) accepts a connection within
    `seconds` (default `connect_seconds()`), tried again every second; else one InputError naming the address.
    Ray's own connect retries for minutes, printing its retry lines, and does not end on SIGTERM; this waits in
    Python, so Ctrl-C and SIGTERM end it at once."""
    import socket
    import time

    seconds = connect_seconds() if seconds is None else seconds
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if address == "auto" or not sep:
        return
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--ray-address {address!r}: expected HOST:PORT (the Ray head's GCS port, e.g. 6379)")
    deadline = time.monotonic() + seconds
    while True:
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=min(5.0, seconds)):
                return
        except OSError as err:
            if time.monotonic() + 1 >= deadline:
                raise InputError(f"--ray-address {address}: no Ray head answers there ({err.strerror or err}) after "
                                 f"{seconds:g} s: start it (ray start --head) or give its address") from None
        time.sleep(1)


def _init_ray(workers: int, address: str | None) -> Any:  # noqa: ANN401 - the ray module
    try:
        import ray
    except ImportError:
        raise InputError("--engine ray needs Ray: pip install 'synprep[ray]'") from None
    if not ray.is_initialized():
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        if address:
            check_reachable(address)
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
        else:
            # Ray's socket paths must stay under 108 bytes: a short folder under the system temp dir
            temp = os.environ.get("SYNPREP_RAY_TMP") or tempfile.mkdtemp(prefix="synprep-ray-")
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, _temp_dir=temp)
    return ray


def ray_ordered_map(func: Callable[[Any, Any], Any], tasks: Iterable[Any], workers: int,
                    setup: Callable[..., Any], setup_args: tuple = (), address: str | None = None,
                    in_flight_per_worker: int = 2, cpus: float = 1) -> Iterator[Any]:
    """`func(state, task)` for every task on `workers` Ray actors, in order; each actor reserves `cpus` CPUs (0: a
    light stage running beside another map's actors)."""
    ray = _init_ray(workers, address)

    @ray.remote(num_cpus=cpus)
    class Worker:
        def __init__(self) -> None:
            self.state = setup(*setup_args)

        def run(self, task: Any) -> tuple[str, Any]:
            return ray.get_runtime_context().get_node_id(), func(self.state, task)

    actors = [Worker.remote() for _ in range(max(1, workers))]
    pending: deque = deque()

    def result(ref: Any) -> Any:  # noqa: ANN401
        node, value = _get(ray, ref)
        TASKS_PER_NODE[node] += 1
        return value

    try:
        for index, task in enumerate(tasks):
            pending.append(actors[index % len(actors)].run.remote(task))
            if len(pending) >= len(actors) * in_flight_per_worker:
                yield result(pending.popleft())
        while pending:
            yield result(pending.popleft())
    finally:
        for actor in actors:
            ray.kill(actor)


def _get(ray: Any, ref: Any) -> Any:  # noqa: ANN401
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as err:  # re-raise the worker's own exception (InputError: one line)
        cause = err.as_instanceof_cause() if hasattr(err, "as_instanceof_cause") else err
        if isinstance(getattr(err, "cause", None), InputError):
            raise err.cause from None
        raise cause from None
    except ray.exceptions.RayActorError as err:  # the actor's set-up failed (e.g. a model missing), or it died
        cause = getattr(err, "cause", None) or getattr(err, "error", None)
        if isinstance(cause, InputError):
            raise cause from None
        # killed (out of memory, kill -9, a node lost): Ray does not restart our actors, the task is lost
        pid = re.search(r"\bpid: (\d+)", str(err))
        raise WorkerLost(f"a Ray worker{f' (pid {pid.group(1)})' if pid else ''} died before finishing its task "
                         "(killed by a signal: out of memory?)") from None
    except ray.exceptions.WorkerCrashedError:
        raise WorkerLost("a Ray worker process died (killed by a signal: out of memory?)") from None
