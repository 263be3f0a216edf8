"""What synprep prints besides its results: one summary line, no leaked library output; progress bars on demand
(convert's with totals and ETA, one per stage); inspect's statistics on stdout only when asked; rejected.tsv
names the detected language; the HTML report's charts fit their titles."""

from __future__ import annotations

import re
import subprocess
import sys

from synprep.convert.converter import Converter, ConvertOptions
from synprep.convert.pipeline import load_pipeline
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
    lines = quiet.stderr.splitlines()
    # progress (one line per epoch/iteration off a terminal), then the summary; none of UDPipe's own log
    assert quiet.returncode == 0 and lines[-1].startswith("trained udpipe model"), quiet.stderr
    assert all(line.startswith("parser train: ") for line in lines[:-1]), quiet.stderr
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


def _text_pipeline(tmp_path, model):
    """A raw-text pipeline: 40 train + 10 valid pairs; the source parser trained on the fly, the target's given."""
    for split, n in (("train", 40), ("valid", 10)):
        (tmp_path / f"{split}.en").write_text("".join(f"The cat {i} sleeps on the mat today .\n" for i in range(n)))
        (tmp_path / f"{split}.de").write_text("".join(f"Die Katze {i} schläft heute auf der Matte .\n"
                                                      for i in range(n)))
    path = tmp_path / "pipeline.toml"
    path.write_text(f"""[pipeline]
name = "progress"
src_lang = "en"
tgt_lang = "de"
output = "out"
[splits.train]
src = "train.en"
tgt = "train.de"
[splits.valid]
src = "valid.en"
tgt = "valid.de"
[filter]
langid = "none"
[parser.src]
backend = "udpipe"
train_conllu = "{SAMPLE_DATA / 'en.conllu'}"
preset = "tiny"
[parser.tgt]
backend = "udpipe"
model = "{model}"
[bpe]
symbols = 40
""")
    return str(path)


def test_convert_progress_has_totals_and_a_bar_or_line_per_stage(tmp_path, tiny_udpipe, capfd, monkeypatch):
    pipeline = _text_pipeline(tmp_path, tiny_udpipe("de"))
    Converter(load_pipeline(pipeline), ConvertOptions(workers=1, progress=True)).run()
    err = capfd.readouterr().err
    assert "train the src parser: UDPipe, tiny preset, on " in err
    # the input lines are counted first: total, percentage and ETA (the time left in [elapsed<left])
    assert re.search(r"filter\+parse: 100%\|[^|]*\| 50/50 \[\d\d:\d\d<00:00", err), err
    assert "learn joint BPE: 40 merges on the train tokens" in err
    assert re.search(r"features\+shards train: 100%\|[^|]*\| 40/40 \[", err), err
    assert re.search(r"features\+shards valid: 100%\|[^|]*\| 10/10 \[", err), err
    # default, stderr not a terminal (a log file): plain lines at the progress interval (0 here: every update),
    # never a bar or a carriage return, and no stage lines
    monkeypatch.setenv("SYNPREP_PROGRESS_SECONDS", "0")
    Converter(load_pipeline(pipeline, str(tmp_path / "lines")), ConvertOptions(workers=1)).run()
    err = capfd.readouterr().err
    assert "\r" not in err and "|" not in err and "train the src parser" not in err, err
    line = r"convert: {} {}/{} pairs \(100%\), [\d.]+ pairs/s, \d+m\d\ds elapsed, ETA \d+m\d\ds"
    for stage, n in (("filter\\+parse", 50), ("features\\+shards train", 40), ("features\\+shards valid", 10)):
        assert re.search(line.format(stage, n, n), err), err


def test_inspect_prints_statistics_only_when_asked_with_html(tmp_path):
    conllu = str(SAMPLE_DATA / "en.conllu")
    plain = synprep("inspect", conllu)
    assert plain.returncode == 0 and "sentences" in plain.stdout, plain.stderr
    report = tmp_path / "r.html"
    quiet = synprep("inspect", conllu, "--html", str(report))
    assert quiet.returncode == 0 and quiet.stdout == "" and report.stat().st_size > 1000, quiet.stderr
    assert quiet.stderr.strip() == f"wrote {report}"
    asked = synprep("inspect", conllu, "--html", str(report), "--stats")
    assert asked.returncode == 0 and asked.stdout == plain.stdout
    assert synprep("inspect", conllu, "--no-stats").stdout == ""


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
