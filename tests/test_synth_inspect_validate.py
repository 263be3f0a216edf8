"""synprep synth / inspect / validate: synthetic treebanks, statistics, the HTML report, the shard checker."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from synprep.conllu import read_conllu, read_trees
from synprep.convert.converter import Converter, ConvertOptions
from synprep.convert.pipeline import load_pipeline
from synprep.inspect import compute_stats, format_stats, open_dataset, pick_examples, tree_diagram
from synprep.report import build_html
from synprep.synth import SynthConfig, write_corpus
from synprep.trees import is_projective
from synprep.validate import validate_directory

# Universal Dependencies v2: the 37 universal relations and the 17 UPOS tags
UD_RELATIONS = set("acl advcl advmod amod appos aux case cc ccomp clf compound conj cop csubj dep det discourse "
                   "dislocated expl fixed flat goeswith iobj list mark nmod nsubj nummod obj obl orphan parataxis "
                   "punct reparandum root vocative xcomp".split())
UPOS = set("ADJ ADP ADV AUX CCONJ DET INTJ NOUN NUM PART PRON PROPN PUNCT SCONJ SYM VERB X".split())
SPLITS = ("train", "valid", "test")


def synprep(*args):
    return subprocess.run([sys.executable, "-m", "synprep.cli", *args], capture_output=True, text=True)


# ------------------------------------------------------------------------------------------------ synth


def test_synth_is_valid_ud_and_translates_word_by_word(tmp_path):
    summary = write_corpus(str(tmp_path), 400, 5, SynthConfig(non_projective_rate=0.1))
    assert summary.pairs == {"train": 360, "valid": 20, "test": 20}
    lexicon = {}
    for line in open(tmp_path / "lexicon.tsv", encoding="utf-8"):
        src, tgt, _ = line.rstrip("\n").split("\t")
        lexicon[src] = tgt
    for split in SPLITS:
        trees = {side: list(read_trees(str(tmp_path / f"{split}.{side}.conllu"))) for side in ("src", "tgt")}
        texts = {side: (tmp_path / f"{split}.{side}").read_text(encoding="utf-8").splitlines()
                 for side in ("src", "tgt")}
        assert len(trees["src"]) == len(trees["tgt"]) == len(texts["src"]) == summary.pairs[split]
        for side in ("src", "tgt"):
            for sentence in read_conllu(str(tmp_path / f"{split}.{side}.conllu")):
                assert {w[3] for w in sentence.words} <= UPOS
            for tree, text in zip(trees[side], texts[side]):
                assert tree.heads.count(0) == 1 and tree.labels[tree.heads.index(0)] == "root"
                assert {label.split(":")[0] for label in tree.labels} <= UD_RELATIONS
                assert " ".join(tree.tokens) == text == tree.text
        for index, (src, tgt) in enumerate(zip(trees["src"], trees["tgt"])):
            assert src.sent_id == tgt.sent_id == str(index)
            assert sorted(lexicon[w] for w in src.tokens) == sorted(tgt.tokens)  # a reordering of the lexicon's words
            assert Counter(src.labels) == Counter(tgt.labels)
            assert is_projective(src.heads) == is_projective(tgt.heads)
    assert {"acl:relcl", "ccomp", "mark", "obl", "nmod"} <= {label for t in trees["src"] for label in t.labels}


def test_synth_orders_differ_as_documented(tmp_path):
    write_corpus(str(tmp_path), 300, 2, SynthConfig(non_projective_rate=0.0))
    verb_final = main_v2 = 0
    for src, tgt in zip(read_trees(str(tmp_path / "train.src.conllu")), read_trees(str(tmp_path / "train.tgt.conllu"))):
        for i, label in enumerate(tgt.labels):
            if label in ("ccomp", "acl:relcl"):  # subordinate / relative clause: verb-final (but a ccomp follows)
                assert all(j < i for j, h in enumerate(tgt.heads) if h == i + 1 and tgt.labels[j] != "ccomp")
                verb_final += 1
            if label == "root":  # verb second after the subject phrase
                subject = tgt.heads.index(i + 1) if i + 1 in tgt.heads else None
                assert subject is not None and tgt.labels[subject] == "nsubj"
                span = [j for j in range(len(tgt.heads)) if _dominates(tgt.heads, subject, j)]
                assert max(span) + 1 == i
                main_v2 += 1
        root = src.labels.index("root")  # SVO: the object follows the verb in the source
        objects = [j for j, (h, lab) in enumerate(zip(src.heads, src.labels)) if h == root + 1 and lab == "obj"]
        assert all(j > root for j in objects)
    assert verb_final > 10 and main_v2 == 270


def _dominates(heads, ancestor, node):
    while True:
        if node == ancestor:
            return True
        if heads[node] == 0:
            return False
        node = heads[node] - 1


def test_synth_is_deterministic_per_seed(tmp_path):
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        write_corpus(str(tmp_path / name), 200, seed)
    files = sorted(os.listdir(tmp_path / "a"))
    assert "pipeline.toml" in files and "train.src.conllu" in files
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert (tmp_path / "a" / "train.src").read_bytes() != (tmp_path / "c" / "train.src").read_bytes()


@pytest.mark.parametrize("rate", [0.0, 0.2])
def test_synth_non_projective_rate(tmp_path, rate):
    write_corpus(str(tmp_path), 1500, 11, SynthConfig(non_projective_rate=rate))
    flags = [not is_projective(tree.heads) for split in SPLITS
             for tree in read_trees(str(tmp_path / f"{split}.src.conllu"))]
    share = sum(flags) / len(flags)
    assert abs(share - rate) < 0.035  # 3.4 standard deviations at rate 0.2
    assert json.loads((tmp_path / "synth.json").read_text())["non_projective_pairs"] == sum(flags)


def test_synth_cli_and_bad_options(tmp_path):
    result = synprep("synth", "--pairs", "40", "--seed", "3", "-o", str(tmp_path / "s"), "--max-depth", "0",
                     "--non-projective-rate", "0")
    assert result.returncode == 0, result.stderr
    assert "synthesized 40 pairs" in result.stderr
    lengths = [len(t) for t in read_trees(str(tmp_path / "s" / "train.src.conllu"))]
    assert max(lengths) <= 13  # depth 0: no clause or PP inside noun phrases
    result = synprep("synth", "--pairs", "10", "-o", str(tmp_path / "t"), "--non-projective-rate", "1.5")
    assert result.returncode == 2 and result.stderr.count("\n") == 1


# ------------------------------------------------------------------------------------------------ inspect

SMALL = """\
# sent_id = a
# text = the dog sleeps
1	the	_	DET	_	_	2	det	_	_
2	dog	_	NOUN	_	_	3	nsubj	_	_
3	sleeps	_	VERB	_	_	0	root	_	_

# sent_id = b
1	John	_	PROPN	_	_	2	nsubj	_	_
2	saw	_	VERB	_	_	0	root	_	_
3	a	_	DET	_	_	4	det	_	_
4	dog	_	NOUN	_	_	2	obj	_	_
5	yesterday	_	NOUN	_	_	2	obl:tmod	_	_
6	which	_	PRON	_	_	7	nsubj	_	_
7	barked	_	VERB	_	_	4	acl:relcl	_	_

# sent_id = c
1	hi	_	INTJ	_	_	0	root	_	_

"""


def test_inspect_conllu_numbers_by_hand(tmp_path):
    path = tmp_path / "small.conllu"
    path.write_text(SMALL, encoding="utf-8")
    stats = compute_stats(open_dataset(str(path)))
    side = stats.sides["conllu"]
    assert stats.pairs == 3
    assert (side.sentences, side.tokens, side.subwords) == (3, 11, 11)
    assert side.lengths == Counter({3: 1, 7: 1, 1: 1})
    assert side.projective == 2  # b: dog -> barked crosses saw -> yesterday
    assert side.labels == Counter({"root": 3, "nsubj": 3, "det": 2, "obj": 1, "obl:tmod": 1, "acl:relcl": 1})
    assert side.length_bins() == [("1-5", 2), ("6-10", 1)]
    text = format_stats(stats)
    assert "66.7%" in text and "1.000" in text and "3 sentences" in text
    assert "nsubj 27.3%" in text  # 3 of 11


def test_tree_diagram_by_hand():
    assert tree_diagram([2, 0, 2]) == [" ╭►", "╭┴─", "╰─►"]
    # b of SMALL: dog(4) -> barked(7) crosses saw(2) -> yesterday(5)
    lines = tree_diagram([2, 0, 4, 2, 2, 7, 4])
    assert len(lines) == 7 and all(len(line) == len(lines[0]) for line in lines)
    assert [line[-1] for line in lines] == ["►", "─", "►", "►", "►", "►", "►"]


def test_inspect_cli_show_on_conllu(tmp_path):
    path = tmp_path / "small.conllu"
    path.write_text(SMALL, encoding="utf-8")
    result = synprep("inspect", str(path), "--show", "2")
    assert result.returncode == 0, result.stderr
    assert "NON-PROJECTIVE" in result.stdout and "transitions: the dog LEFT-ARC:det sleeps LEFT-ARC:nsubj" \
        in result.stdout
    assert synprep("inspect", str(tmp_path / "missing")).returncode == 2


# ------------------------------------------------------------------------------------ end to end (shards)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """synth (300 pairs, 20% non-projective) -> convert (pre-parsed gold CoNLL-U, 60 BPE merges)."""
    root = tmp_path_factory.mktemp("synth")
    write_corpus(str(root / "corpus"), 300, 4, SynthConfig(non_projective_rate=0.2), bpe_symbols=60)
    config = load_pipeline(str(root / "corpus" / "pipeline.toml"), str(root / "out"))
    Converter(config, ConvertOptions(workers=1, progress=False)).run()
    return root / "out"


def test_end_to_end_validate_ok_and_inspect(shards, tmp_path):
    for split in SPLITS:
        result = synprep("validate", str(shards / split))
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stderr == "" and result.stdout.startswith("OK ") and result.stdout.count("\n") == 1
    manifest = json.loads((shards / "train" / "manifest.json").read_text())
    assert manifest["rows"] == 270 and manifest["configuration"]["features"]["non_projective"] == "lift"
    table = pa.ipc.open_stream(pa.memory_map(str(shards / "train" / "part-00000.arrow"))).read_all()
    stats = compute_stats(open_dataset(str(shards / "train")))
    assert stats.pairs == table.num_rows == 270
    for side in ("src", "tgt"):
        got = stats.sides[side]
        assert got.tokens == pc.sum(pc.list_value_length(table[f"{side}_tokens"])).as_py()
        assert got.subwords == pc.sum(pc.list_value_length(table[f"{side}_subwords"])).as_py()
        assert got.subwords > got.tokens  # BPE split some words
        assert got.projective == pc.sum(table[f"{side}_projective"].cast(pa.int64())).as_py()
        assert 0.1 < 1 - got.projective_share < 0.3
    assert stats.sides["tgt"].transitions_null == 0  # lifted
    result = synprep("inspect", str(shards / "train"), "--show", "3", "--html", str(tmp_path / "r.html"), "--stats")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("── id ") == 3 and "signature:" in result.stdout and "@@" in result.stdout
    assert (tmp_path / "r.html").stat().st_size > 10000


def _copy_split(shards, tmp_path):
    target = tmp_path / "train"
    shutil.copytree(shards / "train", target)
    path = target / "part-00000.arrow"
    table = pa.ipc.open_stream(path.read_bytes()).read_all()  # not memory-mapped: the file is rewritten
    return target, path, table


def _write_stream(path, table, update_manifest=True):
    """Rewrite a shard; by default also its sha256 (and rows) in the manifest, as a writer with a bug would."""
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    if update_manifest:
        manifest_path = path.parent / "manifest.json"
        manifest = json.loads(manifest_path.read_text())
        for shard in manifest["shards"]:
            if shard["file"] == path.name:
                shard["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
        manifest_path.write_text(json.dumps(manifest))


def test_validate_reports_a_changed_shard_by_its_hash(shards, tmp_path):
    target, path, table = _copy_split(shards, tmp_path)
    _write_stream(path, table.slice(0, table.num_rows), update_manifest=False)  # same rows, other bytes?
    result = synprep("validate", str(target))
    same = path.read_bytes() == (shards / "train" / "part-00000.arrow").read_bytes()
    assert (result.returncode == 0) == same
    if not same:
        assert "part-00000.arrow\t-\tsha256\tsha256 differs from manifest.json" in result.stdout
    with open(path, "ab") as handle:  # trailing bytes: the rows still read, the hash tells
        handle.write(b"\0" * 8)
    result = synprep("validate", str(target))
    assert result.returncode == 1 and "sha256 differs" in result.stdout


def test_validate_catches_changed_parent_mid(shards, tmp_path):
    target, path, table = _copy_split(shards, tmp_path)
    rows = table.to_pylist()
    rows[5]["src_parent_mid"][0] += 1.0
    _write_stream(path, pa.Table.from_pylist(rows, schema=table.schema))
    result = synprep("validate", str(target))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines == [f"part-00000.arrow\tid={rows[5]['id']}\tsrc_parent_mid\t" + lines[0].split("\t", 3)[3]]
    assert "stored" in lines[0] and result.stderr.startswith("FAILED")


def test_validate_catches_dropped_row(shards, tmp_path):
    target, path, table = _copy_split(shards, tmp_path)
    _write_stream(path, pa.concat_tables([table.slice(0, 10), table.slice(11)]))
    report, _ = validate_directory(str(target))
    assert not report.ok
    assert {(f.file, f.field) for f in report.failures} == {("part-00000.arrow", "rows"), ("manifest.json", "rows")}


def test_validate_catches_transitions_ids_and_accounting(shards, tmp_path):
    target, path, table = _copy_split(shards, tmp_path)
    rows = table.to_pylist()
    victim = next(i for i, r in enumerate(rows) if any(t.startswith("LEFT-ARC:det") for t in r["tgt_transitions"]))
    rows[victim]["tgt_transitions"] = [t.replace("LEFT-ARC:det", "LEFT-ARC:amod")
                                       for t in rows[victim]["tgt_transitions"]]
    rows[20], rows[21] = rows[21], rows[20]
    _write_stream(path, pa.Table.from_pylist(rows, schema=table.schema))
    manifest = json.loads((target / "manifest.json").read_text())
    manifest["input_lines"] += 1
    (target / "manifest.json").write_text(json.dumps(manifest))
    report, _ = validate_directory(str(target))
    found = {(f.row, f.field) for f in report.failures}
    assert (rows[victim]["id"], "tgt_transitions") in found
    assert (rows[21]["id"], "id") in found
    assert (None, "input_lines") in found


def test_validate_workers_give_the_same_report_across_shards(shards, tmp_path):
    """Three shards (the last two written in the wrong order, a feature broken in one): the same failures, in
    the same order, for 1 and 2 workers; ids are checked across shard boundaries too."""
    target, path, table = _copy_split(shards, tmp_path)
    rows = table.to_pylist()
    rows[150]["src_parent_mid"][0] += 1.0
    pieces = [rows[:100], rows[200:], rows[100:200]]  # shard 2 holds larger ids than shard 3
    path.unlink()
    manifest = json.loads((target / "manifest.json").read_text())
    manifest["shards"] = []
    for i, piece in enumerate(pieces):
        name = f"part-{i:05d}.arrow"
        _write_stream(target / name, pa.Table.from_pylist(piece, schema=table.schema))
        written = (target / name).read_bytes()
        manifest["shards"].append({"file": name, "rows": len(piece), "bytes": len(written),
                                   "sha256": hashlib.sha256(written).hexdigest()})
    (target / "manifest.json").write_text(json.dumps(manifest))
    one, _ = validate_directory(str(target), workers=1)
    two, _ = validate_directory(str(target), workers=2)
    assert one.failures == two.failures and one.failure_count == two.failure_count == 2
    assert (one.rows, one.shards) == (two.rows, two.shards) == (len(rows), 3)
    assert [(f.file, f.row, f.field) for f in one.failures] == [
        ("part-00002.arrow", rows[100]["id"], "id"), ("part-00002.arrow", rows[150]["id"], "src_parent_mid")]
    capped, _ = validate_directory(str(target), max_failures=1, workers=2)
    assert capped.failures == one.failures[:1] and capped.failure_count == 2


def test_validate_workers_split_a_shard_by_record_batch(shards, tmp_path):
    """One shard of 9 record batches is checked in ranges of batches by several workers: the same report as one
    worker's, ids checked across the ranges too."""
    from synprep.validate import shard_tasks

    target, path, table = _copy_split(shards, tmp_path)
    rows = table.to_pylist()
    rows[100]["src_parent_mid"][0] += 1.0
    rows[239], rows[240] = rows[240], rows[239]  # across the boundary of the last range
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(pa.Table.from_pylist(rows, schema=table.schema), max_chunksize=30)
    manifest = json.loads((target / "manifest.json").read_text())
    manifest["shards"][0]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (target / "manifest.json").write_text(json.dumps(manifest))
    assert [task[2:] for task in shard_tasks(str(target), [path.name], 2)] == [(0, 2), (2, 4), (4, 6), (6, 8),
                                                                               (8, 10)]
    one, _ = validate_directory(str(target), workers=1)
    two, _ = validate_directory(str(target), workers=2)
    assert one.failures == two.failures and (one.rows, one.shards) == (two.rows, two.shards) == (len(rows), 1)
    assert [(f.row, f.field) for f in one.failures] == [(rows[100]["id"], "src_parent_mid"), (rows[240]["id"], "id")]


def test_validate_recomputes_not_trusts(shards, tmp_path):
    """Changing a head alone breaks every feature derived from it."""
    target, path, table = _copy_split(shards, tmp_path)
    rows = table.to_pylist()
    heads = rows[0]["src_heads"]
    leaf = next(i for i in range(len(heads)) if (i + 1) not in heads and heads[i] != 0)
    other = next(h for h in range(1, len(heads) + 1) if h not in (heads[leaf], leaf + 1))
    heads[leaf] = other
    _write_stream(path, pa.Table.from_pylist(rows, schema=table.schema))
    report, _ = validate_directory(str(target))
    fields = {f.field for f in report.failures if f.row == rows[0]["id"]}
    assert {"src_parent_mid", "src_parent_first"} <= fields  # (distances: made from the heads, not stored)


# ------------------------------------------------------------------------------------------------ HTML


def _html(shards):
    dataset = open_dataset(str(shards / "train"))
    examples = pick_examples(dataset, 3, max_tokens=24)
    return build_html(compute_stats(dataset), examples), examples


def test_html_is_well_formed_and_self_contained(shards):
    html, examples = _html(shards)
    assert html.startswith("<!DOCTYPE html>")
    root = ET.fromstring(html.split("\n", 1)[1])  # the document is well-formed XML
    svg = "{http://www.w3.org/2000/svg}svg"
    svgs = list(root.iter(svg))
    for fragment in re.findall(r"<svg .*?</svg>", html, flags=re.S):
        ET.fromstring(fragment)
    # 2 length + 2 label charts, per example and side: tree, Pascal prior, distances
    assert len(svgs) == 4 + 3 * 2 * len(examples) and len(examples) == 3
    assert any(not all(r.get("projective") for r in ex.sides.values()) for ex in examples)
    assert "<script" not in html and "src=" not in html and not re.search(r"https?://(?!www\.w3\.org/)", html)
    # the Pascal prior of the first example's source side: one cell per (t, j)
    n = len(examples[0].sides["src"]["subwords"])
    prior = [s for s in svgs if s.get("aria-label", "").startswith("Pascal")][0]
    cells = [r for r in prior.iter("{http://www.w3.org/2000/svg}rect") if r.find("{http://www.w3.org/2000/svg}title")
             is not None]
    assert len(cells) == n * n
    peak = max(cells, key=lambda r: float(r.find("{http://www.w3.org/2000/svg}title").text.rsplit(": ", 1)[1]))
    assert abs(float(peak.find("{http://www.w3.org/2000/svg}title").text.rsplit(": ", 1)[1])
               - 1 / np.sqrt(2 * np.pi)) < 1e-3  # N(0 | 0, 1) on an integer parent_mid


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_html_renders_in_headless_chromium(shards, tmp_path):
    html, _ = _html(shards)
    page, png = tmp_path / "report.html", tmp_path / "report.png"
    page.write_text(html, encoding="utf-8")
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={png}", "--window-size=1200,2000",
                    page.as_uri()], capture_output=True, timeout=90, check=True)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1200, 2000)
    assert len(data) > 40000  # a blank page of this size compresses to under 10 kB


def test_inspect_of_a_dataset_folder_names_its_splits(tmp_path):
    shards = os.path.join(os.path.dirname(__file__), "data", "switches", "shards")
    for split in ("train", "valid"):
        shutil.copytree(os.path.join(shards, split), tmp_path / "out" / split)
    (tmp_path / "out" / "codes.bpe").write_text("")
    result = subprocess.run([sys.executable, "-m", "synprep.cli", "inspect", str(tmp_path / "out")],
                            capture_output=True, text=True)
    assert result.returncode == 2 and result.stderr == (
        f"synprep: error: {tmp_path / 'out'}: a dataset folder, not a split: give one of its splits: "
        f"{tmp_path / 'out' / 'train'}, {tmp_path / 'out' / 'valid'}\n")
