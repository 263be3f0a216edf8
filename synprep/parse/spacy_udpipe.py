"""spacy-udpipe backend: a local UDPipe 1 model run through spaCy's `Doc` (presegmented or pretokenized input).

spacy-udpipe turns multiword tokens into their syntactic words (German `zum` -> `zu dem`), so its output
has no multiword ranges; use the `udpipe` backend to keep them.
"""

from __future__ import annotations

from ..conllu import ConlluSentence
from ..errors import InputError
from .base import Parser, file_signature
from .spacy import span_to_sentence
from .udpipe import load_udpipe_model


class SpacyUDPipeParser(Parser):
    """A UDPipe model loaded with `spacy_udpipe.load_from_path`."""

    name = "spacy-udpipe"

    def __init__(self, model_path: str, lang: str, pretokenized: bool = False) -> None:
        super().__init__(pretokenized)
        try:
            import spacy_udpipe
        except ImportError:
            raise InputError("spacy-udpipe is not installed: pip install 'synprep[spacy-udpipe]'") from None
        load_udpipe_model(model_path)  # a clear error before spacy-udpipe fails on a None model
        self.model_path = model_path
        self._nlp = spacy_udpipe.load_from_path(lang=lang, path=model_path)

    def model_signature(self) -> str:
        return file_signature(self.model_path)

    def parse_lines(self, lines: list[str]) -> list[list[ConlluSentence]]:
        result = []
        for line in lines:
            # a list of strings = presegmented text, a list of token lists = pretokenized (spacy-udpipe's API)
            doc = self._nlp.tokenizer([line.split(" ")] if self.pretokenized else [line])
            result.append([span_to_sentence(sent) for sent in doc.sents])
        return result
