"""OUT/train.log: everything a run printed to stderr (`logged_run` tees stderr into it once `start_run_folder`
has attached the file; what was printed before is written then)."""

from __future__ import annotations

import contextlib
import io
import logging
import sys
from collections.abc import Iterator
from typing import TextIO


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


