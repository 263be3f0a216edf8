"""The `pretrained` sub-word scheme: a pretrained translation model's own tokenizer files (a local Hugging Face
model folder, nothing downloaded), applied token by token, so the shards' pieces are the model's pieces.

The folder is named once (`[bpe] model = "FOLDER"`) and each side is cut by its own SentencePiece model: a Marian
(OPUS-MT) folder's `source.spm` for the source side and `target.spm` for the target side, an M2M100/NLLB folder's one
`sentencepiece.bpe.model` (or `spm.model`) for both. The vocabulary is the model's, in its id order: `vocab.json`
(Marian, M2M100), else `tokenizer.json`'s (NLLB); its special pieces are read there. Convert copies the files into
the dataset folder: each side's SentencePiece model as `pretrained.src.spm` / `pretrained.tgt.spm` and the
vocabulary as `pretrained-vocab.json` (either format).

A token is cut as `SentencePieceProcessor.encode(token)` cuts it (the model's own normalisation, e.g. OPUS-MT's
nmt_nfkc, applied to the token): a piece per token boundary, where the model's tokenizer cutting the sentence may
put a piece across a space it normalised away; MarianTokenizer's Moses punctuation normalisation is not applied
(docs/pretrained.md).
"""

from __future__ import annotations

import os

from ..errors import InputError
from ..textio import read_json
from .base import Scheme
from .registry import register
from .sentencepiece_scheme import MARKER, SentencePieceCutter

SIDE_MODELS = {"src": ("source.spm", "sentencepiece.bpe.model", "spm.model"),
               "tgt": ("target.spm", "sentencepiece.bpe.model", "spm.model")}  # in a model folder, first found
VOCABULARIES = ("pretrained-vocab.json", "vocab.json", "tokenizer.json")  # beside a side's model, first found


def _first(folder: str, names: tuple[str, ...], what: str) -> str:
    found = next((os.path.join(folder, name) for name in names if os.path.isfile(os.path.join(folder, name))), None)
    if found is None:
        raise InputError(f"no {what} in this pretrained model folder ({' or '.join(names)})", folder)
    return found


def read_vocabulary(path: str) -> dict[str, int]:
    """piece -> id of a vocab.json, or of a tokenizer.json (its model's vocabulary and its added tokens)."""
    data = read_json(path, "a vocabulary file")
    if isinstance(data, dict) and isinstance(data.get("model"), dict):  # tokenizer.json
        vocab = data["model"].get("vocab") or {}
        ids = dict(vocab) if isinstance(vocab, dict) else {piece: i for i, (piece, _) in enumerate(vocab)}
        ids.update({token["content"]: token["id"] for token in data.get("added_tokens") or []})
        return ids
    if not isinstance(data, dict) or not all(isinstance(i, int) for i in data.values()):
        raise InputError("not a vocabulary file: a JSON object piece -> id expected", path)
    return data


class PretrainedCutter(SentencePieceCutter):
    """One side's SentencePiece model of a pretrained model, with the model's vocabulary (see the module)."""

    scheme = "pretrained"

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.vocabulary_path = _first(os.path.dirname(os.path.abspath(path)), VOCABULARIES, "vocabulary")
        self.ids = read_vocabulary(self.vocabulary_path)
        self.unknown_piece = "<unk>" if "<unk>" in self.ids else None

    def vocabulary(self) -> list[str]:
        """The model's pieces in its id order."""
        return sorted(self.ids, key=self.ids.__getitem__)

    def specials(self) -> dict[str, str]:
        """The model's special pieces by role, as its vocabulary spells them (Marian has no '<s>')."""
        roles = {"unk": "<unk>", "bos": "<s>", "eos": "</s>", "pad": "<pad>"}
        return {role: piece for role, piece in roles.items() if piece in self.ids}


@register
class PretrainedScheme(Scheme):
    name = "pretrained"
    order = 25
    files = ("pretrained{side}.spm", "pretrained-vocab.json")
    per_side = True
    marker, marker_kind = MARKER, "start"
    package = "sentencepiece"
    keys = ("model",)
    needs_model = True
    own_vocabulary = True
    pieces = "the pretrained model's pieces"
    model_help = "a pretrained translation model's folder (Marian: source.spm, target.spm, vocab.json; M2M100/NLLB: " \
                 "sentencepiece.bpe.model, vocab.json or tokenizer.json)"
    keys_help = "takes model (a pretrained model's folder)"

    def model_path(self, path: str) -> str:
        """A model folder means its source side's SentencePiece model; a file is one side's model as stored."""
        return _first(path, SIDE_MODELS["src"], "source SentencePiece model") if os.path.isdir(path) \
            else super().model_path(path)

    def stored_files(self, given: str, side: str | None) -> list[tuple[str, str]]:
        """The side's SentencePiece model and the model's vocabulary."""
        if not os.path.isdir(given):
            raise InputError("[bpe] model: a pretrained model's folder expected", given)
        model = _first(given, SIDE_MODELS[side or "src"], f"{side or 'src'} SentencePiece model")
        return [(model, self.model_file(side) or ""),
                (_first(given, VOCABULARIES[1:], "vocabulary"), self.files[1])]

    def load(self, path: str | None, vocabulary: set[str] | None = None) -> PretrainedCutter:
        return PretrainedCutter(path or "")

    def model_what(self) -> str:
        return "pretrained model's SentencePiece model and vocabulary"
