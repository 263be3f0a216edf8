"""A convert output for every reader: the format version in each shard's schema metadata, a README.md dataset card,
and `datasets.load_dataset("arrow", data_dir=OUT)` giving train/validation/test (the installed `datasets`,
offline)."""

import json
import os
import re
import subprocess
import sys

import pyarrow as pa
import pytest

from synprep.convert.dataset_card import hf_split_name
from synprep.schema import FORMAT_VERSION_KEY

from .conftest import REPO


@pytest.fixture(scope="module")
def sample_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("card") / "out"
    subprocess.run([sys.executable, "-m", "synprep.cli", "convert", str(REPO / "pipelines" /
                    "sample.toml"), "--output", str(out), "--workers", "1"], check=True,
                   capture_output=True)
    return out


def manifests(out):
    return {split: json.loads((out / split / "manifest.json").read_text()) for split in ("train", "valid", "test")}


def test_every_shard_names_its_format_version(sample_out):
    for split, manifest in manifests(sample_out).items():
        for shard in manifest["shards"]:
            schema = pa.ipc.open_stream(pa.memory_map(str(sample_out / split / shard["file"]))).schema
            assert schema.metadata[FORMAT_VERSION_KEY.encode()] == str(manifest["schema_version"]).encode()


def test_dataset_card_names_languages_sizes_pipeline_and_loading(sample_out):
    card = (sample_out / "README.md").read_text(encoding="utf-8")
    assert card.startswith("---\n") and "language: [en, de]" in card
    for split, manifest in manifests(sample_out).items():
        rejected = sum(manifest["rejected"].values())
        assert f"| {split} | {manifest['input_lines']} | {manifest['rows']} | {rejected} |" in card
        assert f"path: data/{hf_split_name(split)}-*.arrow" in card
    signature = manifests(sample_out)["train"]["signature"]
    assert signature["parsers"]["src"]["sha256"][:16] in card and "udpipe" in card
    assert signature["bpe_codes_sha256"][:16] in card and "300 merges" in card
    for reader in ("datasets.load_dataset", "synprep.load_dataset", "pa.ipc.open_stream", "pl.read_ipc_stream",
                   "syntrain run --data OUT/train --valid OUT/valid", "synprep export OUT/train"):
        assert reader in card, reader


def test_dataset_card_loading_block_runs(sample_out, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    card = (sample_out / "README.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"^```python\n(.*?)^```", card, re.S | re.M)
    namespace = {}
    exec(compile(block.replace('"OUT', f'"{sample_out}'), "README.md", "exec"), namespace)
    rows = {split: manifest["rows"] for split, manifest in manifests(sample_out).items()}
    assert {name: len(split) for name, split in namespace["splits"].items()} == {
        "train": rows["train"], "validation": rows["valid"], "test": rows["test"]}
    assert len(namespace["dataset"]) == namespace["table"].num_rows == len(namespace["frame"]) == rows["train"]


def test_hf_arrow_builder_reads_the_splits_and_not_the_rejections(sample_out, monkeypatch, tmp_path):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    splits = datasets.load_dataset("arrow", data_dir=str(sample_out), cache_dir=str(tmp_path / "cache"))
    assert set(splits) == {"train", "validation", "test"}
    train = manifests(sample_out)["train"]
    assert train["rejected"] and (sample_out / "train" / "rejected.tsv").stat().st_size  # rejections exist ...
    assert len(splits["train"]) == train["rows"]  # ... and not read as rows
    assert splits["train"].features["src_subwords"].feature.dtype == "string"


def test_links_follow_the_shards_after_a_new_run(sample_out, tmp_path):
    """--overwrite with another shard size: OUT/data/ names the new shards only."""
    pipeline = (REPO / "pipelines" / "sample.toml").read_text()
    pipeline = pipeline.replace('data_root = "../sample_data"', f'data_root = "{REPO / "sample_data"}"')
    path = tmp_path / "p.toml"
    out = tmp_path / "out"
    for size in (20, 30):
        path.write_text(pipeline.replace("shard_size = 20", f"shard_size = {size}"))
        subprocess.run([sys.executable, "-m", "synprep.cli", "convert", str(path), "--output",
                        str(out), "--workers", "1", "--overwrite"], check=True,
                       capture_output=True)
    links = sorted(os.listdir(out / "data"))
    assert [name for name in links if name.startswith("train-")] == ["train-00000-of-00002.arrow",
                                                                     "train-00001-of-00002.arrow"]
    assert all(os.path.isfile(out / "data" / name) for name in links)
