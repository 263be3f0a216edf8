"""The one interface every language-identification backend implements (like sacrebleu's Metric base)."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence

UNDETERMINED = "und"  # ISO 639-2 code for "cannot tell": text without usable features
_ISO_639_1 = re.compile(r"^[a-z]{2}$")


def check_iso_639_1(code: str) -> str:
    """Return `code` lower-cased if it looks like an ISO 639-1 code (two letters), else raise ValueError."""
    normalized = code.strip().lower()
    if not _ISO_639_1.match(normalized):
        raise ValueError(f"{code!r} is not an ISO 639-1 language code (two letters, e.g. en, de)")
    return normalized


class LanguageIdentifier(ABC):
    """Maps a sentence to a language code: ISO 639-1 where one exists, else the backend's code, or 'und'.

    Backends are deterministic: the same text gives the same code whatever was detected before it and in
    whichever process, so filtering with N workers equals filtering with one. A backend can be restricted to
    a set of candidate languages (`languages`); None means the backend's default set.
    """

    name: str = "base"

    def __init__(self, languages: Sequence[str] | None = None) -> None:
        self.languages = None if languages is None else tuple(sorted({check_iso_639_1(c) for c in languages}))

    @abstractmethod
    def supported_languages(self) -> tuple[str, ...]:
        """Every code this backend can return (besides 'und'), sorted."""

    @abstractmethod
    def detect(self, text: str) -> str:
        """The most likely language of `text`."""

    def detect_scored(self, text: str) -> tuple[str, float]:
        """`detect` and the backend's probability for that answer (0..1; NaN where the backend has none)."""
        return self.detect(text), float("nan")

    def detect_scored_many(self, texts: Sequence[str]) -> list[tuple[str, float]]:
        """`detect_scored` over several texts; backends may override with something faster, same results."""
        return [self.detect_scored(text) for text in texts]

    def detect_many(self, texts: Iterable[str]) -> list[str]:
        """`detect` over several texts; backends may override with something faster, same results."""
        return [self.detect(text) for text in texts]

    def check_languages(self, codes: Iterable[str]) -> None:
        """Raise ValueError naming the codes this backend (with its candidate set) can never return."""
        available = set(self.candidates())
        missing = sorted(set(codes) - available)
        if missing:
            raise ValueError(f"language(s) {', '.join(missing)} not available in langid backend {self.name!r} "
                             f"(candidates: {', '.join(sorted(available))})")

    def validate_candidates(self) -> None:
        """Raise ValueError if the candidate set names a language this backend does not know (call after loading)."""
        if self.languages is not None:
            unknown = sorted(set(self.languages) - set(self.supported_languages()))
            if unknown:
                raise ValueError(f"language(s) {', '.join(unknown)} not supported by langid backend {self.name!r}")

    def candidates(self) -> tuple[str, ...]:
        """The codes this instance can return: its candidate set, else everything it supports."""
        return self.languages if self.languages is not None else self.supported_languages()

    def signature(self) -> dict[str, object]:
        """What determines this identifier's output, JSON-serializable (goes into dataset signatures)."""
        return {"backend": self.name, "languages": None if self.languages is None else list(self.languages),
                "version": self.version()}

    def version(self) -> str:
        """Version of the underlying package (results may change between versions)."""
        return "unknown"
