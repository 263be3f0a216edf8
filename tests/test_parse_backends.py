"""The other backends (spacy-udpipe, spaCy, stanza) through their real libraries: one line = one sentence."""

import subprocess
import sys

import pytest

from synprep.conllu import read_conllu, to_tree
from synprep.errors import InputError
from synprep.parse import JOIN_LABEL, ParserSpec
from synprep.parse.runner import parse_file

LONG_LINE = " ".join(["The old farmer sold his cows at the market and walked home slowly ."] * 20)
RAW = ["The dog barked loudly at the postman.", "", "He left. She stayed.", "  ", LONG_LINE, "Where is the car?"]
TOKENIZED = ["The dog barked loudly at the postman .", "", "He left . She stayed .", "My sister lives in Paris ."]


def run(spec, lines, tmp_path, workers=1):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / f"out{workers}.conllu"
    summary = parse_file(spec, str(source), str(out), workers=workers, batch_size=2)
    sentences = list(read_conllu(str(out)))
    assert summary.lines == len(sentences) == len(lines)
    for number, (sentence, line) in enumerate(zip(sentences, lines, strict=True), 1):
        assert sentence.sent_id == str(number) and sentence.text == line.strip()
        assert bool(sentence.words) == bool(line.strip())
        tree = to_tree(sentence, str(out))
        assert sum(h == 0 for h in tree.heads) == (1 if line.strip() else 0)
        if spec.pretokenized:
            assert [w[1] for w in sentence.words] == line.split()
    return sentences, summary, out.read_bytes()


@pytest.mark.parametrize("pretokenized", [False, True])
def test_spacy_udpipe(tiny_udpipe, tmp_path, pretokenized):
    pytest.importorskip("spacy_udpipe")
    spec = ParserSpec("spacy-udpipe", tiny_udpipe("en"), lang="en", pretokenized=pretokenized)
    run(spec, TOKENIZED if pretokenized else RAW, tmp_path)


def test_spacy_udpipe_broken_model(tmp_path):
    pytest.importorskip("spacy_udpipe")
    with pytest.raises(InputError, match="LINDAT"):
        ParserSpec("spacy-udpipe", str(tmp_path / "none.udpipe"), lang="en").load()


def test_spacy_joins_sentences_of_a_line(tiny_spacy, tmp_path):
    sentences, summary, single = run(ParserSpec("spacy", tiny_spacy), RAW, tmp_path)
    assert summary.joined >= 1  # the pipeline's sentencizer splits "He left. She stayed."
    joined = sentences[2]
    assert [w[1] for w in joined.words] == ["He", "left", ".", "She", "stayed", "."]
    assert [w[7] for w in joined.words].count(JOIN_LABEL) == 1
    first_root = next(w[0] for w in joined.words[:3] if w[6] == "0")
    assert next(w[6] for w in joined.words[3:] if w[7] == JOIN_LABEL) == first_root  # second root -> first root
    _, _, double = run(ParserSpec("spacy", tiny_spacy), RAW, tmp_path, workers=2)
    assert single == double


def test_spacy_pretokenized(tiny_spacy, tmp_path):
    run(ParserSpec("spacy", tiny_spacy, pretokenized=True), TOKENIZED, tmp_path)


def test_spacy_missing_pipeline():
    pytest.importorskip("spacy")
    with pytest.raises(InputError, match="spacy download"):
        ParserSpec("spacy", "xx_no_such_pipeline").load()


@pytest.mark.slow
def test_stanza_tiny_models(tiny_stanza, tmp_path):
    spec = ParserSpec("stanza", model_dir=tiny_stanza, lang="en", pretokenized=True)
    _, _, single = run(spec, TOKENIZED, tmp_path)
    _, _, double = run(spec, TOKENIZED, tmp_path, workers=2)
    assert single == double


@pytest.mark.slow
def test_stanza_cli_errors(tiny_stanza, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("Hello world.\n", encoding="utf-8")
    for args in (["--model-dir", tiny_stanza], ["--model-dir", str(tmp_path / "nowhere")]):  # no tokenizer / no folder
        done = subprocess.run([sys.executable, "-m", "synprep.cli", "parse", "--backend", "stanza", "--lang", "en",
                               "-i", str(source), "--workers", "1", *args], capture_output=True, text=True)
        assert done.returncode == 2
        assert len(done.stderr.strip().splitlines()) == 1 and "stanza.download" in done.stderr


def test_spacy_numpy_blas_makes_the_trees_blis_makes(tiny_spacy):
    """The backend's matrix products go through numpy's BLAS for speed (its layers' ops; the process's current
    ops are left as they were): the trees are BLIS's."""
    import spacy
    from thinc.api import get_current_ops

    lines = [line for line in RAW if line.strip()] + [" ".join(TOKENIZED)]
    before = get_current_ops()
    parser = ParserSpec("spacy", tiny_spacy).load()
    assert get_current_ops() is before
    layers = [node.ops.use_blis for _, proc in parser._nlp.pipeline if hasattr(getattr(proc, "model", None), "walk")
              for node in proc.model.walk()]
    assert layers.count(False) > layers.count(True)  # spaCy makes a few of the parser's ops itself
    ours = [line.sentence.words for line in parser.parse(lines)]
    parser._nlp = spacy.load(tiny_spacy, exclude=["ner"])  # under the current ops (BLIS by default)
    blis = [line.sentence.words for line in parser.parse(lines)]
    assert ours == blis and len(ours) == len(lines)
