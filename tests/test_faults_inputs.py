"""Fault injection, synprep's inputs and outputs: a dataset folder holding a training run, inputs read twice (named
pipes), write errors, parser training settings checked before any training, and options checked before work.

Each case runs the real command (in this process where it cannot hang, in a subprocess with a time limit where it
could) and expects one `synprep: error:` line (exit 2) or the right result: never a traceback, a hang or a silent
loss.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from .conftest import SAMPLE_DATA, cli_in_process

BIN = Path(sys.executable).parent
SYNPREP = [str(BIN / "synprep")]
EN = SAMPLE_DATA / "en.conllu"
TIMEOUT = 120


def synprep(*argv: object) -> subprocess.CompletedProcess:
    """`synprep ARGV` in this process (spaCy and UDPipe imported once), for the cases that cannot hang."""
    code, err = cli_in_process("synprep", [str(a) for a in argv])
    return subprocess.CompletedProcess(argv, code, "", err)


def call(*argv: object, **kwargs) -> subprocess.CompletedProcess:
    """A command in its own process; a hang fails the test (the time limit raises)."""
    result = subprocess.run([*SYNPREP, *map(str, argv)], capture_output=True, text=True, timeout=TIMEOUT, **kwargs)
    return result


def one_line_error(result: subprocess.CompletedProcess, *names: str) -> str:
    assert result.returncode == 2, f"exit {result.returncode}: {result.stderr[-800:]}"
    assert "Traceback" not in result.stderr, result.stderr[-1500:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("synprep: error: "), last
    for name in names:
        assert name in last, f"{name!r} not in {last!r}"
    return last


@contextlib.contextmanager
def named_pipe(path: Path, data: bytes):
    """A FIFO at `path` that gives `data` to its first reader (a second reader would wait for ever)."""
    os.mkfifo(path)

    def write() -> None:
        with contextlib.suppress(OSError), open(path, "wb") as sink:
            sink.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        yield path
    finally:
        if writer.is_alive():  # nobody read it: open it once so the writer ends
            with contextlib.suppress(OSError):
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
                os.close(fd)
        writer.join(5)


def cyclic_treebank(tmp_path: Path) -> Path:
    """sample_data/en.conllu with a cycle in its second sentence (words 1 and 2 head each other), at line 14."""
    text = EN.read_text(encoding="utf-8").replace("2\tbrother\tbrother\tNOUN\tNN\t_\t3\tnsubj",
                                                   "2\tbrother\tbrother\tNOUN\tNN\t_\t1\tnsubj", 1)
    path = tmp_path / "en_cycle.conllu"
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------ a dataset holding a run


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """A converted synthetic corpus (60 pairs, pre-parsed: no parser)."""
    root = tmp_path_factory.mktemp("faults_inputs")
    subprocess.run([*SYNPREP, "synth", "--pairs", "60", "-o", str(root / "synth")], check=True, capture_output=True)
    subprocess.run([*SYNPREP, "convert", str(root / "synth" / "pipeline.toml"), "--output",
                    str(root / "out")], check=True, capture_output=True)
    return root


@pytest.mark.parametrize("where", ["", "train"])
@pytest.mark.parametrize("flag", ["--overwrite", "--resume"])
def test_convert_never_writes_over_a_training_run_in_its_output(dataset, tmp_path, where, flag):
    """A run trained into the dataset or one of its split folders (`syntrain run --out OUT/train`): convert
    refuses the folder, and the checkpoints stay. Before: --overwrite deleted best.pt and last.pt silently."""
    out = tmp_path / "out"
    import shutil

    shutil.copytree(dataset / "out", out)
    run = out / where
    for name in ("best.pt", "last.pt", "metrics.jsonl"):
        (run / name).write_bytes(b"a checkpoint")
    refused = synprep("convert", dataset / "synth" / "pipeline.toml", "--output", out, flag)
    one_line_error(refused, f"{run.as_posix().rstrip('/')}: holds a training run (best.pt, last.pt, metrics.jsonl)")
    assert all((run / name).read_bytes() == b"a checkpoint" for name in ("best.pt", "last.pt", "metrics.jsonl"))


# ------------------------------------------------------------------------------ inputs read once


def test_parser_eval_reads_a_named_pipe_gold_file_once(tmp_path, tiny_udpipe):
    """--mode both scores gold tokens and raw text from one reading. Before: the second open of the pipe
    waited for ever (with `<(cat x)`: 'no sentences')."""
    model = tiny_udpipe("en")
    expected = call("parser", "eval", "--model", model, "--conllu", EN)
    assert expected.returncode == 0, expected.stderr
    with named_pipe(tmp_path / "gold", EN.read_bytes()) as gold:
        piped = call("parser", "eval", "--model", model, "--conllu", gold)
    assert piped.returncode == 0, piped.stderr
    scores = [line.split("[")[0] for line in piped.stdout.splitlines()]  # without the rate
    assert len(scores) == 2 and scores == [line.split("[")[0] for line in expected.stdout.splitlines()]


def test_parser_train_reads_a_named_pipe_once_and_names_it_in_errors(tmp_path):
    """The treebank is checked, then trained on: a pipe is copied once, and an error in it names the pipe (not
    the copy). Before: the second reading waited for ever."""
    with named_pipe(tmp_path / "treebank", cyclic_treebank(tmp_path).read_bytes()) as treebank:
        refused = call("parser", "train", "--conllu", treebank, "-o", tmp_path / "m.udpipe", "--preset", "tiny")
    one_line_error(refused, f"{treebank}:14 (sentence en-2): cycle through words 1 -> 2")
    assert not (tmp_path / "m.udpipe").exists()


# ------------------------------------------------------------------------------ write errors


def test_parse_write_errors_name_the_file_and_the_cause(tmp_path, tiny_udpipe):
    """Before: `synprep: error: <output>: No space left on device`."""
    args = ["parse", "--backend", "udpipe", "--model", tiny_udpipe("en"), "--input", SAMPLE_DATA / "parallel" /
            "train.en"]
    one_line_error(call(*args, "-o", "/dev/full"), "/dev/full: cannot write: No space left on device")
    with open("/dev/full", "w") as full:
        result = subprocess.run([*SYNPREP, *map(str, args)], stdout=full, stderr=subprocess.PIPE, text=True,
                                timeout=TIMEOUT)
    one_line_error(result, "<stdout>: cannot write: No space left on device")


# ------------------------------------------------------------------------------ parser training settings


def test_both_trainers_refuse_a_treebank_with_a_cycle(tmp_path):
    """Before: spaCy trained on it (UDPipe refused it)."""
    pytest.importorskip("spacy")
    treebank = cyclic_treebank(tmp_path)
    for backend in ("udpipe", "spacy"):
        refused = synprep("parser", "train", "--backend", backend, "--conllu", treebank, "-o", tmp_path / backend,
                          "--preset", "tiny")
        one_line_error(refused, f"{treebank}:14 (sentence en-2): cycle through words 1 -> 2")
    refused = synprep("parser", "train", "--backend", "spacy", "--conllu", EN, "--heldout", treebank, "-o",
                      tmp_path / "spacy", "--preset", "tiny")
    one_line_error(refused, f"{treebank}:14 (sentence en-2): cycle")


@pytest.mark.parametrize(("args", "names"), [
    (["--set", "training.max_steps=abc"], ["--set training.max_steps='abc': Input should be a valid integer"]),
    (["--set", "bogus.key=1"], ["--set bogus.key: spaCy's configuration has no such setting"]),
    (["--set", "training.max_step=3"], ["--set training.max_step: ", "did you mean training.max_steps?"]),
    (["--tagger-options", "models=1"], ["--tagger-options is for --backend udpipe, not spacy"]),
])
def test_spacy_training_settings_are_checked_before_training(tmp_path, args, names):
    """Before: 'spaCy training failed (see its messages above)' with nothing above and a deleted file named,
    'ConfigValidationError: ' with no key, a UDPipe option silently ignored."""
    pytest.importorskip("spacy")
    refused = synprep("parser", "train", "--backend", "spacy", "--conllu", EN, "-o", tmp_path / "m", "--preset",
                      "tiny", *args)
    one_line_error(refused, *names)
    assert not (tmp_path / "m").exists()


def test_spacy_options_are_refused_with_udpipe(tmp_path):
    for args in (["--set", "training.max_steps=3"], ["--lang", "en"], ["--max-minutes", "1"]):
        refused = synprep("parser", "train", "--conllu", EN, "-o", tmp_path / "m.udpipe", "--preset", "tiny", *args)
        one_line_error(refused, f"{args[0]} is for --backend spacy")


# ------------------------------------------------------------------------------ options checked before work


def test_parse_reports_the_workers_that_really_run(tmp_path, tiny_udpipe):
    """Before: 'on 200 worker(s)' while at most 4 per core ran."""
    result = call("parse", "--backend", "udpipe", "--model", tiny_udpipe("en"), "--input",
                  SAMPLE_DATA / "parallel" / "train.en", "-o", tmp_path / "out.conllu", "--workers", "200",
                  "--batch-size", "4")
    assert result.returncode == 0, result.stderr
    limit = 4 * len(os.sched_getaffinity(0))
    assert f"note: --workers 200 lowered to {limit} " in result.stderr
    ran = int(result.stderr.split(" worker(s)")[0].rsplit(" ", 1)[-1])
    assert 2 <= ran <= limit


def _pipeline(tmp_path: Path, split: str, features: str = '["parents"]') -> Path:
    parallel = SAMPLE_DATA / "parallel"
    path = tmp_path / "pipeline.toml"
    path.write_text(f"""[pipeline]
name = "t"
src_lang = "en"
tgt_lang = "de"
output = "{tmp_path / 'out'}"
[splits.train]
{split}
[features]
src = {features}
tgt = ["parents"]
""".replace("SRC", str(parallel / "train.en")).replace("TGT", str(parallel / "train.de"))
                    .replace("GOLD", str(EN)), encoding="utf-8")
    return path


@pytest.mark.parametrize(("split", "features", "names"), [
    ('src = "SRC"\ntgt = "TGT"\nsrc_column = 2', '["parents"]',
     ["[splits.train] src_column choose columns of TSV input, but these files are read as text"]),
    ('src = "SRC"\ntgt = "TGT"\ntgt_column = 0', '["parents"]', ["tgt_column choose columns of TSV input"]),
    ('src = "GOLD"\ntgt = "GOLD"', '["parents", "labels", "parents"]', ["[features] src lists 'parents' twice"]),
])
def test_pipeline_keys_that_cannot_apply_are_refused(tmp_path, split, features, names):
    """Before: column keys on plain text gave 'src_column and tgt_column are the same column' (or were ignored);
    a repeated feature group was merged silently."""
    pipeline = _pipeline(tmp_path, split, features)
    one_line_error(synprep("convert", pipeline), str(pipeline), *names)
    assert not (tmp_path / "out").exists()


def test_filter_refuses_a_language_listed_twice(tmp_path):
    parallel = SAMPLE_DATA / "parallel"
    refused = synprep("filter", "--src", parallel / "train.en", "--tgt", parallel / "train.de", "--src-lang", "en",
                      "--tgt-lang", "de", "-o", tmp_path / "out", "--langid-languages", "en,de,en")
    one_line_error(refused, "langid_languages lists 'en' twice")
    assert not (tmp_path / "out").exists()
