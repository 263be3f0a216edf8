"""Loading a sub-word scheme's model through the registry (`synprep.subwords.registry`): the model file's name and
path, the cutter, the marker, a missing library as a one-line error."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from ..errors import InputError
from . import registry
from .base import Scheme


def model_file_name(scheme: str, side: str | None = None) -> str:
    """The model's file name in a dataset folder (joint: `side` None); ValueError for a scheme without a model."""
    name = registry.get(scheme).model_file(side)
    if name is None:
        raise ValueError(f"the {scheme} scheme has no model file")
    return name


def model_path(scheme: str, path: str) -> str:
    """The model file a pipeline names (an hf-tokenizer folder means its tokenizer.json)."""
    return registry.get(scheme).model_path(path)


def _library(scheme: Scheme) -> None:
    """A scheme's optional library imported; missing, a one-line error saying what to install (the optional
    extra `subwords`)."""
    if scheme.package is None:
        return
    try:
        importlib.import_module(scheme.package)
    except ImportError as err:
        if err.name != scheme.package:
            raise
        raise InputError(f"the {scheme.name} scheme needs the {scheme.package} package: pip install "
                         "'synprep[subwords]'") from None


def scheme_module(scheme: str) -> ModuleType:
    """The module of a scheme (its library checked: `_library`)."""
    declared = registry.get(scheme)
    _library(declared)
    return importlib.import_module(type(declared).__module__)


def load_cutter(scheme: str, path: str | None, vocabulary: set[str] | None = None) -> Any:
    """A scheme's cutter loaded from its model file (None: no model; subword-nmt: codes, with an optional
    vocabulary filter, and None without codes)."""
    declared = registry.get(scheme)
    _library(declared)
    return declared.load(path, vocabulary)


def cutter_of(scheme: str, model: str | None, codes: str | None = None) -> Any:
    """The cutter of a scheme and its model as `synprep bpe apply` / `align` take them: InputError for a model (or
    BPE codes) given to a scheme without one, no model (or BPE codes too) for a scheme with one."""
    if not registry.get(scheme).files:
        if model is not None or codes is not None:
            raise InputError(f"--scheme {scheme} has no model: give neither --model nor BPE codes")
        return load_cutter(scheme, None)
    if model is None or codes is not None:
        raise InputError(f"--scheme {scheme} takes --model (a {scheme} model), not BPE codes")
    return load_cutter(scheme, model_path(scheme, model))


def marker_of(scheme: str, model: str | None) -> tuple[str, str]:
    """(marker, marker kind) of a scheme's pieces (hf-tokenizer: read from its tokenizer.json)."""
    return registry.get(scheme).marker_of(model)


def dataset_marker(configuration: dict, signature: dict, side: str) -> tuple[str, str]:
    """(marker, marker kind) of one side's pieces in a converted dataset (its manifest's configuration and
    signature): as the signature records it (`subword_marker`), else the scheme's own (subword-nmt '@@', end;
    sentencepiece '▁', start); ValueError for a dataset whose marker depends on its model without the record."""
    recorded = (signature.get("subword_marker") or {}).get(side)
    if recorded:
        return recorded[0], recorded[1]
    scheme = registry.of(configuration)
    fixed = scheme.fixed_marker()
    if fixed is None:
        raise ValueError(f"the dataset's manifest does not record the marker of its {scheme.name} pieces "
                         "(signature.subword_marker): convert it again")
    return fixed
