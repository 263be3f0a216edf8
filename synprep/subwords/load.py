"""Loading a sub-word scheme's model: the one place that knows which module serves which scheme."""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import TYPE_CHECKING

from ..errors import InputError
from ..options import BPE_SEPARATOR
from . import HF_TOKENIZER, SCHEMES, SENTENCEPIECE, SUBWORD_NMT, TokenCutter

if TYPE_CHECKING:
    from ..bpe import Bpe


def model_file_name(scheme: str, side: str | None = None) -> str:
    """The model's file name in a dataset folder (joint: `side` None)."""
    middle = f".{side}" if side else ""
    return {SUBWORD_NMT: f"codes{middle}.bpe", SENTENCEPIECE: f"subwords{middle}.model",
            HF_TOKENIZER: f"tokenizer{middle}.json"}[scheme]


def model_path(scheme: str, path: str) -> str:
    """The model file a pipeline names: an hf-tokenizer folder means its tokenizer.json."""
    if scheme == HF_TOKENIZER and os.path.isdir(path):
        path = os.path.join(path, "tokenizer.json")
    if not os.path.isfile(path):
        raise InputError(f"no {scheme} model file here", path)
    return path


def scheme_module(scheme: str) -> ModuleType:
    """The module of a sentencepiece / hf-tokenizer scheme; a missing library is a one-line error saying what to
    install (they are the optional extra `subwords`)."""
    name, package = {SENTENCEPIECE: ("sentencepiece_scheme", "sentencepiece"),
                     HF_TOKENIZER: ("hf_tokenizer", "tokenizers")}[scheme]
    try:
        return importlib.import_module(f"{__package__}.{name}")
    except ImportError as err:
        if err.name != package:
            raise
        raise InputError(f"the {scheme} scheme needs the {package} package: pip install 'synprep[subwords]'"
                         ) from None


def load_cutter(scheme: str, path: str, vocabulary: set[str] | None = None) -> Bpe | TokenCutter:
    """A scheme's model loaded from its file (subword-nmt: codes, with an optional vocabulary filter)."""
    if scheme == SUBWORD_NMT:
        from ..bpe import Bpe

        return Bpe(path, vocabulary)
    if scheme == SENTENCEPIECE:
        return scheme_module(scheme).SentencePieceCutter(path)
    if scheme == HF_TOKENIZER:
        return scheme_module(scheme).TokenizerCutter(path)
    raise InputError(f"unknown sub-word scheme {scheme!r} (choose from {', '.join(SCHEMES)})")


def marker_of(scheme: str, model: str | None) -> tuple[str, str]:
    """(marker, marker kind) of a scheme's pieces (hf-tokenizer: read from its tokenizer.json)."""
    if scheme == SUBWORD_NMT:
        return BPE_SEPARATOR, "end"
    if scheme == SENTENCEPIECE:
        return "\u2581", "start"
    return scheme_module(HF_TOKENIZER).tokenizer_marker(model)


def dataset_marker(configuration: dict, signature: dict, side: str) -> tuple[str, str]:
    """(marker, marker kind) of one side's pieces in a converted dataset (its manifest's configuration and
    signature): as the signature records it (`subword_marker`), else the scheme's own (subword-nmt '@@', end;
    sentencepiece '▁', start); ValueError for an hf-tokenizer dataset without the record."""
    recorded = (signature.get("subword_marker") or {}).get(side)
    if recorded:
        return recorded[0], recorded[1]
    scheme = (configuration.get("bpe") or {}).get("scheme", SUBWORD_NMT)
    if scheme == HF_TOKENIZER:
        raise ValueError("the dataset's manifest does not record the marker of its hf-tokenizer pieces "
                         "(signature.subword_marker): convert it again")
    return marker_of(scheme, None)
