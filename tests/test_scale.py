"""Scale: WMT-like synthetic lengths, the work folder after convert, compact shards, flat trainer storage."""

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from synprep.conllu import read_trees
from synprep.synth import WMT_MAX_TOKENS, SynthConfig, write_corpus
from synprep.trees import is_projective

# ------------------------------------------------------------------------------------- synth --lengths wmt


def test_synth_wmt_lengths_are_wmt_like_and_still_the_same_tree(tmp_path):
    write_corpus(str(tmp_path / "wmt"), 3000, 4, SynthConfig(lengths="wmt"))
    write_corpus(str(tmp_path / "short"), 3000, 4, SynthConfig())
    lengths = {}
    for name in ("wmt", "short"):
        src = list(read_trees(str(tmp_path / name / "train.src.conllu")))
        tgt = list(read_trees(str(tmp_path / name / "train.tgt.conllu")))
        lengths[name] = np.array([len(tree) for tree in src])
        for s, t in zip(src, tgt):
            assert len(s) == len(t) and Counter(s.labels) == Counter(t.labels)
            assert is_projective(s.heads) == is_projective(t.heads)
            assert s.heads.count(0) == 1
    wmt, short = lengths["wmt"], lengths["short"]
    assert 22 <= wmt.mean() <= 29 and wmt.max() <= WMT_MAX_TOKENS  # WMT14 En-De: ~25 tokens on average
    assert (wmt >= 60).sum() >= 30 and np.median(wmt) < wmt.mean()  # a long right tail
    assert short.mean() < 15
    config = json.loads((tmp_path / "wmt" / "synth.json").read_text())["config"]
    assert config["lengths"] == "wmt" and "--lengths wmt" in (tmp_path / "wmt" / "pipeline.toml").read_text()


def test_synth_lengths_choice_is_checked():
    with pytest.raises(Exception, match="--lengths must be one of short, wmt"):
        SynthConfig(lengths="long")


# ------------------------------------------------------------------------------ the work folder after convert

BIN = Path(sys.executable).parent


def synprep(*args, check=True):
    result = subprocess.run([str(BIN / "synprep"), *map(str, args)], capture_output=True, text=True)
    assert not check or result.returncode == 0, result.stderr[-2000:]
    return result


def shard_files(out):
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(Path(out).glob("*/part-*.arrow"))}


@pytest.fixture(scope="module")
def synth_corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("synth")
    synprep("synth", "--pairs", 300, "--seed", 1, "-o", folder)
    return folder / "pipeline.toml"


def test_work_folder_goes_after_a_finished_convert_unless_kept(tmp_path, synth_corpus):
    out, kept = tmp_path / "out", tmp_path / "kept"
    synprep("convert", synth_corpus, "--output", out, "--workers", 2)
    assert not (out / ".work").exists() and not (out / ".work.removing").exists()
    assert json.loads((out / "run.json").read_text())["fingerprint"]
    synprep("convert", synth_corpus, "--output", kept, "--workers", 1, "--keep-work")
    assert list((kept / ".work" / "train").glob("piece-*.src.conllu")) and (kept / ".work" / "config.json").exists()
    assert shard_files(out) == shard_files(kept)
    # a finished output: --resume has nothing to do (same summary, shards untouched), another configuration is
    # refused, --overwrite starts again
    before = {p: p.stat().st_mtime_ns for p in out.glob("*/part-*.arrow")}
    again = synprep("convert", synth_corpus, "--output", out, "--resume")
    assert "train" in again.stdout and not (out / ".work").exists()
    assert before == {p: p.stat().st_mtime_ns for p in out.glob("*/part-*.arrow")}
    changed = synprep("convert", synth_corpus, "--output", out, "--resume", "--shard-size", 7, check=False)
    assert changed.returncode == 2 and "different configuration" in changed.stderr
    synprep("convert", synth_corpus, "--output", out, "--overwrite", "--shard-size", 100)
    assert len(list((out / "train").glob("part-*.arrow"))) == 3 and not (out / ".work").exists()


def test_an_interrupted_removal_is_finished_by_resume(tmp_path, synth_corpus):
    out = tmp_path / "out"
    synprep("convert", synth_corpus, "--output", out, "--workers", 1, "--keep-work")
    reference = shard_files(out)
    os.replace(out / ".work", out / ".work.removing")  # killed while removing: the rename had happened
    shutil.rmtree(out / ".work.removing" / "train")
    synprep("convert", synth_corpus, "--output", out, "--resume")
    assert not (out / ".work.removing").exists() and shard_files(out) == reference
