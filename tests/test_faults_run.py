"""Fault injection, run folders and live data: two writers on one run folder, resumes from damaged or changed
runs, budgets over the whole run, shards changed or replaced by odd files (named pipes, /dev/zero) under a
reader or a running trainer, splits of 0 pairs, damaged test shards and checkpoints, averaging across runs,
run folders inside datasets, a lost best.pt, NaN weights, output paths that collide or cannot be written, raw
lines too long to translate, atomic BPE codes, convert inputs changed before --resume, compare's cache.

Each test runs the real commands on a tiny synthetic dataset (synprep synth: 300 pairs) and a model of a few
thousand parameters, and expects a one-line `synprep: error:` / `syntrain: error:` (exit 2) or the right result:
never a traceback, a signal, a hang or a silent mix.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
SYNPREP = [str(BIN / "synprep")]
SYNTRAIN = [sys.executable, "-m", "syntrain"]
TIMEOUT = 120
SMALL = ["--preset", "tiny", "--set", "model.d_model=32", "--set", "model.d_ff=64", "--set", "model.enc_layers=1",
         "--set", "model.dec_layers=1", "--set", "model.n_heads=2", "--threads", "1", "--max-tokens", "400",
         "--warmup", "5", "--eval-sentences", "4", "--test-beam", "1"]


def call(*argv: object, timeout: int = TIMEOUT, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """A command's result; a hang is a failure of the test (the time limit raises)."""
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, cwd=cwd)
    return result


def syntrain(*argv: object) -> subprocess.CompletedProcess:
    """`syntrain ARGV` in this process (torch imported once), for the cases that cannot hang; as a result."""
    import torch

    from tests.test_faults_config import run_in_process

    threads = torch.get_num_threads()  # a run sets it (--threads): the other tests keep theirs
    try:
        code, err = run_in_process([str(a) for a in argv])
    finally:
        torch.set_num_threads(threads)
    return subprocess.CompletedProcess(argv, code, "", err)


def one_line_error(result: subprocess.CompletedProcess, *names: str) -> str:
    """The one error line of a refused command (exit 2, no traceback), which must contain every one of `names`."""
    assert result.returncode == 2, f"exit {result.returncode}: {result.stderr[-800:]}"
    assert "Traceback" not in result.stderr, result.stderr[-1500:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.split(": error: ")[0] in ("synprep", "syntrain"), last
    for name in names:
        assert name in last, f"{name!r} not in {last!r}"
    return last


def steps(run: Path) -> list[int]:
    """The steps of the training-loss records of a run's metrics.jsonl, in file order."""
    with open(run / "metrics.jsonl", encoding="utf-8") as handle:
        return [record["step"] for record in map(json.loads, handle) if "loss" in record]


def train(data: dict, out: Path, *extra: object) -> subprocess.CompletedProcess:
    return call(*SYNTRAIN, "run", "--data", data["shards"] / "train", "--valid", data["shards"] / "valid", "--out",
                out, *SMALL, *extra)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict:
    """Two synthetic corpora (seeds 1 and 2) converted, and a finished 4-step run on the first (checkpoints at
    steps 2 and 4 kept, test scored)."""
    root = tmp_path_factory.mktemp("run_faults")
    found = {}
    for seed in (1, 2):
        synth = root / f"synth{seed}"
        subprocess.run([*SYNPREP, "synth", "--pairs", "300", "--seed", str(seed), "-o", str(synth)], check=True,
                       capture_output=True)
        subprocess.run([*SYNPREP, "convert", str(synth / "pipeline.toml"), "--output",
                        str(root / f"shards{seed}")], check=True, capture_output=True)
        found[f"synth{seed}"] = synth
    data = {"root": root, "synth": found["synth1"], "shards": root / "shards1", "other": root / "shards2"}
    run = train(data, root / "run", "--max-steps", "4", "--eval-interval", "2", "--keep-last", "2", "--log-interval",
                "1", "--test", data["shards"] / "test")
    assert run.returncode == 0, run.stderr
    data["run"] = root / "run"
    return data


def copy_run(data: dict, tmp: Path) -> Path:
    run = tmp / "run"
    shutil.copytree(data["run"], run)
    return run


# ------------------------------------------------------------------------------ one writer per run folder


def test_a_second_run_on_a_training_run_folder_is_refused(data, tmp_path):
    """Two `syntrain run` on one --out at once (--overwrite, --resume, fresh): the second is refused in one line
    naming the holder, while the first trains on."""
    out = tmp_path / "busy"
    log = tmp_path / "first.log"  # a file, not a pipe: a full pipe nobody reads would block the run's logging
    with open(log, "w") as sink:
        first = subprocess.Popen([*SYNTRAIN, "run", "--data", str(data["shards"] / "train"), "--out", str(out),
                                  *SMALL, "--max-steps", "100000", "--max-minutes", "3", "--log-interval", "1"],
                                 stderr=sink, text=True)
    try:
        deadline = time.time() + 90
        while not (out / "metrics.jsonl").exists() and time.time() < deadline and first.poll() is None:
            time.sleep(0.2)
        assert first.poll() is None, log.read_text()
        for extra in ([], ["--overwrite"], ["--resume"]):
            second = syntrain("run", "--data", data["shards"] / "train", "--out", out, *SMALL, "--max-steps", "1",
                              *extra)
            one_line_error(second, "another syntrain run is writing this run folder (pid", str(out))
        assert first.poll() is None  # the first was not disturbed
    finally:
        first.send_signal(signal.SIGINT)
        first.wait(timeout=60)


# ------------------------------------------------------------------------------ resume


def test_resume_without_last_pt_continues_from_the_newest_complete_checkpoint(data, tmp_path):
    import torch

    run = copy_run(data, tmp_path)
    (run / "last.pt").unlink()
    (run / "checkpoint_4.pt").write_bytes(b"PK\x03\x04 cut short")  # damaged: the step-2 one is the newest whole
    trained = torch.load(run / "checkpoint_2.pt", weights_only=False)["elapsed_s"]
    resumed = syntrain("run", "--resume", "--out", run, "--max-steps", "5")
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming" in resumed.stderr and "at step 2 (from checkpoint_2.pt" in resumed.stderr
    # the trained time of the checkpoint (run_state.TrainedClock), said as it is
    assert f"at step 2 ({trained / 60:.1f} min trained (what max_minutes counts; validation" in resumed.stderr
    assert steps(run) == [1, 2, 3, 4, 5]  # the steps after the checkpoint are redone, never twice


def test_resume_with_no_complete_checkpoint_is_refused_and_changes_nothing(data, tmp_path):
    run = copy_run(data, tmp_path)
    for checkpoint in run.glob("*.pt"):
        checkpoint.unlink()
    metrics = (run / "metrics.jsonl").read_bytes()
    refused = syntrain("run", "--resume", "--out", run, "--max-steps", "6")
    one_line_error(refused, "last.pt: missing", "--overwrite")
    assert (run / "metrics.jsonl").read_bytes() == metrics and not list(run.glob("*.pt"))


@pytest.mark.parametrize("change, named", [
    (["--lr", "0.01"], "lr 0.0007 -> 0.01"),
    (["--set", "model.d_model=64"], "model.d_model 32 -> 64"),
    (["--preset", "base"], "preset tiny -> base"),
    (["--seed", "5"], "seed 1 -> 5"),
    (["--data", "OTHER"], "the training data"),
], ids=["lr", "model shape", "preset", "seed", "reconverted data"])
def test_resume_refuses_a_change_of_what_the_run_is(data, tmp_path, change, named):
    run = copy_run(data, tmp_path)
    change = [str(data["other"] / "train") if item == "OTHER" else item for item in change]
    before = {path.name: path.read_bytes() for path in run.iterdir() if path.is_file() and path.name != ".lock"}
    refused = syntrain("run", "--resume", "--out", run, "--max-steps", "6", *change)
    one_line_error(refused, f"--resume {run}: {named}", "--out NEW")
    assert {path.name: path.read_bytes() for path in run.iterdir() if path.is_file() and path.name != ".lock"} == before


def test_resume_of_a_finished_run_says_so_and_leaves_it(data, tmp_path):
    run = copy_run(data, tmp_path)
    metrics = (run / "metrics.jsonl").read_bytes()
    again = syntrain("run", "--resume", "--out", run)
    assert again.returncode == 0, again.stderr
    assert f"{run} is complete (step 4 of max_steps 4)" in again.stderr
    assert (run / "metrics.jsonl").read_bytes() == metrics  # no second test score


def test_the_time_budget_counts_over_the_whole_run(data, tmp_path):
    """A run stopped by --max-minutes and resumed with the same budget has nothing left to do: the minutes of
    every session count."""
    import torch

    run = copy_run(data, tmp_path)
    ckpt = torch.load(run / "last.pt", weights_only=False)
    assert ckpt["elapsed_s"] > 0  # each checkpoint keeps the training time so far
    ckpt["elapsed_s"] = 90.0
    torch.save(ckpt, run / "last.pt")
    again = syntrain("run", "--resume", "--out", run, "--max-steps", "1000", "--max-minutes", "1")
    assert again.returncode == 0, again.stderr
    assert "is complete (1.5 of max_minutes 1 trained, validation not counted)" in again.stderr
    assert steps(run) == [1, 2, 3, 4]


def test_trained_time_is_one_figure_everywhere_without_validation(data, tmp_path):
    """The trained time (validation and checkpoint writing not counted) is the same figure in the checkpoint
    (`elapsed_s`), metrics.jsonl (`elapsed_s` of the last validation record), train.log and --resume's message;
    validation's own seconds are kept apart (`valid_s`)."""
    import torch

    run = copy_run(data, tmp_path)
    ckpt = torch.load(run / "last.pt", weights_only=False)
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    valid = [record for record in records if "valid_loss" in record]
    assert [record["step"] for record in valid] == [2, 4] and all(record["valid_s"] > 0 for record in valid)
    assert ckpt["elapsed_s"] == pytest.approx(valid[-1]["elapsed_s"], abs=0.06)  # saved after that validation
    assert ckpt["valid_s"] >= sum(record["valid_s"] for record in valid) - 0.1
    last_step = [record for record in records if "loss" in record][-1]
    assert last_step["elapsed_s"] <= valid[-1]["elapsed_s"] + 0.06  # the validation after it did not count
    log = (run / "train.log").read_text(encoding="utf-8")
    trained = f"{ckpt['elapsed_s'] / 60:.1f} min trained (what max_minutes counts; validation and checkpoints: "
    assert f"trained to step 4: {trained}" in log
    # --resume says the checkpoint's figure: test_resume_without_last_pt_continues_from_the_newest_complete_...


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_in_the_final_test_scoring_names_the_eval_command(data, tmp_path, signum):
    """Ctrl-C, SIGTERM or SIGHUP while best.pt decodes the test split: exit 128 + the signal, one line saying
    best.pt is intact and the exact `syntrain eval` command that scores it (which then runs), in train.log too; no
    traceback (SIGTERM and SIGHUP were a bare `stopped by SIGTERM`)."""
    out, log = tmp_path / "run", tmp_path / "stderr.log"
    test = data["shards"] / "train"  # the largest split, beam 8: decoding lasts long enough to be interrupted
    with open(log, "w") as sink:
        process = subprocess.Popen([*SYNTRAIN, "run", "--data", str(data["shards"] / "train"), "--valid",
                                    str(data["shards"] / "valid"), "--out", str(out), *SMALL, "--max-steps", "2",
                                    "--eval-interval", "2", "--test", str(test), "--test-beam", "8"],
                                   stderr=sink, text=True)
    try:
        deadline = time.time() + TIMEOUT
        while "trained to step 2" not in log.read_text() and time.time() < deadline and process.poll() is None:
            time.sleep(0.1)
        time.sleep(0.5)
        assert process.poll() is None, log.read_text()[-2000:]  # still decoding the test split
        process.send_signal(signum)
        assert process.wait(timeout=60) == 128 + signum
    finally:
        if process.poll() is None:
            process.kill()
    err = log.read_text()
    assert "Traceback" not in err, err[-2000:]
    last = err.strip().splitlines()[-1]
    command = (f"syntrain eval --checkpoint {out / 'best.pt'} --data {test} --beam 8 --length-penalty 0.6")
    how = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
    assert last == (f"syntrain: {how} while scoring the test split; training is done and {out / 'best.pt'} "
                    f"is intact: score it with {command}"), last
    assert (out / "train.log").read_text(encoding="utf-8").strip().splitlines()[-1] == last
    from syntrain.cli import cli  # the command as the CLI reads it: every option known, every path there

    args = command.split()[2:]
    context = cli.commands["eval"].make_context("eval", args)
    assert context.params["checkpoint"] == str(out / "best.pt") and context.params["beam"] == 8


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_while_training_saves_last_pt_and_resume_goes_on_as_if_uninterrupted(data, tmp_path, signum):
    """SIGTERM (a scheduler preempting the job), Ctrl-C or SIGHUP while the run trains: it stops after the update
    it is in, saves last.pt at that step (not validated, no checkpoint_<step>.pt) and ends in one line naming the
    resume command (exit 128 + the signal); `--resume` then gives the losses an uninterrupted run gives."""
    import torch

    out, log = tmp_path / "run", tmp_path / "stderr.log"
    argv = ["run", "--data", data["shards"] / "train", "--valid", data["shards"] / "valid", *SMALL,
            "--log-interval", "1", "--eval-interval", "100000", "--keep-last", "3", "--seed", "5"]
    with open(log, "w") as sink:
        process = subprocess.Popen([*SYNTRAIN, *map(str, argv), "--out", str(out), "--max-steps", "100000"],
                                   stderr=sink, text=True)
    try:
        deadline = time.time() + TIMEOUT
        while time.time() < deadline and process.poll() is None:  # until step 3 is logged (lines may be partial)
            lines = (out / "metrics.jsonl").read_text().splitlines() if (out / "metrics.jsonl").exists() else []
            if sum('"loss"' in line for line in lines[:-1]) >= 3:
                break
            time.sleep(0.1)
        assert process.poll() is None, log.read_text()[-2000:]
        process.send_signal(signum)
        assert process.wait(timeout=60) == 128 + signum, log.read_text()[-2000:]
    finally:
        if process.poll() is None:
            process.kill()
    err = log.read_text()
    assert "Traceback" not in err, err[-2000:]
    step = torch.load(out / "last.pt", map_location="cpu", weights_only=False)["step"]
    name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    assert err.strip().splitlines()[-1] == (f"syntrain: stopped by {name} at step {step}: {out / 'last.pt'} holds it "
                                            f"(not validated); syntrain run --resume --out {out} continues the run")
    assert steps(out)[-1] == step and not list(out.glob("checkpoint_*.pt")) and not (out / "best.pt").exists()
    resumed = syntrain("run", "--resume", "--out", out, "--max-steps", step + 3)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    whole = syntrain(*argv, "--out", tmp_path / "whole", "--max-steps", step + 3)
    assert whole.returncode == 0, whole.stderr[-2000:]
    losses = [{r["step"]: r["loss"] for r in map(json.loads, (folder / "metrics.jsonl").read_text().splitlines())
               if "loss" in r} for folder in (out, tmp_path / "whole")]
    assert sorted(losses[0]) == list(range(1, step + 4))
    assert [losses[0][s] for s in range(step + 1, step + 4)] == [losses[1][s] for s in range(step + 1, step + 4)]


def _terminated_when(out: Path, argv: list, moment: str | float, log: Path,
                     signum: int = signal.SIGTERM) -> subprocess.CompletedProcess:
    """`syntrain ARGV` sent `signum` at `moment`: seconds after it started, when the run folder appears
    ("folder"), when FILE appears in it."""
    with open(log, "w") as sink:
        process = subprocess.Popen([*SYNTRAIN, *map(str, argv)], stderr=sink, text=True)
    try:
        if isinstance(moment, float):  # (before ~1 s the interpreter is starting: it ends by the signal, no write)
            time.sleep(moment)
        else:
            deadline, target = time.time() + TIMEOUT, out if moment == "folder" else out / moment
            while not target.exists() and time.time() < deadline and process.poll() is None:
                time.sleep(0.005)
        assert process.poll() is None, log.read_text()[-2000:]
        process.send_signal(signum)
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    return subprocess.CompletedProcess(argv, code, "", log.read_text())


MOMENTS = [1.0, "folder", "config.toml", "vocab.json", "train.log", "metrics.jsonl", "resume 1.5", "resume 2.5",
           "resume 3.5"]


@pytest.mark.parametrize(("signum", "moment"), [(signal.SIGTERM, moment) for moment in MOMENTS]
                         + [(signal.SIGINT, moment) for moment in ("folder", "vocab.json", "metrics.jsonl",
                                                                   "resume 2.5")])
def test_a_signal_at_any_moment_of_a_run_leaves_a_folder_resume_continues_or_none(data, tmp_path, signum, moment):
    """SIGTERM or Ctrl-C while `syntrain run` starts (checks, the run folder being set up, the data loading; a
    new run or a resumed one) ended the process with no line and left a folder without a checkpoint that
    `--resume` refused: one line (exit 128 + the signal), and the folder is gone (a new run) or `--resume`
    continues it."""
    resume = isinstance(moment, str) and moment.startswith("resume")
    out = copy_run(data, tmp_path) if resume else tmp_path / "run"
    argv = ["run", "--out", out, "--max-steps", "100000", "--log-interval", "1"]
    argv += ["--resume"] if resume else ["--data", data["shards"] / "train", *SMALL]
    result = _terminated_when(out, argv, float(moment.split()[1]) if resume else moment, tmp_path / "stderr.log",
                              signum)
    assert result.returncode == 128 + signum, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    name = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
    assert result.stderr.strip().splitlines()[-1].startswith(f"syntrain: stopped by {name}"), result.stderr[-500:]
    if out.exists():
        done = steps(out) if (out / "metrics.jsonl").exists() else []
        continued = syntrain("run", "--resume", "--out", out, "--max-steps", max(done, default=0) + 1)
        assert continued.returncode == 0, continued.stderr[-2000:]
    else:
        assert not resume


# ------------------------------------------------------------------------------ odd files


def _odd_shard(data: dict, tmp: Path, kind: str) -> Path:
    split = tmp / "odd" / "valid"
    shutil.copytree(data["shards"] / "valid", split)
    shard = split / "part-00000.arrow"
    shard.unlink()
    if kind == "fifo":
        os.mkfifo(shard)
    else:
        shard.symlink_to("/dev/zero")
    return split


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
@pytest.mark.parametrize("command", ["inspect", "validate", "run", "run --no-verify-shards"])
def test_a_shard_that_is_not_a_file_is_one_line(data, tmp_path, kind, command):
    split = _odd_shard(data, tmp_path, kind)
    if command == "inspect" or command == "validate":
        result = call(*SYNPREP, command, split, timeout=60)
    else:
        result = call(*SYNTRAIN, "run", "--data", data["shards"] / "train", "--valid", split, "--out",
                      tmp_path / "r", *SMALL, "--max-steps", "1", *command.split()[1:], timeout=60)
        assert not (tmp_path / "r").exists()
    one_line_error(result, "part-00000.arrow", "not a regular file")


def test_a_checkpoint_or_codes_that_are_devices_are_one_line(data, tmp_path):
    (tmp_path / "zero.pt").symlink_to("/dev/zero")
    one_line_error(syntrain("translate", "--checkpoint", tmp_path / "zero.pt", "-i", data["shards"] / "test"),
                   "zero.pt", "not a regular file")
    (tmp_path / "in.txt").write_text("the dog\n")
    one_line_error(call(*SYNPREP, "bpe", "apply", "--codes", "/dev/zero", "-i", tmp_path / "in.txt", timeout=60),
                   "/dev/zero", "character device")
    (tmp_path / "model.udpipe").symlink_to("/dev/zero")
    one_line_error(call(*SYNPREP, "parse", "--backend", "udpipe", "--model", tmp_path / "model.udpipe", "-i",
                        tmp_path / "in.txt", timeout=60), "model.udpipe", "not a regular file")


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_convert_workers_are_capped_with_a_note(data, tmp_path, engine):
    """--workers 100000 on this machine: lowered to 4 per core, said, for the local engine and a Ray started here
    (not capped on a Ray cluster, whose cores are elsewhere)."""
    from synprep.convert.converter import ConvertOptions

    env = dict(os.environ)
    if engine == "ray":
        pytest.importorskip("ray")
        env.update(RAY_AUTH_MODE="disabled", SYNPREP_RAY_TMP=tempfile.mkdtemp(prefix="rc"))  # short socket paths
    result = subprocess.run([*SYNPREP, "convert", str(data["synth"] / "pipeline.toml"), "--output",
                             str(tmp_path / "out"), "--workers", "100000", "--engine", engine], capture_output=True,
                            text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "note: --workers 100000 lowered to" in result.stderr
    assert json.loads((tmp_path / "out" / "run.json").read_text())["workers"] <= 4 * len(os.sched_getaffinity(0))
    assert ConvertOptions(workers=100000, engine="ray", ray_address="head:6379").worker_count() == 100000


# ------------------------------------------------------------------------------ live data


def test_validation_and_test_shards_truncated_under_a_running_trainer(data, tmp_path):
    """The validation and test references and sources are copied out at the start (the test split as well,
    though it is scored only at the end): shards truncated while the run trains change nothing (never SIGBUS,
    never a failure after training), and the run ends with its checkpoint and the test score of the data it
    checked at the start."""
    shards = tmp_path / "live"
    shutil.copytree(data["shards"], shards)
    out = tmp_path / "r"
    trainer = subprocess.Popen([*SYNTRAIN, "run", "--data", str(shards / "train"), "--valid", str(shards / "valid"),
                                "--test", str(shards / "test"), "--out", str(out), *SMALL, "--max-steps", "100000",
                                "--max-minutes", "0.15", "--eval-interval", "100000", "--log-interval", "1"],
                               stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 90
    while not (out / "metrics.jsonl").exists() and time.time() < deadline and trainer.poll() is None:
        time.sleep(0.1)
    os.truncate(shards / "valid" / "part-00000.arrow", 1000)
    os.truncate(shards / "test" / "part-00000.arrow", 1000)
    _, err = trainer.communicate(timeout=TIMEOUT)
    assert trainer.returncode == 0, f"exit {trainer.returncode}: {err[-800:]}"
    assert "Traceback" not in err and (out / "last.pt").exists()
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len([record for record in records if "test_bleu" in record]) == 1


# ------------------------------------------------------------------------------ splits of 0 pairs


def _empty_split(data: dict, root: Path) -> Path:
    """A copy of the dataset whose valid split has 0 pairs (every input line rejected)."""
    from synprep.shards import open_split, write_shard

    dataset = root / "emptyset"
    shutil.copytree(data["shards"], dataset)
    split = dataset / "valid"
    manifest = json.loads((split / "manifest.json").read_text())
    schema = open_split(str(split)).schema
    for shard in manifest["shards"]:
        (split / shard["file"]).unlink()
    manifest["shards"] = [write_shard(str(split / "part-00000.arrow"), schema, [])]
    manifest["rows"] = 0
    manifest["rejected"] = {**{key: 0 for key in manifest["rejected"]}, "too_long": manifest["input_lines"]}
    (split / "manifest.json").write_text(json.dumps(manifest))
    return split


@pytest.mark.parametrize("command", ["run --valid", "run --test", "run --data", "eval", "translate", "compare"])
def test_a_split_of_zero_pairs_is_one_line_before_anything_is_written(data, tmp_path, command):
    empty = _empty_split(data, tmp_path)
    checkpoint = data["run"] / "best.pt"
    out = tmp_path / "r"
    if command.startswith("run"):
        flag = command.split()[1]
        splits = {"--data": data["shards"] / "train", "--valid": data["shards"] / "valid", flag: empty}
        result = syntrain("run", *(x for pair in splits.items() for x in pair), "--out", out, *SMALL,
                          "--max-steps", "1")
        assert not out.exists()
    elif command == "compare":
        run = copy_run(data, tmp_path)
        result = syntrain("compare", "--data", empty, "--samples", "10", run)
    else:
        io = ["--data", empty] if command == "eval" else ["-i", empty, "-o", out]
        result = syntrain(command, "--checkpoint", checkpoint, *io)
        assert not out.exists()
    one_line_error(result, str(empty), "0 pairs")


@pytest.mark.parametrize("option", ["-o", "--json"])
def test_eval_output_in_a_missing_folder_is_one_line_before_decoding(data, tmp_path, option):
    path = tmp_path / "nowhere" / "out"
    result = syntrain("eval", "--checkpoint", data["run"] / "best.pt", "--data", data["shards"] / "test",
                      option, path)
    one_line_error(result, str(path), "does not exist")
    assert "BLEU" not in result.stdout  # refused before anything was decoded


def test_eval_scores_that_cannot_be_written_are_one_line(data, tmp_path):
    path = "/proc/self/scores.json"  # a folder no one may create files in, root included
    result = syntrain("eval", "--checkpoint", data["run"] / "best.pt", "--data", data["shards"] / "test",
                      "--json", path)
    one_line_error(result, path, "cannot write")


# ------------------------------------------------------------------------------ damaged test shards, checkpoints


@pytest.mark.parametrize("command", ["eval", "translate"])
def test_a_flipped_byte_in_a_test_shard_is_one_line(data, tmp_path, command):
    split = tmp_path / "test"
    shutil.copytree(data["shards"] / "test", split)
    shard = split / "part-00000.arrow"
    raw = bytearray(shard.read_bytes())
    raw[len(raw) * 2 // 3] ^= 0x10
    shard.write_bytes(bytes(raw))
    io = ["--data", split] if command == "eval" else ["-i", split, "-o", tmp_path / "out"]
    one_line_error(syntrain(command, "--checkpoint", data["run"] / "best.pt", *io), "part-00000.arrow",
                   "sha256 differs")


def _edited_checkpoint(data: dict, tmp: Path, edit) -> Path:
    import torch

    ckpt = torch.load(data["run"] / "best.pt", weights_only=False)
    edit(ckpt)
    path = tmp / "edited.pt"
    torch.save(ckpt, path)
    return path


@pytest.mark.parametrize("command", ["translate", "eval", "env"])
@pytest.mark.parametrize("damage, named", [
    ("config", "the weights do not fit the recorded model configuration"),
    ("vocab", "the stored vocabulary has"),
    ("specials", "the stored vocabulary is damaged"),
])
def test_a_checkpoint_whose_parts_disagree_is_one_line(data, tmp_path, command, damage, named):
    def edit(ckpt):
        if damage == "config":
            ckpt["model_config"]["d_ff"] = 48
        elif damage == "vocab":
            ckpt["vocab"] = ckpt["vocab"][:-1]
        else:  # the special symbols gone: the same size, every id shifted
            ckpt["vocab"] = [*ckpt["vocab"][4:], "w1", "w2", "w3", "w4"]

    path = _edited_checkpoint(data, tmp_path, edit)
    args = {"translate": ["translate", "--checkpoint", path, "-i", data["shards"] / "test", "-o", tmp_path / "o"],
            "eval": ["eval", "--checkpoint", path, "--data", data["shards"] / "test"],
            "env": ["env", "--checkpoint", path]}[command]
    one_line_error(syntrain(*args), "edited.pt", named)


def test_average_refuses_checkpoints_of_other_runs_unless_forced(data, tmp_path):
    def other_run(ckpt):
        ckpt["train_config"]["out"] = "/elsewhere/run"
        ckpt["signature"] = {**ckpt["signature"], "bpe_codes_sha256": "0" * 64}

    other = _edited_checkpoint(data, tmp_path, other_run)
    mine = data["run"] / "checkpoint_2.pt"
    refused = syntrain("average", "-o", tmp_path / "avg.pt", mine, other)
    one_line_error(refused, "edited.pt", "another run", "--force")
    assert not (tmp_path / "avg.pt").exists()
    forced = syntrain("average", "-o", tmp_path / "avg.pt", mine, other, "--force")
    assert forced.returncode == 0 and (tmp_path / "avg.pt").exists(), forced.stderr
    same_run = syntrain("average", "-o", tmp_path / "avg2.pt", mine, data["run"] / "checkpoint_4.pt")
    assert same_run.returncode == 0, same_run.stderr


# ------------------------------------------------------------------------------ compare's cache


def test_compare_decodes_again_for_other_decoding_settings_or_another_split(data, tmp_path):
    run = copy_run(data, tmp_path)
    hyp = str(run / "test.hyp")

    def compare(split: Path, *extra: str) -> str:
        result = syntrain("compare", "--data", split, "--samples", "10", *extra, run)
        assert result.returncode == 0, result.stderr
        return result.stderr.strip().splitlines()[-1]

    # the run's final test (its test_beam 1) wrote test.hyp: the same key, reused, also when given explicitly
    assert hyp not in compare(data["shards"] / "test") and hyp not in compare(data["shards"] / "test", "--beam", "1")
    assert hyp in compare(data["shards"] / "test", "--beam", "2")
    assert hyp not in compare(data["shards"] / "test", "--beam", "2")  # same key: the cache is used
    assert hyp in compare(data["shards"] / "test", "--beam", "2", "--max-tokens", "500")
    assert hyp in compare(data["shards"] / "valid", "--beam", "2")
    other = syntrain("compare", "--data", data["other"] / "test", "--samples", "10", "--beam", "1", run)
    assert "warning: " in other.stderr and "BPE codes" in other.stderr


KEY_FIELDS = ("checkpoint", "data", "data_fingerprint", "beam", "length_penalty", "max_tokens", "threads", "device",
              "hypotheses_sha256")


def _hypotheses_key_cases():
    """Damage to compare's cache of a run's hypotheses: the key file garbage, or each field of the key a run's
    final test records (KEY_FIELDS: the test below fails when the key gets a field they do not list) missing or
    of another type."""
    cases = [("test.hyp.json", "garbage"), ("test.hyp.json", "a list"), ("test.hyp", "missing"),
             ("test.hyp", "changed in place"), ("best.pt", "changed in place")]
    return cases + [(field, how) for field in KEY_FIELDS for how in ("missing", "type")]


@pytest.mark.parametrize("field, how", _hypotheses_key_cases())
def test_compare_with_a_damaged_hypotheses_cache_decodes_again(data, tmp_path, field, how):
    """A damaged cache of hypotheses is never used: compare decodes again (and writes a new one), never a
    traceback; so is one whose test.hyp or best.pt changed in place (keyed by content: before, by best.pt's size
    and mtime, and test.hyp not at all)."""
    run = copy_run(data, tmp_path)
    key = json.loads((run / "test.hyp.json").read_text())
    assert set(key) == set(KEY_FIELDS)
    if field == "test.hyp.json":
        (run / field).write_bytes(b"\x00{" if how == "garbage" else b"[]")
    elif how == "changed in place":  # same size and mtime: test.hyp's lines reversed, best.pt another checkpoint
        info = (run / field).stat()
        lines = (run / field).read_bytes().splitlines(keepends=True)
        other = next(path.read_bytes() for path in sorted(run.glob("checkpoint_*.pt"))
                     if path.read_bytes() != (run / "best.pt").read_bytes())
        (run / field).write_bytes(b"".join(reversed(lines)) if field == "test.hyp" else other)
        assert (run / field).stat().st_size == info.st_size
        os.utime(run / field, ns=(info.st_atime_ns, info.st_mtime_ns))
    elif field == "test.hyp":
        (run / field).unlink()
    else:
        key = {k: v for k, v in key.items() if k != field} if how == "missing" else {**key, field: [["x"]]}
        (run / "test.hyp.json").write_text(json.dumps(key))
    result = syntrain("compare", "--data", data["shards"] / "test", "--samples", "10", run)
    assert result.returncode == 0, result.stderr[-1500:]
    wrote = result.stderr.strip().splitlines()[-1]  # decoded and written again
    assert str(run / "test.hyp") in wrote.removeprefix("compare wrote ").split(", "), wrote


# ------------------------------------------------------------------------------ run folders and datasets, lost best.pt


@pytest.mark.parametrize("where", ["dataset", "split", "inside a split"])
def test_a_run_folder_in_a_dataset_or_split_folder_is_refused(data, tmp_path, where):
    """`synprep convert --overwrite` of a dataset deletes the folder: a run's checkpoints must never live there."""
    dataset = tmp_path / "shards"
    shutil.copytree(data["shards"], dataset)
    out = {"dataset": dataset, "split": dataset / "train", "inside a split": dataset / "train" / "run"}[where]
    before = sorted(str(path) for path in dataset.rglob("*"))
    result = syntrain("run", "--data", dataset / "train", "--out", out, *SMALL, "--max-steps", "1")
    one_line_error(result, f"--out {out}", "synprep dataset folder" if where == "dataset" else "synprep split folder")
    assert sorted(str(path) for path in dataset.rglob("*")) == before  # no lock, no folder, no file


def test_resume_re_creates_a_lost_best_pt(data, tmp_path):
    """best.pt lost (a full disk while writing it after last.pt, a deletion): --resume of the finished run
    re-creates it (copied from the checkpoint holding the recorded best step, else the resumed weights
    re-validated) instead of leaving the run without the checkpoint its test score and `eval` use."""
    import torch

    run = copy_run(data, tmp_path)
    (run / "best.pt").unlink()
    for kept in run.glob("checkpoint_*.pt"):
        kept.unlink()
    again = syntrain("run", "--resume", "--out", run)
    assert again.returncode == 0, again.stderr
    assert f"{run / 'best.pt'} is missing or damaged" in again.stderr and "complete" in again.stderr
    best = torch.load(run / "best.pt", weights_only=False)
    assert best["step"] in (2, 4) and best["best_step"] == best["step"]


def two_processes(tmp: Path, *argv: object) -> list[tuple[int, str, float]]:
    """`syntrain ARGV` as ranks 0 and 1 of one gloo run, started with the variables torchrun sets but with no
    launcher to stop a process whose peer failed (each must end by itself): (exit code, stderr, seconds from
    the start to its end) per rank; a process still running after TIMEOUT fails the test (both killed)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ranks = []
    start = time.time()
    for rank in (0, 1):
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2",
               "RANK": str(rank), "LOCAL_RANK": str(rank), "OMP_NUM_THREADS": "1"}
        with open(tmp / f"rank{rank}.err", "w") as err:
            ranks.append(subprocess.Popen([*SYNTRAIN, *map(str, argv)], stdout=subprocess.DEVNULL, stderr=err,
                                          env=env))
    ended = [0.0, 0.0]
    while not all(ended) and time.time() < start + TIMEOUT:
        for rank, process in enumerate(ranks):
            if not ended[rank] and process.poll() is not None:
                ended[rank] = time.time() - start
        time.sleep(0.1)
    for process in ranks:
        process.kill()
        process.wait()
    assert all(ended), f"a hang: still running after {TIMEOUT} s: ranks {[r for r in (0, 1) if not ended[r]]}"
    return [(process.returncode, (tmp / f"rank{rank}.err").read_text(), ended[rank])
            for rank, process in enumerate(ranks)]


def test_a_process_that_fails_ends_every_process_of_the_run_in_one_line(data, tmp_path):
    """Under DDP, rank 0 cannot write a kept checkpoint (its name taken by a folder) while rank 1 waits for it
    in a collective: rank 0 ends in its one-line error, and rank 1, with no launcher to stop it, ends seconds
    later in one line saying why: never a traceback, never a wait for the process group's time limit."""
    run = copy_run(data, tmp_path)
    (run / "checkpoint_6.pt").mkdir()
    (rc0, err0, end0), (rc1, err1, end1) = two_processes(tmp_path, "run", "--resume", "--out", run, "--max-steps",
                                                          "8", "--eval-interval", "2", "--device", "cpu")
    one_line_error(subprocess.CompletedProcess([], rc0, "", err0), str(run / "checkpoint_6.pt"), "directory")
    one_line_error(subprocess.CompletedProcess([], rc1, "", err1), "process 1 of 2: another process of the run ended")
    assert end1 < end0 + 20, (end0, end1)
    assert steps(run) == [1, 2, 3, 4, 5, 6]


def test_resume_of_a_finished_run_re_creates_a_lost_best_pt_under_ddp(data, tmp_path):
    """A finished run whose best.pt is lost with its weights in no other file, resumed by 2 processes: rank 0
    re-validates alone (no collective the other rank would not join), re-creates best.pt, both end cleanly."""
    import torch

    run = copy_run(data, tmp_path)
    (run / "best.pt").unlink()
    for kept in run.glob("checkpoint_*.pt"):
        kept.unlink()
    last = torch.load(run / "last.pt", weights_only=False)
    torch.save({**last, "best_step": 2}, run / "last.pt")  # the best is of an earlier step: re-validated
    (rc0, err0, _), (rc1, err1, _) = two_processes(tmp_path, "run", "--resume", "--out", run, "--device", "cpu")
    assert rc0 == rc1 == 0, err0[-1500:] + err1[-1500:]
    assert "re-validated" in err0 and "complete" in err0 and err1 == ""
    assert torch.load(run / "best.pt", weights_only=False)["best_step"] == 4


# ------------------------------------------------------------------------------ checkpoints with NaN weights


@pytest.mark.parametrize("command", ["translate", "eval", "average", "env", "resume", "resume, optimizer state"])
def test_a_checkpoint_with_nan_weights_is_one_line(data, tmp_path, command):
    """A diverged run's checkpoint decodes to empty lines (exit 0) and trains on in NaN: refused wherever it is
    loaded; a resume from one whose optimizer state holds NaN stepped into NaN weights at once (and blamed the
    learning rate)."""
    import torch

    if command.startswith("resume"):
        run = copy_run(data, tmp_path)
        ckpt = torch.load(run / "last.pt", weights_only=False)
        table = ckpt["optimizer"]["state"][0] if "optimizer" in command else ckpt["model"]
        name = "exp_avg" if "optimizer" in command else next(iter(table))
        table[name] = torch.full_like(table[name], float("nan"))
        torch.save(ckpt, run / "last.pt")
        part = "the optimizer state holds" if "optimizer" in command else "the weights hold"
        one_line_error(syntrain("run", "--resume", "--out", run, "--max-steps", "5"), "last.pt", part,
                       "NaN or infinite")
        assert steps(run) == [1, 2, 3, 4]
        return

    def edit(ckpt):
        name = next(iter(ckpt["model"]))
        ckpt["model"][name][0] = float("inf")

    path = _edited_checkpoint(data, tmp_path, edit)
    out = tmp_path / "out"
    args = {"translate": ["translate", "--checkpoint", path, "-i", data["shards"] / "test", "-o", out],
            "eval": ["eval", "--checkpoint", path, "--data", data["shards"] / "test", "-o", out],
            "average": ["average", data["run"] / "best.pt", path, "-o", out],
            "env": ["env", "--checkpoint", path]}[command]
    one_line_error(syntrain(*args), "edited.pt", "NaN or infinite")
    assert not out.exists()


def _strict_json(path: Path) -> object:
    """A JSON file read as strict readers (jq, JavaScript) read it: `NaN` and `Infinity` are not JSON."""
    def refuse(constant: str) -> None:
        raise AssertionError(f"{path}: {constant} is not JSON")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


def test_a_loss_that_is_nan_is_null_in_eval_json(data, tmp_path):
    """Finite weights so large that the loss is NaN: eval says `loss nan`, and its --json holds null there, not
    Python's `NaN` (which strict JSON readers refuse)."""
    def edit(ckpt):
        for name, value in ckpt["model"].items():
            if value.is_floating_point() and "norm" not in name:
                ckpt["model"][name] = value * 1e30

    path = _edited_checkpoint(data, tmp_path, edit)
    result = syntrain("eval", "--checkpoint", path, "--data", data["shards"] / "test", "--json", tmp_path / "s.json")
    assert result.returncode == 0, result.stderr[-2000:]
    assert _strict_json(tmp_path / "s.json")["loss"] is None


DIVERGING = {  # how a run diverges -> its flags and what its one line names
    "fp16, loss NaN": (["--precision", "fp16", "--lr", "1", "--log-interval", "5", "--eval-interval", "10"],
                       "training loss"),
    "fp16 with accumulation, loss NaN": (["--precision", "fp16", "--lr", "1", "--accum-steps", "3", "--log-interval",
                                          "5", "--eval-interval", "10"], "training loss"),
    "bf16, loss NaN": (["--precision", "bf16", "--lr", "1e6", "--log-interval", "5", "--eval-interval", "10"],
                       "training loss"),
    "fp32, weights NaN before a log step": (["--lr", "1e6", "--log-interval", "50", "--eval-interval", "2"],
                                            "NaN or infinite"),
    # fp16 skips the updates that overflow: the weights stay finite, the validation loss is NaN (was best.pt)
    "fp16, validation loss NaN, weights finite": (["--precision", "fp16", "--lr", "1e6", "--warmup", "1",
                                                   "--log-interval", "50", "--eval-interval", "5"],
                                                  "the validation loss is NaN or infinite (nan) at step 5"),
}


@pytest.mark.parametrize("case", list(DIVERGING))
def test_a_run_that_diverges_stops_in_one_line_and_saves_no_nan_weights(data, tmp_path, case):
    """A run whose loss is NaN or infinite for a whole log window learns nothing from there (fp16 and bf16 skip
    or lose every update; fp32 trains on in NaN), and a validation that scores NaN has no best to keep: one line,
    exit 2; the checkpoints it leaves hold finite weights and a finite best only."""
    import math

    import torch

    run = tmp_path / "run"
    extra, named = DIVERGING[case]
    result = syntrain("run", "--data", data["shards"] / "train", "--valid", data["shards"] / "valid", "--out", run,
                      *SMALL, "--max-steps", "40", *extra)
    one_line_error(result, "the run diverged", "NaN or infinite", named)
    for path in run.glob("*.pt"):
        ckpt = torch.load(path, weights_only=False)
        assert ckpt["best"] is None or math.isfinite(ckpt["best"]), (path, ckpt["best"])
        weights = ckpt["model"]
        assert all(bool(torch.isfinite(value).all()) for value in weights.values() if value.is_floating_point())


OVERFLOWING = {  # each auxiliary loss's weight ([model] *_lambda) -> the settings that switch its loss on
    "lisa_lambda": ["--set", "model.lisa_layer=1"],
    "dbsa_lambda": ["--set", "model.dbsa_encoder=true", "--set", "model.dbsa_decoder=true", "--set",
                    "model.dbsa_layer=1"],
    "sync_lambda": ["--set", "model.dbsa_encoder=true", "--set", "model.dbsa_decoder=true", "--set",
                    "model.dbsa_layer=1"],
}


def test_every_auxiliary_loss_weight_is_tried():
    from syntrain.train import _model_fields

    assert sorted(OVERFLOWING) == sorted(name for name in _model_fields() if name.endswith("_lambda"))


@pytest.mark.parametrize("weight", list(OVERFLOWING))
def test_an_auxiliary_loss_that_overflows_in_fp16_stops_the_run(data, tmp_path, weight):
    """An auxiliary loss weighted so that fp16's scaled objective overflows: every update is skipped while the
    losses stay finite (the run learned nothing and ended with exit 0): one line, exit 2, once the gradients were
    non-finite in 32 updates in a row (more than fp16's loss scale needs to settle)."""
    run = tmp_path / "run"
    result = syntrain("run", "--data", data["shards"] / "train", "--valid", data["shards"] / "valid", "--out", run,
                      *SMALL, "--max-steps", "40", "--precision", "fp16", "--log-interval", "5", "--eval-interval",
                      "10", *OVERFLOWING[weight], "--set", f"model.{weight}=1e30")
    one_line_error(result, "the run diverged", "the gradients are NaN or infinite in each of the last 35 updates",
                   "at step 35")


def test_a_dataset_whose_subword_model_was_replaced_is_refused(data, tmp_path):
    """`syntrain run` on a dataset whose sub-word model (here codes.bpe; subwords.model and tokenizer.json by the
    same record) was replaced after convert trained with the foreign vocabulary: every model file the manifest's
    signature records a sha256 of is compared by content, one line naming it, fresh or `--resume`."""
    dataset = tmp_path / "dataset"
    shutil.copytree(data["shards"], dataset)
    recorded = json.loads((dataset / "train" / "manifest.json").read_text())["signature"]
    assert recorded["bpe_codes_sha256"]
    shutil.copyfile(data["other"] / "codes.bpe", dataset / "codes.bpe")
    result = syntrain("run", "--data", dataset / "train", "--out", tmp_path / "run", *SMALL, "--max-steps", "1")
    one_line_error(result, str(dataset / "codes.bpe"), "not the sub-word model this dataset was cut with")
    assert not (tmp_path / "run").exists()
    run = copy_run(data, tmp_path / "resumed")  # --resume too (before: it went on, and source/ took the new file)
    resumed = syntrain("run", "--resume", "--out", run, "--data", dataset / "train", "--max-steps", "5")
    one_line_error(resumed, str(dataset / "codes.bpe"), "not the sub-word model this dataset was cut with")
    assert steps(run)[-1] == 4


def _damaged_fields():
    """(field, how, value) for every field `--resume` reads from a checkpoint (its declaration), each missing (if
    required), of another type, or impossible; `None` as value: the field removed."""
    from syntrain.runfolder.checkpoints import CHECKPOINT_FIELDS, COUNTS
    from syntrain.runfolder.resume import RESUMABLE

    cases = []
    for key, kinds in CHECKPOINT_FIELDS.items():
        if key in RESUMABLE:
            cases.append((key, "missing", None))
        cases.append((key, "another type", b"x" if str not in kinds else 5))
        if key in COUNTS:
            cases.append((key, "below 0", -3))
    return cases


@pytest.mark.parametrize("key, how, value", _damaged_fields(), ids=lambda v: str(v))
def test_resume_never_takes_a_checkpoint_field_that_is_missing_wrong_or_impossible(data, tmp_path, key, how, value):
    """Every field --resume reads, damaged in last.pt: that file is not resumed from (the newest complete other
    checkpoint is, or one line): before, a wrong `rng`, `position`, `optimizer`, `scheduler`, `best`, `bad_evals`
    or `train_config` was a traceback mid-start."""
    import torch

    from syntrain.runfolder.resume import resume_point

    run = copy_run(data, tmp_path)
    ckpt = torch.load(run / "last.pt", weights_only=False)
    if value is None:
        del ckpt[key]
    else:
        ckpt[key] = value
    torch.save(ckpt, run / "last.pt")
    path, state = resume_point(str(run))
    assert os.path.basename(path) != "last.pt" and state["step"] == 4, path


READERS = {  # every command that reads a checkpoint, as the arguments after its file's place
    "translate": lambda path, data, tmp: ["translate", "--checkpoint", path, "-i", data["shards"] / "test", "-o",
                                          tmp / "o"],
    "eval": lambda path, data, tmp: ["eval", "--checkpoint", path, "--data", data["shards"] / "test"],
    "env": lambda path, data, tmp: ["env", "--checkpoint", path],
    "average": lambda path, data, tmp: ["average", data["run"] / "checkpoint_2.pt", path, "-o", tmp / "avg.pt",
                                        "--force"],
    "export-hf": lambda path, data, tmp: ["export-hf", path, "-o", tmp / "hf"]}


@pytest.mark.parametrize("key, how, value", [case for case in _damaged_fields() if case[1] != "missing"]
                         + [("model", "a weight not a tensor", "x")], ids=lambda v: str(v))
def test_every_reader_refuses_a_checkpoint_field_of_another_type_or_impossible(data, tmp_path, key, how, value):
    """Every field a checkpoint holds (`CHECKPOINT_FIELDS`), of another type or impossible, in the file every
    command that reads checkpoints is given: one line naming it (before: a `signature` of another type was an
    AttributeError traceback in eval and translate, a weight that is not a tensor a `load_state_dict` traceback,
    and average read its files without the checks of the others)."""
    def edit(ckpt):
        if how == "a weight not a tensor":
            ckpt["model"][next(iter(ckpt["model"]))] = value
        else:
            ckpt[key] = value

    path = _edited_checkpoint(data, tmp_path, edit)
    for arguments in READERS.values():
        one_line_error(syntrain(*arguments(path, data, tmp_path)), "edited.pt", "the checkpoint is damaged", key)


def test_resume_from_a_damaged_last_pt_continues_from_the_newest_complete_checkpoint(data, tmp_path):
    import torch

    run = copy_run(data, tmp_path)
    ckpt = torch.load(run / "last.pt", weights_only=False)
    torch.save({**ckpt, "rng": "x"}, run / "last.pt")  # a traceback in set_rng_state before
    result = syntrain("run", "--resume", "--out", run, "--max-steps", "5")
    assert result.returncode == 0, result.stderr[-1500:]
    assert "from checkpoint_4.pt" in result.stderr or "from best.pt" in result.stderr, result.stderr[-1500:]


def _run_records():
    from syntrain.runfolder.files import RUN_FILES

    return [(name, how) for name in RUN_FILES if not name.endswith(".pt") and name != "vocab.src.json"
            for how in ("missing", "garbage")]


@pytest.mark.parametrize("name, how", _run_records())
def test_resume_with_a_run_record_missing_or_damaged_is_one_line_or_goes_on(data, tmp_path, name, how):
    """Every record of a run folder besides its checkpoints (from `RUN_FILES`: config.toml, metrics.jsonl,
    train.log, vocab.json), missing or garbage: `--resume` goes on or refuses in one line, never a traceback."""
    run = copy_run(data, tmp_path)
    if how == "missing":
        (run / name).unlink()
    else:
        (run / name).write_bytes(b"\x00\xff{[ not what it should be\n")
    result = syntrain("run", "--resume", "--out", run, "--max-steps", "5")
    assert "Traceback" not in result.stderr, result.stderr[-1500:]
    if result.returncode:
        one_line_error(result)


# ------------------------------------------------------------------------------ output paths


@pytest.mark.parametrize("case", ["eval -o = --json", "eval -o = checkpoint", "translate -o = split file",
                                  "average -o = input", "compare --json = RUN/test.hyp"])
def test_an_output_that_would_overwrite_another_or_an_input_is_refused_before_work(data, tmp_path, case):
    run = copy_run(data, tmp_path)
    best, test = run / "best.pt", tmp_path / "test"
    shutil.copytree(data["shards"] / "test", test)  # a copy: a failing case must not damage the shared split
    hyp = tmp_path / "out.txt"
    args, target = {
        "eval -o = --json": (["eval", "--checkpoint", best, "--data", test, "-o", hyp, "--json", hyp], hyp),
        "eval -o = checkpoint": (["eval", "--checkpoint", best, "--data", test, "-o", best], best),
        "translate -o = split file": (["translate", "--checkpoint", best, "-i", test, "-o", test / "manifest.json"],
                                      test / "manifest.json"),
        "average -o = input": (["average", run / "checkpoint_2.pt", best, "-o", best], best),
        "compare --json = RUN/test.hyp": (["compare", "--data", test, "--samples", "10", run, "--json",
                                           run / "test.hyp"], run / "test.hyp"),
    }[case]
    before = target.read_bytes() if target.exists() else None
    result = syntrain(*args)
    one_line_error(result, str(target), "would overwrite")
    assert "BLEU" not in result.stdout  # refused before decoding
    assert (target.read_bytes() if target.exists() else None) == before


@pytest.mark.parametrize("target, cause", [("nodir/a.pt", "does not exist"), ("/dev/full", "No space left on device")])
def test_a_checkpoint_that_cannot_be_written_names_the_cause(data, tmp_path, target, cause):
    path = tmp_path / target if not target.startswith("/") else Path(target)
    result = syntrain("average", data["run"] / "checkpoint_2.pt", data["run"] / "checkpoint_4.pt", "-o", path)
    last = one_line_error(result, str(path), cause)
    assert "disk full?" not in last


# ------------------------------------------------------------------------------ raw text too long to translate


def _raw_run(data: dict, tmp_path: Path, tiny_udpipe, bpe: str = "") -> Path:
    """A run of one step on 60 raw source lines parsed by the tiny UDPipe model (`bpe`: more [bpe] keys)."""
    folder = tmp_path / "raw"
    folder.mkdir()
    sentences = (data["synth"] / "train.tgt.conllu").read_text().split("\n\n")[:60]  # a small corpus: quick
    (folder / "train.tgt.conllu").write_text("\n\n".join(sentences).strip() + "\n\n")
    raw = (data["synth"] / "train.src").read_text().splitlines()[:60]
    (folder / "train.src").write_text("".join(line + "\n" for line in raw))
    (folder / "raw.toml").write_text(
        '[pipeline]\nname = "raw"\nsrc_lang = "en"\ntgt_lang = "de"\n\n[splits.train]\nsrc = "train.src"\n'
        'tgt = "train.tgt.conllu"\n\n[filter]\nlangid = "none"\n\n[parser.src]\nbackend = "udpipe"\n'
        f'model = "{tiny_udpipe()}"\n\n[bpe]\nsymbols = 300\n{bpe}\n[features]\nsrc = ["parents", "distances"]\n')
    converted = call(*SYNPREP, "convert", folder / "raw.toml", "--output", tmp_path / "shards")
    assert converted.returncode == 0, converted.stderr
    trained = syntrain("run", "--data", tmp_path / "shards" / "train", "--out", tmp_path / "run", *SMALL,
                       "--max-steps", "1", "--set", "model.max_len=64")
    assert trained.returncode == 0, trained.stderr
    return tmp_path / "run"


def test_raw_lines_too_long_for_the_model_are_left_empty_before_parsing(data, tmp_path, tiny_udpipe):
    """A line of many words, one long word, a line that parses into more words than the model's positions and a
    10 MB line are left empty and counted, found before parsing or before their features are made (their tree
    distances take memory growing with the cube of the words): no memory error, no hang."""
    _raw_run(data, tmp_path, tiny_udpipe)
    lines = ["every big river sings .", " ".join(["the king sings ."] * 400), "a" * 12000,
             ",".join(["a"] * 100), "x" * 10_000_000, "my happy doctor waits ."]
    (tmp_path / "in.txt").write_text("".join(line + "\n" for line in lines))
    result = call(*SYNTRAIN, "translate", "--checkpoint", tmp_path / "run" / "best.pt", "-i", tmp_path / "in.txt",
                  "-o", tmp_path / "out.txt", "--beam", "1", timeout=90)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-1500:]
    assert "4 line(s) longer than the model's 64 positions left empty" in result.stderr
    out = (tmp_path / "out.txt").read_text().split("\n")
    assert len(out) == len(lines) + 1 and out[1:5] == ["", "", "", ""]


def test_translate_refuses_every_file_of_the_run_source_folder_changed_in_place(data, tmp_path, tiny_udpipe):
    """Raw text is prepared with the files the run keeps in source/ (codes, the BPE vocabulary of a vocabulary
    threshold, source.json): each, changed with its size and mtime kept, is one line naming it, never used (the
    vocabulary was not recorded by content: a changed one cut the words otherwise, exit 0)."""
    run = _raw_run(data, tmp_path, tiny_udpipe, "vocabulary_threshold = 1\n")
    (tmp_path / "in.txt").write_text("every big river sings .\n")
    files = sorted(path for path in (run / "source").iterdir() if path.is_file())
    assert {"codes.bpe", "vocab.src", "source.json"} <= {path.name for path in files}, files
    for path in files:  # its first two lines swapped: well-formed still, the same size and mtime
        before, info = path.read_bytes(), path.stat()
        lines = before.splitlines(keepends=True)
        path.write_bytes(b"".join([lines[1], lines[0], *lines[2:]]))
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
        result = call(*SYNTRAIN, "translate", "--checkpoint", run / "best.pt", "-i", tmp_path / "in.txt", "-o",
                      tmp_path / "out.txt", "--beam", "1")
        one_line_error(result, path.name)
        path.write_bytes(before)
    result = call(*SYNTRAIN, "translate", "--checkpoint", run / "best.pt", "-i", tmp_path / "in.txt", "-o",
                  tmp_path / "out.txt", "--beam", "1")
    assert result.returncode == 0, result.stderr[-1500:]


# ------------------------------------------------------------------------------ pairs longer than the model


def split_lengths(path: Path) -> tuple[list[int], list[int]]:
    """Each pair's positions in a split: source (sub-words + EOS) and target (+ BOS / EOS)."""
    from syntrain.dataset import read_split

    table = read_split(str(path))[0]
    return ([len(x) + 1 for x in table.column("src_subwords").to_pylist()],
            [len(x) + 1 for x in table.column("tgt_subwords").to_pylist()])


def test_pairs_longer_than_the_model_are_skipped_counted_and_translated_empty(data, tmp_path):
    """[model] max_len below some pairs' lengths (and [train] max_len 0, no limit of its own): training skips
    those pairs, counted in the header; validation leaves them out of its loss and translates their sources as
    empty, said once, not at every validation; the test hypotheses and `syntrain eval` keep one line per pair
    ("" for a source too long). No traceback, no crash of the run at its first validation."""
    train_len, valid_len, test_len = (split_lengths(data["shards"] / split) for split in ("train", "valid", "test"))
    positions = sorted(valid_len[0])[len(valid_len[0]) // 2]  # the median source: some valid sources too long
    train_long = sum(max(s, t) > positions for s, t in zip(*train_len))
    valid_src_long = sum(s > positions for s in valid_len[0])
    valid_pair_long = sum(max(s, t) > positions for s, t in zip(*valid_len))
    assert 0 < train_long < len(train_len[0]) and valid_src_long > 0
    run = tmp_path / "run"
    result = train(data, run, "--max-steps", "4", "--eval-interval", "2", "--eval-sentences", "0", "--test",
                   data["shards"] / "test", "--set", "train.max_len=0", "--set", f"model.max_len={positions}")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-1500:]
    assert f"({train_long} longer than the model's {positions} positions skipped)" in result.stderr
    valid = str(data["shards"] / "valid")
    said = [line for line in result.stderr.splitlines() if line.startswith(valid + ":")]
    assert said == [f"{valid}: {valid_pair_long} pair(s) longer than the model's {positions} positions left out of "
                    "the loss", f"{valid}: {valid_src_long} source(s) longer than the model's {positions} positions: "
                    "not translated (an empty translation each)"], said  # two validations, each said once
    hyps = (run / "test.hyp").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(hyps) == len(test_len[0])
    assert all(hyp == "" for hyp, s in zip(hyps, test_len[0]) if s > positions)
    evaluated = call(*SYNTRAIN, "eval", "--checkpoint", run / "best.pt", "--data", data["shards"] / "test", "-o",
                     tmp_path / "eval.hyp")
    assert evaluated.returncode == 0 and "Traceback" not in evaluated.stderr, evaluated.stderr[-1500:]
    assert (tmp_path / "eval.hyp").read_text(encoding="utf-8").split("\n")[:-1] == hyps
    test_src_long = sum(s > positions for s in test_len[0])
    assert (f"{test_src_long} source(s) longer than the model's {positions} positions" in evaluated.stderr) == \
        (test_src_long > 0)


def test_a_validation_split_none_of_whose_pairs_fits_the_model_is_refused_before_training(data, tmp_path):
    """Its loss would be over no pair (0.0, the best loss there is): one line naming the split, nothing written."""
    train_len, valid_len = (split_lengths(data["shards"] / split) for split in ("train", "valid"))
    positions = min(max(s, t) for s, t in zip(*valid_len)) - 1
    assert any(max(s, t) <= positions for s, t in zip(*train_len))  # training alone would run
    result = train(data, tmp_path / "run", "--max-steps", "2", "--set", f"model.max_len={positions}")
    one_line_error(result, str(data["shards"] / "valid"), f"none of its {len(valid_len[0])} pairs fits the model's "
                                                          f"{positions} positions")
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------------------ synprep: bpe learn, pipelines


@pytest.mark.parametrize("case", ["whitespace only", "vocab prefix in a missing folder", "a single word"])
def test_bpe_learn_writes_nothing_on_a_late_error(tmp_path, case):
    text = {"whitespace only": "  \n\t\n \t \n", "a single word": "hello\n"}.get(case, "the dog barks\n" * 20)
    (tmp_path / "in.txt").write_text(text)
    extra = ["--vocab-prefix", str(tmp_path / "missing" / "vocab")] if "prefix" in case else []
    result = call(*SYNPREP, "bpe", "learn", "-i", tmp_path / "in.txt", "-o", tmp_path / "codes.bpe", *extra)
    one_line_error(result, "missing" if extra else "in.txt")
    assert sorted(os.listdir(tmp_path)) == ["in.txt"]  # no codes, no temporary file


def _edited_pipeline(data: dict, tmp: Path, old: str, new: str) -> Path:
    folder = tmp / "synth"
    shutil.copytree(data["synth"], folder, ignore=shutil.ignore_patterns("shards"))
    text = (folder / "pipeline.toml").read_text()
    assert old in text
    (folder / "pipeline.toml").write_text(text.replace(old, new, 1))
    return folder


@pytest.mark.parametrize("case", ["[[pipeline]]", "sgml without <seg>", "text format on CoNLL-U, no parser",
                                  "src = \".\""])
def test_pipeline_mistakes_are_one_line(data, tmp_path, case, tiny_udpipe):
    if case == "[[pipeline]]":
        folder, named = _edited_pipeline(data, tmp_path, "[pipeline]", "[[pipeline]]"), "[[pipeline]]"
    elif case.startswith("sgml"):  # plain text (with a parser) read as WMT SGML
        folder = _edited_pipeline(data, tmp_path, 'tgt = "test.tgt.conllu"\n', 'tgt = "test.tgt.conllu"\nformat = '
                                  f'"sgml"\n\n[parser.src]\nbackend = "udpipe"\nmodel = "{tiny_udpipe()}"\n\n'
                                  f'[parser.tgt]\nbackend = "udpipe"\nmodel = "{tiny_udpipe()}"\n')
        (folder / "test.src.conllu").write_text("the dog barks .\na cat .\n")
        (folder / "test.tgt.conllu").write_text("der Hund .\neine Katze .\n")
        named = "no <seg>"
    elif case.startswith("text"):
        folder = _edited_pipeline(data, tmp_path, 'tgt = "train.tgt.conllu"\n',
                                  'tgt = "train.tgt.conllu"\nformat = "text"\n')
        named = 'format = "text"'
    else:
        folder = _edited_pipeline(data, tmp_path, 'src = "train.src.conllu"', 'src = "."')
        named = "[splits.train] src names a folder"
    result = call(*SYNPREP, "convert", folder / "pipeline.toml", "--output", tmp_path / "out")
    one_line_error(result, named)
    assert not (tmp_path / "out").exists()


def test_convert_resume_refuses_inputs_changed_since_the_interrupted_run(data, tmp_path):
    folder = tmp_path / "synth"
    shutil.copytree(data["synth"], folder, ignore=shutil.ignore_patterns("shards"))
    out = tmp_path / "out"
    first = call(*SYNPREP, "convert", folder / "pipeline.toml", "--output", out, "--keep-work")
    assert first.returncode == 0, first.stderr  # .work kept: the state of an interrupted run
    shutil.copy(data["root"] / "synth2" / "train.src.conllu", folder / "train.src.conllu")
    shutil.copy(data["root"] / "synth2" / "train.tgt.conllu", folder / "train.tgt.conllu")
    one_line_error(call(*SYNPREP, "convert", folder / "pipeline.toml", "--output", out, "--resume"),
                   "train.src.conllu", "changed since the interrupted run")


@pytest.mark.parametrize("command", ["translate -o", "eval -o", "eval --json", "average -o"])
def test_a_syntrain_output_inside_a_dataset_or_split_is_refused_before_work(data, tmp_path, command):
    """The one rule of synprep.outputs in syntrain too: before, an output could be written among the shards
    (`validate` still said OK, `convert --overwrite` deleted it); a run folder stays a place for syntrain's own
    products (`average -o RUN/avg.pt`)."""
    run = copy_run(data, tmp_path)
    dataset = tmp_path / "data"
    shutil.copytree(data["shards"], dataset)
    target = {"translate -o": dataset / "test" / "hyp.txt", "eval -o": dataset / "hyp.txt",
              "eval --json": dataset / "test" / "scores.json", "average -o": dataset / "avg.pt"}[command]
    args = {"translate -o": ["translate", "--checkpoint", run / "best.pt", "-i", dataset / "test", "-o", target],
            "eval -o": ["eval", "--checkpoint", run / "best.pt", "--data", dataset / "test", "-o", target],
            "eval --json": ["eval", "--checkpoint", run / "best.pt", "--data", dataset / "test", "--json", target],
            "average -o": ["average", run / "checkpoint_2.pt", run / "best.pt", "-o", target]}[command]
    one_line_error(syntrain(*args), str(target), "lies inside the synprep")
    assert not target.exists()
    if command == "average -o":
        kept = syntrain("average", run / "checkpoint_2.pt", run / "best.pt", "-o", run / "avg.pt")
        assert kept.returncode == 0 and (run / "avg.pt").is_file(), kept.stderr
