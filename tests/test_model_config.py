"""The model config: typed parts (the sizes, one section per switch) under the flat option names, built once per
run, the data-derived values set once; the generic code reads only the sizes."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest

from syntrain.model import ModelConfig, ModelSizes, build_model
from syntrain.switches import option_names, registered
from syntrain.switches.pascal import Pascal, PascalConfig
from syntrain.switches.tree import TreeDecoding

from .conftest import REPO
from .data import make_switch_fixtures as fixtures

GENERIC = ["attention", "model", "train", "decode", "translate", "compare", "cli", "arrow", "columns", "vocab",
           "batch", "dataset", "shapes", "validation", "run_state", "distributed", "precision", "runfolder/checkpoints",
           "runfolder/resume", "runfolder/source", "runfolder/start", "runfolder/config_file", "runfolder/metrics_file",
           "search", "postprocess", "scoring"]


def test_sizes_and_sections_are_typed_parts_under_the_flat_names():
    cfg = ModelConfig.from_dict({"pascal_heads": [2], "d_model": 64, "vocab_size": 9})
    assert isinstance(cfg.sizes, ModelSizes) and cfg.sizes.d_model == 64
    section = cfg.section(Pascal)
    assert isinstance(section, PascalConfig) and section.pascal_heads == [2] and cfg.section("pascal") is section
    assert Pascal(cfg).options is section
    flat = cfg.to_dict()  # checkpoints and recipes: one flat namespace, every declared name once
    declared = [spec.name for spec in fields(ModelSizes)] + [n for s in registered() for n in option_names(s)]
    assert sorted(flat) == sorted(declared) and flat["pascal_heads"] == [2]
    assert ModelConfig.from_dict(flat) == cfg


def test_a_switch_option_is_not_an_attribute_of_the_config():
    cfg = ModelConfig.from_dict({"pascal_heads": [2]})
    for name in ("pascal_heads", "d_model", "source_labels", "attn_dropout"):
        with pytest.raises(AttributeError):
            getattr(cfg, name)
    with pytest.raises(KeyError, match="no registered switch 'nope'"):
        cfg.section("nope")
    with pytest.raises(AttributeError, match="built once"):
        cfg.sizes = ModelSizes()


@pytest.mark.parametrize("module", GENERIC)
def test_generic_modules_read_no_switch_option_from_the_config(module):
    """`cfg.pascal_heads` in a generic module would be an AttributeError at run time; this finds it without
    running the line (a switch's options are read through its section, in the switch)."""
    text = (REPO / "syntrain" / f"{module}.py").read_text()
    names = "|".join(n for switch in registered() for n in option_names(switch)
                     if not hasattr(ModelConfig, n))  # `target`: a property of its own, from the switches' hooks
    found = re.findall(rf"\b(?:cfg|mcfg|model_config)\.({names})\b", text)
    assert found == [], f"{module}.py reads switch options {found}: use a switch hook or cfg.section(...)"


def test_fill_sets_the_data_derived_values_once():
    from syntrain.vocab import SPECIALS, Vocab

    cfg = ModelConfig.from_dict({**TreeDecoding.example, "label_embedding": 4})
    vocab = Vocab([*SPECIALS, "a", "b", "LEFT-ARC:nsubj", "RIGHT-ARC:obj"])
    table, manifest = fixtures_split()
    cfg.fill(table, manifest, vocab)
    tree = cfg.section(TreeDecoding)
    assert cfg.sizes.vocab_size == len(vocab) and tree.arc_labels == ["nsubj", "obj"]
    assert cfg.section("labels").source_labels  # from the split's label column
    with pytest.raises(ValueError, match="set once"):
        cfg.fill(table, manifest, vocab)
    with pytest.raises(ValueError, match="set once"):  # a checkpoint's config: filled when it was trained
        ModelConfig.from_dict(cfg.to_dict()).fill(table, manifest, vocab)


def test_fill_refuses_an_option_that_is_not_data_derived():
    cfg = ModelConfig.from_dict({"pascal_heads": [2]})
    with pytest.raises(ValueError, match="pascal_sigma2 is not a data-derived option"):
        cfg._set(cfg.section(Pascal), {"pascal_sigma2": 2.0})


def fixtures_split():
    from syntrain.dataset import read_split

    return read_split(str(fixtures.SHARDS / "train"))


def test_the_model_config_is_built_once_per_run(tmp_path, monkeypatch):
    """A run (new, then resumed) builds its ModelConfig once: data-derived values are filled in, validation and
    the test split's scoring with best.pt reuse it (instrumentation: a counter on the real __init__)."""
    built = []
    original = ModelConfig.__init__

    def counted(self, **values):
        built.append(sorted(values))
        original(self, **values)

    monkeypatch.setattr(ModelConfig, "__init__", counted)
    model = {**fixtures.TINY, "label_embedding": 4, **TreeDecoding.example}
    out = str(tmp_path / "run")
    valid = str(fixtures.SHARDS / "valid")
    fixtures.train_run(model, "cpu", out, max_steps=2, valid=valid, test=valid, eval_interval=2)
    assert len(built) == 1, built
    built.clear()
    fixtures.train_run(model, "cpu", out, max_steps=3, valid=valid, test=valid, eval_interval=2, resume=True)
    assert len(built) == 1, built


def test_a_run_stores_the_filled_config_flat(tmp_path):
    from syntrain.runfolder.checkpoints import read_checkpoint

    out = str(tmp_path / "run")
    fixtures.train_run({**fixtures.TINY, "label_embedding": 4}, "cpu", out, max_steps=1)
    stored = read_checkpoint(f"{out}/last.pt")["model_config"]
    assert stored["label_embedding"] == 4 and stored["source_labels"] and stored["vocab_size"] > 0
    assert build_model("cpu", **stored).cfg.section("labels").source_labels == stored["source_labels"]
