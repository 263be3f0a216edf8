"""UDPipe 1 backend (`ufal.udpipe`): tokenizer in presegmented mode, or `horizontal` input when pretokenized."""

from __future__ import annotations

import os
from typing import Any

from ..conllu import MISC, ConlluSentence, parse_conllu_text
from ..errors import InputError
from ..textio import regular_file
from .base import Parser, file_signature

MODELS_HINT = ("UDPipe 1 models are released at the LINDAT repository "
               "(https://lindat.mff.cuni.cz/repository/xmlui/handle/11234/1-3131, "
               "e.g. english-ewt-ud-2.5-191206.udpipe), "
               "or train one with `synprep parser train --backend udpipe`")


_PROBED: set[tuple[str, int, int]] = set()  # model files a child process loaded safely (inherited by forks)


def check_udpipe_model(path: str, probe: bool = True) -> None:
    """Load the model once in a forked child: an unusable file is a one-line InputError, and on some damaged
    files UDPipe's C++ code throws an exception nothing catches and aborts the whole process (a pool would
    restart its dying workers forever). The caller itself loads nothing (workers load the model once).
    `probe=False`: only check that the file exists (no load; the probe comes when something is parsed)."""
    regular_file(path, "the UDPipe model")
    if not os.path.isfile(path):
        raise InputError(f"no such UDPipe model file; {MODELS_HINT}", path)
    if not probe:
        return
    stat = os.stat(path)
    key = (os.path.abspath(path), stat.st_size, stat.st_mtime_ns)
    if key in _PROBED or not hasattr(os, "fork"):
        return
    pid = os.fork()
    if pid == 0:  # the child: load, report by exit code, never return
        code = 4
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)  # the C++ runtime's "terminate called ..." lines
            from ufal.udpipe import Model

            code = 0 if Model.load(path) is not None else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        raise InputError(f"not a UDPipe model (UDPipe aborted while reading it: a damaged file?); {MODELS_HINT}", path)
    if code:
        raise InputError(f"not a loadable UDPipe model; {MODELS_HINT}", path)
    _PROBED.add(key)


def load_udpipe_model(path: str) -> Any:  # noqa: ANN401 (a ufal.udpipe.Model, imported lazily)
    """Load a UDPipe model or raise a one-line InputError (Model.load returns None instead of raising; a file
    that makes UDPipe abort is caught in a child process first)."""
    from ufal.udpipe import Model

    check_udpipe_model(path)
    model = Model.load(path)
    if model is None:
        raise InputError(f"not a loadable UDPipe model; {MODELS_HINT}", path)
    return model


def has_tagger(model: Any) -> bool:  # noqa: ANN401 (a ufal.udpipe.Model)
    """Whether the model has a tagger: a model trained with `--tagger-options none` (its parser reads word
    forms only) is run without one, and its words get no UPOS, lemma or features (`_`)."""
    from ufal.udpipe import Pipeline, ProcessingError

    error = ProcessingError()
    Pipeline(model, "horizontal", Pipeline.DEFAULT, Pipeline.NONE, "conllu").process("a\n", error)
    return not (error.occurred() and "No tagger" in error.message)


class UDPipeParser(Parser):
    """Tokenize (one line = one sentence), tag and parse with a UDPipe 1 model."""

    name = "udpipe"

    def __init__(self, model_path: str, pretokenized: bool = False) -> None:
        super().__init__(pretokenized)
        from ufal.udpipe import Pipeline, ProcessingError

        self.model_path = model_path
        self._model = load_udpipe_model(model_path)
        if not pretokenized and not self._model.newTokenizer(self._model.DEFAULT):
            raise InputError("this UDPipe model has no tokenizer; use --pretokenized", model_path)
        source = "horizontal" if pretokenized else "tokenizer=presegmented"
        tagger = Pipeline.DEFAULT if has_tagger(self._model) else Pipeline.NONE  # a parser trained without tags
        self._pipeline = Pipeline(self._model, source, tagger, Pipeline.DEFAULT, "conllu")
        self._error = ProcessingError()

    def model_signature(self) -> str:
        return file_signature(self.model_path)

    def parse_lines(self, lines: list[str]) -> list[list[ConlluSentence]]:
        result = []
        for line in lines:
            conllu = self._pipeline.process(line, self._error)
            if self._error.occurred():
                raise InputError(f"UDPipe failed: {self._error.message}", self.model_path)
            sentences = parse_conllu_text(conllu, self.model_path)
            if sentences:
                _drop_line_end(sentences[-1])
            result.append(sentences)
        return result


def _drop_line_end(sentence: ConlluSentence) -> None:
    """Remove UDPipe's `SpacesAfter=\\n` from the last token: it records the end of the input, not the text."""
    last = len(sentence.words)
    rows = [cols for first, end, cols in sentence.multiword if end == last] or sentence.words[-1:]
    for cols in rows:
        items = [item for item in cols[MISC].split("|") if not item.startswith("SpacesAfter=")]
        cols[MISC] = "|".join(items) or "_"
