"""Post-processing: an output's pieces to its text. The pieces that are text are kept (each switch's
`DecodedOutputs.text`: tree decoding drops its transition tokens), joined into tokens by the split's sub-word
scheme (`vocab.pieces_joiner`: subword-nmt's "@@ " marker removed, or a sentencepiece / tokenizer piece with its
marker starting a token) and detokenized: languages written without spaces by `synprep.languages.detokenize`,
others with sacremoses (Moses rules for the target language) or, without it, a simple fallback that removes the
space before closing punctuation and after opening brackets."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from .switches import Switch, decoded
from .vocab import pieces_joiner

if TYPE_CHECKING:
    from .dataset import ParallelData


def _simple_detokenize(tokens: Sequence[str]) -> str:
    text = " ".join(tokens)
    text = re.sub(r" ([.,!?;:%)\]}])", r"\1", text)
    return re.sub(r"([(\[{]) ", r"\1", text)


def detokenizer(lang: str) -> Callable[[Sequence[str]], str]:
    """A function tokens -> text: for languages written without spaces (ja, zh, ...) the rule of
    `synprep.languages.detokenize`; else sacremoses for `lang` when installed, else the simple fallback."""
    from synprep.languages import UNSPACED, detokenize

    if lang in UNSPACED:
        return lambda tokens: detokenize(tokens, lang)
    try:
        from sacremoses import MosesDetokenizer
    except ImportError:
        return _simple_detokenize
    moses = MosesDetokenizer(lang=lang or "en")
    return lambda tokens: moses.detokenize(list(tokens))


def postprocessor(data: ParallelData, switches: Iterable[Switch]) -> Callable[[list[str]], str]:
    """A function output pieces -> text for the outputs of a model with `switches` on split `data` (its sub-word
    scheme and target language)."""
    detok, outputs = detokenizer(data.tgt_lang), decoded(switches)
    join = pieces_joiner(data.configuration, data.path, data.signature)

    def text(pieces: list[str]) -> str:
        for switch_outputs in outputs:
            pieces = switch_outputs.text(pieces)
        return detok(join(pieces))

    return text
