"""syntrain as a user meets it: run folders (refusal, --overwrite, default names), logging, checkpoints kept and
averaged, early stopping, TensorBoard, translate from stdin / interactive / n-best, one error style."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys

import pytest
import torch

from syntrain.dataset import read_split
from syntrain.run_state import format_eta
from syntrain.runfolder.checkpoints import load_checkpoint
from syntrain.train import TrainConfig, train

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
    precision = "bf16" if torch.cuda.is_available() else "fp32"  # auto: bf16 autocast on CUDA
    assert f"precision {precision}, plain attention, out" in first.stderr
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
    from_file = syntrain("translate", "--checkpoint", ckpt, "-i", str(raw), "--beam", "2",
                         env={**os.environ, "SYNPREP_PROGRESS_SECONDS": "0"})  # progress lines off a terminal
    assert re.search(rf"^translating {len(lines)}/{len(lines)} sent \(100%\), [\d.]+ sent/s, ", from_file.stderr, re.M)
    assert "\r" not in from_file.stderr
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
    for line in [*lines[:2], "the dog " * 2000]:  # the last: longer than the model's positions
        process.stdin.write(line + "\n")
        process.stdin.flush()
        ready, _, _ = select.select([process.stdout], [], [], 300)
        assert ready, "no answer to an interactive line"
        answers.append(process.stdout.readline().rstrip("\n"))
    process.stdin.close()
    assert process.wait() == 0
    assert answers == [*from_file.stdout.splitlines()[:2], ""]
    said = process.stderr.read()
    assert "> " not in said  # no prompt when the input is not a terminal
    assert re.search(r"^line 3: longer than the model's \d+ positions: left empty$", said, re.M), said
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


# ------------------------------------------------------------------------------------------ configuration


def _run_args(sample, out, *extra: str) -> list[str]:
    """A small `syntrain run` on the sample shards, given by flags and --set only."""
    return ["run", "--data", str(sample / "shards" / "train"), "--valid", str(sample / "shards" / "valid"),
            "--out", str(out), "--max-tokens", "300", "--threads", "1", "--pascal-heads", "2", "--set",
            "model.d_model=32", "--set", "model.d_ff=64", "--set", "model.enc_layers=1", "--set",
            "model.dec_layers=1", "--log-interval", "1", "--eval-interval", "2", "--eval-sentences", "2", *extra]


def test_run_folder_holds_its_configuration_and_log_and_resumes_from_them(sample, tmp_path):
    import tomllib

    from synprep.shards import load_manifest

    out = tmp_path / "r"
    first = syntrain(*_run_args(sample, out, "--max-steps", "2", "--warmup", "5"))
    assert first.returncode == 0, first.stderr
    config = tomllib.loads((out / "config.toml").read_text(encoding="utf-8"))
    assert config["data"] == {"train": str(sample / "shards" / "train"), "valid": str(sample / "shards" / "valid"),
                              "test": ""}
    assert config["model"]["preset"] == "tiny" and config["model"]["d_model"] == 32
    assert config["model"]["pascal_heads"] == [2] and config["model"]["n_heads"] == 4  # the preset's
    assert (config["train"]["max_steps"], config["train"]["warmup"], config["train"]["label_smoothing"]) == (2, 5, 0.1)
    signature = load_manifest(str(sample / "shards" / "train")).signature
    assert config["synprep"]["signature"]["bpe_codes_sha256"] == signature["bpe_codes_sha256"]
    assert config["synprep"]["signature"]["parsers"] == signature["parsers"]
    log = (out / "train.log").read_text(encoding="utf-8")
    assert log == first.stderr and "warning: warm-up (5 steps) is longer than the run (2 steps)" in log
    # the run folder is all a resume needs; its first line names the step
    resumed = syntrain("run", "--resume", "--out", str(out), "--max-steps", "4")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stderr.splitlines()[0] == f"syntrain: resuming {out} at step 2"
    assert _steps(out) == [1, 2, 3, 4]
    assert (out / "train.log").read_text(encoding="utf-8") == first.stderr + resumed.stderr
    assert tomllib.loads((out / "config.toml").read_text(encoding="utf-8"))["train"]["max_steps"] == 4
    # a folder without config.toml (an older run) needs its recipe again
    (tmp_path / "old").mkdir()
    old = syntrain("run", "--resume", "--out", str(tmp_path / "old"))
    assert old.returncode == 2 and "has no config.toml" in old.stderr


def test_nothing_is_written_before_every_check_has_passed(sample, tmp_path):
    out = tmp_path / "r"
    refused = syntrain(*_run_args(sample, out, "--max-steps", "1", "--max-tokens", "5"))  # found after reading data
    assert refused.returncode == 2 and "max_tokens 5 is below the longest training sentence" in refused.stderr
    assert not out.exists()
    corrected = syntrain(*_run_args(sample, out, "--max-steps", "1"))
    assert corrected.returncode == 0, corrected.stderr
    assert {"vocab.json", "config.toml", "train.log", "last.pt"} <= set(os.listdir(out))


def _foreign_copy(split, to):
    """A copy of a split folder whose manifest says it was made with other BPE codes."""
    import shutil

    shutil.copytree(split, to)
    manifest = json.loads((to / "manifest.json").read_text(encoding="utf-8"))
    manifest["signature"]["bpe_codes_sha256"] = "0" * 64
    (to / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return to


def test_data_flag_keeps_only_recipe_splits_of_the_same_shards(sample, tmp_path):
    import shutil

    from syntrain.config.resolve import check_run, resolve_run

    shards = sample / "shards"
    foreign = _foreign_copy(shards / "test", tmp_path / "foreign_test")
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(f'[data]\ntrain = "{shards / "train"}"\nvalid = "{shards / "valid"}"\ntest = "{foreign}"\n')
    other_train = tmp_path / "other_train"
    shutil.copytree(shards / "train", other_train)  # the same shards (signature) elsewhere
    cfg, notes, _ = resolve_run(str(recipe), {"data": str(other_train)}, {})
    assert cfg.valid == str(shards / "valid") and cfg.test == ""
    assert len(notes) == 1 and f"its test split {foreign} is dropped: its BPE codes differ" in notes[0]
    cfg, notes, _ = resolve_run(str(recipe), {"data": str(other_train), "test": str(shards / "test")}, {})
    assert (cfg.test, notes) == (str(shards / "test"), [])
    cfg, notes, _ = resolve_run(str(recipe), {"data": str(other_train), "valid": "", "test": ""}, {})
    assert (cfg.valid, cfg.test, notes) == ("", "", [])  # '' = none, as the user said: no warning
    # training data from another dataset: both of the recipe's splits go
    cfg, notes, _ = resolve_run(str(recipe), {"data": str(_foreign_copy(shards / "train", tmp_path / "ft"))}, {})
    assert (cfg.valid, cfg.test) == ("", str(foreign)) and "valid split" in notes[0]  # foreign test: same codes
    # no --data: the recipe's splits stay; a split of other shards is one warning
    cfg, notes, label = resolve_run(str(recipe), {"max_steps": 50, "warmup": 10}, {})
    assert cfg.test == str(foreign) and notes == []
    assert check_run(cfg, label) == [f"warning: the test split {foreign} was not made with the BPE codes of the "
                                     f"training data {shards / 'train'} (synprep signatures differ)"]


def test_warmup_longer_than_the_run_is_one_warning_with_the_numbers():
    from syntrain.config.resolve import warmup_note
    from syntrain.config.train import TrainConfig

    note = warmup_note(TrainConfig(max_steps=40))
    assert note == ("warning: warm-up (4000 steps) is longer than the run (40 steps): lr reaches 7.2e-06 at the last "
                    "step, never its peak 0.0007 (lower --warmup, e.g. to 4)")
    assert warmup_note(TrainConfig(max_steps=40, warmup=40)) is None


def test_set_overrides_any_field_and_flags_win():
    from syntrain.config import ConfigError
    from syntrain.config.resolve import resolve_run

    cfg, _, _ = resolve_run(None, {"data": "d", "warmup": 7}, {"dropout": 0.2},
                            ("model.dbsa_encoder=true", "train.warmup=100", "model.pascal_heads=[1, 0]",
                             "train.device=cpu", "model.dropout=0.3", "train.lr=1e-3"))
    assert cfg.model == {"dbsa_encoder": True, "pascal_heads": [1, 0], "dropout": 0.2}
    assert (cfg.warmup, cfg.device, cfg.lr) == (7, "cpu", 1e-3)
    for item, message in [("model.dbsa_encoder=yes", "--set model.dbsa_encoder must be true or false, got 'yes'"),
                          ("model.dbsa_encoder=\"true\"", "--set model.dbsa_encoder must be true or false"),
                          ("train.warmup=0", "--set train.warmup must be >= 1, got 0"),
                          ("model.pascal_head=2", "--set model: unknown key pascal_head (did you mean pascal_heads?)"),
                          ("train.dropout=0.1", "--set train: unknown key dropout (a [model] key)"),
                          ("data.train=x", "--set data.train=x: expected model.FIELD=VALUE or train.FIELD=VALUE")]:
        with pytest.raises(ConfigError) as error:
            resolve_run(None, {"data": "d"}, {}, (item,))
        assert str(error.value).startswith(message), (item, str(error.value))


def test_run_help_shows_every_option_with_its_default():
    from click.testing import CliRunner

    from syntrain.cli import cli, run_flag_fields

    result = CliRunner().invoke(cli, ["run", "--help"], terminal_width=200)
    assert result.exit_code == 0
    assert result.output.count("[default: ") == len(run_flag_fields())
    assert "--warmup INTEGER" in result.output and "[default: 4000]" in result.output
    assert "(a number > 0).  [default: 0.0007]" in result.output  # --lr
    assert "[default: the preset's: cpu 0.1, tiny 0.1, base 0.1]" in result.output  # --dropout


def test_help_and_a_bad_train_flag_answer_without_torch():
    """`syntrain --help` and a [train] flag value refused by its declaration answer before torch is imported: the
    model flags (read from the switches' declarations, which import torch) are added only when an argument may be
    one; a bad model flag value is refused too, with torch then imported."""
    script = ("import sys\nfrom click.testing import CliRunner\nfrom syntrain.cli import cli\n"
              "for args in (['--help'], ['run', '--warmup', '0'], ['run', '--dropout', '2']):\n"
              "    result = CliRunner().invoke(cli, args)\n"
              "    print(result.exit_code, 'torch' in sys.modules, result.output.strip().splitlines()[-1])\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=True)
    lines = done.stdout.splitlines()
    assert lines[0].startswith("0 False "), lines
    assert lines[1] == "2 False Error: Invalid value for '--warmup': 0 is not in the range x>=1.", lines
    assert lines[2] == "2 True Error: Invalid value for '--dropout': 2.0 is not in the range 0<=x<1.", lines


def test_compare_subcommand_writes_only_what_it_says(sample, tmp_path):
    import shutil

    run = tmp_path / "model"
    shutil.copytree(sample / "run", run)
    before = set(os.listdir(run))
    result = syntrain("compare", "--data", str(sample / "shards" / "test"), "--samples", "10", str(run),
                      env={**os.environ, "SYNPREP_PROGRESS_SECONDS": "0"})
    assert result.returncode == 0, result.stderr
    assert re.search(rf"^compare {run}: translating (\d+)/\1 sent \(100%\), ", result.stderr, re.M), result.stderr
    assert result.stdout.startswith("| run | switches | seed | steps |")
    assert "| model | pascal heads [2]" in result.stdout
    assert set(os.listdir(run)) - before == {"test.hyp", "test.hyp.json", "describe.json"}
    assert result.stderr.strip().splitlines()[-1] == (f"compare wrote {run / 'test.hyp'}, {run / 'test.hyp.json'}, "
                                                      f"{run / 'describe.json'}")
    again = subprocess.run([sys.executable, "-m", "syntrain.compare", "--data", str(sample / "shards" / "test"),
                            "--samples", "10", str(run)], capture_output=True, text=True, cwd=REPO)
    assert again.returncode == 0 and again.stdout == result.stdout  # test.hyp reused: same checkpoint, split, beam
    assert again.stderr.strip().splitlines()[-1] == f"compare wrote {run / 'describe.json'}"
    missing = syntrain("compare", "--data", str(sample / "shards" / "test"), str(tmp_path))
    assert missing.returncode == 2 and "no best.pt or test.hyp in" in missing.stderr


def test_one_checkpoint_gives_one_set_of_hypotheses(sample, tmp_path):
    """The run's final test, `syntrain eval` and `syntrain compare` (decoding again, and reusing the final test's
    hypotheses) give byte-identical hypotheses with their default settings: each decodes with the run's own beam,
    length penalty, batches (max_tokens) and threads."""
    import shutil

    shards, run = sample / "shards", tmp_path / "run"
    trained = syntrain(*_run_args(sample, run, "--max-steps", "40", "--max-tokens", "60", "--lr", "3e-3",
                                  "--test", str(shards / "train"), "--eval-interval", "20"))
    assert trained.returncode == 0, trained.stderr
    final = (run / "test.hyp").read_bytes()
    assert len(final.splitlines()) == len(read_split(str(shards / "train"), ["id"])[0]["id"])
    assert json.loads((run / "test.hyp.json").read_text())["max_tokens"] == 60
    evaluated = syntrain("eval", "--checkpoint", str(run / "best.pt"), "--data", str(shards / "train"),
                         "-o", str(tmp_path / "eval.hyp"))
    assert evaluated.returncode == 0, evaluated.stderr
    device = "cuda" if torch.cuda.is_available() else "cpu"
    assert f"eval: beam 4, length penalty 0.6, max_tokens 60, 1 thread(s) on {device}" in evaluated.stderr
    assert (tmp_path / "eval.hyp").read_bytes() == final
    fresh = tmp_path / "fresh"
    shutil.copytree(run, fresh, ignore=shutil.ignore_patterns("test.hyp*"))
    env = {**os.environ, "SYNPREP_PROGRESS_SECONDS": "0"}
    decoded = syntrain("compare", "--data", str(shards / "train"), "--samples", "10", str(fresh), env=env)
    assert decoded.returncode == 0, decoded.stderr
    assert f"compare {fresh}: translating" in decoded.stderr
    assert (fresh / "test.hyp").read_bytes() == final
    reused = syntrain("compare", "--data", str(shards / "train"), "--samples", "10", str(run), env=env)
    assert reused.returncode == 0 and "translating" not in reused.stderr, reused.stderr
    assert f"compare {run}: {run / 'test.hyp'} reused" in reused.stderr
    assert (run / "test.hyp").read_bytes() == final
    other = syntrain("compare", "--data", str(shards / "train"), "--samples", "10", "--threads", "2", str(run),
                     env=env)  # other settings: decoded again
    assert other.returncode == 0 and f"compare {run}: translating" in other.stderr, other.stderr


def _hypothesis_run(folder, lines: list[str], **described) -> str:
    folder.mkdir()
    (folder / "test.hyp").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    (folder / "describe.json").write_text(json.dumps(described), encoding="utf-8")
    return str(folder)


def test_compare_flags_degenerate_systems_and_unequal_budgets_and_groups_seeds(sample, tmp_path):
    """Runs brought as hypotheses (describe.json: switches, seed, steps, system): a degenerate run ("a a a a")
    is flagged in the table and in --json, and no p value beside it stands bare; unequal budgets are said; the
    seeds of a system are grouped (mean, spread) and its p value, which resamples the seeds too, is larger than
    the one-run paired bootstrap's when the seeds disagree."""
    split = sample / "shards" / "train"
    refs = read_split(str(split), ["tgt_text"])[0]["tgt_text"].to_pylist()
    shuffled = refs[1:] + refs[:1]  # fluent text, wrong sentences
    half = [ref if i % 2 else other for i, (ref, other) in enumerate(zip(refs, shuffled))]
    fifth = [other if i % 5 else ref for i, (ref, other) in enumerate(zip(refs, shuffled))]
    runs = [_hypothesis_run(tmp_path / "base1", half, switches="none", seed=1, steps=100, system="base"),
            _hypothesis_run(tmp_path / "base2", half, switches="none", seed=2, steps=100, system="base"),
            _hypothesis_run(tmp_path / "new1", refs, switches="pascal", seed=1, steps=100, system="new"),
            _hypothesis_run(tmp_path / "new2", fifth, switches="pascal", seed=2, steps=100, system="new"),
            _hypothesis_run(tmp_path / "broken", ["a a a a a"] * len(refs), switches="x", seed=1, steps=80,
                            system="broken")]
    out = tmp_path / "results.json"
    result = syntrain("compare", "--data", str(split), "--samples", "200", "--json", str(out), *runs)
    assert result.returncode == 0, result.stderr
    rows = {line.split(" | ")[0].strip("| "): line for line in result.stdout.splitlines() if line.startswith("| ")}
    assert "repeated words on 100% of lines" in rows["broken"] and "below the floor 1" in rows["broken"]
    assert "one output line on 100% of lines" in rows["broken"]
    assert "unequal budget: 80 steps trained, another run 100" in rows["broken"]
    assert re.search(r"\| \d\.\d{3} \(flagged\) \|", rows["broken"]), rows["broken"]
    assert "(flagged)" not in rows["new1"] and rows["base1"].count("baseline") == 2
    assert "Warning: unequal budgets: the runs trained different numbers of steps" in result.stdout
    results = json.loads(out.read_text())
    flags = {system["run"]: system["flags"] for system in results["systems"]}
    assert flags[runs[0]] == flags[runs[2]] == [] and len(flags[runs[4]]) == 4
    assert [system["p_flagged"] for system in results["systems"]] == [False, False, False, False, True]
    groups = {tuple(group["runs"]): group for group in results["groups"]}
    assert list(groups) == [tuple(runs[:2]), tuple(runs[2:4]), (runs[4],)]
    base, new, broken = groups.values()
    assert base["bleu_spread"] == 0 and new["bleu_spread"] > 10 and broken["bleu_spread"] is None
    paired = {system["run"]: system for system in results["systems"]}[runs[2]]["p_bleu"]
    assert paired < 0.05 < new["p_bleu"]  # new1 alone is better than base1; the seeds of new disagree
    assert broken["p_flagged"] and not new["p_flagged"] and base["p_bleu"] is None
    assert "| pascal | new1, new2 | 1, 2 | 100, 100 |" in result.stdout


def test_interactive_translation_prompts_on_a_terminal(sample):
    import pty

    master, slave = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "syntrain", "translate", "--checkpoint",
                                str(sample / "run" / "last.pt"), "--beam", "1", "--interactive"], stdin=slave,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    os.close(slave)
    ready, _, _ = select.select([process.stderr], [], [], 300)
    assert ready and os.read(process.stderr.fileno(), 2) == b"> "  # the prompt, before any input
    os.write(master, (_raw_lines(sample)[0] + "\n").encode())
    ready, _, _ = select.select([process.stdout], [], [], 300)
    assert ready, "no answer to an interactive line"
    answer = process.stdout.readline()
    os.write(master, b"\x04")  # end of input (Ctrl-D)
    _, err = process.communicate(timeout=120)
    os.close(master)
    # one answer line per input line; a barely trained model may answer with an empty translation (seen on CUDA)
    assert process.returncode == 0 and answer.endswith(b"\n"), err
    assert err.startswith(b"> ")  # the prompt for the next line


def test_recipe_fields_page_is_current():
    """docs/recipe-fields.md lists every field as declared (regenerate: python -m syntrain.config)."""
    from syntrain.config.docs import BEGIN, docs_page

    with open(os.path.join(REPO, "docs", "recipe-fields.md"), encoding="utf-8") as handle:
        text = handle.read()
    assert BEGIN in text and docs_page(text) == text, "run: python -m syntrain.config docs/recipe-fields.md"
    for name in ("warmup", "pascal_heads", "label_smoothing", "valid"):
        assert f"| `{name}` |" in text


@pytest.mark.parametrize("recipe", sorted(os.listdir(os.path.join(REPO, "pipelines", "train"))))
def test_shipped_recipes_pass_the_up_front_model_check(recipe):
    """Every shipped recipe's model builds (on the meta device: the check `syntrain run` makes before any work)."""
    from syntrain.config.recipe import load_run_config
    from syntrain.config.resolve import check_model
    from syntrain.config.train import TrainConfig

    check_model(TrainConfig.from_dict(load_run_config(os.path.join(REPO, "pipelines", "train", recipe))), recipe)


def test_a_run_folder_translates_raw_text_after_the_dataset_moved(sample, tmp_path):
    """The run folder keeps what raw-text translation needs (source/: BPE codes, the parser's identity, with
    --bundle the parser model); a file found nowhere is one error naming it and the flag that supplies it."""
    import shutil

    dataset, run = tmp_path / "data", tmp_path / "run"
    shutil.copytree(sample / "shards", dataset)  # the sample pipeline trains its parser into the dataset folder
    args = _run_args(sample, run, "--max-steps", "2", "--bundle")
    args[2] = str(dataset / "train")
    assert syntrain(*args).returncode == 0
    assert sorted(os.listdir(run / "source")) == ["codes.bpe", "parser-src.udpipe", "source.json"]
    raw = tmp_path / "in.en"
    raw.write_text("".join(line + "\n" for line in _raw_lines(sample)))
    ckpt = str(run / "last.pt")
    before = syntrain("translate", "--checkpoint", ckpt, "-i", str(raw), "--beam", "2")
    assert before.returncode == 0 and before.stdout.strip(), before.stderr
    dataset.rename(tmp_path / "moved")
    assert syntrain("translate", "--checkpoint", ckpt, "-i", str(raw), "--beam", "2").stdout == before.stdout

    info = json.loads((run / "source" / "source.json").read_text())
    (run / "source" / info.pop("bundled")).unlink()  # as a run without --bundle
    (run / "source" / "source.json").write_text(json.dumps(info))
    missing = syntrain("translate", "--checkpoint", ckpt, "-i", str(raw))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1, missing.stderr
    assert missing.stderr.startswith(f"syntrain: error: {dataset / 'models' / 'src.udpipe'}: the source parser model "
                                     "is missing") and "--parser-model PATH" in missing.stderr
    (run / "source" / "codes.bpe").unlink()
    given = ["--parser-model", str(tmp_path / "moved" / "models" / "src.udpipe")]
    missing = syntrain("translate", "--checkpoint", ckpt, "-i", str(raw), *given)
    assert missing.stderr.startswith(f"syntrain: error: {dataset / 'codes.bpe'}: the BPE codes are missing") and \
        "--bpe-codes PATH" in missing.stderr, missing.stderr
    given += ["--bpe-codes", str(tmp_path / "moved" / "codes.bpe")]
    assert syntrain("translate", "--checkpoint", ckpt, "-i", str(raw), "--beam", "2", *given).stdout == before.stdout


def test_a_travelling_source_preparation_keeps_the_source_normalization(tmp_path):
    """Raw text translated from a run folder is normalized as the training data was ([normalize] src)."""
    from syntrain.runfolder.source import travelling_preparation

    model = tmp_path / "src.udpipe"
    model.write_bytes(b"any file")
    pipeline = {"src_parser": {"backend": "udpipe", "model": "gone.udpipe"}, "normalize": {"src": ["romanian"]},
                "bpe": {}, "features": {"src": ["parents"]}}
    ckpt = {"pipeline": pipeline, "signature": {}, "dataset": str(tmp_path / "dataset")}
    preparation = travelling_preparation(ckpt, str(tmp_path / "run" / "best.pt"), parser_model=str(model))
    assert preparation.normalize == ("romanian",) and preparation.parser["model"] == str(model)
