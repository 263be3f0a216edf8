"""Language identification backends on real sentences: accuracy, determinism, ISO 639-1 codes."""

import json
import random
from pathlib import Path

import pytest

from synprep.langid import BACKENDS, UNDETERMINED, check_iso_639_1, get_identifier

DATA = Path(__file__).parent / "data"
UD = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "ud"


def labelled_fixtures():
    """(language, sentence) pairs written for these tests: en, de and eleven other languages."""
    rows = []
    for line in (DATA / "langid_sentences.tsv").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            lang, sentence = line.split("\t")
            rows.append((lang, sentence))
    return rows


def treebank_sentences(folder, n, min_tokens=6):
    """n random '# text' sentences of at least min_tokens tokens from a shared UD treebank folder."""
    texts = []
    for path in sorted((UD / folder).glob("*.conllu")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("# text = ") and len(line.split()) - 3 >= min_tokens:
                texts.append(line[9:])
    random.Random(1).shuffle(texts)
    return texts[:n]


@pytest.fixture(scope="module", params=BACKENDS)
def identifier(request):
    return get_identifier(request.param)


def test_fixture_sentences_accuracy(identifier):
    rows = labelled_fixtures()
    predicted = identifier.detect_many(s for _, s in rows)
    wrong = [(g, p, s) for (g, s), p in zip(rows, predicted) if g != p]
    assert len(wrong) <= 0.05 * len(rows), wrong
    en_de = [(g, p) for (g, _), p in zip(rows, predicted) if g in ("en", "de")]
    assert all(g == p for g, p in en_de)  # the filter's languages: no mistakes on full sentences


@pytest.mark.skipif(not (UD / "UD_English-EWT").is_dir() or not (UD / "UD_German-GSD").is_dir(),
                    reason="../shared/data/ud not present")
def test_treebank_sentences_en_de(identifier):
    en, de = treebank_sentences("UD_English-EWT", 300), treebank_sentences("UD_German-GSD", 300)
    en_ok = sum(p == "en" for p in identifier.detect_many(en))
    de_ok = sum(p == "de" for p in identifier.detect_many(de))
    assert en_ok >= 0.95 * len(en) and de_ok >= 0.95 * len(de), (en_ok, de_ok)


def test_deterministic_whatever_came_before(identifier):
    sentences = [s for _, s in labelled_fixtures()] + ["Yes .", "ok", "Merci", "Danke schön", "No way"]
    first = identifier.detect_many(sentences)
    shuffled = sentences[:]
    random.Random(3).shuffle(shuffled)
    again = dict(zip(shuffled, identifier.detect_many(shuffled)))
    fresh = get_identifier(identifier.name)
    assert first == [again[s] for s in sentences] == fresh.detect_many(sentences)


def test_no_letters_is_undetermined(identifier):
    for text in ("", "   ", "2009 .", "12 , 13 - 14 ..."):
        assert identifier.detect(text) == UNDETERMINED


def test_candidate_restriction(identifier):
    restricted = get_identifier(identifier.name, ["EN", "de"])
    assert restricted.candidates() == ("de", "en")
    assert {restricted.detect(s) for _, s in labelled_fixtures()} <= {"en", "de"}
    assert restricted.detect("Das ist ein schönes Haus am See .") == "de"


def test_codes_are_iso_639_1(identifier):
    assert all(len(code) == 2 for code in identifier.supported_languages())
    assert {"en", "de", "fr", "hr", "es"} <= set(identifier.candidates())
    json.dumps(identifier.signature())
    with pytest.raises(ValueError, match="not supported"):
        get_identifier(identifier.name, ["en", "xx"])


def test_langdetect_maps_chinese_to_zh():
    assert "zh" in get_identifier("langdetect").supported_languages()


def test_iso_check_and_unknown_backend():
    assert check_iso_639_1(" EN ") == "en"
    for bad in ("eng", "e", "en-US", ""):
        with pytest.raises(ValueError):
            check_iso_639_1(bad)
    with pytest.raises(ValueError, match="unknown langid backend"):
        get_identifier("cld3")
