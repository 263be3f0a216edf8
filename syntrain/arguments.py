"""The checks that syntrain's commands and their Python API functions share (synprep/arguments.py declares the
options; the decoding options are checked by their [train] declarations), and the outputs they write alike."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

DECODING_FIELDS = {"beam": "test_beam", "length_penalty": "length_penalty", "max_tokens": "max_tokens",
                   "threads": "threads", "bleu_tokenize": "bleu_tokenize"}  # option -> the [train] field declaring it


def check_decoding(command: str, **given: Any) -> dict[str, Any]:  # noqa: ANN401
    """The decoding and scoring options of a command (`beam`, `length_penalty`, `max_tokens`, `threads`: None,
    the run's own; `bleu_tokenize`) checked by their [train] declarations, as the command's flags are
    (`syntrain.cli.DeclaredType`): ConfigError with the line the command prints."""
    from .config.sections import check_value
    from .config.values import ConfigError

    try:
        return {name: None if value is None else
                check_value("train", DECODING_FIELDS[name], value, "--" + name.replace("_", "-"))
                for name, value in given.items()}
    except ConfigError as err:
        raise ConfigError(f"{err} (see '{command} --help')") from None


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
    import json

    from synprep.textio import atomic_write

    atomic_write(path, (json.dumps(values, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))
