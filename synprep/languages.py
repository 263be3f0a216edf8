"""What differs between languages for length counting, detokenization and scoring; one place for each rule.

Languages written without spaces between words (`UNSPACED`: ja, zh, th, lo, km, my) cannot be measured in
whitespace tokens (a raw Japanese line is one "token"). The filter runs before any parser, so their length is
a stated character rule, `count_tokens` (docs/languages.md has its calibration):

- text is split on whitespace, then each piece into runs:
- a run of characters of the unspaced scripts (CJK ideographs, kana, Thai, Lao, Khmer, Myanmar) counts
  ceil(characters / `UNSPACED[lang]`): the mean characters per word of that script's treebank words;
- a run of other letters and digits (Latin, Cyrillic, full-width digits, ...) counts one token;
- punctuation and symbols count nothing: in whitespace-token counts of spaced languages they mostly ride on
  a word (`Tom!`), so counting them here would make ratios against English lopsided.

Every other language counts whitespace tokens. `detokenize` joins tokens back into text (SpaceAfter when the
parser gave it, else the language's rule) and `bleu_tokenize` names sacrebleu's tokenizer for a target language.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from .options import SEGMENTATIONS

# characters per word of the script, for `count_tokens`: ja/zh measured on UD_Japanese-GSD / UD_Chinese-GSD
# dev+test (words made only of the script's characters: 1.69 and 1.61); th/lo/km/my: an estimate, not measured
UNSPACED: dict[str, float] = {"ja": 1.7, "zh": 1.6, "th": 3.0, "lo": 3.0, "km": 3.0, "my": 3.0}
__all__ = ["SEGMENTATIONS", "UNSPACED", "bleu_tokenize", "count_tokens", "detokenize"]

_SCRIPT = ("\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3005\u3006\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
           "\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003ffff")
_RUNS = re.compile(rf"([{_SCRIPT}]+)|([^\W_{_SCRIPT}]+)")
_ALNUM = re.compile(rf"[^\W_{_SCRIPT}]")  # a letter or digit of a spaced script


def count_tokens(text: str, lang: str, segmentation: str = "auto") -> int:
    """Tokens of `text` in `lang` for length and ratio checks: the character rule (module doc) for the
    `UNSPACED` languages with segmentation 'auto', whitespace tokens otherwise."""
    per_word = UNSPACED.get(lang) if segmentation == "auto" else None
    if per_word is None:
        return len(text.split())
    count = 0
    for script, word in _RUNS.findall(text):
        count += math.ceil(len(script) / per_word) if script else bool(word)
    return count


def _spaced(left: str, right: str, lang: str) -> bool:
    """Whether the rule puts a space between two tokens of an unspaced language: between two letters of a
    spaced script (`New York` inside Japanese); in Chinese also between a digit and a letter (`9:00 AM`)."""
    a, b = left[-1], right[0]
    if not (_ALNUM.match(a) and _ALNUM.match(b)):
        return False
    return lang == "zh" or not (a.isdigit() or b.isdigit())


def detokenize(tokens: Sequence[str], lang: str, space_after: Sequence[bool] | None = None) -> str:
    """Tokens -> text for a language written without spaces: `space_after` (the tokens' SpaceAfter, when the
    parser gave it) decides, else the language rule (`_spaced`). Other languages: tokens joined by spaces
    (syntrain uses sacremoses for them)."""
    tokens = [token for token in tokens if token]
    if not tokens:
        return ""
    if space_after is None:
        if lang not in UNSPACED:
            return " ".join(tokens)
        space_after = [_spaced(a, b, lang) for a, b in zip(tokens, tokens[1:])]
    parts = [tokens[0]]
    for token, space in zip(tokens[1:], space_after):
        parts.append(" " + token if space else token)
    return "".join(parts)


def bleu_tokenize(lang: str) -> str:
    """sacrebleu's tokenizer for a target language: `ja-mecab` for ja, `zh` for zh, `13a` otherwise."""
    return {"ja": "ja-mecab", "zh": "zh"}.get(lang, "13a")
