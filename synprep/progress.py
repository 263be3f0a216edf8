"""Progress of long commands, one implementation for synprep and syntrain (convert, parser training of every
backend, decoding in eval / compare / translate / the final test of a run).

On a terminal: a tqdm bar; in a Jupyter notebook with ipywidgets: tqdm's notebook bar (`tqdm_class`). Off a
terminal (a log file, a pipe, a batch job): one plain line at a steady interval, never a carriage return, e.g.

    convert: filter+parse 4000/12000 pairs (33%), 61.2 pairs/s, 1m05s elapsed, ETA 2m11s

The interval is `SYNPREP_PROGRESS_SECONDS` (default 30; 0 writes a line at every update). A line is written by
the first `update` (or `tick`) after the interval has passed, and a last one by `close` when any was written, so
a command shorter than the interval stays silent. The ETA is the time left of the phase being counted plus
`later_units` that follow at its rate (the next splits of a stage), or what `estimate()` says where rounds
differ in cost (a trainer's later components), so that it does not promise the end of a phase as the end of
the command.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import IO, Any

INTERVAL_ENV = "SYNPREP_PROGRESS_SECONDS"
DEFAULT_INTERVAL = 30.0


def progress_interval() -> float:
    """Seconds between two progress lines off a terminal: `SYNPREP_PROGRESS_SECONDS`, else 30."""
    try:
        value = float(os.environ.get(INTERVAL_ENV, ""))
    except ValueError:
        return DEFAULT_INTERVAL
    return value if value >= 0 else DEFAULT_INTERVAL


def clock(seconds: float) -> str:
    """`4m05s`, or `1h07m` from an hour on."""
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m{secs:02d}s"


def is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or a stream-like object without a file
        return False


class ProgressLines:
    """tqdm's counting interface (`update`, `set_description`, `refresh`, `close`, `n`, `total`; a context
    manager), written as plain lines at a steady interval (see the module's docstring)."""

    def __init__(self, desc: str, total: int | None = None, unit: str = "it", stream: IO[str] | None = None,
                 interval: float | None = None, estimate: Callable[[], float | None] | None = None,
                 later_units: float = 0) -> None:
        """`later_units`: units of later phases that go at this one's rate (the next splits of the same stage),
        in the ETA; `estimate`: the whole ETA instead (seconds or None), for a counter whose rounds differ in
        cost (UDPipe's components)."""
        self.desc, self.total, self.unit, self.estimate = desc, total, unit, estimate
        self.later_units = later_units
        self.stream = stream if stream is not None else sys.stderr
        self.interval = progress_interval() if interval is None else interval
        self.n, self.written, self.written_n = 0, 0, -1
        self.start = self.last = time.monotonic()

    def update(self, n: float = 1) -> None:
        self.n += n
        self.tick()

    def tick(self, force: bool = False) -> None:
        """Write a line when the interval has passed since the last (or the start), or when `force`."""
        now = time.monotonic()
        if force or now - self.last >= self.interval:
            self.last, self.written_n = now, self.n
            self.stream.write(self.line(now) + "\n")
            self.stream.flush()
            self.written += 1

    def eta(self, elapsed: float) -> float | None:
        """Seconds left: this phase and `later_units` at its rate so far, or `estimate()` (None: unknown yet)."""
        if self.estimate is not None:
            return self.estimate()
        if not self.total or not self.n or elapsed <= 0:
            return None
        left = max(self.total - self.n, 0) + self.later_units
        return left * elapsed / self.n

    def line(self, now: float | None = None) -> str:
        elapsed = (time.monotonic() if now is None else now) - self.start
        count = f"{self.n:g}/{self.total:g} {self.unit} ({100 * self.n / self.total:.0f}%)" if self.total else (
            f"{self.n:g} {self.unit}")
        parts = [f"{self.desc} {count}", f"{self.n / elapsed if elapsed > 0 else 0.0:.1f} {self.unit}/s",
                 f"{clock(elapsed)} elapsed"]
        eta = self.eta(elapsed)
        if eta is not None:
            parts.append(f"ETA {clock(eta)}")
        return ", ".join(parts)

    def set_description(self, desc: str, refresh: bool = True) -> None:  # noqa: ARG002 (tqdm's signature)
        self.desc = desc

    def refresh(self) -> None:
        """Nothing to redraw: lines are written by `update` and `tick`."""

    def clear(self) -> None:
        """Nothing to clear (tqdm clears its bar before another line is printed)."""

    def close(self) -> None:
        """A last line, where lines were written and the count moved since the last one."""
        if self.written and self.n != self.written_n:
            self.tick(force=True)

    def __enter__(self) -> ProgressLines:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel whose notebook can draw tqdm's widget bars (ipywidgets imports)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None  # type: ignore[attr-defined]
    if shell is None or type(shell).__name__ != "ZMQInteractiveShell":  # not a kernel (a terminal IPython either)
        return False
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def tqdm_class() -> Any:  # noqa: ANN401 (tqdm.auto.tqdm or tqdm.tqdm)
    """The bar class of this session: tqdm.auto's (a widget in a notebook) where the notebook can draw it
    (`in_notebook`), plain tqdm elsewhere: tqdm.auto without ipywidgets prints "IProgress not found" at every
    bar."""
    if in_notebook():
        from tqdm.auto import tqdm
    else:
        from tqdm import tqdm
    return tqdm


def progress(desc: str, total: int | None = None, unit: str = "it", *, shown: bool | None = None,
             stream: IO[str] | None = None, prefix: str = "", estimate: Callable[[], float | None] | None = None,
             later_units: float = 0, leave: bool = True, lines: bool = True,
             **bar_options: Any) -> Any:  # noqa: ANN401 (a tqdm or a ProgressLines)
    """A progress counter for one phase: a tqdm bar where `shown` is True, or None and `stream` (default
    stderr) is a terminal (a notebook's widget bar in a Jupyter kernel with ipywidgets: `tqdm_class`); plain
    lines at the interval, each starting with `prefix` (the command, in a log of several), where `shown` is None
    and it is not (`lines` False: nothing there); nothing (a disabled tqdm) where `shown` is False. Every kind
    takes `update(n)`, `set_description`, `refresh`, `close`; `bar_options` go to tqdm (`mininterval`)."""
    tqdm = tqdm_class()
    stream = stream if stream is not None else sys.stderr
    if shown is False:
        return tqdm(total=total, disable=True)
    if shown or is_terminal(stream) or in_notebook():
        return tqdm(total=total, unit=f" {unit}", desc=desc, file=stream, leave=leave, **bar_options)
    if not lines:
        return tqdm(total=total, disable=True)
    return ProgressLines(prefix + desc, total, unit, stream, estimate=estimate, later_units=later_units)
