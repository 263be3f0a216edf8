"""`synprep bpe` against the real subword-nmt command line: byte-identical output."""

import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synprep.bpe import Bpe, align_subwords, merge_word
from synprep.bpe_learn import learn_joint

BIN = Path(sys.executable).parent
WORDS = ("the house houses housing a an unhappily happiness translation translations translated "
         "Haus Häuser Übersetzung übersetzen übersetzte schön schöner am schönsten Straßenbahn "
         "Donaudampfschifffahrt run running runner ran 1999 2.5 e-mail don't , . ! ?").split()


def make_corpus(path: Path, lines: int, seed: int) -> Path:
    rng = random.Random(seed)
    path.write_text("\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 15)))
                              for _ in range(lines)) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bpe")
    en = make_corpus(tmp / "train.en", 300, 1)
    de = make_corpus(tmp / "train.de", 300, 2)
    codes = tmp / "codes.bpe"
    learn_joint([str(en), str(de)], str(codes), 60, [str(tmp / "vocab.en"), str(tmp / "vocab.de")])
    return tmp, en, de, codes


TRICKY = (
    "the houses\n"
    "\n"
    "  leading and trailing spaces  \n"
    "double  spaces\tand\ttabs Donaudampfschifffahrt\n"
    "windows line end übersetzte\r\n"
    "a line separator\u2028inside übersetzen and next\x85line\n"
    "\n"
    "x\n"
    "last line without newline Häuser"
)


def run(cmd, stdin: bytes) -> bytes:
    return subprocess.run(cmd, input=stdin, capture_output=True, check=True).stdout


def test_learn_matches_subword_nmt(corpus):
    tmp, en, de, codes = corpus
    subprocess.run([str(BIN / "subword-nmt"), "learn-joint-bpe-and-vocab", "-i", str(en), str(de), "-s", "60",
                    "-o", str(tmp / "ref.codes"), "--write-vocabulary", str(tmp / "ref.en"), str(tmp / "ref.de")],
                   check=True, capture_output=True)
    assert codes.read_bytes() == (tmp / "ref.codes").read_bytes()
    assert (tmp / "vocab.en").read_bytes() == (tmp / "ref.en").read_bytes()
    assert (tmp / "vocab.de").read_bytes() == (tmp / "ref.de").read_bytes()


@pytest.mark.parametrize("extra", [[], ["--vocabulary", "VOCAB", "--vocabulary-threshold", "3"],
                                   ["--merges", "20"], ["--glossaries", "Haus"]])
def test_apply_is_byte_identical_to_subword_nmt(corpus, extra):
    tmp, en, _, codes = corpus
    extra = [str(tmp / "vocab.de") if arg == "VOCAB" else arg for arg in extra]
    data = TRICKY.encode() + b"\n" + en.read_bytes()
    reference = run([str(BIN / "subword-nmt"), "apply-bpe", "-c", str(codes), *extra], data)
    ours = run([str(BIN / "synprep"), "bpe", "apply", "--codes", str(codes), *extra], data)
    assert ours == reference
    assert ours.count(b"\n") == data.count(b"\n")
    assert b"@@" in ours


def test_apply_files_and_gz(corpus, tmp_path):
    import gzip

    _, en, _, codes = corpus
    gz = tmp_path / "in.en.gz"
    gz.write_bytes(gzip.compress(en.read_bytes()))
    out = tmp_path / "out.bpe"
    subprocess.run([str(BIN / "synprep"), "bpe", "apply", "-c", str(codes), "-i", str(gz), "-o", str(out)], check=True)
    assert out.read_bytes() == run([str(BIN / "subword-nmt"), "apply-bpe", "-c", str(codes)], en.read_bytes())


def test_word_caches_are_bounded_and_change_no_segmentation(corpus, monkeypatch):
    import synprep.bpe as bpe_module

    _, en, de, codes = corpus
    words = [w for path in (en, de) for w in path.read_text(encoding="utf-8").split()]
    unbounded = Bpe(str(codes))
    expected = [unbounded.segment_word(w) for w in words]
    expected_pieces = align_subwords(words, unbounded.segment_word)
    monkeypatch.setattr(bpe_module, "CACHE_WORDS", 7)
    bounded = Bpe(str(codes))
    assert [bounded.segment_word(w) for w in words] == expected
    assert [list(p) for p in align_subwords(words, bounded.segment_word)] == [list(p) for p in expected_pieces]
    assert len(set(words)) > 7 and len(bounded._cache) <= 7 and len(bounded._pieces) <= 7
    assert len(unbounded._cache) == len(set(words))


def test_align_subwords_keeps_whitespace_tokens_whole(corpus):
    _, _, _, codes = corpus
    bpe = Bpe(str(codes))
    subwords, owner = bpe.segment_tokens(["10 000", "Häuser", "the"])
    assert all(" " not in piece for piece in subwords)
    assert owner[-1] == 2 and owner[0] == 0 and set(owner) == {0, 1, 2}
    joined = "".join(p[:-2] if p.endswith("@@") else p + " " for p in subwords).split()
    assert joined == ["10\u2581000", "Häuser", "the"]
    assert align_subwords(["a b", "c"]) == (["a\u2581b", "c"], [0, 1])


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("#version: 0.2\nt h\nth e\nnot codes at all\n", "codes.bpe:4: not a BPE codes file"),
])
def test_bad_codes_are_one_line_errors(tmp_path, content, message):
    codes = tmp_path / "codes.bpe"
    if content is not None:
        codes.write_text(content)
    result = subprocess.run([str(BIN / "synprep"), "bpe", "apply", "-c", str(codes)], input=b"a b\n",
                            capture_output=True)
    assert result.returncode == 2
    err = result.stderr.decode()
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_apply_non_utf8_input_names_the_line(corpus):
    _, _, _, codes = corpus
    result = subprocess.run([str(BIN / "synprep"), "bpe", "apply", "-c", str(codes)],
                            input=b"fine\nalso fine\n\xff\xfe broken\n", capture_output=True)
    assert result.returncode == 2
    assert result.stderr.decode().strip() == "synprep: error: -:3: not valid UTF-8 (byte 1 of the line)"


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="aabbbxé", min_size=1, max_size=16))
def test_fast_merge_equals_subword_nmt_encode(corpus_codes, word):
    from subword_nmt.apply_bpe import encode

    lib = corpus_codes._bpe
    reference = encode(word, lib.bpe_codes, lib.bpe_codes_reverse, None, "@@", lib.version, {})
    rank_pair = {rank: pair for pair, rank in lib.bpe_codes.items()}
    assert merge_word(lib, rank_pair, word, "@@") == list(reference)


@pytest.fixture(scope="module")
def corpus_codes(tmp_path_factory):
    """Codes learned on a small-alphabet corpus, so random words hit many (and repeated-symbol) merges."""
    rng = random.Random(3)
    tmp = tmp_path_factory.mktemp("merge")
    text = tmp / "text"
    words = ["abab", "ababab", "bbbb", "xaxa", "abx"] + ["".join(rng.choice("abbxé") for _ in range(rng.randint(1, 9)))
                                                         for _ in range(300)]
    text.write_text("\n".join(" ".join(rng.choice(words) for _ in range(12)) for _ in range(400)) + "\n")
    codes = tmp / "codes"
    learn_joint([str(text)], str(codes), 150)
    return Bpe(str(codes))
