"""langdetect (port of Google's language-detection, 55 languages): slow but well known (the papers'
filter); the default is py3langid, more accurate on the held-out sets of docs/langid.md.

langdetect draws random n-gram samples; every detection here re-seeds with 0 (a fresh detector per call from
our own factory), so a sentence's result does not depend on what was detected before it or in which worker.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib import metadata

from .base import UNDETERMINED, LanguageIdentifier

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
        from langdetect.detector_factory import DetectorFactory

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

    def supported_languages(self) -> tuple[str, ...]:
        return self._supported

    def detect(self, text: str) -> str:
        from langdetect.lang_detect_exception import LangDetectException

        detector = self._factory.create()
        detector.append(text)
        try:
            code = detector.detect()
        except LangDetectException:  # no letters at all
            return UNDETERMINED
        return UNDETERMINED if code == "unknown" else _iso(code)

    def detect_scored(self, text: str) -> tuple[str, float]:
        from langdetect.lang_detect_exception import LangDetectException

        detector = self._factory.create()
        detector.append(text)
        try:
            ranked = detector.get_probabilities()  # what detector.detect() takes the first of
        except LangDetectException:  # no letters at all
            return UNDETERMINED, 0.0
        if not ranked or ranked[0].lang == "unknown":
            return UNDETERMINED, 0.0
        return _iso(ranked[0].lang), float(ranked[0].prob)

    def version(self) -> str:
        return metadata.version("langdetect")
