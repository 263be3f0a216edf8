"""Text normalizations applied to a side before filtering and parsing (`[normalize]` in a pipeline file) and to
references by `syntrain eval --normalize`; the rules of WMT16 En-Ro practice (Sennrich et al.'s wmt16-scripts):

- `romanian`: normalise-romanian: s and t with cedilla (ş Ş ţ Ţ, U+015E/F, U+0162/3) become the comma-below
  letters (ș Ș ț Ț, U+0218/9, U+021A/B) that the Romanian standard and newstest2016 use;
- `remove-diacritics`: remove-diacritics: ș ț ă â î (and capitals) become s t a a i. Like the original it
  expects comma-below letters: list `romanian` first (`["romanian", "remove-diacritics"]`).

Names are applied in the order given; each is a pure str -> str function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .options import NORMALIZERS

_ROMANIAN = str.maketrans({"\u015e": "\u0218", "\u015f": "\u0219", "\u0162": "\u021a", "\u0163": "\u021b"})
_DIACRITICS = str.maketrans({"\u0218": "S", "\u0219": "s", "\u021a": "T", "\u021b": "t", "\u0102": "A",
                             "\u0103": "a", "\u00c2": "A", "\u00e2": "a", "\u00ce": "I", "\u00ee": "i"})
_TABLES = {"romanian": _ROMANIAN, "remove-diacritics": _DIACRITICS}
assert set(_TABLES) == set(NORMALIZERS)


def check_names(names: Sequence[str]) -> tuple[str, ...]:
    """The names as a tuple; ValueError naming an unknown one and the choices."""
    for name in names:
        if name not in _TABLES:
            raise ValueError(f"unknown normalization {name!r} (choose from {', '.join(NORMALIZERS)})")
    return tuple(names)


def normalizer(names: Sequence[str]) -> Callable[[str], str]:
    """A function text -> text applying `names` in order (the identity for none)."""
    tables = [_TABLES[name] for name in check_names(names)]

    def apply(text: str) -> str:
        for table in tables:
            text = text.translate(table)
        return text

    return apply
