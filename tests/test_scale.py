"""Scale: WMT-like synthetic lengths, the work folder after convert, compact shards, flat trainer storage."""

import json
from collections import Counter

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
