"""The `hf-tokenizer` sub-word scheme: a Hugging Face tokenizer (a local `tokenizer.json`, or a tokenizer folder
holding one: a pretrained model's own tokenizer, nothing downloaded), applied token by token as
`is_split_into_words` does, so no piece crosses a token.

`raw_cut` is the other way: the sentence's raw text cut at once, each piece given to the token its first
character belongs to; `compare_cuts` says how often the two differ (docs/synprep.md gives figures).
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Sequence
from typing import Any

from ..errors import InputError
from ..textio import read_json
from . import BYTE_LEVEL, TokenCutter
from .base import Marker, Scheme
from .registry import register


def _read(path: str) -> dict:
    return read_json(path, "a tokenizer.json file")


def _components(part: dict | None) -> list[dict]:
    """A pre-tokenizer or decoder and, for a Sequence, its members."""
    if not part:
        return []
    return [part] + [member for item in part.get("pretokenizers", part.get("decoders", part.get("normalizers", [])))
                     or [] for member in _components(item)]


def tokenizer_marker(path: str) -> tuple[str, str]:
    """(marker, kind) of a tokenizer.json's pieces, read from what cuts them (its model and pre-tokenizer, never
    its decoder): WordPiece '##' (start of each continuing piece); a Metaspace pre-tokenizer that prepends its
    '▁' or a ByteLevel one that adds a prefix space 'Ġ' (start of a token's first piece); else no marker (a
    ByteLevel pre-tokenizer without prefix space, GPT-2 style, puts no 'Ġ' on a token cut on its own); else a
    normalizer that prepends the marker (Llama / Mistral: `Prepend("▁")`, no pre-tokenizer; start of a token's
    first piece); else a BPE model's continuing_subword_prefix (start of each continuing piece, as WordPiece's)."""
    data = _read(path)
    model = data.get("model") or {}
    if model.get("type") == "WordPiece":
        return model.get("continuing_subword_prefix") or "##", "continue"
    for part in _components(data.get("pre_tokenizer")):
        if part.get("type") == "Metaspace" and part.get("prepend_scheme", "always") != "never" \
                and part.get("add_prefix_space", True):
            return part.get("replacement", "\u2581"), "start"
        if part.get("type") == "ByteLevel" and part.get("add_prefix_space", False):
            return BYTE_LEVEL, "start"
    for part in _components(data.get("normalizer")):  # Llama / Mistral style: the normalizer prepends the '▁'
        if part.get("type") == "Prepend" and part.get("prepend"):
            return part["prepend"], "start"
    if model.get("type") == "BPE" and model.get("continuing_subword_prefix"):  # a BPE cutting as WordPiece does
        return model["continuing_subword_prefix"], "continue"
    return "", "none"


class TokenizerCutter(TokenCutter):
    """A Hugging Face tokenizer cutting tokens (see the module)."""

    scheme = "hf-tokenizer"
    tokenizer: Any

    def __init__(self, path: str) -> None:
        from tokenizers import Tokenizer

        _read(path)
        try:
            self.tokenizer = Tokenizer.from_file(path)
        except Exception as err:  # tokenizers raises a bare Exception for a file it cannot read
            raise InputError(f"not a tokenizer the tokenizers library reads: {err}", path) from None
        super().__init__()
        self.path = path
        self.marker, self.marker_kind = tokenizer_marker(path)
        self.unknown_piece = self._model_unknown()
        self._byte_level = any(part.get("type") == "ByteLevel"
                               for part in _components(_read(path).get("pre_tokenizer")))

    def _model_unknown(self) -> str | None:
        model = _read(self.path).get("model") or {}
        unk = model.get("unk_token")
        if unk is None and model.get("unk_id") is not None:
            unk = self.tokenizer.id_to_token(model["unk_id"])
        return unk

    def cut_many(self, words: list[str]) -> list[list[str]]:
        """The pieces of each token, as `encode([word], is_pretokenized=True)` gives them (no special tokens; one
        `encode_batch` call for all)."""
        encodings = self.tokenizer.encode_batch([[word] for word in words], is_pretokenized=True,
                                                add_special_tokens=False)
        return [encoding.tokens for encoding in encodings]

    def normalize(self, text: str) -> str:
        """A token as the tokenizer's normalizer writes it; behind a ByteLevel pre-tokenizer, in its byte alphabet
        (`é` -> `Ã©`, with its `Ġ` when it adds one), as its pieces spell it."""
        normalizer = self.tokenizer.normalizer
        text = normalizer.normalize_str(text) if normalizer is not None else text
        if self._byte_level:
            text = "".join(part for part, _ in self.tokenizer.pre_tokenizer.pre_tokenize_str(text))
        return text

    def vocabulary(self) -> list[str]:
        """The tokenizer's pieces in id order (added tokens included)."""
        vocab = self.tokenizer.get_vocab(with_added_tokens=True)
        return [piece for piece, _ in sorted(vocab.items(), key=lambda item: item[1])]

    def special_pieces(self) -> frozenset[str]:
        """The special pieces by role and every added token marked special, but the unknown piece."""
        added = {token.content for token in self.tokenizer.get_added_tokens_decoder().values() if token.special}
        return (super().special_pieces() | added) - {self.unknown_piece or ""}

    def cut_text(self, text: str, tokens: Sequence[str]) -> list[list[str]] | None:
        """`raw_cut`."""
        return raw_cut(self, text, tokens)

    def unreadable(self) -> str | None:
        """A tokenizer whose pieces carry no marker reads back only when each token is one piece (WordLevel); a
        model whose pieces carry a second marker (a BPE end_of_word_suffix `</w>`, or a continuing_subword_prefix
        beside a pre-tokenizer's `▁`/`Ġ`) reads back none."""
        data = _read(self.path).get("model") or {}
        model = data.get("type")
        if data.get("end_of_word_suffix") or (model == "BPE" and data.get("continuing_subword_prefix")
                                              and tokenizer_marker(self.path)[1] != "continue"):
            what = "end_of_word_suffix" if data.get("end_of_word_suffix") else "continuing_subword_prefix"
            return (f"its {model} model marks pieces by its {what} {data.get(what)!r}, which the marker rule of "
                    f"its pieces ({self.marker!r}, {self.marker_kind}) does not read: a token cannot be read back "
                    "from its pieces")
        if self.marker_kind != "none" or model == "WordLevel":
            return None
        return (f"its pieces carry no marker (neither a Metaspace/ByteLevel pre-tokenizer that marks a token's start "
                f"nor WordPiece) and its {model} model cuts words into several pieces: a token cannot be read back "
                "from its pieces")

    def specials(self) -> dict[str, str]:
        """The tokenizer's special pieces by role, as the usual names spell them."""
        vocab = self.tokenizer.get_vocab(with_added_tokens=True)
        roles = {"unk": (self.unknown_piece, "<unk>", "[UNK]"), "bos": ("<s>", "[CLS]", "<|endoftext|>"),
                 "eos": ("</s>", "[SEP]", "<|endoftext|>"), "pad": ("<pad>", "[PAD]")}
        return {role: next(name for name in names if name in vocab) for role, names in roles.items()
                if any(name in vocab for name in names if name)}


def token_spans(text: str, tokens: Sequence[str]) -> list[tuple[int, int]] | None:
    """Each token's (start, end) in `text`, found left to right; None when a token is not spelled there (a
    multiword token's words, a token the parser changed)."""
    spans, at = [], 0
    for token in tokens:
        start = text.find(token, at) if token else -1
        if start < 0 or text[at:start].strip():
            return None
        spans.append((start, start + len(token)))
        at = start + len(token)
    return spans


def raw_cut(cutter: TokenizerCutter, text: str, tokens: Sequence[str]) -> list[list[str]] | None:
    """The pieces of each token when the raw `text` is cut at once: a piece belongs to the token its first
    character belongs to (a piece starting in the space before a token, to that token). None when the tokens
    cannot be found in the text or a token gets no piece of its own."""
    spans = token_spans(text, tokens)
    if spans is None:
        return None
    encoding = cutter.tokenizer.encode(text, add_special_tokens=False)
    ends = [end for _, end in spans]
    out: list[list[str]] = [[] for _ in tokens]
    for piece, (start, _) in zip(encoding.tokens, encoding.offsets):
        out[min(bisect.bisect_right(ends, start), len(tokens) - 1)].append(piece)
    return out if all(out) else None


def compare_cuts(cutter: TokenizerCutter, sentences: Sequence[tuple[str, Sequence[str]]]) -> dict[str, int]:
    """How often the raw-text cut differs from the token-by-token cut, over (text, tokens) sentences: counts of
    sentences, of those that differ, of those the raw cut cannot align, and of tokens that differ."""
    counts = {"sentences": 0, "differ": 0, "unaligned": 0, "tokens": 0, "tokens_differ": 0}
    for text, tokens in sentences:
        counts["sentences"] += 1
        counts["tokens"] += len(tokens)
        raw = raw_cut(cutter, text, tokens)
        if raw is None:
            counts["unaligned"] += 1
            counts["differ"] += 1
            continue
        by_token = [cutter.segment_word(token).split(" ") for token in tokens]
        differing = sum(a != b for a, b in zip(raw, by_token))
        counts["tokens_differ"] += differing
        counts["differ"] += bool(differing)
    return counts


@register
class HfTokenizerScheme(Scheme):
    name = "hf-tokenizer"
    order = 20
    files = ("tokenizer{side}.json",)
    package = "tokenizers"
    keys = ("model", "cut")
    needs_model = True
    own_vocabulary = True
    cuts = ("token", "raw")
    pieces = "tokenizer pieces"
    model_help = "a local tokenizer.json (or its folder)"
    keys_help = "takes model, and cut"
    unmarked_help = "neither Metaspace/ByteLevel nor WordPiece"

    def model_path(self, path: str) -> str:
        """A tokenizer folder means its tokenizer.json."""
        return super().model_path(os.path.join(path, "tokenizer.json") if os.path.isdir(path) else path)

    def load(self, path: str | None, vocabulary: set[str] | None = None) -> TokenizerCutter:
        return TokenizerCutter(path or "")

    def marker_of(self, path: str | None) -> Marker:
        """Read from the tokenizer.json (`tokenizer_marker`)."""
        return tokenizer_marker(path or "")
