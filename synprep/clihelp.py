"""Help of both command lines: every command's `--help` ends with one example (its epilog)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import click


def leaf_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """(path of names, command) of every command under `group`, sub-groups walked."""
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from leaf_commands(command, (*prefix, name))
        else:
            yield (*prefix, name), command


def verbosity_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """-v / -q of a command line's group: more (-v: debug) or fewer (-q: warnings and errors) messages on
    stderr (synprep.logs); data on stdout is the same."""
    function = click.option("-q", "--quiet", count=True, help="Fewer messages: warnings and errors only.")(function)
    return click.option("-v", "--verbose", count=True, help="More messages (debug).")(function)


def add_examples(group: click.Group, prog: str, examples: dict[str, str]) -> None:
    """The example of each command ("bpe learn": "synprep bpe learn ...") as its `--help`'s last lines; a
    command without one, or an example of no command, is a programming error."""
    commands = {" ".join(path): command for path, command in leaf_commands(group)}
    if set(commands) != set(examples):
        raise AssertionError(f"{prog}: examples differ from the commands: {sorted(set(commands) ^ set(examples))}")
    for path, command in commands.items():
        command.epilog = f"\b\nExample:\n  {examples[path]}"


class Finite(click.FloatRange):
    """A number in a range, never NaN or an infinity (click's FloatRange takes `nan`: no comparison refuses it)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:  # noqa: ANN401
        import math

        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{number!r} is not a finite number.", param, ctx)  # 'nan' given, nan in the API: one line
        return number
