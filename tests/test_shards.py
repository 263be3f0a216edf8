"""Dataset folders (synprep.shards): pinned bytes, manifests independent of the output folder, integrity,
compression, the readers."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import REPO

BIN = Path(sys.executable).parent

# sha256 of the shards of format 2 (strings dictionary-encoded, distances made from heads where used; format 1's
# pins came from commit a2de335 and held until then): every later change must keep uncompressed shards
# byte-identical for the same input and configuration. The schema carries field descriptions (metadata), so the
# data is compared with them removed (`data_hashes`). That format 2 holds everything format 1 held:
# tests/test_scale.py (test_format_2_holds_everything_format_1_held).
SAMPLE_SHARDS = {
    "test/part-00000.arrow": "ca9ad9226c4efa3d4dbb53b41222b8a001d507809bba82334a6775a7464b228a",
    "train/part-00000.arrow": "b6beb775962802da32fc79fa729ef8e71f71d95cd3869b8111ddb68af3356410",
    "train/part-00001.arrow": "67d825a2b94637fa53113ccfb79260057a9fa1bd7de9a43a334385825893d08c",
    "train/part-00002.arrow": "da9dc4819fcb5d9e4e5297736a6eaee8a75e8f8dabc01373b144bcf44277b6af",
    "valid/part-00000.arrow": "97216b50e7f4b900ef73a63566af6a2fcc42a63d9bf5ef9db21a63c89b632a30",
}
SYNTH_LIFT_SHARDS = {
    "test/part-00000.arrow": "7ef8a52c52829baa7c0325c1aabafdf4c1e53e2ade3b5cf537d90478c4c6c34a",
    "train/part-00000.arrow": "8ee4bcfa3a5c4da47e932b2da563c800639bbf70cd9a869f547b1c0a38a8b9f1",
    "valid/part-00000.arrow": "ab8e17030fdfecacd613457a5a48166c2e5ccd1cae92b42b8a7e5c8dc0ccc979",
}
SYNTH_DROP_SHARDS = {
    "test/part-00000.arrow": "7752c579a4227d9e8571cefb29339abbb6e78fe5a96cf49ff8e0ba222289cb05",
    "train/part-00000.arrow": "69e4c1d3f4d0cc8d7e28d67074b5cc95d553529e27c38a1bebf7f788375272af",
    "train/part-00001.arrow": "21b907f8eaa2022db089d71a745f91c12794881ec9d62cd5fb2fc547bb5f6497",
    "train/part-00002.arrow": "d0e7d5245f660280c27172d6e6978032cf2de3874dba0aee93df85bf67eb914b",
    "valid/part-00000.arrow": "3a49b373d9cea0ac492b08858f81b8ab252c0925d827a4890d196b2a9706f582",
}


def run(*args):
    result = subprocess.run([str(BIN / "synprep"), *map(str, args)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def shard_hashes(out):
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(out).glob("*/part-*.arrow"))}


def data_hashes(out):
    """sha256 of each shard re-written without the field descriptions (schema metadata) that came after the
    pins: the same batches, the same writer, so equal hashes mean equal data, batch layout and types."""
    import pyarrow as pa

    hashes = {}
    for path in sorted(Path(out).glob("*/part-*.arrow")):
        reader = pa.ipc.open_stream(path.read_bytes())
        bare = pa.schema([field.remove_metadata() for field in reader.schema])
        assert reader.schema.field("id").metadata  # the descriptions are there
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, bare) as writer:
            for batch in reader:
                writer.write_batch(pa.RecordBatch.from_arrays(batch.columns, schema=bare))
        hashes[str(path.relative_to(out))] = hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()
    return hashes


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
    assert data_hashes(tmp_path / "out") == SAMPLE_SHARDS


@pytest.mark.parametrize("drop", [False, True], ids=["lift", "drop"])
def test_preparsed_shards_are_byte_identical_to_before(tmp_path, drop):
    pipeline = synth_pipeline(tmp_path / "synth", drop)
    run("convert", pipeline, "--output", tmp_path / "out", "--workers", 2, "--compression", "none")
    assert data_hashes(tmp_path / "out") == (SYNTH_DROP_SHARDS if drop else SYNTH_LIFT_SHARDS)


def test_manifests_do_not_depend_on_the_output_folder(tmp_path):
    pipeline = synth_pipeline(tmp_path / "synth")
    for name in ("a", "deeper/b"):
        run("convert", pipeline, "--output", tmp_path / name)
    for split in ("train", "valid", "test"):
        a = (tmp_path / "a" / split / "manifest.json").read_bytes()
        assert a == (tmp_path / "deeper" / "b" / split / "manifest.json").read_bytes()
        manifest = json.loads(a)
        assert str(tmp_path) not in a.decode() and "output" not in manifest["configuration"]
        assert manifest["configuration"]["splits"][0]["src"] == ["train.src.conllu"]  # as written in the file
        for shard in manifest["shards"]:
            data = (tmp_path / "a" / split / shard["file"]).read_bytes()
            assert shard["sha256"] == hashlib.sha256(data).hexdigest() and shard["bytes"] == len(data)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """The synth dataset converted once, uncompressed and with zstd."""
    tmp = tmp_path_factory.mktemp("converted")
    pipeline = synth_pipeline(tmp / "synth")
    run("convert", pipeline, "--output", tmp / "plain")
    run("convert", pipeline, "--output", tmp / "zstd", "--compression", "zstd")
    return tmp


def test_compressed_shards_read_the_same_everywhere(converted):
    import datasets
    import polars

    from synprep.shards import load_hf_dataset, open_split

    plain, packed = open_split(str(converted / "plain" / "train")), open_split(str(converted / "zstd" / "train"))
    assert packed.manifest.compression == "zstd" and "compression" in packed.manifest.signature
    assert (converted / "zstd" / "train" / "part-00000.arrow").stat().st_size < \
        (converted / "plain" / "train" / "part-00000.arrow").stat().st_size
    assert packed.table().equals(plain.table())
    assert packed.table(["id", "src_subwords"]).equals(plain.table(["id", "src_subwords"]))
    assert polars.read_ipc_stream(packed.shard_paths()[0]).height == plain.manifest.rows
    hf = load_hf_dataset(str(converted / "zstd" / "train"))
    assert isinstance(hf, datasets.Dataset) and hf["src_text"] == plain.table().column("src_text").to_pylist()


def corrupt_copy(converted, tmp_path, mutate):
    target = tmp_path / "train"
    shutil.copytree(converted / "plain" / "train", target)
    mutate(target / "part-00000.arrow", target / "manifest.json")
    return target


def flip_bytes(shard, manifest):
    data = bytearray(shard.read_bytes())
    for k in range(400, len(data) - 400, 97):  # inside the buffers and their offsets, past the schema
        data[k] ^= 0xFF
    shard.write_bytes(bytes(data))


def truncate(shard, manifest):
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])


def empty_shard(shard, manifest):  # a zero-byte file cannot be memory-mapped at all
    shard.write_bytes(b"")


def more_rows_than_listed(shard, manifest):
    data = json.loads(manifest.read_text())
    data["shards"][0]["rows"] -= 7
    manifest.write_text(json.dumps(data))


def broken_manifest(shard, manifest):
    manifest.write_bytes(manifest.read_bytes()[:100])


def latin1_manifest(shard, manifest):
    manifest.write_bytes(b"\xff\xfe" + manifest.read_bytes())


@pytest.mark.parametrize("mutate", [flip_bytes, truncate, empty_shard, more_rows_than_listed, broken_manifest,
                                    latin1_manifest])
@pytest.mark.parametrize("command", ["inspect", "syntrain"])
def test_readers_fail_in_one_line_on_damaged_splits(converted, tmp_path, mutate, command):
    """Fault injection: a damaged shard or manifest is a one-line error naming the file (exit 2), never a
    traceback, a crash (segfault) or training on rows the manifest does not list."""
    target = corrupt_copy(converted, tmp_path, mutate)
    if command == "inspect":
        args = [str(BIN / "synprep"), "inspect", str(target)]
    else:
        args = [sys.executable, "-m", "syntrain", "run", "--data", str(target), "--max-steps", "1",
                "--out", str(tmp_path / "run")]
    result = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert result.returncode in (1, 2), result.stderr[-1500:]
    assert "Traceback" not in result.stderr and result.returncode != -11
    last = result.stderr.strip().splitlines()[-1]
    assert str(target) in last, last


def test_validate_reports_damaged_shards_without_crashing(converted, tmp_path):
    for mutate in (flip_bytes, truncate, empty_shard, more_rows_than_listed):
        target = corrupt_copy(converted, tmp_path / mutate.__name__, mutate)
        result = subprocess.run([str(BIN / "synprep"), "validate", str(target)], capture_output=True, text=True,
                                timeout=300)
        assert result.returncode == 1 and "Traceback" not in result.stderr, (mutate.__name__, result.stderr)
        assert "part-00000.arrow" in result.stdout


def test_convert_reads_each_input_once_named_pipes(tmp_path):
    """Inputs are read in one pass: named pipes (readable exactly once) give the shards of regular files."""
    import threading

    pipeline = synth_pipeline(tmp_path / "synth")
    run("convert", pipeline, "--output", tmp_path / "files")
    folder = tmp_path / "synth"
    contents = {}
    for name in ("train.src.conllu", "train.tgt.conllu"):
        contents[name] = (folder / name).read_bytes()
        (folder / name).unlink()
        os.mkfifo(folder / name)

    def feed(name):
        with open(folder / name, "wb") as pipe:
            pipe.write(contents[name])

    feeders = [threading.Thread(target=feed, args=(name,), daemon=True) for name in contents]
    for feeder in feeders:
        feeder.start()
    run("convert", pipeline, "--output", tmp_path / "pipes", "--workers", 1)
    assert shard_hashes(tmp_path / "pipes") == shard_hashes(tmp_path / "files")


def test_sides_of_different_lengths_name_both_counts_and_leave_nothing(tmp_path):
    pipeline = synth_pipeline(tmp_path / "synth")
    tgt = tmp_path / "synth" / "train.tgt.conllu"
    blocks = tgt.read_text().split("\n\n")
    tgt.write_text("\n\n".join(blocks[:-4]) + "\n\n")  # three sentences fewer (the last block is empty)
    result = subprocess.run([str(BIN / "synprep"), "convert", str(pipeline), "--output", str(tmp_path / "out")],
                            capture_output=True, text=True)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "270 source segments" in result.stderr and "267 target segments" in result.stderr
    assert not (tmp_path / "out").exists()  # no half-made folder blocks the corrected run


def test_a_second_writer_is_refused_while_the_first_runs(tmp_path):
    """Fault: two converts (or a --resume) on one output folder at once. The second is refused in one line
    naming the holder; the first finishes with the shards of a lone run."""
    pipeline = synth_pipeline(tmp_path / "synth")
    run("convert", pipeline, "--output", tmp_path / "alone")
    folder = tmp_path / "synth"
    text = (folder / "train.src.conllu").read_bytes()
    (folder / "train.src.conllu").unlink()
    os.mkfifo(folder / "train.src.conllu")  # the first run waits on this pipe until we feed it
    first = subprocess.Popen([str(BIN / "synprep"), "convert", str(pipeline), "--output", str(tmp_path / "out"),
                              "--workers", "1"], stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not (tmp_path / "out" / ".work").exists() and time.time() < deadline:
        time.sleep(0.1)
    for extra in ([], ["--resume"], ["--overwrite"]):
        second = subprocess.run([str(BIN / "synprep"), "convert", str(pipeline), "--output", str(tmp_path / "out"),
                                 *extra], capture_output=True, text=True, timeout=60)
        assert second.returncode == 2 and "Traceback" not in second.stderr, second.stderr
        assert "another synprep convert is writing this dataset (pid" in second.stderr
    with open(folder / "train.src.conllu", "wb") as pipe:
        pipe.write(text)
    assert first.wait(timeout=120) == 0, first.stderr.read()
    assert shard_hashes(tmp_path / "out") == shard_hashes(tmp_path / "alone")
    (folder / "train.src.conllu").unlink()
    (folder / "train.src.conllu").write_bytes(text)
    run("convert", pipeline, "--output", tmp_path / "out", "--overwrite")  # the lock went with the process


def test_source_preparation_resolves_relative_models_through_paths_json(tmp_path, tiny_udpipe):
    """A manifest records the parser model as written (relative); the trainer's raw-text preparation finds it
    through OUT/paths.json, checks its hash, and makes the source features exactly as convert did."""
    from synprep.prepare import prepare_source
    from synprep.shards import open_split, source_preparation

    data = tmp_path / "data"
    (data / "models").mkdir(parents=True)
    for lang in ("en", "de"):
        shutil.copy(tiny_udpipe(lang), data / "models" / f"{lang}.udpipe")
        shutil.copy(REPO / "sample_data" / "parallel" / f"train.{lang}", data / f"train.{lang}")
    pipeline = tmp_path / "conf" / "p.toml"
    pipeline.parent.mkdir()
    pipeline.write_text('[pipeline]\nsrc_lang = "en"\ntgt_lang = "de"\ndata_root = "../data"\n'
                        '[splits.train]\nsrc = "train.en"\ntgt = "train.de"\n[filter]\nlangid = "none"\n'
                        '[parser.src]\nbackend = "udpipe"\nmodel = "models/en.udpipe"\n'
                        '[parser.tgt]\nbackend = "udpipe"\nmodel = "models/de.udpipe"\n[bpe]\nsymbols = 100\n'
                        '[features]\nsrc = ["parents", "labels"]\ntgt = ["labels"]\n')
    run("convert", pipeline, "--output", tmp_path / "out")
    split = open_split(str(tmp_path / "out" / "train"))
    assert split.manifest.configuration["src_parser"]["model"] == "models/en.udpipe"
    preparation = source_preparation(split.manifest.configuration, split.manifest.signature, split.dataset_root())
    assert preparation.parser["model"] == str(data / "models" / "en.udpipe")
    table = split.table()
    prepared = prepare_source(table.column("src_text").to_pylist(), preparation)
    for column in ("src_subwords", "src_parent_mid", "src_labels", "src_heads"):
        assert prepared.column(column).to_pylist() == table.column(column).to_pylist(), column
    (data / "models" / "en.udpipe").write_bytes(b"changed")
    with pytest.raises(Exception, match="sha256 differs"):
        prepare_source(["A line ."], preparation)
