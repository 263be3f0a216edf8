"""The checks that syntrain's commands and their Python API functions share (synprep/arguments.py declares the
options; the options that set a [train] or [model] field, `syntrain run`'s flags and the decoding options, are
checked by that field's declaration, in the same words: `field_option`), and the outputs they write alike."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from synprep.arguments import Arg

DECODING_FIELDS = {"beam": "test_beam", "length_penalty": "length_penalty", "max_tokens": "max_tokens",
                   "threads": "threads", "bleu_tokenize": "bleu_tokenize"}  # option -> the [train] field declaring it


def field_option(section: str, name: str, flag: str) -> Arg | None:
    """The [train] or [model] field `name` as the option `flag` that sets it (`Arg.of_field`: a number, text or
    choice; None for a list, a table or a boolean)."""
    from synprep.arguments import Arg

    from .config.sections import declaration

    return Arg.of_field(declaration(section, name)[0], name, flag)  # type: ignore[index]


def check_field_option(command: str, section: str, name: str, value: Any, flag: str) -> Any:  # noqa: ANN401
    """A value given to the option `flag` of `command` that sets [section] field `name` (a `syntrain run` flag,
    `--beam`), checked by the field's declaration in the words of every other option: ConfigError with the
    command's line (`Invalid value for '--beam': 0 is not in the range 1<=x<=256 (see 'syntrain eval --help')`)."""
    from synprep.arguments import Arg
    from synprep.errors import InputError

    from .config.sections import check_value
    from .config.values import ConfigError

    arg = field_option(section, name, flag)
    try:
        if arg is not None:
            return arg.check(value, command)
        try:
            return check_value(section, name, value, flag)
        except ConfigError as err:
            raise Arg(flag).error(str(err).removeprefix(f"{flag} "), command) from None
    except InputError as err:
        raise ConfigError(str(err)) from None


def check_decoding(command: str, **given: Any) -> dict[str, Any]:  # noqa: ANN401
    """The decoding and scoring options of a command (`beam`, `length_penalty`, `max_tokens`, `threads`: None,
    the run's own; `bleu_tokenize`) checked by their [train] declarations, as the command's flags are
    (`syntrain.cli.DeclaredType`): ConfigError with the line the command prints."""
    return {name: None if value is None else
            check_field_option(command, "train", DECODING_FIELDS[name], value, "--" + name.replace("_", "-"))
            for name, value in given.items()}


def syntrain_arguments(command: str, **values: Any) -> dict[str, Any]:  # noqa: ANN401
    """`synprep.arguments.check_arguments` for a syntrain command: a ConfigError (a ValueError) with its line."""
    from synprep.arguments import check_arguments
    from synprep.errors import InputError

    from .config.values import ConfigError

    try:
        return check_arguments(command, **values)
    except InputError as err:
        raise ConfigError(str(err)) from None


def check_folders(paths: Sequence[str | None]) -> None:
    """ValueError naming the first output path whose folder does not exist (before any decoding is spent)."""
    import os

    for path in filter(None, paths):
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise ValueError(f"{path}: the folder {folder} does not exist")


def write_json(path: str, values: dict[str, Any]) -> None:
    """One JSON object written whole or not at all (a temporary file renamed over `path`; a failure is one line
    naming it)."""
    from synprep.textio import atomic_write, json_text

    atomic_write(path, (json_text(values, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))
