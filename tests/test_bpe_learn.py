"""`learn_bpe_codes` against subword-nmt's learn_bpe on the same word counts: byte-identical codes on real text
(sample_data/ always; Multi30k and UD EWT from ../shared when present), on the benchmark's synthetic Zipf
vocabularies (several seeds, many ties) and on small edge cases."""

import contextlib
import importlib.util
import io
import os
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synprep.bpe_learn import count_words, learn_bpe_codes, learn_joint_from_counts, merge_counts

REPO = Path(__file__).resolve().parents[1]
SAMPLE_DATA = REPO / "sample_data"
SHARED = Path(os.environ.get("SYNPREP_SHARED", REPO.parent / "shared"))
MULTI30K = SHARED / "data" / "parallel" / "multi30k"
EWT = SHARED / "data" / "ud" / "UD_English-EWT" / "en_ewt-ud-train.conllu"

_spec = importlib.util.spec_from_file_location("bench_learn_bpe", REPO / "benchmarks" / "bench_learn_bpe.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def reference(counts, merges, min_frequency=2, total_symbols=False):
    from subword_nmt import learn_bpe

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        learn_bpe.learn_bpe([f"{w} {c}" for w, c in counts.items()], out, merges, min_frequency, False,
                            is_dict=True, total_symbols=total_symbols)
    return out.getvalue(), err.getvalue()


def fast(counts, merges, min_frequency=2, total_symbols=False):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        learn_bpe_codes([f"{w} {c}" for w, c in counts.items()], out, merges, min_frequency, total_symbols)
    return out.getvalue(), err.getvalue()


def assert_same(counts, merges, min_frequency=2, total_symbols=False, at_least=1):
    ref, ref_err = reference(counts, merges, min_frequency, total_symbols)
    got, got_err = fast(counts, merges, min_frequency, total_symbols)
    assert ref.count("\n") - 1 >= at_least, "too few merges to prove anything"
    assert got == ref
    stopped = "no pair has frequency"
    assert (stopped in got_err) == (stopped in ref_err)
    return ref


def text_counts(*paths, lines=None):
    texts = []
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            texts.append("".join(line for _, line in zip(range(lines or 10**9), handle)))
    return dict(merge_counts(count_words(text) for text in texts))


@pytest.mark.parametrize("min_frequency", [1, 2])
def test_sample_data(min_frequency):
    paths = sorted((SAMPLE_DATA / "parallel").glob("*"))
    counts = text_counts(*paths)
    counts.update(Counter(bench.words_of(SAMPLE_DATA / "en.conllu")))
    counts.update(Counter(bench.words_of(SAMPLE_DATA / "de.conllu")))
    assert_same(counts, 2000, min_frequency, at_least=300)


@pytest.mark.skipif(not MULTI30K.is_dir(), reason="needs ../shared (Multi30k)")
@pytest.mark.parametrize("min_frequency", [1, 2])
def test_multi30k(min_frequency):
    counts = text_counts(MULTI30K / "train.en", MULTI30K / "train.de", lines=3000)
    assert_same(counts, 4000, min_frequency, at_least=3000)


@pytest.mark.skipif(not EWT.is_file(), reason="needs ../shared (UD EWT)")
def test_ud_ewt():
    counts = dict(Counter(bench.words_of(EWT)))
    assert_same(counts, 3000, 2, at_least=3000)


@pytest.fixture(scope="module")
def char_model():
    real = bench.real_word_counts(bench.sample_text_files())
    return real, bench.CharModel(real)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_synthetic_zipf(char_model, seed):
    real, model = char_model
    counts = bench.synthetic_counts(4000, seed, real=real, model=model)
    assert_same(counts, 1500, 2, at_least=1000)


@pytest.mark.parametrize("seed,min_frequency", [(3, 1), (4, 2), (5, 1)])
def test_synthetic_many_ties(char_model, seed, min_frequency):
    real, model = char_model
    counts = bench.synthetic_counts(3000, seed, tokens=6000, real=real, model=model)  # counts 1-2 mostly
    assert Counter(counts.values()).most_common(1)[0][1] > 1000
    assert_same(counts, 1500, min_frequency, at_least=500)
    flat = {word: 3 for word in counts}  # exponent 0: every word counts the same
    assert_same(flat, 1500, min_frequency, at_least=500)


def test_total_symbols(char_model):
    real, model = char_model
    counts = bench.synthetic_counts(2000, 7, real=real, model=model)
    assert_same(counts, 800, 2, total_symbols=True, at_least=100)


@pytest.mark.parametrize("counts", [
    {"aaaa": 5, "aaaaaaa": 3, "aaa": 2, "a": 9, "aa": 1},
    {"abab": 4, "ababab": 2, "ba": 3, "bab": 2, "abba": 1},
    {"a": 3, "ab": 2, "b": 7},
    {"singing": 2, "ringing": 3, "bring": 2, "thing": 4, "ing": 1, "kings": 2, "sing": 5},
    {"x\\y": 3, "\\\\": 2, "a.b": 2, "a*b": 2, "(ab)": 3, "[a]": 2, "$1": 2, "a+b?": 2},
    {"\xa0ba": 6, "b\xa0bbbb": 4, "\xa0babbab": 2, "a\xa0a": 3},  # the pattern merges "\xa0a b" too
    {"a\xa0b": 4, "a\xa0ab": 3, "ab\xa0b": 2, "\xa0a": 2, "b\u2028a\xa0b": 3, "a\x85b\tab": 2, "ab": 5},
    {"Straßenbahn": 3, "Straßenbahnhaltestelle": 2, "Bahn": 4, "bahn": 3, "Haltestelle": 2},
])
@pytest.mark.parametrize("min_frequency", [1, 2])
def test_edge_cases(counts, min_frequency):
    ref, _ = reference(counts, 100, min_frequency)
    assert fast(counts, 100, min_frequency)[0] == ref


def test_single_characters_raise_like_subword_nmt():
    counts = {"a": 3, "b": 2, "c": 1}
    with pytest.raises(ValueError):
        reference(counts, 10)
    with pytest.raises(ValueError):
        fast(counts, 10)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(alphabet="ab\xa0\\c", min_size=1, max_size=8), st.integers(1, 6), min_size=1,
                       max_size=25), st.integers(1, 3))
def test_random_vocabularies(counts, min_frequency):
    try:
        ref, _ = reference(counts, 40, min_frequency)
    except ValueError:
        with pytest.raises(ValueError):
            fast(counts, 40, min_frequency)
        return
    assert fast(counts, 40, min_frequency)[0] == ref


def test_learn_joint_from_counts_uses_the_fast_learner(tmp_path, monkeypatch):
    from subword_nmt import learn_bpe

    counts = text_counts(*sorted((SAMPLE_DATA / "parallel").glob("train.*")))
    learn_joint_from_counts([Counter(counts)], str(tmp_path / "ref"), 300, reference=True)

    def refuse(*args, **kwargs):
        raise AssertionError("subword-nmt's learn_bpe called")

    monkeypatch.setattr(learn_bpe, "learn_bpe", refuse)
    learn_joint_from_counts([Counter(counts)], str(tmp_path / "fast"), 300)
    assert (tmp_path / "fast").read_bytes() == (tmp_path / "ref").read_bytes()


def small_alphabet_counts(seed):
    """Words of 2-4 letters, Zipf-like counts: many symbols are made by more than one merge, where subword-nmt's
    pruned counts differ from the true ones, so its pruning and thresholds decide the codes."""
    import random

    rng = random.Random(seed)
    alphabet = "abcd"[:rng.randint(2, 4)]
    counts = {}
    for rank in range(1, rng.randint(5, 60)):
        word = "".join(rng.choice(alphabet) for _ in range(rng.randint(2, 14)))
        counts[word] = max(1, int(rng.choice([1000, 300, 100]) / rank ** rng.choice([0.5, 1, 1.5])))
    return counts


PRUNING_MATTERS = {  # exact counts (no pruning) give other codes after 300 merges
    "ababbbbaababba": 100, "aabaaa": 35, "ba": 57, "ab": 37, "baabb": 200, "aababbabbb": 16, "ababbabbaba": 53,
    "bbababba": 44, "aaabb": 11, "babaababb": 3, "bbbbb": 27, "bbaaaaabaa": 288, "ababaabba": 277, "abbbbb": 80,
    "bb": 20, "abababaaabaaab": 1, "babaabbbabaa": 58, "abb": 23, "baaaabaa": 68, "aababab": 3, "abbbaaaba": 14,
    "babbb": 21, "aaa": 208, "abbbbbbaba": 1, "aabababaa": 60, "baaabbbabba": 38, "aa": 57, "aaabaabaaaabbb": 3,
    "bbaabaaabbbbb": 55, "bba": 54, "bbbaabaabababa": 1, "babbababbaba": 1, "aaaaababaaa": 17, "bbbaab": 5,
    "aaaabbabaaaa": 1, "aabbaaababbbbb": 27, "abbabaa": 2, "aaabbbbaaab": 162, "bbaabbbabb": 1, "baaabaabbbbab": 15,
}


@pytest.mark.parametrize("min_frequency", [1, 2])
def test_pruning_and_thresholds_as_subword_nmt(min_frequency):
    assert_same(PRUNING_MATTERS, 300, min_frequency, at_least=75)
    for seed in range(40):
        counts = small_alphabet_counts(seed)
        try:
            ref, _ = reference(counts, 300, min_frequency)
        except ValueError:
            continue
        assert fast(counts, 300, min_frequency)[0] == ref, seed


def test_learn_joint_from_counts_is_subword_nmts_from_several_inputs(tmp_path):
    """The fast path learns from the joint counts themselves (no vocabulary lines, emptied as it goes); a word
    that subword-nmt would read otherwise from its line (a leading line break) goes through the lines."""
    parts = [Counter(small_alphabet_counts(seed)) for seed in (3, 4)]
    parts[1]["\rab"] = 3
    for name, inputs in (("plain", parts[:1] * 2), ("odd", parts)):
        learn_joint_from_counts([Counter(p) for p in inputs], str(tmp_path / f"{name}.ref"), 60,
                                reference=True)
        learn_joint_from_counts([Counter(p) for p in inputs], str(tmp_path / f"{name}.fast"), 60)
        assert (tmp_path / f"{name}.fast").read_bytes() == (tmp_path / f"{name}.ref").read_bytes()


def test_learn_joint_from_counts_shows_a_bar_over_the_merges(tmp_path, capsys):
    counts = Counter(small_alphabet_counts(5))
    learn_joint_from_counts([counts], str(tmp_path / "codes"), 30, verbose=True)
    merges = len((tmp_path / "codes").read_text(encoding="utf-8").splitlines()) - 1
    err = capsys.readouterr().err
    assert "learn BPE: 100%" in err and f"{merges}/30 [" in err and "merges/s" in err
    learn_joint_from_counts([counts], str(tmp_path / "quiet"), 30)
    assert "learn BPE" not in capsys.readouterr().err
