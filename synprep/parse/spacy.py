"""spaCy backend: an installed pipeline package (e.g. `en_core_web_sm`) with a dependency parser.

spaCy's parser also segments sentences; several sentences on one line are joined (see base.py). Labels are
the pipeline's own (the English pipelines use ClearNLP labels such as `dobj`, not UD); `ROOT` becomes `root`.
Raw lines are single-spaced before parsing so that spaCy makes no whitespace tokens.

Matrix products go through numpy's BLAS (the pipeline is loaded under thinc `NumpyOps(use_blis=False)`; the
process's current ops are left as they were), one thread per process (synprep
runs one parser per worker): spaCy's bundled BLIS falls back to its generic kernel on CPUs it does not
recognise (e.g. an AMD EPYC VM), where the same trees come 1.5-1.8x faster this way
(benchmarks/README.md, bench_parse).
"""

from __future__ import annotations

from typing import Any

from ..conllu import ConlluSentence
from ..errors import InputError
from .base import Parser

SPACY_HINT = "install a pipeline with `python -m spacy download {name}` (or pip install its package)"


def span_to_sentence(span: Any) -> ConlluSentence:  # noqa: ANN401 (a spacy.tokens.Span)
    """A spaCy sentence span as CoNLL-U word rows (heads relative to the span, `ROOT` -> `root`)."""
    words = []
    start = span.start
    for i, token in enumerate(span, 1):
        head = 0 if token.head.i == token.i else token.head.i - start + 1
        label = "root" if head == 0 else (token.dep_ or "dep")
        misc = "SpaceAfter=No" if not token.whitespace_ and i < len(span) else "_"
        words.append([str(i), token.text, token.lemma_ or "_", token.pos_ or "_", token.tag_ or "_",
                      str(token.morph) or "_", str(head), label, "_", misc])
    return ConlluSentence(words)


class SpacyParser(Parser):
    """Parse with `spacy.load(name_or_path)`."""

    name = "spacy"

    def __init__(self, model: str, pretokenized: bool = False) -> None:
        super().__init__(pretokenized)
        try:
            import spacy
        except ImportError:
            raise InputError("spaCy is not installed: pip install 'synprep[spacy]'") from None
        from thinc.api import use_ops

        self.model = model
        try:
            with use_ops("numpy", use_blis=False):  # the pipeline's layers keep the ops they were made with
                self._nlp = spacy.load(model, exclude=["ner"])
        except OSError as err:
            raise InputError(f"cannot load spaCy pipeline ({str(err).splitlines()[0][:200]}); "
                             f"{SPACY_HINT.format(name=model)}", model) from None
        if "parser" not in self._nlp.pipe_names:
            raise InputError("this spaCy pipeline has no dependency parser", model)

    def model_signature(self) -> str:
        meta = self._nlp.meta
        return f"{meta.get('lang', '')}_{meta.get('name', self.model)}-{meta.get('version', '')}"

    def parse_lines(self, lines: list[str]) -> list[list[ConlluSentence]]:
        if self.pretokenized:
            from spacy.tokens import Doc

            inputs = (Doc(self._nlp.vocab, words=line.split(" ")) for line in lines)
        else:
            inputs = (" ".join(line.split()) for line in lines)
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1, user_api="blas"):
            return [[span_to_sentence(sent) for sent in doc.sents] for doc in self._nlp.pipe(inputs)]
