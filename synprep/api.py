"""synprep's Python API (docs/python-api.md): the main jobs as functions, with the command line's defaults and
its checks (the commands call these). Bad input raises `synprep.InputError` (the CLI's one-line error)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import options
from .convert import ConvertResult, convert
from .errors import InputError
from .parse import parse

if TYPE_CHECKING:
    from .bpe import Bpe

__all__ = ["ConvertResult", "apply_bpe", "convert", "learn_bpe", "load_bpe", "load_dataset", "parse"]


def load_dataset(path: str) -> Any:  # noqa: ANN401 (datasets.Dataset or DatasetDict; datasets is optional)
    """A split folder as a Hugging Face `datasets.Dataset`, or a dataset folder (convert's output) as a
    `DatasetDict` of its splits (`valid` named `validation`); memory-mapped, every shard checked against its
    manifest first. Needs `datasets` (pip install 'synprep[hf]')."""
    try:
        import datasets
    except ImportError:
        raise InputError("datasets is not installed: pip install 'synprep[hf]'") from None
    from .convert.dataset_card import hf_split_name
    from .shards import MANIFEST, load_hf_dataset

    if os.path.isfile(os.path.join(path, MANIFEST)):
        return load_hf_dataset(path)
    splits = sorted(name for name in os.listdir(path) if os.path.isfile(os.path.join(path, name, MANIFEST))) \
        if os.path.isdir(path) else []
    if not splits:
        raise InputError("neither a split folder (manifest.json) nor a dataset folder of splits", path)
    return datasets.DatasetDict({hf_split_name(name): load_hf_dataset(os.path.join(path, name)) for name in splits})


def vocabulary_paths(prefix: str, inputs: Sequence[str]) -> list[str]:
    """vocab prefix + each input's language suffix (train.tok.en -> PREFIX.en), unique per input."""
    suffixes = [os.path.basename(p).rsplit(".", 1)[-1] if "." in os.path.basename(p) else str(i)
                for i, p in enumerate(inputs)]
    if len(set(suffixes)) != len(suffixes):
        suffixes = [str(i) for i in range(len(inputs))]
    return [f"{prefix}.{s}" for s in suffixes]


def learn_bpe(inputs: Sequence[str], output: str, symbols: int = 16000, *, vocab_prefix: str | None = None,
              min_frequency: int = 2, verbose: bool = False) -> list[str]:
    """`synprep bpe learn`: joint codes from all `inputs` (subword-nmt's bytes) into `output`, and one
    vocabulary per input when `vocab_prefix` is given; returns the vocabularies' paths."""
    from .bpe_learn import learn_joint

    if min_frequency < 1:
        raise InputError(f"--min-frequency must be >= 1, got {min_frequency}")
    vocab_paths = vocabulary_paths(vocab_prefix, inputs) if vocab_prefix else None
    learn_joint(list(inputs), output, symbols, vocab_paths, min_frequency, verbose=verbose)
    return vocab_paths or []


def load_bpe(codes: str, *, vocabulary: str | None = None, vocabulary_threshold: int | None = None,
             merges: int = -1, separator: str = options.BPE_SEPARATOR, glossaries: Sequence[str] = ()) -> Bpe:
    """BPE codes ready to segment (`.segment_line(text)`, `.segment_tokens(tokens)`): subword-nmt's apply-bpe,
    byte for byte."""
    from .bpe import Bpe, check_glossaries, check_separator, read_vocabulary

    if vocabulary_threshold is not None and vocabulary is None:
        raise InputError("--vocabulary-threshold needs --vocabulary")
    check_separator(separator)
    check_glossaries(glossaries)
    vocab = read_vocabulary(vocabulary, vocabulary_threshold) if vocabulary else None
    return Bpe(codes, vocab, merges, separator, list(glossaries) or None)


def apply_bpe(codes: str, input: str = "-", output: str = "-", **settings: Any) -> int:  # noqa: ANN401
    """`synprep bpe apply`: segment a file (`-` = stdin/stdout); `settings` as for `load_bpe`. Returns the
    lines written."""
    from .bpe import apply_file

    return apply_file(load_bpe(codes, **settings), input, output)
