"""synprep parser eval / synprep.parse.evaluate: alignment by character offsets, scores, every backend's CLI."""

import io
import subprocess
import sys
from pathlib import Path

import pytest

from synprep.conllu import ConlluSentence, format_sentence, parse_conllu_text, read_conllu
from synprep.parse import ParserSpec
from synprep.parse.evaluate import Scores, align, evaluate, gold_text, score_sentence, sentence_words

REPO = Path(__file__).resolve().parents[1]
SAMPLE_DATA = REPO / "sample_data"


def synprep(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "synprep.cli", *args], capture_output=True, text=True)


def sentence(rows: list[tuple], multiword: list[tuple[int, int, str]] = (), text: str | None = None):
    """rows: (form, upos, head, deprel); multiword: (first, last, surface form)."""
    words = [[str(i), form, "_", upos, "_", "_", str(head), rel, "_", "_"]
             for i, (form, upos, head, rel) in enumerate(rows, 1)]
    ranges = [(a, b, [f"{a}-{b}", form] + ["_"] * 8) for a, b, form in multiword]
    return ConlluSentence(words, ranges, [f"text = {text}"] if text else [])


GOLD = sentence([("Fue", "AUX", 4, "cop"), ("a", "ADP", 4, "case"), ("el", "DET", 4, "det"),
                 ("mercado", "NOUN", 0, "root"), (".", "PUNCT", 4, "punct")], [(2, 3, "al")], "Fue al mercado.")


def test_spans_and_multiword_tokens():
    words, tokens, chars = sentence_words(GOLD)
    assert chars == "Fuealmercado."
    assert tokens == [(0, 3), (3, 5), (5, 12), (12, 13)]
    assert [(w.start, w.end, w.multiword) for w in words[1:3]] == [(3, 5, True), (3, 5, True)]


def test_align_equal_spans_lcs_inside_multiword_and_different_tokenization():
    system = sentence([("Fue", "AUX", 4, "cop"), ("al", "ADP", 3, "case"), ("mercado", "NOUN", 0, "root"),
                       (".", "PUNCT", 3, "punct")])  # "al" not split: no gold word has its span
    pairs = align(sentence_words(GOLD)[0], sentence_words(system)[0])
    assert pairs == [(0, 0), (3, 2), (4, 3)]
    split = sentence([("Fue", "AUX", 4, "cop"), ("A", "ADP", 4, "case"), ("el", "DET", 4, "det"),
                      ("mercado", "NOUN", 0, "root"), (".", "PUNCT", 4, "punct")], [(2, 3, "al")])
    # inside the multiword token: lowercased forms, longest common subsequence
    assert align(sentence_words(GOLD)[0], sentence_words(split)[0]) == [(i, i) for i in range(5)]
    glued = sentence([("Fuealmercado", "NOUN", 0, "root"), (".", "PUNCT", 1, "punct")])
    assert align(sentence_words(GOLD)[0], sentence_words(glued)[0]) == [(4, 1)]


def test_scores_count_heads_through_the_alignment():
    system = sentence([("Fue", "AUX", 3, "cop"), ("al", "ADP", 3, "case"), ("mercado", "NOUN", 0, "root"),
                       (".", "PUNCT", 3, "punct:x")])
    scores = Scores("raw")
    score_sentence(scores, GOLD, system)
    assert (scores.gold_words, scores.system_words, scores.aligned) == (5, 4, 3)
    # Fue -> mercado (gold 4, system 3: aligned), mercado root, "." -> mercado (label's universal part)
    assert (scores.uas, scores.las, scores.upos) == (3, 3, 3)
    assert scores.metrics()["las"] == pytest.approx(100 * 2 * 3 / 9)
    other = sentence([("Fue", "AUX", 0, "root"), ("al", "ADP", 1, "case"), ("mercadoX.", "NOUN", 1, "obj")])
    score_sentence(scores, GOLD, other)  # other characters: counted, nothing aligned
    assert scores.mismatched == ["2"] and scores.aligned == 3


def test_gold_text_from_space_after():
    tokens = parse_conllu_text("1\tHi\t_\tX\t_\t_\t0\troot\t_\tSpaceAfter=No\n2\t!\t_\tX\t_\t_\t1\tpunct\t_\t_\n\n")[0]
    assert gold_text(tokens) == "Hi!"


def udtools_scores(gold: list[ConlluSentence], system: list[ConlluSentence]) -> dict[str, float]:
    udeval = pytest.importorskip("udtools.udeval", reason="udtools (the UD evaluation) not installed")
    loaded = [udeval.load_conllu(io.StringIO("".join(format_sentence(s) for s in side)), name, {})
              for side, name in ((gold, "gold"), (system, "system"))]
    result = udeval.evaluate(*loaded)
    return {key.lower(): 100 * result[key].f1 for key in ("Tokens", "Words", "UPOS", "UAS", "LAS")}


def test_raw_text_scores_agree_with_the_ud_evaluation(tiny_udpipe):
    """The same figures as the UD project's own evaluation (udtools), on a real parser's output."""
    gold = list(read_conllu(str(SAMPLE_DATA / "en.conllu")))
    parser = ParserSpec("udpipe", tiny_udpipe("en")).load()
    lines = [" ".join(gold_text(s).replace(" ,", ",").split()) for s in gold]  # tokenized differently from gold
    parsed = [line.sentence for line in parser.parse(lines)]
    ours = Scores("raw")
    for g, s in zip(gold, parsed, strict=True):
        score_sentence(ours, g, s)
    reference = udtools_scores(gold, parsed)
    for key, value in ours.metrics().items():
        assert value == pytest.approx(reference[key], abs=1e-9), key
    assert ours.metrics()["uas"] < 100


def test_gold_text_parsed_perfectly_is_100():
    gold = list(read_conllu(str(SAMPLE_DATA / "de.conllu")))
    scores = Scores("raw")
    for g in gold:
        score_sentence(scores, g, g)
    assert all(value == 100 for value in scores.metrics().values())


def test_parser_eval_cli_udpipe(tiny_udpipe):
    gold = str(SAMPLE_DATA / "en.conllu")
    done = synprep("parser", "eval", "--model", tiny_udpipe("en"), "--conllu", gold)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("gold tokenization") and lines[1].startswith("raw text")
    expected = evaluate(ParserSpec("udpipe", tiny_udpipe("en"), pretokenized=True).load(), gold, "gold").metrics()
    assert f"UAS {expected['uas']:5.2f}" in lines[0] and f"LAS {expected['las']:5.2f}" in lines[0]


def test_parser_eval_cli_bad_gold_is_one_line(tiny_udpipe, tmp_path):
    bad = tmp_path / "bad.conllu"
    bad.write_text("1\tword\t_\n\n")
    done = synprep("parser", "eval", "--model", tiny_udpipe("en"), "--conllu", str(bad))
    assert done.returncode == 2 and done.stderr.startswith(f"synprep: error: {bad}:1"), done.stderr
    assert "Traceback" not in done.stderr


def test_parser_eval_stanza_gold_tokens(tiny_stanza):
    """stanza (no tokenizer model here): scored from gold tokens only."""
    done = synprep("parser", "eval", "--backend", "stanza", "--model-dir", tiny_stanza, "--lang", "en",
                   "--conllu", str(SAMPLE_DATA / "en.conllu"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("gold tokenization") and "raw text" not in done.stdout


def test_parser_eval_spacy_udpipe(tiny_udpipe):
    pytest.importorskip("spacy_udpipe")
    done = synprep("parser", "eval", "--backend", "spacy-udpipe", "--model", tiny_udpipe("en"), "--lang", "en",
                   "--conllu", str(SAMPLE_DATA / "en.conllu"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("gold tokenization") and lines[1].startswith("raw text")
    uas = float(lines[1].split("UAS")[1].split()[0])
    assert 0 < uas <= 100
