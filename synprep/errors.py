"""The one exception type for bad input, and the one way both CLIs report it: `PROG: error: ...`, exit 2."""

from __future__ import annotations

import os
import sys


class InputError(Exception):
    """Bad user input, located as precisely as we can (file, line, sentence)."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None,
                 sentence: str | None = None) -> None:
        self.message, self.path, self.line, self.sentence = message, path, line, sentence
        super().__init__(str(self))

    def __reduce__(self) -> tuple:  # keep the fields across processes (pickle)
        return (InputError, (self.message, self.path, self.line, self.sentence))

    def __str__(self) -> str:
        if self.path is None and self.line is None:  # an option or a setting: the message names it
            return self.message
        where = self.path or "<input>"
        if self.line is not None:
            where += f":{self.line}"
        if self.sentence is not None:
            where += f" (sentence {self.sentence})"
        return f"{where}: {self.message}"


class WriteError(InputError):
    """A write that failed (a full disk, permission denied, a missing folder): the system's fault, not the
    input's; one line naming the file and the cause."""

    def __reduce__(self) -> tuple:
        return (WriteError, (self.message, self.path, self.line, self.sentence))


class Interrupted(Exception):
    """Ctrl-C (or SIGTERM/SIGHUP) in a command that keeps its work: the message says how to continue (exit code
    130, or 128 + the signal's number)."""

    def __init__(self, message: str, exit_code: int = 130) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def fail(prog: str, message: str) -> None:
    """`PROG: error: MESSAGE` as one line on stderr, exit code 2, no traceback."""
    print(f"{prog}: error: {' '.join(message.split())}", file=sys.stderr, flush=True)
    sys.exit(2)


def _fill_closed_descriptors() -> None:
    """A closed standard descriptor (`<&-`, `>&-`, `2>&-`) is opened on /dev/null: otherwise the next file opened
    would get its number, and whatever writes to descriptor 1 or 2 (a library's C code) would write into it.
    Python's sys.stdin/sys.stdout stay None: reading or writing '-' is then one line (textio.standard_stream)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)
            if opened != fd:  # a lower one was closed too and got it first: filled in order, so not expected
                os.dup2(opened, fd)
                os.close(opened)


def run_cli(cli: object, prog: str, ending_signals: bool = False) -> None:
    """Run a click group so that every user error is `PROG: error: ...` (exit 2): click's usage errors (with a
    hint to the command's --help instead of click's `Error:` block), InputError, and ValueError/OSError raised as
    click.ClickException by the commands. A closed stdout (`... | head`) is not an error. With `ending_signals`,
    SIGTERM and SIGHUP end the command like Ctrl-C: one line, exit code 128 + the signal's number."""
    import click

    from .processes import Terminated, signals_interrupt

    _fill_closed_descriptors()
    try:
        if ending_signals:
            with signals_interrupt():
                cli.main(prog_name=prog, standalone_mode=False)  # type: ignore[attr-defined]
        else:
            cli.main(prog_name=prog, standalone_mode=False)  # type: ignore[attr-defined]
    except click.exceptions.Exit as exit_:
        sys.exit(exit_.exit_code)
    except click.UsageError as err:
        hint = f" (see '{err.ctx.command_path} --help')" if getattr(err, "ctx", None) else ""
        fail(prog, err.format_message().rstrip(".") + hint)
    except click.ClickException as err:
        fail(prog, err.format_message())
    except Interrupted as err:
        print(f"{prog}: {err}", file=sys.stderr)
        sys.exit(err.exit_code)
    except click.exceptions.Abort as err:
        if isinstance(err.__cause__, Terminated):  # SIGTERM / SIGHUP in a command that says nothing more
            print(f"{prog}: stopped by {err.__cause__}", file=sys.stderr)
            sys.exit(err.__cause__.exit_code)
        # Ctrl-C in a command that says nothing more (click turned it, or an end of input, into Abort)
        print(f"{prog}: stopped by Ctrl-C" if isinstance(err.__cause__, KeyboardInterrupt) else f"{prog}: aborted",
              file=sys.stderr)
        sys.exit(130)
    except InputError as err:
        fail(prog, str(err))
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)
    except OSError as err:  # disk full, permission denied, a missing folder: one line naming the path
        where = err.filename if err.filename is not None else "<output>"
        fail(prog, f"{where}: {err.strerror or err}")
