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


def langdetect_reference(texts, languages=None):
    """langdetect's own answer per text, as the library computes it (seed 0, its Detector, its sampling loop)."""
    import os

    from langdetect.detector_factory import PROFILES_DIRECTORY, DetectorFactory
    from langdetect.lang_detect_exception import LangDetectException

    factory = DetectorFactory()
    profiles = sorted(os.listdir(PROFILES_DIRECTORY))
    if languages is not None:
        profiles = [p for p in profiles if p.split("-")[0] in languages]
    factory.load_json_profile([(Path(PROFILES_DIRECTORY) / p).read_text(encoding="utf-8") for p in profiles])
    factory.set_seed(0)
    answers = []
    for text in texts:
        detector = factory.create()
        detector.append(text)
        try:
            ranked = detector.get_probabilities()
        except LangDetectException:
            answers.append((UNDETERMINED, 0.0))
            continue
        answers.append((ranked[0].lang.split("-")[0], ranked[0].prob) if ranked else (UNDETERMINED, 0.0))
    return answers


def mixed_real_sentences():
    """Real sentences of many languages and lengths: the fixtures, EWT/GSD sentences (when ../shared is here),
    and edge cases (no letters, one letter, URLs, mixed scripts, a long line)."""
    texts = [sentence for _, sentence in labelled_fixtures()]
    if UD.is_dir():
        texts += treebank_sentences("UD_English-EWT", 150, min_tokens=1)
        texts += treebank_sentences("UD_German-GSD", 100, min_tokens=1)
    texts += ["", "123 456", "a", "I", "see http://example.com/x?y=1 now", "東京 is big", "ÇA VA ? OUI", "x" * 3000,
              "Hello world. " * 300]
    return texts


@pytest.mark.parametrize("languages", [None, ("de", "en", "fr")])
def test_langdetect_backend_equals_langdetect_exactly(languages):
    """The vectorised sampling (one by one and in lock-step batches) gives langdetect's answer and probability to
    the last bit: a changed draw, sum order or product order changes some probability here."""
    texts = mixed_real_sentences()
    expected = langdetect_reference(texts, languages)
    identifier = get_identifier("langdetect", languages)
    assert identifier.detect_scored_many(texts) == expected
    assert [identifier.detect_scored(text) for text in texts[::7]] == expected[::7]


def test_langdetect_sampling_fallbacks_equal_the_fast_paths():
    """The paths taken where the interpreter draws or sums differently (Python's own generator, Python's own sum)
    give what the replayed stream and the vectorised sums give on this interpreter."""
    import numpy as np

    from synprep.langid import langdetect_sampling as sampling

    identifier = get_identifier("langdetect")
    batch = identifier._batch
    texts = mixed_real_sentences()[:60]
    fast = identifier.detect_scored_many(texts)
    assert batch.sampler._stream is not None and batch.sampler._stream.agrees_with_python()
    slow = sampling.BatchSampler(sampling.Sampler(batch.sampler.rows, batch.sampler.table, None))
    slow.sampler.seed, slow._row_sums = 0, sampling._python_sums  # the real generator, Python's sum
    identifier._batch = slow
    try:
        assert identifier.detect_scored_many(texts) == fast
    finally:
        identifier._batch = batch
    rows = np.random.default_rng(3).random((20, 55)) ** 6
    assert np.array_equal(batch._row_sums(rows), sampling._python_sums(rows))
