"""Dataset folders (synprep.shards): pinned bytes, manifests independent of the output folder, integrity,
compression, the readers."""

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

BIN = Path(sys.executable).parent

# sha256 of the shards written before the shards module existed (commit a2de335): the refactor and every later
# change must keep uncompressed shards byte-identical for the same input and configuration.
SAMPLE_SHARDS = {
    "test/part-00000.arrow": "f5a4a8b83f21c46500a12ea64b9e659c4988f4f3c1759a9e3af7b2165728d322",
    "train/part-00000.arrow": "8e4f91d49f48aba000e14e6196efd9094c5ab53f0c832f2699acabcd759cb11f",
    "train/part-00001.arrow": "bcc0829eabfb8b9c45f12e820c5f22e168bb2aba050bad6e98f8b38dab778c60",
    "train/part-00002.arrow": "3161bc0567372c816e948b43fadcfd18debf4d1e3595dfc8288ed15d978335ae",
    "valid/part-00000.arrow": "eb38b08e67430083458fcde8d05402799c11435b699ac7707eba928b71697ee9",
}
SYNTH_LIFT_SHARDS = {
    "test/part-00000.arrow": "0c448ecc50a035752ce549663ed58454849de5ff1fea4b101b6dec60de5d28d3",
    "train/part-00000.arrow": "54db7f397685b81c44fbee2fd4710068ce76b46d1c8ce94baab46985a5a9bfae",
    "valid/part-00000.arrow": "efa33caa5155e9c94e60ddaff90532bc072fbf544a3a9be54f0724518bd72b0a",
}
SYNTH_DROP_SHARDS = {
    "test/part-00000.arrow": "a3dcda7e1a0b369d3e6e8c17db325704ae1ddf2f05111356e72ce12c240a9b6d",
    "train/part-00000.arrow": "6762e5a67e58a9079fa10bab20e26dc968494b64fea921eb2a76e8257c7d7610",
    "train/part-00001.arrow": "b02d7110354387d62910a81394a7a2ae18ed07af05069a70b8b24ba016cbbfeb",
    "train/part-00002.arrow": "7ebea3edbe017a1028b9a0e68498844e900483737fc3897ae3dc0a8c8f8b4ff2",
    "valid/part-00000.arrow": "906099b61c4b2eb429a77d79557c436d83ac24732d14398f6b91aa76b9654a34",
}


def run(*args):
    result = subprocess.run([str(BIN / "synprep"), *map(str, args)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def shard_hashes(out):
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(out).glob("*/part-*.arrow"))}


def synth_pipeline(folder, drop=False):
    """`synprep synth --seed 1` (pre-parsed CoNLL-U input); `drop`: the other policies and all feature groups."""
    run("synth", "--pairs", 300, "--seed", 1, "-o", folder)
    path = folder / "pipeline.toml"
    if drop:
        text = path.read_text()
        text = text.replace('root = "drop"', 'root = "keep"\nstrip_subtypes = true')
        text = text.replace('non_projective = "lift"', 'non_projective = "drop"')
        text = text.replace('tgt = ["parents", "transitions", "labels"]',
                            'tgt = ["parents", "distances", "transitions", "labels"]')
        text = text.replace("shard_size = 10000", "shard_size = 100")
        path.write_text(text)
    return path


@pytest.mark.slow
def test_sample_pipeline_shards_are_byte_identical_to_before(tmp_path):
    run("convert", REPO / "pipelines" / "sample.toml", "--output", tmp_path / "out", "--compression", "none")
    assert shard_hashes(tmp_path / "out") == SAMPLE_SHARDS


@pytest.mark.parametrize("drop", [False, True], ids=["lift", "drop"])
def test_preparsed_shards_are_byte_identical_to_before(tmp_path, drop):
    pipeline = synth_pipeline(tmp_path / "synth", drop)
    run("convert", pipeline, "--output", tmp_path / "out", "--workers", 2, "--compression", "none")
    assert shard_hashes(tmp_path / "out") == (SYNTH_DROP_SHARDS if drop else SYNTH_LIFT_SHARDS)
