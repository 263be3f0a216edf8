"""Messages go through `logging` ("synprep" / "syntrain" and the module loggers below them): the command lines
print them on stderr as before, -q keeps warnings and errors only, stdout (data) is the same; a program embedding
the packages raises, lowers or routes them like any library's."""

import logging
import subprocess
import sys

import pytest

import syntrain

from .conftest import convert_synth

SMALL = dict(d_model=32, n_heads=4, d_ff=64, enc_layers=2, dec_layers=2)


@pytest.fixture(scope="module")
def train_split(tmp_path_factory):
    return convert_synth(tmp_path_factory.mktemp("logging"), "l", ["parents", "depth"])


def cli(program, *args, cwd):
    return subprocess.run([sys.executable, "-m", program, *args], capture_output=True, text=True, cwd=cwd)


def test_quiet_keeps_warnings_and_the_data(train_split, tmp_path):
    args = ["run", "--data", str(train_split), "--max-steps", "2", "--log-interval", "1", "--preset", "cpu",
            "--threads", "1", "--no-tensorboard"]
    loud = cli("syntrain", *args, "--out", "loud", cwd=tmp_path)
    quiet = cli("syntrain", "-q", *args, "--out", "quiet", cwd=tmp_path)
    assert loud.returncode == quiet.returncode == 0, quiet.stderr
    assert "step 1 |" in loud.stderr and "step 1 |" not in quiet.stderr
    assert quiet.stderr.startswith("warning: warm-up") and len(quiet.stderr.splitlines()) == 1
    assert (tmp_path / "loud" / "train.log").read_text() == loud.stderr  # the run's log: the same lines
    assert (tmp_path / "quiet" / "train.log").read_text() == quiet.stderr
    codes = tmp_path / "c.bpe"
    text = train_split.parent.parent / "corpus" / "train.src"
    learned = cli("synprep", "-q", "bpe", "learn", "-i", str(text), "-o", str(codes), "-s", "20", cwd=tmp_path)
    assert learned.returncode == 0 and learned.stderr == "" and codes.stat().st_size
    plain = cli("synprep", "bpe", "apply", "--codes", str(codes), "-i", str(text), cwd=tmp_path)
    silent = cli("synprep", "-q", "bpe", "apply", "--codes", str(codes), "-i", str(text), cwd=tmp_path)
    assert plain.stdout == silent.stdout and plain.stdout.count("@@")


def test_embedding_program_lowers_and_routes_the_messages(train_split, tmp_path, capfd):
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    logger = logging.getLogger("syntrain")
    keep = Keep()
    saved = logger.level
    logger.addHandler(keep)
    try:
        logger.setLevel(logging.WARNING)
        syntrain.train(data=str(train_split), out=str(tmp_path / "a"), max_steps=2, log_interval=1, threads=1,
                       warmup=1, model=SMALL, tensorboard=False)
        assert "step 1 |" not in capfd.readouterr().err and not any("step" in r.getMessage() for r in records)
        logger.setLevel(logging.INFO)
        syntrain.train(data=str(train_split), out=str(tmp_path / "b"), max_steps=2, log_interval=1, threads=1,
                       warmup=1, model=SMALL, tensorboard=False)
    finally:
        logger.removeHandler(keep)
        logger.setLevel(saved)
    steps = [r for r in records if r.getMessage().startswith("step 1 |")]
    assert steps and steps[0].name == "syntrain.train" and steps[0].levelno == logging.INFO
    assert "step 1 |" in capfd.readouterr().err  # the default handler too: stderr as before


def test_train_log_is_written_by_a_logging_handler(train_split, tmp_path, capfd):
    from syntrain.runfolder.train_log import RunLog

    capfd.readouterr()
    run = syntrain.train(data=str(train_split), out=str(tmp_path / "a"), max_steps=2, log_interval=1, threads=1,
                         warmup=1, model=SMALL, tensorboard=False)
    printed = capfd.readouterr().err
    written = (tmp_path / "a" / "train.log").read_text(encoding="utf-8")
    assert "step 1 |" in written and written == printed  # the lines of stderr, from the loggers
    assert not any(isinstance(h, RunLog) for name in ("synprep", "syntrain") for h in logging.getLogger(name).handlers)
    logger = logging.getLogger("syntrain")
    saved = list(logger.handlers)
    try:
        logger.handlers.clear()  # a program that sends the messages elsewhere: none on stderr, the file keeps them
        syntrain.train(data=str(train_split), out=str(tmp_path / "b"), max_steps=2, log_interval=1, threads=1,
                       warmup=1, model=SMALL, tensorboard=False)
    finally:
        logger.handlers[:] = saved
    kept = (tmp_path / "b" / "train.log").read_text(encoding="utf-8")
    assert "step 1 |" not in capfd.readouterr().err and "step 1 |" in kept and run
