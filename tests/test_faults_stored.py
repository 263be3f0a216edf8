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
