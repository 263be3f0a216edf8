"""`synprep convert`'s input: the files of each split checked, fingerprinted and read in pieces.

A piece is PIECE_ROWS input pairs (fewer at the end of a shard or split): the unit of work of every phase and
one Arrow record batch. Its files in OUT/.work/<split>/ share the prefix `piece_prefix` gives.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from itertools import islice, zip_longest

from ..errors import InputError
from ..filter import make_identifier
from ..textio import check_text_file, count_lines, file_sha256, path_sha256
from .corpus import detect_format, read_side
from .pipeline import PipelineConfig, SplitConfig

PIECE_ROWS = 1000  # input pairs per unit of work and per Arrow record batch (changing it changes the bytes)
SIDES = ("src", "tgt")


def piece_prefix(work: str, shard: int, piece: int) -> str:
    """The path prefix of a piece's files in a split's work folder."""
    return os.path.join(work, f"piece-{shard:05d}-{piece:03d}")


def check_inputs(config: PipelineConfig) -> None:
    """Every input file exists (the segment counts are checked while reading, in one pass)."""
    for split in config.splits:
        for path in split.src + split.tgt:
            if not os.path.exists(path) or os.path.isdir(path):  # a named pipe is fine: read once
                raise InputError(f"input file of split {split.name!r} not found (the comments at the top of "
                                 "the pipeline file say where to get it)", path)
            if os.path.isfile(path):
                check_text_file(path)  # UTF-16/UTF-32 text: one error now, before any work
    if config.filter is not None:
        try:  # a language the identifier cannot return would reject every pair: one line now, before any work
            make_identifier(config.filter)
        except ValueError as err:
            raise InputError(f"[filter]: {err}", config.file) from None


def input_fingerprints(config: PipelineConfig) -> dict[str, list]:
    """Every regular input file's [size, sha256] (named pipes are read once: they have none), to tell on
    `--resume` whether the inputs are still those the interrupted run read."""
    found: dict[str, list] = {}
    for split in config.splits:
        for path in (*split.src, *split.tgt):
            if os.path.isfile(path) and path not in found:
                found[path] = [os.path.getsize(path), file_sha256(path)]
    return found


def dependency_digests(config: PipelineConfig) -> dict[str, str]:
    """The sha256 of every other file or folder the configuration names (parser models, treebanks a parser is
    trained on, sub-word models, BPE codes: any absolute path among its values, outside the output folder), so
    that `--resume` finds one replaced under the same name, size and time (`path_sha256`: a folder's files)."""
    out = os.path.abspath(config.output)
    data = config.fingerprint_dict()
    for key in ("output", "file", "splits", "data_root"):  # the output; inputs: `input_fingerprints`; a folder
        data.pop(key, None)                                  # paths resolve against is no content
    found: dict[str, str] = {}

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)
        elif isinstance(value, str) and os.path.isabs(value) and value not in found and \
                (os.path.isfile(value) or os.path.isdir(value)) and \
                os.path.commonpath([out, value]) not in (out, value):  # not in the output, nor holding it
            found[value] = path_sha256(value)

    walk(data)
    return found


def count_pairs(split: SplitConfig) -> int | None:
    """The input pairs of a split, counted cheaply (newlines in the source files), or None where that is not the
    count of segments (CoNLL-U, SGML, XML) or would read the input twice (compressed files, pipes); at most the
    split's `max_pairs`."""
    counts = [count_lines(path) if (split.format or detect_format(path)) in ("text", "tsv") else None
              for path in split.src]
    if None in counts:
        return None
    total = sum(counts)  # type: ignore[arg-type]
    return total if split.max_pairs is None else min(total, split.max_pairs)


def is_conllu(split: SplitConfig, files: tuple[str, ...]) -> bool:
    """Whether a side of a split is pre-parsed (CoNLL-U)."""
    return (split.format or "") == "conllu" or all(detect_format(f) == "conllu" for f in files)


def input_pieces(split: SplitConfig, config: PipelineConfig) -> Iterator[tuple[int, int, tuple]]:
    """(shard, piece, task) for every piece of the split, in input order: both sides read once, in step;
    sides of different lengths are an error naming both counts. A task is (first pair's id, (source items,
    target items)): raw bytes per line, a `corpus.ConlluBlock` per pre-parsed sentence, or a `corpus.BadRow`.
    With the split's `max_pairs`, only its first pairs are read (the rest of the files is never looked at)."""
    size = config.shard_size
    sides = [read_side(files, split.format, lang, column) for files, lang, column in
             ((split.src, config.src_lang, split.src_column), (split.tgt, config.tgt_lang, split.tgt_column))]
    pairs = islice(zip_longest(*sides), split.max_pairs)
    position = 0
    while True:
        shard, offset = divmod(position, size)
        rows = min(PIECE_ROWS, size - offset)
        src_items, tgt_items = [], []
        for src, tgt in pairs:
            if src is None or tgt is None:
                rest = 1 + sum(1 for _ in pairs)
                n_src, n_tgt = (position + len(src_items) + (rest if tgt is None else 0),
                                position + len(tgt_items) + (rest if src is None else 0))
                raise InputError(f"split {split.name!r}: {n_src} source segments ({', '.join(split.src)}) but "
                                 f"{n_tgt} target segments ({', '.join(split.tgt)})")
            src_items.append(src)
            tgt_items.append(tgt)
            if len(src_items) == rows:
                break
        if not src_items:
            return
        yield shard, offset // PIECE_ROWS, (position, (src_items, tgt_items))
        position += len(src_items)
