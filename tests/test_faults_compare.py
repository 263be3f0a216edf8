"""A generator over what `syntrain compare` records beside each row: every field of a hypotheses key (what
`decoding_key` writes: the split's content and the decoding settings, `DecodeSettings`) and of a run's
description (`describe`: its training data, its steps), perturbed in one of two otherwise equal runs, or missing
from it: a field that makes the rows incomparable is flagged in that row (and its p value marked flagged); only
the fields compare declares as changing no output or as what is compared (`NOT_COMPARED`, the description's
switches, seed and system) are not. Runs are brought as hypotheses (test.hyp, test.hyp.json, describe.json): no
training."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from syntrain.compare import DESCRIPTION_COMPARED, HYPOTHESES_DIGEST, NOT_COMPARED, compare_table, reference_texts
from syntrain.decode import DecodeSettings
from syntrain.runfolder.resume import data_fingerprint

BUDGET = ("trained_steps",)  # flagged as an unequal budget (steps: best.pt's, an earlier step)
DESCRIPTION = {"switches": "none", "seed": 1, "steps": 10, "trained_steps": 10, "minutes": 0.5, "system": "s",
               "training_data": "0123456789ab"}


def _key(split: Path | None) -> dict:
    """A hypotheses key as `decoding_key` writes it (None: the fields only)."""
    settings = DecodeSettings(*(field.default if field.default is not dataclasses.MISSING else 1
                                for field in dataclasses.fields(DecodeSettings)))
    return {"checkpoint": "0" * 64, "data": os.path.realpath(split or "."),
            "data_fingerprint": data_fingerprint(str(split)) if split else "", **settings.key("cpu")}


def _other(value: object) -> object:
    """Another value of the same type."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, list):
        return [*value, 1]
    return f"{value}-other"


@pytest.fixture(scope="module")
def split(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("compare")
    subprocess.run([sys.executable, "-m", "synprep.cli", "synth", "--pairs", "40", "-o", str(root / "syn")],
                   check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "synprep.cli", "convert", str(root / "syn" / "pipeline.toml"), "--output",
                    str(root / "out"), "--workers", "1"], check=True, capture_output=True)
    return root / "out" / "train"


def _cases() -> list:
    key = _key(None)
    cases = [("key", name) for name in key] + [("describe", name) for name in DESCRIPTION]
    return [pytest.param(where, name, how, id=f"{where}.{name}-{how}") for where, name in cases
            for how in ("changed", "missing")]


def _run(folder: Path, hyps: list[str], key: dict, described: dict) -> str:
    folder.mkdir()
    text = "".join(line + "\n" for line in hyps).encode("utf-8")
    (folder / "test.hyp").write_bytes(text)  # with its digest beside the key, as `write_hypotheses` writes it
    (folder / "test.hyp.json").write_text(json.dumps({**key, HYPOTHESES_DIGEST: hashlib.sha256(text).hexdigest()}),
                                          encoding="utf-8")
    (folder / "describe.json").write_text(json.dumps(described), encoding="utf-8")
    return str(folder)


def _flags(split: Path, runs: list[str]) -> list[list[str]]:
    results: dict = {}
    compare_table(runs, str(split), samples=10, results=results)
    return [system["flags"] for system in results["systems"]]


def test_equal_runs_have_no_flags(split, tmp_path):
    hyps = reference_texts(str(split))[1]
    runs = [_run(tmp_path / name, hyps, _key(split), DESCRIPTION) for name in ("a", "b")]
    assert _flags(split, runs) == [[], []]


@pytest.mark.parametrize("where, name, how", _cases())
def test_every_recorded_field_that_differs_is_flagged(split, tmp_path, where, name, how):
    hyps = reference_texts(str(split))[1]
    key, described = _key(split), dict(DESCRIPTION)
    changed = key if where == "key" else described
    if how == "missing":
        del changed[name]
    else:
        changed[name] = _other(changed[name])
    runs = [_run(tmp_path / "a", hyps, _key(split), DESCRIPTION), _run(tmp_path / "b", hyps, key, described)]
    flags = _flags(split, runs)
    compared = name not in NOT_COMPARED if where == "key" else name in DESCRIPTION_COMPARED + BUDGET
    if name in BUDGET and how == "missing":
        compared = False  # then best.pt's step is read as the budget (`describe`)
    if compared:
        assert any(flags), (name, how, flags)
    else:
        assert flags == [[], []], (name, how, flags)
