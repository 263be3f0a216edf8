"""syntrain as a user meets it: run folders (refusal, --overwrite, default names), logging, checkpoints kept and
averaged, early stopping, TensorBoard, translate from stdin / interactive / n-best, one error style."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys

import pytest
import torch

from syntrain.data import read_split
from syntrain.train import TrainConfig, format_eta, load_checkpoint, train

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = dict(d_model=32, n_heads=4, d_ff=64, enc_layers=2, dec_layers=2, dropout=0.1, pascal_heads=[2])


def syntrain(*args: str, cwd: str = REPO, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "syntrain", *args], capture_output=True, text=True, cwd=cwd,
                          **kwargs)


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """The sample pipeline's shards (parsed by a tiny UDPipe model) and a run trained 20 steps on them."""
    root = tmp_path_factory.mktemp("sample")
    subprocess.run([sys.executable, "-m", "synprep.cli", "convert", os.path.join(REPO, "pipelines", "sample.toml"),
                    "--output", str(root / "shards")], check=True, capture_output=True)
    train(TrainConfig(data=str(root / "shards" / "train"), valid=str(root / "shards" / "valid"), out=str(root / "run"),
                      model=SMALL, max_tokens=300, max_steps=20, lr=3e-3, warmup=5, log_interval=10,
                      eval_interval=10, threads=1, keep_last=2))
    return root


def _steps(run) -> list[int]:
    return [r["step"] for r in map(json.loads, open(run / "metrics.jsonl")) if "loss" in r]


def test_existing_run_is_refused_unless_overwrite_or_resume(sample, tmp_path):
    args = ["run", "--data", str(sample / "shards" / "train"), "--max-steps", "3", "--max-tokens", "300",
            "--threads", "1", "--preset", "tiny", "--pascal-heads", "0", "--out", str(tmp_path / "r")]
    first = syntrain(*args)
    assert first.returncode == 0, first.stderr
    assert _steps(tmp_path / "r") == [1, 3]  # the first and the last step, although log_interval is 100
    assert "step 3 |" in first.stderr and "ETA" in first.stderr
    assert "precision fp32, attention kernel none (no Pascal heads)" in first.stderr
    before = (tmp_path / "r" / "last.pt").read_bytes()
    again = syntrain(*args)
    assert again.returncode == 2 and (tmp_path / "r" / "last.pt").read_bytes() == before
    assert again.stderr.startswith(f"syntrain: error: {tmp_path / 'r'}: holds an earlier run")
    assert len(again.stderr.strip().splitlines()) == 1
    over = syntrain(*args, "--overwrite")
    assert over.returncode == 0, over.stderr
    assert _steps(tmp_path / "r") == [1, 3]  # metrics.jsonl started over, not appended to
    assert syntrain(*args, "--overwrite", "--resume").returncode == 2


def test_default_run_folder_is_named_after_the_recipe(sample, tmp_path):
    recipe = tmp_path / "my-recipe.toml"
    recipe.write_text(f'[data]\ntrain = "{sample / "shards" / "train"}"\n[model]\npreset = "tiny"\n'
                      "[train]\nmax_steps = 1\nmax_tokens = 300\nthreads = 1\n")
    result = syntrain("run", str(recipe), cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    runs = os.listdir(tmp_path / "runs")
    assert len(runs) == 1 and runs[0].startswith("my-recipe-"), runs
    assert os.path.isfile(tmp_path / "runs" / runs[0] / "last.pt")


def test_format_eta():
    assert format_eta(10, 0, 20.0, 110) == "0:03:20"  # 100 steps left at 2 s each
    assert format_eta(10, 0, 20.0, 110, max_minutes=1) == "0:00:40"  # the time budget ends first
    assert format_eta(5, 5, 0.0, 10) == "?"


def test_keep_last_and_average(sample, tmp_path):
    run = sample / "run"
    kept = sorted(name for name in os.listdir(run) if name.startswith("checkpoint_"))
    assert kept == ["checkpoint_10.pt", "checkpoint_20.pt"]  # keep_last = 2 of the checkpoints at 10, 20
    out = tmp_path / "avg.pt"
    result = syntrain("average", "-o", str(out), str(run / "checkpoint_10.pt"), str(run / "checkpoint_20.pt"))
    assert result.returncode == 0, result.stderr
    avg, _, _ = load_checkpoint(str(out))
    a, _, _ = load_checkpoint(str(run / "checkpoint_10.pt"))
    b, _, _ = load_checkpoint(str(run / "checkpoint_20.pt"))
    name = "encoder.0.ff.0.weight" if "encoder.0.ff.0.weight" in avg.state_dict() else next(iter(avg.state_dict()))
    torch.testing.assert_close(avg.state_dict()[name], (a.state_dict()[name] + b.state_dict()[name]) / 2)
    translated = syntrain("translate", "--checkpoint", str(out), "-i", str(sample / "shards" / "test"))
    assert translated.returncode == 0 and len(translated.stdout.splitlines()) == 6, translated.stderr
    bad = syntrain("average", "-o", str(out), str(run / "vocab.json"))
    assert bad.returncode == 2 and bad.stderr.startswith("syntrain: error: ")


def test_patience_stops_when_validation_does_not_improve(sample, tmp_path):
    # lr = 1e-30 (0 is refused): the weights do not change, so the validation loss never improves after the first
    train(TrainConfig(data=str(sample / "shards" / "train"), valid=str(sample / "shards" / "valid"),
                      out=str(tmp_path / "r"), model=SMALL, max_tokens=300, max_steps=50, lr=1e-30, log_interval=1,
                      eval_interval=1, eval_sentences=2, threads=1, patience=2, best_metric="loss"))
    assert torch.load(tmp_path / "r" / "last.pt", weights_only=False)["step"] == 3


def test_tensorboard_logging(sample, tmp_path):
    pytest.importorskip("tensorboard")
    train(TrainConfig(data=str(sample / "shards" / "train"), out=str(tmp_path / "r"), model=SMALL, max_tokens=300,
                      max_steps=2, log_interval=1, threads=1, tensorboard=True))
    events = os.listdir(tmp_path / "r" / "tensorboard")
    assert any(name.startswith("events.out.tfevents") for name in events)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(tmp_path / "r" / "tensorboard"))
    accumulator.Reload()
    assert [event.step for event in accumulator.Scalars("loss")] == [1, 2]


def _raw_lines(sample) -> list[str]:
    return read_split(str(sample / "shards" / "test"))[0].column("src_text").to_pylist()


def test_translate_stdin_interactive_and_nbest(sample, tmp_path):
    ckpt = str(sample / "run" / "last.pt")
    lines = _raw_lines(sample)
    raw = tmp_path / "test.en"
    raw.write_text("".join(line + "\n" for line in lines))
    from_file = syntrain("translate", "--checkpoint", ckpt, "-i", str(raw), "--beam", "2")
    from_stdin = syntrain("translate", "--checkpoint", ckpt, "-i", "-", "--beam", "2", input=raw.read_text())
    assert from_file.returncode == 0 and from_stdin.stdout == from_file.stdout
    assert len(from_file.stdout.splitlines()) == len(lines)
    default_stdin = syntrain("translate", "--checkpoint", ckpt, "--beam", "2", "-o", "-", input=raw.read_text())
    assert default_stdin.stdout == from_file.stdout
    empty = syntrain("translate", "--checkpoint", ckpt, input="")
    assert empty.returncode == 0 and empty.stdout == "" and empty.stderr == ""
    # interactive: the translation of a line comes back before the next line is sent
    process = subprocess.Popen([sys.executable, "-m", "syntrain", "translate", "--checkpoint", ckpt, "--beam", "2",
                                "--interactive"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=REPO)
    answers = []
    for line in lines[:2]:
        process.stdin.write(line + "\n")
        process.stdin.flush()
        ready, _, _ = select.select([process.stdout], [], [], 300)
        assert ready, "no answer to an interactive line"
        answers.append(process.stdout.readline().rstrip("\n"))
    process.stdin.close()
    assert process.wait() == 0
    assert answers == from_file.stdout.splitlines()[:2]
    # n-best: N lines per input line, LINE<TAB>SCORE<TAB>TRANSLATION, best first; the best = the 1-best output
    nbest = syntrain("translate", "--checkpoint", ckpt, "-i", str(raw), "--beam", "2", "--nbest", "2")
    assert nbest.returncode == 0, nbest.stderr
    rows = [row.split("\t") for row in nbest.stdout.splitlines()]
    assert [int(r[0]) for r in rows] == [n for n in range(1, len(lines) + 1) for _ in range(2)]
    for first, second in zip(rows[::2], rows[1::2]):
        assert float(first[1]) >= float(second[1])
    assert [r[2] for r in rows[::2]] == from_file.stdout.splitlines()


@pytest.mark.parametrize("prog,args,message", [
    ("synprep", ["parse", "-i", "x"], "synprep: error: Missing option '--backend'"),
    ("synprep", ["align"], "synprep: error: Missing option '--conllu'"),
    ("synprep", ["bpe", "learn", "-i", "x", "-o", "y", "--nonsense"],
     "synprep: error: No such option '--nonsense' (see 'synprep bpe learn --help')"),
    ("syntrain", ["translate", "--checkpoint", "README.md", "--beam", "2", "--nbest", "3"],
     "syntrain: error: --nbest 3 needs --beam >= 3"),
    ("syntrain", ["translate", "--checkpoint", "nowhere.pt"], "syntrain: error: Invalid value for '--checkpoint'"),
    ("syntrain", ["run"], "syntrain: error: no training data"),
    ("syntrain", ["translate", "--checkpoint", "README.md", "-i", "nowhere.txt"], "syntrain: error: nowhere.txt"),
])
def test_one_error_style(prog, args, message):
    result = subprocess.run([sys.executable, "-m", "synprep.cli" if prog == "synprep" else "syntrain", *args],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(message), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Error:" not in result.stderr, result.stderr
    assert result.stderr.count("error:") == 1
