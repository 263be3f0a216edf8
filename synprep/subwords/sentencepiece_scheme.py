"""The `sentencepiece` sub-word scheme: a SentencePiece model (unigram or bpe) learned on the parsed train tokens
or loaded from a `.model` file, applied token by token.

Learning reads the train tokens' counts ('token<TAB>count' lines, SentencePiece's own `tsv` input), so no piece
is learned across two tokens; the text is not normalized (`identity`), so pieces spell the tokens as parsed.
A token is cut by `SentencePieceProcessor.encode(token, out_type=str)`: its first piece starts with '▁'; a
character the model does not know is a piece of its own (its id is the unknown id), or with byte fallback a run
of byte pieces "<0xE6>". A token that gives no piece (its form is only "▁") is that one piece.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping
from typing import Any

import click

from ..clihelp import Finite
from ..errors import InputError
from ..textio import atomic_write
from . import MODEL_TYPES, TokenCutter
from .base import Scheme
from .registry import register

MARKER = "\u2581"


def learn(counts: Iterable[Mapping[str, int]], model: str, vocab_size: int, model_type: str = "unigram",
          character_coverage: float = 1.0, byte_fallback: bool = False) -> None:
    """A SentencePiece model learned on token counts (several counters: summed) into the file `model`. The same
    counts give the same model bytes (one thread, tokens in a fixed order, no file path recorded); `vocab_size` is
    a ceiling on small data (SentencePiece's hard_vocab_limit off)."""
    if model_type not in MODEL_TYPES:
        raise InputError(f"unknown SentencePiece model type {model_type!r} (choose from {', '.join(MODEL_TYPES)})")
    total: dict[str, int] = {}
    for part in counts:
        for word, count in part.items():
            total[word] = total.get(word, 0) + count
    if not total:
        raise InputError("no train tokens to learn a SentencePiece model from")
    import sentencepiece as spm

    lines = (f"{word}\t{count}" for word, count in sorted(total.items(), key=lambda item: (-item[1], item[0]))
             if "\t" not in word and "\n" not in word)
    written = io.BytesIO()  # no input file: the model records no temporary path, so the same counts give its bytes
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=lines, input_format="tsv", model_writer=written, vocab_size=vocab_size,
            model_type=model_type, character_coverage=character_coverage, byte_fallback=byte_fallback,
            normalization_rule_name="identity", hard_vocab_limit=False, num_threads=1, minloglevel=2)
    except RuntimeError as err:
        raise InputError(f"SentencePiece could not learn a model: {err}") from None
    atomic_write(model, written.getvalue())


class SentencePieceCutter(TokenCutter):
    """A SentencePiece model cutting tokens (see the module)."""

    scheme = "sentencepiece"
    marker = MARKER
    marker_kind = "start"

    def __init__(self, path: str) -> None:
        import sentencepiece as spm

        try:
            self.processor = spm.SentencePieceProcessor(model_file=path)
        except (OSError, RuntimeError) as err:
            raise InputError(f"not a SentencePiece model: {err}", path) from None
        super().__init__()
        self.path = path

    def cut_many(self, words: list[str]) -> list[list[str]]:
        """SentencePiece's pieces of each token (one `encode` call for all)."""
        return self.processor.encode(words, out_type=str)

    def normalize(self, text: str) -> str:
        """A token as the model's normalizer sees it (identity for the models synprep learns)."""
        return self.processor.normalize(text) if text.strip() else text

    def unreadable(self) -> str | None:
        """A model that adds no '▁' before a token (SentencePiece's add_dummy_prefix off) marks no token's start:
        no token cut into several pieces reads back."""
        if self.processor.normalize("a").startswith(MARKER):
            return None
        return "it adds no '\u2581' before a token (add_dummy_prefix off): its pieces do not mark a token's start, " \
            "so a token cannot be read back from its pieces"

    def vocabulary(self) -> list[str]:
        """The model's pieces in id order."""
        return [self.processor.id_to_piece(i) for i in range(self.processor.get_piece_size())]

    def specials(self) -> dict[str, str]:
        """The model's special pieces ('<unk>', '<s>', '</s>', and a pad piece where it has one)."""
        ids = {"unk": self.processor.unk_id(), "bos": self.processor.bos_id(), "eos": self.processor.eos_id(),
               "pad": self.processor.pad_id()}
        return {role: self.processor.id_to_piece(i) for role, i in ids.items() if i >= 0}


def learn_files(inputs: list[str], model: str, vocab_size: int, model_type: str = "unigram",
                character_coverage: float = 1.0, byte_fallback: bool = False) -> None:
    """`synprep bpe learn --scheme sentencepiece`: a model learned on the tokens of tokenized text files (one
    sentence a line, tokens split at spaces; joint: the files of both languages), as convert learns it."""
    from ..bpe_learn import word_counts

    learn([word_counts(path) for path in inputs], model, vocab_size, model_type, character_coverage, byte_fallback)


@register
class SentencePieceScheme(Scheme):
    name = "sentencepiece"
    order = 10
    files = ("subwords{side}.model",)
    marker, marker_kind = MARKER, "start"
    package = "sentencepiece"
    keys = ("model", "vocab_size", "model_type", "character_coverage", "byte_fallback")
    learn_keys = ("vocab_size", "model_type", "character_coverage", "byte_fallback")
    learns = True
    own_vocabulary = True
    pieces = "SentencePiece pieces"
    model_help = "a .model file"
    keys_help = "takes model, or vocab_size to learn one"
    learn_options = (
        (("--vocab-size",), {"type": click.IntRange(min=8), "default": 8000, "show_default": True,
                             "help": "sentencepiece: pieces of the model."}),
        (("--model-type",), {"type": click.Choice(list(MODEL_TYPES)), "default": "unigram", "show_default": True,
                             "help": "sentencepiece: the model learned."}),
        (("--character-coverage",), {"type": Finite(0.98, 1.0), "default": 1.0, "show_default": True,
                                     "help": "sentencepiece: share of the characters the model covers."}),
        (("--byte-fallback",), {"is_flag": True, "help": "sentencepiece: unknown characters become byte pieces."}),
    )

    def load(self, path: str | None, vocabulary: set[str] | None = None) -> SentencePieceCutter:
        return SentencePieceCutter(path or "")

    def learn(self, counts: list[Mapping[str, int]], model: str, settings: Any) -> None:
        learn(counts, model, settings.vocab_size, settings.model_type, settings.character_coverage,
              settings.byte_fallback)

    def learn_message(self, settings: Any, which: str) -> str:
        return (f"learn a SentencePiece {settings.model_type} model: {settings.vocab_size} pieces on {which} train "
                "tokens")

    def learn_files(self, inputs: list[str], output: str, options: dict[str, Any]) -> str:
        learn_files(inputs, output, options["vocab_size"], options["model_type"], options["character_coverage"],
                    options["byte_fallback"])
        return f"wrote {output} (a SentencePiece {options['model_type']} model, {options['vocab_size']} pieces max)"

    def fairseq_pieces(self, configuration: dict[str, Any], flag: str) -> str | None:
        joint = configuration.get("bpe", {}).get("joint", True)
        model = "$E/subwords.model" if joint else "$E/subwords.tgt.model"
        return f"--bpe sentencepiece --sentencepiece-model {model} {flag} sentencepiece "
