"""Language identification backends behind one interface: `get_identifier("py3langid", ["en", "de"])`."""

from __future__ import annotations

from collections.abc import Sequence

from ..options import DEFAULT_LANGID, LANGID_BACKENDS
from .base import UNDETERMINED, LanguageIdentifier, check_iso_639_1

BACKENDS = LANGID_BACKENDS
DEFAULT_BACKEND = DEFAULT_LANGID

__all__ = ["BACKENDS", "DEFAULT_BACKEND", "UNDETERMINED", "LanguageIdentifier", "check_iso_639_1",
           "get_identifier"]


def get_identifier(backend: str = DEFAULT_BACKEND, languages: Sequence[str] | None = None) -> LanguageIdentifier:
    """A ready identifier for `backend`, restricted to `languages` when given (None = backend default)."""
    if backend == "langdetect":
        from .langdetect_backend import LangdetectIdentifier

        return LangdetectIdentifier(languages)
    if backend == "py3langid":
        from .py3langid_backend import Py3langidIdentifier

        return Py3langidIdentifier(languages)
    raise ValueError(f"unknown langid backend {backend!r} (choose from {', '.join(BACKENDS)})")
