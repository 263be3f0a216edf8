"""py3langid (langid.py's naive Bayes model over byte n-grams, 97 languages, model shipped in the wheel).

The default backend: ~50x langdetect's throughput and more accurate on en/de text (docs/langid.md has the
figures). Same decisions as `py3langid.classify`, faster: only the n-gram features present in the sentence are
scored (a sparse dot product instead of a dense one over all 7,480 features). Text without any letter is
'und', as with langdetect. Pinned to 0.3.0: 0.4.0 ships a retrained 140-language model that is less accurate
on short English/German (0.936 vs 0.966 en/de accuracy on benchmarks/bench_langid.py's sentences).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from importlib import metadata

import numpy as np

from .base import UNDETERMINED, LanguageIdentifier


class Py3langidIdentifier(LanguageIdentifier):
    """py3langid's bundled model; `languages` = candidate set (None = all 97 languages)."""

    name = "py3langid"

    def __init__(self, languages: Sequence[str] | None = None) -> None:
        super().__init__(languages)
        from py3langid import langid

        model = langid.LanguageIdentifier.from_pickled_model(langid.MODEL_FILE)
        self._supported = tuple(sorted(model.nb_classes))
        self.validate_candidates()
        wanted = set(self.candidates())
        keep = np.array([c in wanted for c in model.nb_classes])
        self._classes = [c for c in model.nb_classes if c in wanted]
        self._log_p_feature = np.ascontiguousarray(model.nb_ptc[:, keep], dtype=np.float64)
        self._log_prior = np.asarray(model.nb_pc, dtype=np.float64)[keep]
        self._next_state = model.tk_nextmove
        self._outputs = model.tk_output

    def supported_languages(self) -> tuple[str, ...]:
        return self._supported

    def detect(self, text: str) -> str:
        return self.detect_scored(text)[0]

    def detect_scored(self, text: str) -> tuple[str, float]:
        """The answer and its probability normalized over the candidates (py3langid's `norm_probs`)."""
        if not any(char.isalpha() for char in text):  # like langdetect: no letters, no language
            return UNDETERMINED, 0.0
        next_state, outputs, state = self._next_state, self._outputs, 0
        features: list[int] = []
        extend = features.extend
        for byte in text.encode("utf-8", errors="surrogatepass"):
            state = next_state[(state << 8) + byte]
            extend(outputs.get(state, ()))
        scores = self._log_prior
        if features:
            counts = Counter(features)
            index = np.fromiter(counts.keys(), dtype=np.intp, count=len(counts))
            values = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
            scores = values @ self._log_p_feature[index] + self._log_prior
        best = int(np.argmax(scores))
        return self._classes[best], float(1.0 / np.exp(scores - scores[best]).sum())

    def version(self) -> str:
        return metadata.version("py3langid")
