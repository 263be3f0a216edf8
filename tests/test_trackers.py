"""Trackers of a run: TensorBoard events in every run folder by default (--no-tensorboard: none), Weights & Biases
(W&B's offline mode, no network) with the same scalars as metrics.jsonl and the run's configuration."""

import json
import os
import subprocess
import sys
import time

import pytest

import syntrain

from .conftest import REPO

SMALL = dict(d_model=32, n_heads=4, d_ff=64, enc_layers=2, dec_layers=2)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    root = tmp_path_factory.mktemp("trackers")
    subprocess.run([sys.executable, "-m", "synprep.cli", "convert", str(REPO / "pipelines" / "sample.toml"),
                    "--output", str(root / "shards"), "--workers", "1"], check=True, capture_output=True)
    return root / "shards"


def small_run(shards, out, **fields):
    return syntrain.train(data=str(shards / "train"), valid=str(shards / "valid"), out=str(out), max_tokens=300,
                          max_steps=4, warmup=2, log_interval=1, eval_interval=2, eval_sentences=2, threads=1,
                          model=SMALL, **fields)


def records(run):
    return [json.loads(line) for line in open(os.path.join(run, "metrics.jsonl"), encoding="utf-8")]


def test_tensorboard_by_default_and_not_with_no_tensorboard(shards, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = small_run(shards, tmp_path / "default")
    accumulator = EventAccumulator(os.path.join(run, "tensorboard"))
    accumulator.Reload()
    assert [event.step for event in accumulator.Scalars("loss")] == [r["step"] for r in records(run) if "loss" in r]
    assert "valid_bleu" in accumulator.Tags()["scalars"]
    done = subprocess.run([sys.executable, "-m", "syntrain", "run", "--data", str(shards / "train"), "--max-steps",
                           "1", "--max-tokens", "300", "--threads", "1", "--preset", "cpu", "--no-tensorboard",
                           "--out", str(tmp_path / "off")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "off" / "last.pt").is_file() and not (tmp_path / "off" / "tensorboard").exists()


def wandb_records(path):
    """The records of a W&B run file (`run-<id>.wandb`: W&B's LevelDB-style log of protobuf records, 32 KiB blocks,
    each chunk with a 7-byte header: crc32, length, type 1 full / 2 first / 3 middle / 4 last)."""
    import struct

    from wandb.proto import wandb_internal_pb2

    data = open(path, "rb").read()
    assert data[:4] == b":W&B"
    position, pending, found = 7, b"", []
    while position + 7 <= len(data):
        if 32768 - position % 32768 < 7:  # a block's tail too short for a header: padding
            position += 32768 - position % 32768
            continue
        _, length, kind = struct.unpack("<IHB", data[position:position + 7])
        if kind == 0:
            break
        pending += data[position + 7:position + 7 + length]
        position += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            found.append(record)
            pending = b""
    return found


def test_wandb_offline_logs_the_same_scalars_and_the_configuration(shards, tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb-cache"))
    run = small_run(shards, tmp_path / "run", wandb_project="synprep-test", tensorboard=False)
    assert not os.path.exists(os.path.join(run, "tensorboard"))
    (offline,) = [entry.path for entry in os.scandir(os.path.join(run, "wandb")) if entry.name.startswith("offline-")]
    (log,) = [os.path.join(offline, name) for name in os.listdir(offline) if name.endswith(".wandb")]
    deadline = time.monotonic() + 120  # W&B's own process writes the file: complete once it holds the exit record
    found = wandb_records(log)
    while not any(record.WhichOneof("record_type") == "exit" for record in found):
        assert time.monotonic() < deadline, "the W&B run file has no exit record"
        time.sleep(0.5)
        found = wandb_records(log)
    history = {}
    for record in found:
        if record.WhichOneof("record_type") == "history":
            items = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            items = {key: value for key, value in items.items() if not key.startswith("_")}
            history.setdefault(record.history.step.num, {}).update(items)
    expected = {}
    for record in records(run):
        if record["step"] > 0:
            expected.setdefault(record["step"], {}).update(
                {key: value for key, value in record.items() if isinstance(value, int | float)
                 and key not in ("step", "epoch")})
    assert sorted(history) == sorted(expected) == [1, 2, 3, 4]
    for step, values in expected.items():
        assert history[step] == pytest.approx(values), step
    (started,) = [record.run for record in found if record.WhichOneof("record_type") == "run"]
    config = {item.key: json.loads(item.value_json) for item in started.config.update}
    assert started.project == "synprep-test"
    assert config["train"]["max_steps"] == 4 and config["model"]["d_model"] == 32  # config.toml's tables


def _no_wandb_login(tmp_path, monkeypatch, netrc_text=None):
    """No W&B login: no key in the environment, no online mode set, a netrc of `netrc_text` (or none)."""
    for name in ("WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_MODE", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    netrc = tmp_path / "netrc"
    if netrc_text is not None:
        netrc.write_text(netrc_text)
    monkeypatch.setenv("NETRC", str(netrc))
    monkeypatch.setenv("HOME", str(tmp_path))


def test_wandb_not_logged_in_is_one_line_before_the_run_folder(shards, tmp_path, monkeypatch):
    """--wandb-project without a W&B login was wandb's traceback after the run folder was made (blocking the
    rerun): one line, nothing written. A netrc entry for the W&B host is a login; WANDB_MODE=offline needs none."""
    pytest.importorskip("wandb")
    from syntrain.config import ConfigError
    from syntrain.trackers import wandb_login_problem

    _no_wandb_login(tmp_path, monkeypatch)
    with pytest.raises(ConfigError, match="wandb is not logged in to api.wandb.ai .*WANDB_MODE=offline"):
        small_run(shards, tmp_path / "run", wandb_project="p")
    assert not (tmp_path / "run").exists()
    _no_wandb_login(tmp_path, monkeypatch, "machine api.wandb.ai\n  login user\n  password " + "k" * 40 + "\n")
    assert wandb_login_problem() is None
    _no_wandb_login(tmp_path, monkeypatch, "machine other.host login user password key\n")
    assert "not logged in" in wandb_login_problem()
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert wandb_login_problem() is None
