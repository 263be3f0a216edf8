"""What a run folder keeps so that its checkpoints translate raw text anywhere: OUT/source/ holds copies of the
training data's BPE codes (codes.bpe) and source BPE vocabulary (vocab.src, where a vocabulary threshold is on),
source.json (the source parser: backend, the model's absolute path on the training machine and its sha256), and
with `bundle` the parser model itself. `syntrain translate` looks for each file there first, then where the
dataset had it; a file found nowhere is an error naming it and the flag that supplies it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from typing import Any

from synprep.errors import InputError
from synprep.shards import SourcePreparation, source_preparation
from synprep.subwords import registry
from synprep.textio import atomic_write

SOURCE_DIR, SOURCE_INFO = "source", "source.json"
FILE_BACKENDS = ("udpipe", "spacy-udpipe")  # backends whose model is one file (the others: a folder or a package)


def _copy(path: str, target: str) -> None:
    """`path` (a file or a folder) to `target`, complete or not at all."""
    tmp = target + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    if os.path.isdir(path):
        shutil.copytree(path, tmp)
    else:
        shutil.copyfile(path, tmp)
    if os.path.isdir(target):
        shutil.rmtree(target)
    os.replace(tmp, target)


def write_source_files(out: str, configuration: dict[str, Any], signature: dict[str, Any], dataset: str,
                       bundle: bool, fresh: bool = True) -> None:
    """OUT/source/ for the training data converted into `dataset` (nothing where its source side was CoNLL-U:
    such a model translates split folders only). `bundle`: also copy the parser model (file or folder);
    `fresh` (a new run): an earlier run's source/ goes first."""
    folder = os.path.join(out, SOURCE_DIR)
    if fresh:
        shutil.rmtree(folder, ignore_errors=True)
    try:
        preparation = source_preparation(configuration, signature, dataset)
    except InputError:
        return
    os.makedirs(folder, exist_ok=True)
    scheme = registry.get(preparation.scheme)
    further = [(os.path.join(os.path.dirname(preparation.codes), name), name)  # what `load` reads beside it
               for name in scheme.further_files(joint=True)] if preparation.codes else []
    for path, name in ((preparation.codes, scheme.model_file()), (preparation.vocabulary, "vocab.src"), *further):
        if path and name and os.path.isfile(path):
            _copy(path, os.path.join(folder, name))
    parser = {key: os.path.abspath(value) if key in ("model", "model_dir") and value and os.path.exists(value)
              else value for key, value in preparation.parser.items()}
    bundled = None
    if bundle:
        model = parser.get("model_dir") or parser.get("model")
        if not model or not os.path.exists(model):
            raise ValueError(f"bundle: the source parser model {model!r} is not a file or folder here (a package "
                             "name?): install it where the checkpoint is used instead")
        bundled = "parser-" + os.path.basename(model.rstrip("/"))
        _copy(model, os.path.join(folder, bundled))
    info = {"parser": parser, "parser_sha256": preparation.parser_sha256, "bundled": bundled,
            "bundled_as": "model_dir" if parser.get("model_dir") else "model"}
    atomic_write(os.path.join(folder, SOURCE_INFO), json.dumps(info, indent=2).encode())


def _source_info(folder: str) -> dict[str, Any]:
    path = os.path.join(folder, SOURCE_INFO)
    if not os.path.isfile(path):
        return {}
    from synprep.textio import read_json

    info = read_json(path, "the record of the run's source files (source.json)")
    kinds = {"parser": dict, "bundled": (str, type(None)), "bundled_as": str}  # what travelling_preparation reads
    if not isinstance(info, dict) or any(key in info and not isinstance(info[key], kind)
                                         for key, kind in kinds.items()):
        raise InputError("not the record of the run's source files: a table with parser, bundled, bundled_as",
                         path)
    return info


def travelling_preparation(ckpt: dict[str, Any], checkpoint: str, parser_model: str | None = None,
                      bpe_codes: str | None = None) -> SourcePreparation:
    """How to prepare raw source lines for `checkpoint`: each file from the flag, else from the run folder's
    source/ (next to the checkpoint), else where the dataset had it; InputError naming a file found nowhere."""
    if "pipeline" not in ckpt:
        raise ValueError("this checkpoint has no pipeline configuration: give a split folder")
    pipeline = ckpt["pipeline"]
    dataset = ckpt.get("dataset") or pipeline.get("output", "")  # older checkpoints: the output
    preparation = source_preparation(pipeline, ckpt.get("signature", {}), dataset)
    folder = os.path.join(os.path.dirname(os.path.abspath(checkpoint)), SOURCE_DIR)
    info = _source_info(folder)
    parser = dict(info.get("parser") or preparation.parser)
    key = info.get("bundled_as", "model_dir" if parser.get("model_dir") else "model")
    if parser_model:
        parser[key] = parser_model
    elif info.get("bundled"):
        parser[key] = os.path.join(folder, info["bundled"])
    model = parser.get(key)
    if parser.get("backend") in FILE_BACKENDS and model and not os.path.isfile(model):
        raise InputError("the source parser model is missing (raw text is parsed with the model the training data "
                         "was parsed with): give --parser-model PATH, or train with --bundle to keep a copy in the "
                         "run folder", model)
    codes = preparation.codes
    if preparation.codes:
        stored = os.path.join(folder, registry.get(preparation.scheme).model_file() or "")
        codes = bpe_codes or next((path for path in (stored, preparation.codes)
                                   if os.path.isfile(path)), None)
        if codes is None:
            raise InputError(f"the BPE codes are missing (not in {folder}, and the dataset's moved or was deleted): "
                             "give --bpe-codes PATH (the dataset's source codes: codes.bpe, with separate BPE "
                             "codes.src.bpe)", preparation.codes)
    vocabulary = preparation.vocabulary
    if vocabulary and os.path.isfile(os.path.join(folder, "vocab.src")):
        vocabulary = os.path.join(folder, "vocab.src")
    return dataclasses.replace(preparation, parser=parser, codes=codes, vocabulary=vocabulary)
