"""The model config: typed parts (the generic model's sizes, dropout rates and weight sharing, one section per
switch) under the flat option names, built once per run, the data-derived values set once; the generic code reads
only the generic parts."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest

from syntrain.config.core import CORE_PARTS, DropoutRates, ModelSizes, WeightSharing
from syntrain.config.fill import fill_from_data, set_data_derived
from syntrain.config.model import ModelConfig
from syntrain.model import build_model
from syntrain.switches import option_names, registered
from syntrain.switches.pascal import Pascal, PascalConfig
from syntrain.switches.tree_decoding import TreeDecoding

from .conftest import REPO
from .data import make_switch_fixtures as fixtures
from .test_generic_modules import GENERIC  # every module outside the switches' package (switches/active too)


def test_sizes_and_sections_are_typed_parts_under_the_flat_names():
    cfg = ModelConfig.from_dict({"pascal_heads": [2], "d_model": 64, "vocab_size": 9})
    assert isinstance(cfg.sizes, ModelSizes) and cfg.sizes.d_model == 64
    assert isinstance(cfg.dropouts, DropoutRates) and isinstance(cfg.sharing, WeightSharing)
    section = cfg.section(Pascal)
    assert isinstance(section, PascalConfig) and section.pascal_heads == [2] and cfg.section("pascal") is section
    assert Pascal(cfg).options is section
    flat = cfg.to_dict()  # checkpoints and recipes: one flat namespace, every declared name once
    declared = [spec.name for part in CORE_PARTS.values() for spec in fields(part)] + [
        n for s in registered() for n in option_names(s)]
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


def test_the_sizes_are_sizes_dropout_and_sharing_parts_of_their_own():
    """The recipe keys stay flat (`dropout`, `attention_dropout`, `share_embeddings`); in Python each lives in the
    part of its concept, and the rates in effect are the dropout part's."""
    cfg = ModelConfig.from_dict({"dropout": 0.3, "attention_dropout": 0.0, "share_embeddings": False, "d_model": 64})
    assert {spec.name for spec in fields(ModelSizes)} == {"vocab_size", "d_model", "n_heads", "d_ff", "enc_layers",
                                                         "dec_layers", "max_len", "src_vocab_size"}
    assert (cfg.dropouts.dropout, cfg.dropouts.attn_dropout, cfg.dropouts.ff_dropout) == (0.3, 0.0, 0.3)
    assert cfg.sharing.share_embeddings is False and not hasattr(cfg.sizes, "dropout")
    flat = cfg.to_dict()
    assert (flat["dropout"], flat["attention_dropout"], flat["share_embeddings"]) == (0.3, 0.0, False)
    model = build_model("cpu", vocab_size=12, dropout=0.3, attention_dropout=0.0, share_embeddings=False)
    assert model.drop.p == 0.3 and model.encoder[0].attn.dropout == 0.0 and model.encoder[0].ff[2].p == 0.3
    assert model.output.weight is not model.tgt_embed.weight


def test_the_model_config_holds_the_options_and_its_collaborators_the_rest():
    """ModelConfig has one job, the options; the checks, the data fill and the switches' queries are collaborators
    (check_model_config, fill_from_data, ActiveSwitches) that read it."""
    from syntrain.config.checks import check_model_config
    from syntrain.switches.active import ActiveSwitches

    jobs = {"check", "fill", "idle_options", "active_switches", "describe_switches", "attention_hooks",
            "batch_columns", "data_options", "dataset_options", "decoder_target", "loss_weights", "recomputes_prefix"}
    assert not {name for name in jobs if hasattr(ModelConfig, name)}
    cfg = ModelConfig.from_dict({**fixtures.TINY, "label_embedding": 4, "pascal_heads": [2], "vocab_size": 9})
    check_model_config(cfg)
    switches = ActiveSwitches(cfg)
    assert [switch.name for switch in switches] == ["pascal", "label_embedding"]
    assert {column.name for column in switches.batch_columns(training=False)} == {"src_parent_mid", "src_labels"}
    arguments = switches.parallel_data_arguments(training=False)
    assert arguments["batch_columns"] == switches.batch_columns(training=False) and arguments["decoder_target"] is None
    assert arguments["data_options"] == switches.data_options() and switches.describe().startswith("pascal heads")


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
    fill_from_data(cfg, table, manifest, vocab)
    tree = cfg.section(TreeDecoding)
    assert cfg.sizes.vocab_size == len(vocab) and tree.arc_labels == ["nsubj", "obj"]
    assert cfg.section("label_embedding").source_labels  # from the split's label column
    with pytest.raises(ValueError, match="set once"):
        fill_from_data(cfg, table, manifest, vocab)
    with pytest.raises(ValueError, match="set once"):  # a checkpoint's config: filled when it was trained
        fill_from_data(ModelConfig.from_dict(cfg.to_dict()), table, manifest, vocab)


def test_fill_refuses_an_option_that_is_not_data_derived():
    cfg = ModelConfig.from_dict({"pascal_heads": [2]})
    with pytest.raises(ValueError, match="pascal_sigma2 is not a data-derived option"):
        set_data_derived(cfg.section(Pascal), {"pascal_sigma2": 2.0})


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
    assert build_model("cpu", **stored).cfg.section("label_embedding").source_labels == stored["source_labels"]
