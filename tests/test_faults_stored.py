"""Generators over what the project stores and reads back: each field of a split's manifest.json (read from the
`Manifest` dataclass, so a new field is covered without a new test), damaged: missing, of another type, an
impossible count. Each is refused in one line naming the file (`load_manifest`, `synprep validate`), never a
traceback. (Checkpoint fields: tests/test_faults_run.py, from `CHECKPOINT_FIELDS`.)"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from synprep.errors import InputError
from synprep.shards import Manifest, load_manifest
from tests.conftest import cli_in_process


@pytest.fixture(scope="module")
def split(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("stored")
    subprocess.run([sys.executable, "-m", "synprep.cli", "synth", "--pairs", "60", "-o", str(root / "syn")],
                   check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "synprep.cli", "convert", str(root / "syn" / "pipeline.toml"),
                    "--output", str(root / "out"), "--workers", "1"], check=True,
                   capture_output=True)
    return root / "out" / "train"


def _manifest_cases() -> list[tuple[str, str, object]]:
    hints = typing.get_type_hints(Manifest)
    cases = []
    for spec in dataclasses.fields(Manifest):
        if spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
            cases.append((spec.name, "missing", None))
        cases.append((spec.name, "another type", 1.5 if hints[spec.name] in (str, dict[str, typing.Any]) else "x"))
        if hints[spec.name] is int:
            cases.append((spec.name, "below 0", -1))
    cases.append(("rejected", "a count below 0", {"empty": -2}))
    return cases


@pytest.mark.parametrize("key, how, value", _manifest_cases(), ids=str)
def test_every_manifest_field_damaged_is_one_line(split, tmp_path, key, how, value):
    folder = tmp_path / "train"
    shutil.copytree(split, folder)
    data = json.loads((folder / "manifest.json").read_text())
    if value is None:
        del data[key]
    else:
        data[key] = value
    (folder / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match=f"manifest.json: '{key}'"):
        load_manifest(str(folder))
    code, err = cli_in_process("synprep", ["validate", str(folder)])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code in (1, 2) and "Traceback" not in err and lines and key in err, err[-1500:]


def _nested_cases() -> list[tuple[str, str, object]]:
    """(where, how, value) inside a manifest: every field of a shard entry (`SHARD_FIELDS`) missing, of another
    type or below 0; every configuration table (`CONFIGURATION_TABLES`) of another type; a signature digest
    (`*_sha256`, found in the manifest the fixture converts) of another type or not a sha256."""
    from synprep.shards import CONFIGURATION_TABLES, SHARD_FIELDS

    cases: list[tuple[str, str, object]] = []
    for key, hint in SHARD_FIELDS.items():
        cases += [(f"shards.{key}", "missing", None), (f"shards.{key}", "another type", 1.5)]
        if hint is int:
            cases.append((f"shards.{key}", "below 0", -1))
    cases += [("shards.file", "not a plain name", "../part-00000.arrow"), ("shards.sha256", "not hex", "z" * 64)]
    cases += [(f"configuration.{key}", "another type", 7) for key in CONFIGURATION_TABLES]
    cases += [(f"signature.{key}", how, value) for key in ("bpe_codes_sha256", "subword_files_sha256")
              for how, value in (("another type", 5), ("not a sha256", "abc"))]
    return cases


@pytest.mark.parametrize("where, how, value", _nested_cases(), ids=str)
def test_every_shard_entry_table_and_digest_damaged_is_one_line(split, tmp_path, where, how, value):
    """Before: a shard entry without its sha256 was read unverified (exit 0), a signature digest of another type
    was not compared (or an AttributeError traceback), a configuration table of another type a traceback."""
    folder = tmp_path / "train"
    shutil.copytree(split, folder)
    data = json.loads((folder / "manifest.json").read_text())
    table, key = where.split(".")
    target = data["shards"][0] if table == "shards" else data[table]
    if value is None:
        del target[key]
    else:
        target[key] = value
    (folder / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match=key):
        load_manifest(str(folder))
    code, err = cli_in_process("synprep", ["validate", str(folder)])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and "Traceback" not in err and len(lines) == 1 and key in lines[0], err[-1500:]
    code, err = cli_in_process("syntrain", ["run", "--data", str(folder), "--out", str(tmp_path / "run")])
    assert not (tmp_path / "run").exists() and code == 2 and "Traceback" not in err, err[-1500:]
    assert key in err.strip().splitlines()[-1], err[-1500:]
