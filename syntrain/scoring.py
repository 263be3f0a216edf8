"""Scoring: corpus BLEU and chrF of hypotheses against references (sacrebleu), BLEU with the tokenizer of the
target language (`synprep.languages.bleu_tokenize`: `ja-mecab` for ja, `zh` for zh, `13a` otherwise), each score
with its sacrebleu signature. The switches' own measures of their decoded outputs are `DecodedOutputs.scores`."""

from __future__ import annotations

from collections.abc import Sequence


def bleu_tokenizer(lang: str, tokenize: str = "auto") -> str:
    """The sacrebleu tokenizer name: `tokenize`, or with 'auto' the one for target language `lang`."""
    from synprep.languages import bleu_tokenize

    return bleu_tokenize(lang) if tokenize == "auto" else tokenize


def bleu_metric(lang: str, tokenize: str = "auto"):  # noqa: ANN201 (a sacrebleu BLEU)
    """sacrebleu's BLEU with the tokenizer for target language `lang` (`ja-mecab` for ja, `zh` for zh, `13a`
    otherwise) unless `tokenize` names one; ValueError naming what to install when it is missing."""
    from sacrebleu.metrics import BLEU

    name = bleu_tokenizer(lang, tokenize)
    try:
        return BLEU(tokenize=name)
    except (ImportError, RuntimeError) as err:  # ja-mecab without mecab-python3 / ipadic
        raise ValueError(f"BLEU tokenizer {name} needs more packages (pip install 'sacrebleu[ja]'): {err}") from None


def score(hypotheses: Sequence[str], references: Sequence[str], lang: str = "", tokenize: str = "auto") -> dict:
    """Corpus BLEU (tokenizer from the target language `lang` or `tokenize`, mixed case) and chrF with their
    signatures."""
    from sacrebleu.metrics import CHRF

    bleu, chrf = bleu_metric(lang, tokenize), CHRF()
    b = bleu.corpus_score(list(hypotheses), [list(references)])
    c = chrf.corpus_score(list(hypotheses), [list(references)])
    return {"bleu": round(b.score, 2), "chrf": round(c.score, 2), "bleu_signature": str(bleu.get_signature()),
            "chrf_signature": str(chrf.get_signature())}
