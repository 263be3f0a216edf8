"""langdetect (port of Google's language-detection, 55 languages): the papers' filter; the default is
py3langid, more accurate on the held-out sets of docs/langid.md.

langdetect draws random n-gram samples; every detection here re-seeds with 0 (a fresh detector per call from
our own factory), so a sentence's result does not depend on what was detected before it or in which worker.
langdetect's own code cleans the text and extracts the n-grams; its sampling loop, ~90% of its time, runs in
`langdetect_sampling` (the same draws and floating-point operations, vectorised; `detect_scored_many` runs many
sentences in lock-step): the same decisions and probabilities to the bit, several times faster
(benchmarks/bench_langid.py --exact measures both on the shared corpora).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from importlib import metadata

from ..errors import InputError
from .base import UNDETERMINED, LanguageIdentifier
from .langdetect_sampling import BatchSampler, Sampler, profile_table

SEED = 0
_CODE_FROM_PROFILE = {"zh-cn": "zh", "zh-tw": "zh"}  # the only non-ISO-639-1 profile names


def _profile_dir() -> str:
    import langdetect

    return os.path.join(os.path.dirname(langdetect.__file__), "profiles")


def _iso(profile_name: str) -> str:
    return _CODE_FROM_PROFILE.get(profile_name, profile_name)


class LangdetectIdentifier(LanguageIdentifier):
    """langdetect with seed 0 per detection; `languages` loads only those profiles (at least two)."""

    name = "langdetect"

    def __init__(self, languages: Sequence[str] | None = None) -> None:
        super().__init__(languages)
        try:
            from langdetect.detector_factory import DetectorFactory
        except ImportError:
            raise InputError("langdetect is not installed: pip install 'synprep[langdetect]'") from None

        profiles = sorted(os.listdir(_profile_dir()))  # sorted: profile order is part of the result's identity
        self._supported = tuple(sorted({_iso(p) for p in profiles}))
        self.validate_candidates()
        if self.languages is not None:
            profiles = [p for p in profiles if _iso(p) in self.languages]
            if len(profiles) < 2:
                raise ValueError("langdetect needs at least two candidate languages")
        self._factory = DetectorFactory()
        self._factory.set_seed(SEED)
        texts = []
        for profile in profiles:
            with open(os.path.join(_profile_dir(), profile), encoding="utf-8") as stream:
                texts.append(stream.read())
        self._factory.load_json_profile(texts)
        rows, table = profile_table(self._factory.word_lang_prob_map)
        self._factory.word_lang_prob_map = rows  # extraction only asks `word in map`; the rows live in `table`
        self._batch = BatchSampler(Sampler(rows, table, SEED))

    def supported_languages(self) -> tuple[str, ...]:
        return self._supported

    def detect(self, text: str) -> str:
        return self.detect_scored(text)[0]

    def detect_scored(self, text: str) -> tuple[str, float]:
        return self.detect_scored_many([text])[0]

    def detect_scored_many(self, texts: Sequence[str]) -> list[tuple[str, float]]:
        """langdetect's answer and probability per text (`Detector.get_probabilities()[0]`), computed together."""
        detectors, ngrams = [], []
        for text in texts:
            detector = self._factory.create()
            detector.append(text)
            detector.cleaning_text()  # what Detector._detect_block does before sampling
            detectors.append(detector)
            ngrams.append(detector._extract_ngrams())
        with_features = [i for i, grams in enumerate(ngrams) if grams]  # none: langdetect's "No features in text"
        langprobs = self._batch.probabilities([ngrams[i] for i in with_features]) if with_features else []
        result = [(UNDETERMINED, 0.0)] * len(texts)
        for i, langprob in zip(with_features, langprobs):
            ranked = detectors[i]._sort_probability(langprob)
            if ranked and ranked[0].lang != "unknown":
                result[i] = (_iso(ranked[0].lang), float(ranked[0].prob))
        return result

    def detect_many(self, texts: Iterable[str]) -> list[str]:
        return [code for code, _ in self.detect_scored_many(list(texts))]

    def version(self) -> str:
        return metadata.version("langdetect")
