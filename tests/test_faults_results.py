"""A generator over what a score depends on, in the run's final test and `syntrain eval`: the key of its
hypotheses (`compare.decoding_key`: the checkpoint, the split's path and content, every `DecodeSettings` field and
the device) is recorded with the scores (the final test's metrics.jsonl record `test_key` and RUN/test.hyp.json,
eval's `--json` and `syntrain.evaluate`'s `key`) and the settings printed beside them (`decode.settings_text`);
each field changed in one of two evaluations changes its record, and compare's `row_flags` flags it unless it
is what is compared (`NOT_COMPARED`). The scoring (sacrebleu's signature, the references' normalization, the plain
loss) is recorded alike. One tiny run (2 steps); the evaluations run in this process."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch

import syntrain
from syntrain.compare import NOT_COMPARED, row_flags
from syntrain.decode import DecodeSettings, settings_text

from .conftest import cli_in_process

SETTINGS = list(DecodeSettings().key())  # every DecodeSettings field, and the device
TINY = {"d_model": 32, "n_heads": 4, "d_ff": 64, "enc_layers": 1, "dec_layers": 1}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A synthetic dataset and a run trained 2 steps on it, its final test scored."""
    root = tmp_path_factory.mktemp("results")
    code, err = cli_in_process("synprep", ["synth", "--pairs", "60", "-o", root / "syn"])
    assert code == 0, err
    code, err = cli_in_process("synprep", ["convert", root / "syn" / "pipeline.toml", "--output", root / "out",
                                           "--workers", "1"])
    assert code == 0, err
    threads = torch.get_num_threads()
    syntrain.train(data=str(root / "out" / "train"), valid=str(root / "out" / "valid"),
                   test=str(root / "out" / "test"), out=str(root / "run"), model=TINY, max_steps=2, warmup=1,
                   eval_interval=2, log_interval=1, threads=1, seed=1, tensorboard=False)
    torch.set_num_threads(threads)
    return root


@pytest.fixture
def restored_threads():
    """An evaluation with `threads` sets torch's threads in this process: set back after the test."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def _evaluate(run: Path, checkpoint: str = "best.pt", data: Path | None = None, **given: object) -> dict:
    return syntrain.evaluate(str(run / "run" / checkpoint), str(data or run / "out" / "test"), **given)


def test_the_final_test_records_what_eval_reproduces(run, tmp_path, restored_threads):
    """The final test's record (metrics.jsonl), its hypotheses' key (test.hyp.json), `syntrain eval --json` and
    `syntrain.evaluate` on best.pt and the test split: one key, one record (the API's adds the hypotheses) and the
    same scores (the loss without label smoothing in both); the final test's log line prints the settings."""
    records = [json.loads(line) for line in (run / "run" / "metrics.jsonl").read_text().splitlines()]
    [test] = [record for record in records if "test_bleu" in record]
    key = json.loads((run / "run" / "test.hyp.json").read_text())
    assert key.pop("hypotheses_sha256") == hashlib.sha256((run / "run" / "test.hyp").read_bytes()).hexdigest()
    assert test["test_key"] == key and set(SETTINGS) <= set(key)
    code, err = cli_in_process("syntrain", ["eval", "--checkpoint", run / "run" / "best.pt", "--data",
                                            run / "out" / "test", "--json", tmp_path / "eval.json",
                                            "-o", tmp_path / "eval.hyp"])
    assert code == 0, err
    evaluated, api = json.loads((tmp_path / "eval.json").read_text()), _evaluate(run)
    assert evaluated["key"] == api["key"] == key
    assert {name: value for name, value in api.items() if name != "hypotheses"} == evaluated  # one record
    assert (tmp_path / "eval.hyp").read_text(encoding="utf-8").splitlines() == api["hypotheses"]
    for name in ("bleu", "bleu_signature", "chrf", "chrf_signature", "loss"):
        assert test[f"test_{name}"] == evaluated[name] == api[name], name
    assert f"eval: {settings_text(key)}" in err
    assert f"best.pt, {settings_text(key)}): BLEU" in (run / "run" / "train.log").read_text()


def _changed(value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"no other value of {value!r}")
    return value + 1


def _other_device() -> str | None:
    return "cuda" if torch.cuda.is_available() and torch.device(DecodeSettings().key()["device"]).type == "cpu" \
        else None


def _perturbed(run: Path, tmp_path: Path, name: str, key: dict) -> dict:
    """syntrain.evaluate's key with field `name` changed: a DecodeSettings field by its argument, the checkpoint
    by another file of the run, the split by a copy of it elsewhere or by another split."""
    if name == "device":
        if _other_device() is None:
            pytest.skip("one device on this machine")
        return _evaluate(run, device=_other_device())["key"]
    if name in SETTINGS:
        return _evaluate(run, **{name: _changed(key[name])})["key"]
    if name == "checkpoint":
        import torch  # another checkpoint: one weight changed (the key holds its content, not its name)

        ckpt = torch.load(run / "run" / "best.pt", weights_only=False)
        first = next(name for name, value in ckpt["model"].items() if value.is_floating_point())
        ckpt["model"][first] = ckpt["model"][first] * 1.001
        torch.save(ckpt, tmp_path / "other.pt")
        return syntrain.evaluate(str(tmp_path / "other.pt"), str(run / "out" / "test"))["key"]
    if name == "data":
        shutil.copytree(run / "out" / "test", tmp_path / "test")  # the same content elsewhere
        return _evaluate(run, data=tmp_path / "test")["key"]
    if name == "data_fingerprint":
        return _evaluate(run, data=run / "out" / "valid")["key"]  # other content
    raise AssertionError(f"a key field with no way to change it here: {name}")


def _key_fields() -> list[str]:
    """Every field of a hypotheses key: `decoding_key`'s own (checkpoint, data, data_fingerprint) and the
    DecodeSettings key's (read from a key made on this file and the sample split of tests/data)."""
    from syntrain.compare import decoding_key

    split = Path(__file__).parent / "data" / "switches" / "shards" / "train"
    return list(decoding_key(__file__, str(split), DecodeSettings().key()))


@pytest.mark.parametrize("name", _key_fields())
def test_every_key_field_changed_is_recorded_and_flagged(run, tmp_path, restored_threads, name):
    key = _evaluate(run)["key"]
    other = _perturbed(run, tmp_path, name, key)
    assert other[name] != key[name], name
    changed = [field for field in key if other[field] != key[field] and (field == name or field not in NOT_COMPARED)]
    assert changed == [name], (name, key, other)  # no other compared field (another split lies elsewhere too)
    flags = row_flags([{}, {}], [key, other], key["data_fingerprint"])
    assert flags[0] == [] and bool(flags[1]) == (name not in NOT_COMPARED), (name, flags)
    if name in SETTINGS:  # printed with the scores by eval and the final test
        assert settings_text(other) != settings_text(key), name


@pytest.mark.parametrize("given", [{"bleu_tokenize": "none"}, {"normalize_refs": ["romanian"]}], ids=repr)
def test_the_scoring_is_recorded_with_the_scores(run, given):
    """What scores the same hypotheses otherwise (sacrebleu's tokenizer: its signature; the references'
    normalizers) is in the result."""
    plain, scored = _evaluate(run), _evaluate(run, **given)
    assert scored["key"] == plain["key"]  # the same hypotheses
    recorded = ["bleu_signature"] if "bleu_tokenize" in given else ["normalize_refs"]
    assert all(scored[name] != plain[name] for name in recorded), (plain, scored)
