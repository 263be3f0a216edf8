"""The `characters` sub-word scheme: each character of a token is a piece, every piece but the token's last
ending in '@@' (subword-nmt's marker, so transitions, `--remove-bpe` and every export reader read the pieces as
they read BPE). No model file, nothing learned; syntrain counts its vocabulary from the shards."""

from __future__ import annotations

from ..options import BPE_SEPARATOR
from . import TokenCutter
from .base import Scheme
from .registry import register


class CharacterCutter(TokenCutter):
    """Each character a piece (a token of one character: that piece)."""

    scheme = "characters"
    marker, marker_kind = BPE_SEPARATOR, "end"

    def cut_many(self, words: list[str]) -> list[list[str]]:
        return [[char + BPE_SEPARATOR for char in word[:-1]] + [word[-1:]] if word else [] for word in words]

    def normalize(self, text: str) -> str:
        return text


@register
class Characters(Scheme):
    name = "characters"
    marker, marker_kind = BPE_SEPARATOR, "end"
    pieces = "character pieces"

    def load(self, path: str | None, vocabulary: set[str] | None = None) -> CharacterCutter:
        return CharacterCutter()

    def export_what(self) -> str:
        return "model file (the characters scheme needs none)"

    def fairseq_pieces(self, configuration: dict, flag: str) -> str | None:
        return flag + " "
