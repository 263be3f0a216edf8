"""Where a command may write: the one rule every writing command applies to its output paths before any write.

An output is refused, in one line naming it, when it
- is one of the command's inputs, or a file of an input folder (it would be replaced by what is made from it);
- is a folder that holds one of the inputs (its files would be replaced or deleted);
- is given twice (two options naming one file: the second would overwrite the first);
- is or lies inside a synprep dataset or split folder (`synprep convert` owns them: `validate` would not see the
  stranger, `convert --overwrite` would delete it) or a training run's folder (`syntrain run` owns it; syntrain's
  own products, such as averaged checkpoints and evaluations, may go there: `runs=True`);
- holds a newline, or starts with a dash (an option's name given where a path belongs).
A file name a command makes from a value (`export --name`) is checked by `check_name`: no path separator, no
`..`, no newline, no leading dash, so that the file stays in its output folder.
"""

from __future__ import annotations

import contextlib
import glob
import os

from .errors import InputError
from .options import MANIFEST, PATHS

RUN_MARKS = ("metrics.jsonl", "train.log")  # with checkpoints (*.pt): what a `syntrain run` folder holds


def run_files(folder: str) -> list[str]:
    """The files marking a training run (`syntrain run --out`) in `folder`: checkpoints (*.pt), its metrics and
    log; empty for a dataset's own folders."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(name for name in names if name.endswith(".pt") or name in RUN_MARKS)


def dataset_folder(path: str) -> tuple[str, str] | None:
    """(folder, 'split' or 'dataset') when `path` is or lies inside a synprep split folder (a manifest.json or
    shards) or dataset folder (convert's OUT: its paths.json or .work/), else None."""
    path = os.path.abspath(path)
    while True:
        if os.path.isfile(os.path.join(path, MANIFEST)) or glob.glob(os.path.join(glob.escape(path), "part-*.arrow")):
            return path, "split"
        if os.path.isfile(os.path.join(path, PATHS)) or os.path.isdir(os.path.join(path, ".work")):
            return path, "dataset"
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def run_folder(path: str) -> str | None:
    """The training run folder that `path` is or lies inside (one holding checkpoints, metrics.jsonl or
    train.log), else None."""
    path = os.path.abspath(path)
    while True:
        if os.path.isdir(path) and run_files(path):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def check_name(name: str, option: str) -> None:
    """A value that becomes a file name (`export --name`) stays a plain name in its output folder."""
    if not name or "/" in name or os.sep in name or (os.altsep and os.altsep in name) or name in (".", "..") \
            or ".." in name.split(".") or "\n" in name or "\r" in name or name.startswith("-"):
        raise InputError(f"{option} {name!r} must be a plain file name (no path separator, '..', newline or "
                         "leading dash): the files it names stay in the output folder")


def _same(a: str, b: str) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    with contextlib.suppress(OSError):
        return os.path.samefile(a, b)  # hard links
    return False


def check_outputs(outputs: dict[str, str | None], inputs: dict[str, str | None], runs: bool = False,
                  dataset: bool = False) -> None:
    """The rule of the module docstring, before any write: InputError naming the output. `outputs`: option ->
    path (a file or a folder the command makes); `inputs`: what it is, in words -> path (a folder stands for
    every file in it; an input inside an output folder is refused too). '-' (stdout) and devices such as
    /dev/null are not checked. `runs`: outputs may be or lie in a training run's folder (syntrain's own
    products); `dataset`: the output is a dataset folder (convert's), which may be one but not lie in another."""
    from .textio import replaceable

    seen: list[tuple[str, str]] = []
    for option, path in outputs.items():
        if not path or path == "-":
            continue
        if "\n" in path or "\r" in path or path.startswith("-"):
            raise InputError(f"{option} {path!r}: an output path with a newline or a leading dash is refused "
                             "(a mistyped option?): give a plain path")
        if not os.path.isdir(path) and not replaceable(path):  # a device, a named pipe: written in place
            continue
        for other_option, other in seen:
            if _same(path, other):
                raise InputError(f"{path}: given to both {other_option} and {option} (the second file would "
                                 "overwrite the first): give each output its own path")
        for label, given in inputs.items():
            if not given or given == "-":
                continue
            folder = os.path.isdir(given)
            files = [os.path.join(given, name) for name in os.listdir(given)] if folder else [given]
            if any(_same(path, name) for name in [given, *files]):
                raise InputError(f"{path}: {option} would overwrite {'a file of ' if folder else ''}{label}: "
                                 "write it elsewhere")
            if os.path.isdir(path) and _inside(given, path):
                raise InputError(f"{path}: the output folder ({option}) holds {label} ({given}): its files would "
                                 "be replaced or deleted: give a folder of its own")
        found = dataset_folder(os.path.dirname(os.path.abspath(path)) if dataset else path)
        if found:
            where, kind = found
            at = f"is a synprep {kind} folder" if os.path.abspath(path) == where else \
                f"lies inside the synprep {kind} folder {where}"
            raise InputError(f"{option} {path} {at}, which synprep convert owns (validate would not know the "
                             "files, convert --overwrite would delete them): give a folder outside it")
        run = None if runs else run_folder(path)
        if run:
            raise InputError(f"{option} {path} lies in the training run folder {run}, which syntrain run owns: "
                             "give a folder outside it")
        seen.append((option, path))


def _inside(path: str, folder: str) -> bool:
    """Whether `path` lies below `folder` (links resolved)."""
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path != folder and os.path.commonpath([path, folder]) == folder
