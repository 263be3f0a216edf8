"""Messages of both packages go through `logging`: the loggers "synprep" and "syntrain" and the module loggers
below them (`logging.getLogger(__name__)`). A program embedding the packages raises, lowers or routes them as it
does any library's (`logging.getLogger("syntrain").setLevel(logging.WARNING)`). The handler, plain lines on
stderr as the messages always were, is there from import (`default_handler`); the command lines set the level
(-v / -q). `syntrain run` also writes them to the run's train.log (a logging file handler on both loggers,
syntrain.runfolder.train_log). Progress bars keep their
own stream (stderr, tqdm); data goes to stdout, never through logging."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

LEVELS = (logging.WARNING, logging.INFO, logging.DEBUG)  # -q, default, -v


class StderrHandler(logging.StreamHandler):
    """Lines on whatever `sys.stderr` is when a message is emitted (a test's capture, syntrain's run log)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:  # the stream is always the current sys.stderr
        pass


def level_of(verbose: int, quiet: int) -> int:
    """The level -v (more: DEBUG) and -q (less: warnings and errors only) give, INFO by default."""
    return LEVELS[max(0, min(len(LEVELS) - 1, 1 + verbose - quiet))]


def default_handler(name: str) -> None:
    """At import: the messages of logger `name` as plain lines on stderr at INFO, as the packages always printed
    them, unless the embedding program configured that logger first (a handler of its own; its level kept). To
    route them elsewhere: `logger.handlers.clear(); logger.propagate = True` (then the root logger's handlers)."""
    logger = logging.getLogger(name)
    if logger.handlers:
        return
    handler = StderrHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.propagate = False
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)


def set_verbosity(verbose: int, quiet: int) -> None:
    """-v / -q of either command line: the level of both packages' loggers."""
    for name in ("synprep", "syntrain"):
        logging.getLogger(name).setLevel(level_of(verbose, quiet))


_SAID: set[tuple[str, object]] = set()  # (logger name, key) of the warnings said once already


def warn_once(logger: logging.Logger, message: str, key: object = None) -> None:
    """`message` as a warning of `logger`, once per process for `key` (default: the message): a condition met at
    every validation of a run, or at every read of one config, is said the first time only."""
    said = (logger.name, message if key is None else key)
    if said not in _SAID:
        _SAID.add(said)
        logger.warning(message)


def forget_warnings() -> None:
    """Every warning of `warn_once` may be said again (tests that check one)."""
    _SAID.clear()
