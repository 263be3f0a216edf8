"""synprep parse / parser train with the UDPipe backend: real models trained in the session, real text."""

import gzip
import lzma
import re
import subprocess
import sys
from pathlib import Path

import pytest

from synprep.conllu import ConlluSentence, parse_conllu_text, read_conllu, to_tree
from synprep.parse import ParserSpec
from synprep.parse.base import JOIN_LABEL, join_sentences
from synprep.parse.runner import parse_file

REPO = Path(__file__).resolve().parents[1]
SAMPLE_DATA = REPO / "sample_data"
SHARED = REPO.parent / "shared"

LONG_LINE = " ".join(["The old farmer sold his cows at the market and walked home slowly ."] * 30)
LINES = ["The dog barked loudly at the postman.", "", "He left. She stayed.", "   ", LONG_LINE,
         "Where did you park the car?", "", "She smiled and waved at the crowd."]


def synprep(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "synprep.cli", *args], input=stdin, capture_output=True)


def check_one_per_line(path, lines):
    sentences = list(read_conllu(str(path)))
    assert len(sentences) == len(lines)
    for number, (sentence, line) in enumerate(zip(sentences, lines, strict=True), 1):
        assert sentence.sent_id == str(number)
        assert sentence.text == line.strip()
        assert bool(sentence.words) == bool(line.strip())
        tree = to_tree(sentence, str(path))  # validates: one root, no cycle, heads in range
        assert sum(h == 0 for h in tree.heads) == (1 if line.strip() else 0)
    return sentences


def test_train_cli_and_parse_raw(tmp_path):
    model = tmp_path / "en.udpipe"
    done = synprep("parser", "train", "--backend", "udpipe", "--conllu", str(SAMPLE_DATA / "en.conllu"),
                   "-o", str(model), "--preset", "tiny")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    text = tmp_path / "in.txt"
    text.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    done = synprep("parse", "--backend", "udpipe", "--model", str(model), "-i", str(text), "-o",
                   str(tmp_path / "out.conllu"), "--workers", "1")
    assert done.returncode == 0, done.stderr.decode()
    sentences = check_one_per_line(tmp_path / "out.conllu", LINES)
    assert len(sentences[4].words) >= 300  # the long line stays one sentence
    assert b"3 empty" in done.stderr


def test_pretokenized_keeps_tokens(tiny_udpipe, tmp_path):
    lines = ["The  dog barked at the post-man .", "", "He left . She stayed .", "U.S.A. ( 1850 ) !"]
    source = tmp_path / "tok.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "tok.conllu"
    parse_file(ParserSpec("udpipe", tiny_udpipe("en"), pretokenized=True), str(source), str(out), workers=1)
    sentences = check_one_per_line(out, lines)
    for sentence, line in zip(sentences, lines, strict=True):
        assert [w[1] for w in sentence.words] == line.split()


@pytest.mark.parametrize("pretokenized", [False, True])
def test_two_workers_byte_identical(tiny_udpipe, tmp_path, pretokenized):
    lines = [line.rstrip("\n") for line in open(SAMPLE_DATA / "en.conllu",
                                                encoding="utf-8") if line.startswith("# text = ")]
    lines = [line[len("# text = "):] for line in lines] * 3 + LINES
    source = tmp_path / "in.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    flag = ["--pretokenized"] if pretokenized else []
    outputs = []
    for workers in ("1", "2"):
        out = tmp_path / f"out{workers}.conllu"
        done = synprep("parse", "--backend", "udpipe", "--model", tiny_udpipe("en"), "-i", str(source), "-o",
                       str(out), "--workers", workers, "--batch-size", "5", *flag)
        assert done.returncode == 0, done.stderr.decode()
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    check_one_per_line(tmp_path / "out2.conllu", lines)


def test_compressed_input_and_stdio(tiny_udpipe, tmp_path):
    data = ("\n".join(LINES[:4]) + "\n").encode()
    (tmp_path / "in.gz").write_bytes(gzip.compress(data))
    (tmp_path / "in.xz").write_bytes(lzma.compress(data))
    results = []
    for name in ("in.gz", "in.xz"):
        done = synprep("parse", "--backend", "udpipe", "--model", tiny_udpipe("en"), "-i", str(tmp_path / name),
                       "-o", "-", "--workers", "1")
        assert done.returncode == 0, done.stderr.decode()
        results.append(done.stdout)
    done = synprep("parse", "--backend", "udpipe", "--model", tiny_udpipe("en"), "-i", "-", "--workers", "2",
                   stdin=data)
    assert done.returncode == 0, done.stderr.decode()
    assert results[0] == results[1] == done.stdout
    assert len(parse_conllu_text(done.stdout.decode())) == 4
    # a real rate from stdin: the workers' parsing time, not the model loading (4 lines took seconds of wall time)
    rate = re.search(r"in ([\d.]+)s \(([\d.e+]+) sentences/s per worker while parsing\)", done.stderr.decode())
    assert rate and float(rate.group(2)) > 4 / float(rate.group(1)), done.stderr.decode()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_non_utf8_input_names_the_line(tiny_udpipe, tmp_path, workers):
    source = tmp_path / "bad.txt"
    source.write_bytes(b"A good line.\n\nAnother good line.\nBad \xff\xfe byte.\nMore.\n")
    done = synprep("parse", "--backend", "udpipe", "--model", tiny_udpipe("en"), "-i", str(source), "-o",
                   str(tmp_path / "out.conllu"), "--workers", workers)
    assert done.returncode == 2
    err = done.stderr.decode().strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"{source}:4" in err and "UTF-8" in err


def test_missing_and_broken_model(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("Hello world.\n", encoding="utf-8")
    broken = tmp_path / "broken.udpipe"
    broken.write_bytes(b"not a model")
    for model in (tmp_path / "missing.udpipe", broken):
        for workers in ("1", "2"):
            done = synprep("parse", "--backend", "udpipe", "--model", str(model), "-i", str(source), "--workers",
                           workers)
            assert done.returncode == 2
            err = done.stderr.decode().strip()
            assert len(err.splitlines()) == 1 and str(model) in err and "LINDAT" in err


def test_join_sentences_attaches_later_roots():
    def piece(forms, heads):
        return ConlluSentence([[str(i), f, "_", "_", "_", "_", str(h), "root" if h == 0 else "dep", "_", "_"]
                               for i, (f, h) in enumerate(zip(forms, heads, strict=True), 1)])

    joined = join_sentences([piece(["He", "left", "."], [2, 0, 2]), piece(["She", "stayed", "."], [2, 0, 2]),
                             piece(["Bye"], [0])])
    assert [w[6] for w in joined.words] == ["2", "0", "2", "5", "2", "5", "2"]
    assert [w[7] for w in joined.words if w[7] == JOIN_LABEL] == [JOIN_LABEL, JOIN_LABEL]
    assert [w[0] for w in joined.words] == [str(i) for i in range(1, 8)]


def test_german_multiword_tokens(tiny_udpipe, tmp_path):
    lines = ["Wir gehen morgen zum Bahnhof.", "Das Buch liegt im Regal."]
    source = tmp_path / "de.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    model = SHARED / "models" / "de_gsd.udpipe"
    out = tmp_path / "de.conllu"
    parse_file(ParserSpec("udpipe", str(model) if model.exists() else tiny_udpipe("de")), str(source), str(out), 1)
    sentences = check_one_per_line(out, lines)
    if model.exists():  # the tiny model may not learn to split contractions
        assert "zum" in to_tree(sentences[0]).tokens and sentences[0].multiword


EWT_DEV = SHARED / "data" / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu"
EWT_MODEL = SHARED / "models" / "en_ewt.udpipe"


@pytest.mark.skipif(not (EWT_DEV.exists() and EWT_MODEL.exists()), reason="../shared EWT model/data not present")
def test_ewt_dev_attachment_scores(tmp_path):
    gold = [s for s in read_conllu(str(EWT_DEV)) if all(" " not in w[1] for w in s.words)][:600]
    source = tmp_path / "dev.tok"
    source.write_text("".join(" ".join(w[1] for w in s.words) + "\n" for s in gold), encoding="utf-8")
    out = tmp_path / "dev.conllu"
    summary = parse_file(ParserSpec("udpipe", str(EWT_MODEL), pretokenized=True), str(source), str(out), workers=2)
    assert summary.lines == len(gold)
    total = uas = las = 0
    for g, p in zip(gold, read_conllu(str(out)), strict=True):
        assert [w[1] for w in g.words] == [w[1] for w in p.words]
        for gw, pw in zip(g.words, p.words, strict=True):
            total += 1
            uas += gw[6] == pw[6]
            las += gw[6] == pw[6] and gw[7] == pw[7]
    print(f"\nEWT dev ({len(gold)} sentences, {total} words, gold tokens): "
          f"UAS {100 * uas / total:.1f} LAS {100 * las / total:.1f}")
    assert uas / total > 0.75 and las / total > 0.70
