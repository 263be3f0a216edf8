"""OUT/train.log: the run's messages, the lines the loggers "syntrain" and "synprep" print on stderr, written by a
logging file handler (`RunLog`) that `logged_run` adds to both loggers for the run's duration. The messages
before the run folder exists are kept and written once `start_run_folder` attaches the file. Progress bars keep
their own stream (stderr) and are not in the file."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

LOGGERS = ("syntrain", "synprep")


class RunLog(logging.Handler):
    """The records of a run: kept until `attach` names the file, then written there by a `logging.FileHandler`
    (appending on a resumed run), formatted as on stderr (the message only)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))
        self.file: logging.FileHandler | None = None
        self.pending: list[logging.LogRecord] = []
        self.held: list[str] = []

    def hold(self, line: str) -> None:
        """A warning about the configuration, logged once the run has started (a run refused at its start ends in
        its one error line only)."""
        self.held.append(line)

    def emit(self, record: logging.LogRecord) -> None:
        if self.file is None:
            self.pending.append(record)
        else:
            self.file.handle(record)

    def attach(self, path: str, append: bool) -> None:
        """From now on write to `path`, starting with the messages logged so far, then the held warnings."""
        self.file = logging.FileHandler(path, "a" if append else "w", encoding="utf-8")
        self.file.setFormatter(self.formatter)
        for record in self.pending:
            self.file.handle(record)
        self.pending = []
        for line in self.held:  # through logging: on stderr and in the file alike
            logging.getLogger(__name__).warning(line)
        self.held = []

    def write_line(self, line: str) -> None:
        """A line that is not a message (the error that ended the run, which the command line prints)."""
        if self.file is not None:
            self.file.stream.write(line + "\n")
            self.file.flush()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
        super().close()


def attach_run_log(path: str, append: bool) -> None:
    """The run log of `logged_run` (if this process runs one) writes to `path` from now on."""
    for handler in logging.getLogger(LOGGERS[0]).handlers:
        if isinstance(handler, RunLog):
            handler.attach(path, append)


@contextlib.contextmanager
def logged_run(prog: str = "syntrain") -> Iterator[RunLog]:
    """The messages of both packages also go to the run's train.log for the duration (the file is attached by
    `start_run_folder`); an error that ends the run is its last line there too."""
    run_log = RunLog()
    loggers = [logging.getLogger(name) for name in LOGGERS]
    for logger in loggers:
        logger.addHandler(run_log)
    try:
        yield run_log
    except Exception as err:
        from synprep.errors import Interrupted  # Ctrl-C that keeps the run's work (Interrupted) is not an error

        kind = "" if isinstance(err, Interrupted) else "error: "
        run_log.write_line(f"{prog}: {kind}{' '.join(str(err).split())}")
        raise
    finally:
        for logger in loggers:
            logger.removeHandler(run_log)
        run_log.close()
