"""What synprep prints besides its results: one summary line, no leaked library output; progress bars on demand;
rejected.tsv names the detected language; the HTML report's charts fit their titles."""

from __future__ import annotations

import re
import subprocess
import sys

from synprep.filter import FilterSettings, filter_files
from synprep.parse import ParserSpec
from synprep.parse.runner import parse_file
from synprep.report import bar_chart, hbar_chart

from .conftest import REPO, SAMPLE_DATA


def synprep(*args: str, cwd: str = str(REPO)) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "synprep.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_bpe_learn_prints_one_line_unless_verbose(tmp_path):
    text = tmp_path / "train.txt"
    text.write_text("the cat sat\nthe dog sat\n")  # runs out of pairs: subword-nmt says so on stderr
    quiet = synprep("bpe", "learn", "-i", str(text), "-o", str(tmp_path / "codes"), "-s", "300")
    assert quiet.returncode == 0 and quiet.stderr.splitlines() == [f"wrote {tmp_path / 'codes'} (300 merges max) "
                                                                   "and no vocabularies"]
    loud = synprep("bpe", "learn", "-i", str(text), "-o", str(tmp_path / "codes"), "-s", "300", "-v")
    assert "no pair has frequency >= 2" in loud.stderr


def test_bpe_learn_without_pairs_is_a_one_line_error(tmp_path):
    text = tmp_path / "letters.txt"
    text.write_text("a b c\n")
    result = synprep("bpe", "learn", "-i", str(text), "-o", str(tmp_path / "codes"))
    assert result.returncode == 2 and result.stderr.startswith(f"synprep: error: {text}: no symbol pairs")
    assert "Traceback" not in result.stderr


def test_parser_train_prints_one_line_unless_verbose(tmp_path):
    args = ["parser", "train", "--conllu", str(SAMPLE_DATA / "en.conllu"), "-o", str(tmp_path / "m.udpipe"),
            "--preset", "tiny"]
    quiet = synprep(*args)
    assert quiet.returncode == 0 and len(quiet.stderr.splitlines()) == 1, quiet.stderr
    assert quiet.stderr.startswith("trained udpipe model")
    loud = synprep(*args, "-v")
    assert len(loud.stderr.splitlines()) > 5, loud.stderr


def test_progress_bars_on_request(tmp_path, tiny_udpipe, capfd):
    src, tgt = tmp_path / "s.en", tmp_path / "s.de"
    src.write_text("The cat sleeps on the mat today .\n" * 30)
    tgt.write_text("Die Katze schläft heute auf der Matte .\n" * 30)
    settings = FilterSettings("en", "de", langid=None)
    filter_files(str(src), str(tgt), str(tmp_path / "f"), settings, workers=1, progress=True)
    assert re.search(r"filter: 100%.*30/30", capfd.readouterr().err)
    filter_files(str(src), str(tgt), str(tmp_path / "g"), settings, workers=1)  # default: not a terminal here
    assert capfd.readouterr().err == ""
    parse_file(ParserSpec("udpipe", tiny_udpipe("en")), str(src), str(tmp_path / "p.conllu"), 1, progress=True)
    assert re.search(r"parse: 30 lines", capfd.readouterr().err)


def test_rejected_tsv_names_the_detected_language(tmp_path):
    src, tgt = tmp_path / "s.en", tmp_path / "s.de"
    src.write_text("The weather is very nice today and we go for a walk in the park.\n"
                   "Le chat dort sur le canapé pendant que les enfants jouent dans le jardin.\n")
    tgt.write_text("Das Wetter ist heute sehr schön und wir gehen im Park spazieren.\n"
                   "Die Katze schläft auf dem Sofa, während die Kinder im Garten spielen.\n")
    filter_files(str(src), str(tgt), str(tmp_path / "out"), FilterSettings("en", "de", langid="py3langid"), workers=1)
    rows = [line.split("\t") for line in (tmp_path / "out" / "rejected.tsv").read_text().splitlines()]
    assert len(rows) == 1 and rows[0][:2] == ["1", "src_lang"]
    assert re.fullmatch(r"detected fr (0\.\d\d|1\.00)", rows[0][2]), rows[0]
    assert rows[0][3].startswith("Le chat")


def _width(svg: str) -> float:
    return float(re.search(r'width="([\d.]+)"', svg).group(1))


def test_chart_titles_fit_on_small_datasets():
    title = "sentence length (tokens), source side"
    assert _width(bar_chart([("0-4", 3)], title)) >= 8 * len(title)
    assert _width(hbar_chart([("root", 1)], "dependency labels, target side, all rows")) >= 8 * 40
