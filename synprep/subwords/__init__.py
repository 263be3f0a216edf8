"""Sub-word schemes: how the tokens of a tree are cut into pieces (CONTRACT.md "Sub-word schemes").

One module per scheme, each a `Scheme` (base.py: the interface) registered in `registry` (docs/subwords-api.md:
how to write one); importing this package imports every module of it, so a new module registers itself. The
generic code (pipeline checks, convert's learning, the CLI, validate, align, export, the dataset card, syntrain's
vocabulary) asks the registry and never branches on a scheme's name. The schemes: `subword-nmt` (subword_nmt.py,
BPE codes applied by synprep.bpe; the default), `sentencepiece` (sentencepiece_scheme.py), `hf-tokenizer`
(hf_tokenizer.py: a local tokenizer.json), `pretrained` (pretrained.py: a pretrained translation model's
folder) and `characters` (characters.py: no model, each character a piece).
A scheme's cutter gives `segment_word` (a token -> its pieces joined by spaces, which `synprep.featurize` cuts
with); `TokenCutter` is what the cutters of the model-file schemes share (their marker, vocabulary and special
pieces); `synprep.subwords.load` loads any of them. Every scheme cuts one token at a time (hf-tokenizer may also cut
the raw text, `[bpe] cut = "raw"`), so every piece belongs to exactly one token; the pieces of a token read back to
it (`readback`). The features are then made from the piece -> token map by the same functions for every scheme.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Sequence

MODEL_TYPES = ("unigram", "bpe")  # sentencepiece models synprep learns
CUTS = ("token", "raw")  # each token on its own (the default) | the sentence's raw text, piece -> token of its start
# Where the marker sits: `end` of a piece that continues its token (subword-nmt '@@'), `start` of a token's first
# piece (SentencePiece and Metaspace/ByteLevel tokenizers '▁', 'Ġ'), `continue`: start of each non-first piece
# (WordPiece '##'), `none`: no marker (a plain BPE or word-level tokenizer).
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
BYTE_LEVEL = "\u0120"  # 'Ġ': a ByteLevel tokenizer's space, the start of a token's first piece


CACHE_WORDS = 100_000  # tokens per cache of a cutter before it starts afresh


class TokenCutter:
    """What the sentencepiece and hf-tokenizer cutters share: a bounded cache of each token's pieces, filled for
    many tokens at once (one library call for the tokens not yet cut), and lines of tokens cut. A subclass gives
    `scheme`, `marker`, `marker_kind` and `cut_many` (the library's pieces of each token)."""

    scheme = marker = marker_kind = ""
    path = ""  # the model file
    unknown_piece: str | None = None  # the piece that stands for a whole unknown token (WordPiece's [UNK])

    def __init__(self) -> None:
        self._pieces: dict[str, tuple[str, ...]] = {}

    def cut_many(self, words: list[str]) -> list[list[str]]:
        """The library's pieces of each token."""
        raise NotImplementedError

    def normalize(self, text: str) -> str:
        """A token as the model's normalizer writes it (what its pieces spell)."""
        raise NotImplementedError

    def vocabulary(self) -> list[str]:
        """The model's pieces in id order (its special pieces included)."""
        raise NotImplementedError

    def specials(self) -> dict[str, str]:
        """The model's own special pieces by role: 'unk', 'bos', 'eos', 'pad' (those it has; none by default)."""
        return {}

    def cut_text(self, text: str, tokens: Sequence[str]) -> list[list[str]] | None:
        """The raw cut (`[bpe] cut = "raw"`, for a scheme whose `cuts` allow it): each token's pieces when the
        sentence's text is cut at once; None when a token gets no piece of its own."""
        raise NotImplementedError(f"the {self.scheme} scheme has no raw cut")

    def special_pieces(self) -> frozenset[str]:
        """The pieces a token must not be cut into: the model's special pieces but the unknown one (syntrain maps
        them onto its padding, begin and end)."""
        return frozenset(self.specials().values()) - {self.unknown_piece or ""}

    def unreadable(self) -> str | None:
        """Why no token cut into several pieces can be read back from its pieces (a model whose pieces carry no
        marker but are not whole words), or None."""
        return None

    def pieces_of(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        """The pieces of each token (a space inside a piece written '▁'; a token the model cuts into no piece,
        its form being only '▁', is that one piece). Do not modify the tuples: they are the cache's."""
        cache = self._pieces
        missing = list(dict.fromkeys(word for word in words if word not in cache))
        if missing:
            if len(cache) + len(missing) > CACHE_WORDS:  # bounded: the frequent tokens come back at once
                cache.clear()
                missing = list(dict.fromkeys(words))
            for word, pieces in zip(missing, self.cut_many(missing), strict=True):
                cache[word] = tuple(piece.replace(" ", "\u2581") for piece in pieces) or (word,)
        return [cache[word] for word in words]

    def segment_word(self, word: str) -> str:
        """The pieces of one token joined by spaces (see `pieces_of`)."""
        return " ".join(self.pieces_of([word])[0])

    def segment_line(self, line: str) -> str:
        """A line of space-separated tokens -> their pieces, space-separated (the line end kept)."""
        text = line.rstrip("\r\n")
        words = [word for word in text.split(" ") if word]
        return " ".join(" ".join(pieces) for pieces in self.pieces_of(words)) + line[len(text):]


def decode_bytes(pieces: Sequence[str]) -> str:
    """The pieces joined, each run of byte pieces ('<0xE6>', SentencePiece's byte fallback) read as UTF-8."""
    out, run = [], bytearray()
    for piece in pieces:
        match = _BYTE_PIECE.fullmatch(piece)
        if match:
            run.append(int(match.group(1), 16))
            continue
        if run:
            out.append(run.decode("utf-8", errors="replace"))
            run = bytearray()
        out.append(piece)
    if run:
        out.append(run.decode("utf-8", errors="replace"))
    return "".join(out)


def spells(pieces: Sequence[str], form: str, marker: str, kind: str, unknown: str | None = None) -> bool:
    """Whether a token's pieces spell its form (the token as cut: inner whitespace '▁', an empty token '▁',
    under the model's normalization): the markers removed, byte pieces decoded; a piece equal to the model's
    unknown piece stands for the whole token."""
    if not pieces:
        return False
    if unknown is not None and unknown in pieces:
        return True
    if kind == "end":
        if any(not p.endswith(marker) for p in pieces[:-1]) or pieces[-1].endswith(marker):
            return False
        return "".join(p[: -len(marker)] for p in pieces[:-1]) + pieces[-1] == form
    if kind == "continue":
        if pieces[0].startswith(marker) or any(not p.startswith(marker) for p in pieces[1:]):
            return False
        return pieces[0] + "".join(p[len(marker):] for p in pieces[1:]) == form
    text = decode_bytes(pieces)
    return text == form or (kind == "start" and text == marker + form)


SPECIAL_PIECES = "special_pieces"  # a token cut into a special piece of the model (`<pad>`, `</s>`, `[CLS]`)
UNREAD_PIECES = "unread_pieces"  # a token's pieces do not spell it under the scheme's marker rule
UNMARKED_PIECES = "unmarked_pieces"  # a token's pieces do not show its bounds by the marker


def reads_back(pieces: Sequence[str], form: str, written: str, marker: str, kind: str) -> bool:
    """Whether a token's pieces, read back by the marker rule that de-segments decoded pieces (`pieces_to_tokens`),
    give the token `form`, or the token as the model's normalizer writes it (`written`, in the pieces' alphabet:
    `Café` under a lowercasing model reads back as `café`, what the model translates) where the form holds no
    marker character: a token whose own marker character the rule takes for a marker (`▁dog` read back as `dog`)
    does not read back. An empty or whitespace-only token (form `▁`) reads back from pieces that give no token."""
    tokens = pieces_to_tokens(pieces, marker, kind)
    if tokens == [form] or (form == "\u2581" and not tokens):
        return True
    return marker not in form and tokens == pieces_to_tokens([written], marker, kind)


def read_back(cutter: TokenCutter, forms: Sequence[str], pieces: Sequence[Sequence[str]]) -> tuple[str, str] | None:
    """Why a sentence's pieces do not read back to its tokens under the cutter's rule: (reason, detail) for the
    first token that does not, None when every token does. `forms`: the tokens as cut (inner whitespace '▁', an
    empty token '▁'), `pieces`: each token's pieces. A token reads back when none of its pieces is a special piece
    of the model (SPECIAL_PIECES: it would become padding or an end; the unknown piece too when the token is
    spelled as it, the word `<unk>`: the model matched its special token in the word), its pieces spell it
    (`spells`, under the model's normalization; else UNREAD_PIECES), show its bounds by the marker
    (`features.token_marked`; marker kind `none`: one piece; else UNMARKED_PIECES) and read back to the token as
    the normalizer writes it (`reads_back`: no marker character of its own taken for the marker; else
    UNREAD_PIECES). The one read-back check of convert, `synprep align` and `synprep validate`."""
    from ..features import token_marked

    specials, marker, kind, unknown = cutter.special_pieces(), cutter.marker, cutter.marker_kind, cutter.unknown_piece
    for index, (form, parts) in enumerate(zip(forms, pieces, strict=True)):
        written = cutter.normalize(form)
        special = next((piece for piece in parts if piece in specials
                        or piece == unknown and (piece in form or piece in written)), None)
        if special is not None:
            return SPECIAL_PIECES, f"token {index + 1} {form!r} is cut into the special piece {special!r}"
        if not spells(parts, written, marker, kind, unknown):
            return UNREAD_PIECES, f"token {index + 1} {form!r}: pieces {list(parts)} do not spell it"
        if not (len(parts) == 1 if kind == "none" else token_marked(parts, marker, kind)):
            return UNMARKED_PIECES, f"token {index + 1} {form!r}: pieces {list(parts)} do not show its bounds by " \
                f"{marker!r} ({kind})"
        if (unknown is None or unknown not in parts) and not reads_back(parts, form, written, marker, kind):
            return UNREAD_PIECES, f"token {index + 1} {form!r}: pieces {list(parts)} read back as " \
                f"{pieces_to_tokens(parts, marker, kind)} (the marker rule takes a character of it for the marker)"
    return None


class CodesRule(TokenCutter):
    """The read-back rule of BPE codes (subword-nmt's separator, '@@', ending every piece of a token but its last)
    and of no sub-words (each token its one piece): no model, no special piece, no normalization. Their pieces are
    marked as they are cut, so only a token holding the separator itself (`dog@@`, whose last piece would end in it
    and join the next token) can fail to read back."""

    scheme = "subword-nmt"
    marker_kind = "end"

    def __init__(self, separator: str) -> None:
        super().__init__()
        self.marker = separator

    def normalize(self, text: str) -> str:
        return text

    def check(self, forms: Sequence[str], pieces: Sequence[Sequence[str]]) -> tuple[str, str] | None:
        """`read_back` under this rule."""
        return read_back(self, forms, pieces)


def pieces_to_tokens(pieces: Sequence[str], marker: str, kind: str) -> list[str]:
    """Pieces -> the tokens they spell, by the marker (`start`: a piece beginning with it starts a token; byte
    pieces decoded: SentencePiece's '<0xE6>', and ByteLevel's, whose characters each stand for a UTF-8 byte,
    'Ã¼' for 'ü', read by the tokenizers library's ByteLevel decoder). The inverse of the cut for scoring decoded
    hypotheses."""
    if kind == "start" and marker == BYTE_LEVEL:
        from tokenizers import decoders

        return decoders.ByteLevel().decode(list(pieces)).split()
    if kind == "end":
        return re.sub(re.escape(marker) + "( |$)", "", " ".join(pieces)).split()
    if kind == "continue":
        return " ".join(pieces).replace(" " + marker, "").split()
    if kind == "none":
        return list(pieces)
    return decode_bytes(pieces).replace(marker, " ").split()


for _module in sorted(info.name for info in pkgutil.iter_modules(__path__)):
    if _module not in ("base", "registry", "load"):
        importlib.import_module(f".{_module}", __name__)
