"""`synprep convert` parses each distinct side text once: the shards are the bytes of a run that parses every row."""

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from synprep.convert import treestore
from synprep.convert.treestore import TreeStore, text_key

from .test_convert import BIN, PARALLEL, convert, write_pipeline

OUTPUTS = ("*/part-*.arrow", "*/rejected.tsv", "*/manifest.json", "codes.bpe", "vocab.*")


def output_bytes(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for pattern in OUTPUTS for p in sorted(out.glob(pattern))}


def repeated_corpus(tmp_path: Path, rows: int = 150, seed: int = 0) -> tuple[Path, Path, list[bytes]]:
    """Pairs drawn with repeats from 20 sample pairs; the first occurrence of one English line is paired with a
    French line (the filter rejects it) and the line comes back later in kept pairs."""
    src = (PARALLEL / "train.en").read_bytes().splitlines()[:20]
    tgt = (PARALLEL / "train.de").read_bytes().splitlines()[:20]
    draw = random.Random(seed)
    pairs = [(src[3], "Le chat noir dort sur le canapé de la maison.".encode())]
    pairs += [(src[k], tgt[k]) for k in (draw.randrange(20) for _ in range(rows - 1))]
    (tmp_path / "rep.en").write_bytes(b"".join(s + b"\n" for s, _ in pairs))
    (tmp_path / "rep.de").write_bytes(b"".join(t + b"\n" for _, t in pairs))
    return tmp_path / "rep.en", tmp_path / "rep.de", [s for s, _ in pairs]


def run(tmp_path: Path, name: str, models, train, *args: str, **pipeline) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    convert(write_pipeline(folder, models, train=train, **pipeline), "--workers", "2", *args)
    return folder / "out"


def test_repeats_parsed_once_same_bytes_and_counted(tmp_path, tiny_udpipe):
    src, tgt, src_lines = repeated_corpus(tmp_path)
    off = run(tmp_path, "off", tiny_udpipe, (src, tgt), "--no-dedupe")
    on = run(tmp_path, "on", tiny_udpipe, (src, tgt), "--keep-work")
    assert output_bytes(on) == output_bytes(off) and len(output_bytes(on)) >= 12
    manifest = json.loads((on / "train" / "manifest.json").read_text())
    rejected = {int(line.split("\t")[0]) for line in (on / "train" / "rejected.tsv").read_text().splitlines()}
    assert 0 in rejected and manifest["rejected"] == {"tgt_lang": 1}
    kept = [line for i, line in enumerate(src_lines) if i not in rejected]
    assert manifest["sentences"]["src"] == {"distinct": len(set(kept)), "repeated": len(kept) - len(set(kept))}
    assert manifest["sentences"]["src"]["repeated"] > 100  # 149 kept rows of at most 20 distinct lines
    # each distinct text was parsed by one piece only: the pieces' store entries
    entries = [np.load(path)["src"] for path in sorted((on / ".work" / "train").glob("*.store.npz"))]
    assert sum(len(e) for e in entries) == len(set(kept))
    assert len({bytes(k) for e in entries for k in e["key"]}) == len(set(kept))


def test_spare_trees_and_resume_after_kill(tmp_path, tiny_udpipe):
    """A repeated source line whose first pair is rejected for the (pre-parsed) target's broken tree: its tree is
    kept aside and reused; a run killed after its first pieces resumes to the same bytes."""
    src, tgt, src_lines = repeated_corpus(tmp_path, rows=400, seed=1)
    blocks = []
    for i, line in enumerate(tgt.read_bytes().splitlines()):
        words = line.decode().split()
        heads = ["0"] + ["1"] * (len(words) - 1)
        if i in (1, 2):  # two roots: invalid_tree
            heads[-1] = "0"
        blocks.append("".join(f"{k}\t{w}\t_\t_\t_\t_\t{h}\tdep\t_\t_\n" for k, (w, h) in
                              enumerate(zip(words, heads), 1)))
    conllu = tmp_path / "rep.conllu"
    conllu.write_text("\n".join(blocks) + "\n")
    train = (src, conllu)
    options = {"filter_table": 'langid = "none"', "shard_size": 50}
    off = run(tmp_path, "off", tiny_udpipe, train, "--no-dedupe", **options)
    manifest = json.loads((off / "train" / "manifest.json").read_text())
    assert manifest["rejected"] == {"invalid_tree": 2} and src_lines[1] in src_lines[3:]
    assert list(manifest["sentences"]) == ["src"]  # the pre-parsed side is not parsed

    folder = tmp_path / "crash"
    folder.mkdir()
    pipeline = write_pipeline(folder, tiny_udpipe, train=train, **options)
    out = folder / "out"
    process = subprocess.Popen([str(BIN / "synprep"), "convert", str(pipeline), "--workers", "1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while len(list(out.glob(".work/train/piece-*.json"))) < 2 and process.poll() is None and time.time() < deadline:
        time.sleep(0.002)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert list(out.glob(".work/train/piece-*.spare")), "killed before the spare tree was written"
    assert not (out / "train" / "manifest.json").exists(), "killed too late to test resuming"
    convert(pipeline, "--resume", "--workers", "2")
    assert output_bytes(out) == output_bytes(off)


def test_tree_store_merges_and_finds_every_key(monkeypatch):
    monkeypatch.setattr(treestore, "MERGE_EVERY", 7)
    store = TreeStore()
    keys = [text_key(f"sentence {i}") for i in range(100)] + [b"\x01" * 15 + b"\0", b"\x01" * 14 + b"\0\0"]
    for n, key in enumerate(keys):
        store.add(key, (n, 10 * n, n + 1, n % 3))
    store.add(keys[5], (99, 0, 0, 0))  # known: ignored
    assert len(store) == len(keys)
    assert [store.find(key) for key in keys] == [(n, 10 * n, n + 1, n % 3) for n in range(len(keys))]
    assert store.find(text_key("never added")) is None and store.find(b"\x01" * 13 + b"\0\0\0") is None
    again = TreeStore()
    again.add_array(treestore.entries_array([(key, store.find(key)) for key in keys]))
    assert [again.find(key) for key in keys] == [store.find(key) for key in keys]


@pytest.mark.slow
def test_ray_engine_with_repeats_gives_the_local_shards(tmp_path, tiny_udpipe):
    pytest.importorskip("ray")
    import tempfile

    src, tgt, _ = repeated_corpus(tmp_path, rows=60)
    local = run(tmp_path, "local", tiny_udpipe, (src, tgt))
    folder = tmp_path / "ray"
    folder.mkdir()
    short_tmp = tempfile.mkdtemp(prefix="sr")  # Ray's socket paths must stay under 108 bytes
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "SYNPREP_RAY_TMP": short_tmp}
    done = subprocess.run([str(BIN / "synprep"), "convert", str(write_pipeline(folder, tiny_udpipe, train=(src, tgt))),
                           "--engine", "ray", "--workers", "2"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert output_bytes(folder / "out") == output_bytes(local)


def test_lines_equal_after_normalization_are_parsed_once(tmp_path, tiny_udpipe):
    """The store keys the text the parser is given: with [normalize], two lines that differ only in cedilla vs
    comma-below letters are one sentence (parsed once, its normalized text in the shards), and the bytes are
    those of a run that parses every row."""
    src_lines = (PARALLEL / "train.en").read_text().splitlines()[:12]
    tgt_lines = (PARALLEL / "train.de").read_text().splitlines()[:12]
    comma, cedilla = "Țara și școala", "Ţara şi şcoala"
    src = [f"{line} {comma if k % 2 else cedilla}" for k in range(3) for line in src_lines]
    (tmp_path / "n.en").write_text("".join(line + "\n" for line in src))
    (tmp_path / "n.de").write_text("".join(line + "\n" for _ in range(3) for line in tgt_lines))
    train = (tmp_path / "n.en", tmp_path / "n.de")
    options = {"filter_table": 'langid = "none"', "extra": '[normalize]\nsrc = ["romanian"]\n'}
    off = run(tmp_path, "off", tiny_udpipe, train, "--no-dedupe", **options)
    on = run(tmp_path, "on", tiny_udpipe, train, **options)
    assert output_bytes(on) == output_bytes(off)
    manifest = json.loads((on / "train" / "manifest.json").read_text())
    assert manifest["sentences"]["src"] == {"distinct": 12, "repeated": 24}
    from synprep.shards import open_split

    texts = open_split(str(on / "train")).table(["src_text"]).column("src_text").to_pylist()
    assert all(text.endswith(comma) for text in texts) and len(texts) == 36
