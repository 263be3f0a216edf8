"""stanza backend: models from a local folder, never downloaded at run time (`download_method=None`).

A folder made by `stanza.download(lang, model_dir=DIR)` has `DIR/resources.json` listing the language; stanza
then finds its default models. Otherwise (e.g. models you trained) the folder is read as
`DIR/<lang>/<processor>/<name>.pt` for the processors `pos`, `depparse` and, if present, `pretrain` (word
vectors; models trained with `--no_pretrain`, as `synprep parser train --backend stanza` does, have none),
`tokenize`, `mwt` and `lemma` (without a lemma model, lemmas are the word forms).
Raw lines are tokenized without sentence splitting (`tokenize_no_ssplit`).
"""

from __future__ import annotations

import glob
import json
import os
from typing import Any

from ..conllu import ConlluSentence
from ..errors import InputError
from .base import Parser

STANZA_HINT = ("get models with python -c \"import stanza; stanza.download('{lang}', model_dir='{dir}')\" "
               "(on a machine with internet, then copy the folder)")


def _model_file(model_dir: str, lang: str, processor: str) -> str | None:
    files = sorted(glob.glob(os.path.join(model_dir, lang, processor, "*.pt")))
    return files[0] if files else None


def pipeline_options(model_dir: str, lang: str, pretokenized: bool, gpu: bool = False) -> dict[str, Any]:
    """The `stanza.Pipeline` keyword arguments for a local model folder (see the module docstring)."""
    hint = STANZA_HINT.format(lang=lang, dir=model_dir)
    if not os.path.isdir(model_dir):
        raise InputError(f"no such stanza model folder; {hint}", model_dir)
    options: dict[str, Any] = dict(lang=lang, dir=model_dir, download_method=None, use_gpu=gpu,
                                   logging_level="WARN", tokenize_pretokenized=pretokenized,
                                   tokenize_no_ssplit=True)
    resources = os.path.join(model_dir, "resources.json")
    known: dict[str, Any] = {}
    if os.path.isfile(resources):
        with open(resources, encoding="utf-8") as stream:
            try:
                known = json.load(stream)
            except json.JSONDecodeError:
                raise InputError("resources.json is not valid JSON", resources) from None
    if lang in known and "default_processors" in known.get(lang, {}):
        processors = ["tokenize", "mwt", "pos", "lemma", "depparse"]
        if pretokenized or "mwt" not in known[lang]["default_processors"]:
            processors.remove("mwt")
        options["processors"] = ",".join(processors)
        return options
    files = {p: _model_file(model_dir, lang, p) for p in ("pretrain", "tokenize", "mwt", "pos", "lemma", "depparse")}
    missing = [p for p in ("pos", "depparse") if not files[p]]
    if not pretokenized and not files["tokenize"]:
        missing.append("tokenize (or use --pretokenized)")
    if missing:
        raise InputError(f"no stanza models for '{lang}' ({', '.join(missing)} missing); {hint}", model_dir)
    processors = ["tokenize"]
    if not pretokenized:
        options["tokenize_model_path"] = files["tokenize"]
        if files["mwt"]:
            processors.append("mwt")
            options["mwt_model_path"] = files["mwt"]
    processors += ["pos", "lemma", "depparse"]
    if files["lemma"]:
        options["lemma_model_path"] = files["lemma"]
    else:
        options["lemma_use_identity"] = True
    # logging_level ERROR: stanza warns "unsupported language" for every folder without resources.json
    options.update(processors=",".join(processors), allow_unknown_language=True, logging_level="ERROR",
                   pos_model_path=files["pos"], depparse_model_path=files["depparse"])
    if files["pretrain"]:
        options.update(pos_pretrain_path=files["pretrain"], depparse_pretrain_path=files["pretrain"])
    return options


def stanza_sentence(sentence: Any) -> ConlluSentence:  # noqa: ANN401 (a stanza Sentence)
    """A stanza sentence as CoNLL-U rows (character offsets left out: they depend on the batch)."""
    words = [[str(w.id), w.text, w.lemma or "_", w.upos or "_", w.xpos or "_", w.feats or "_",
              str(w.head if w.head is not None else 0), w.deprel or "_", "_", "_"] for w in sentence.words]
    multiword = []
    for token in sentence.tokens:
        if len(token.id) > 1:
            first, last = token.id[0], token.id[-1]
            multiword.append((first, last, [f"{first}-{last}", token.text] + ["_"] * 8))
    return ConlluSentence(words, multiword)


class StanzaParser(Parser):
    """A stanza pipeline (tokenize, pos, lemma, depparse) from a local folder."""

    name = "stanza"

    def __init__(self, model_dir: str, lang: str, pretokenized: bool = False, threads: int | None = None,
                 gpu: bool = False) -> None:
        super().__init__(pretokenized)
        try:
            import stanza
        except ImportError:
            raise InputError("stanza is not installed: pip install 'synprep[stanza]'") from None
        if threads:
            import torch

            torch.set_num_threads(threads)
        self.model_dir, self.lang = model_dir, lang
        options = pipeline_options(model_dir, lang, pretokenized, gpu)
        try:
            self._nlp = stanza.Pipeline(**options)
        except Exception as err:  # stanza raises many types for a broken folder
            raise InputError(f"cannot load stanza models ({type(err).__name__}: {str(err).splitlines()[0][:200]}); "
                             f"{STANZA_HINT.format(lang=lang, dir=model_dir)}", model_dir) from None
        self._document = stanza.Document

    def model_signature(self) -> str:
        return f"{os.path.basename(os.path.normpath(self.model_dir))}/{self.lang}"

    def parse_lines(self, lines: list[str]) -> list[list[ConlluSentence]]:
        if self.pretokenized:
            doc = self._nlp([line.split(" ") for line in lines])
            return [[stanza_sentence(sentence)] for sentence in doc.sentences]
        docs = self._nlp.bulk_process([self._document([], text=line) for line in lines])
        return [[stanza_sentence(sentence) for sentence in doc.sentences] for doc in docs]
