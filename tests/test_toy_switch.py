"""A new switch is one module plus one registration line: a toy switch defined here (a config field with its
range, an attention hook with its own parameter and recorded weights, a batch feature, an auxiliary loss)
trains through the unchanged trainer, is checkpointed and loads back; so does a toy decoder target."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from syntrain.columns import BatchColumn, TargetColumn
from syntrain.config import option
from syntrain.config.core import TEXT
from syntrain.config.model import ModelConfig
from syntrain.dataset import ParallelData, read_split
from syntrain.runfolder.checkpoints import load_checkpoint
from syntrain.switches import (
    AttentionHook,
    Heads,
    Outputs,
    Switch,
    declared,
    register,
    registered,
    target_column,
    unregister,
)
from syntrain.switches.active import ActiveSwitches
from syntrain.train import TrainConfig, train
from syntrain.vocab import Vocab

from .data.make_switch_fixtures import SHARDS


class Gate(AttentionHook):
    """Adds gain x a projection of the input to the output, and records the last head's attention."""

    heads = Heads.last()
    ops = ("record",)
    name = "toy gate"

    def __init__(self, gain: float) -> None:
        self.gain = gain

    def attach(self, attn: nn.Module) -> None:
        attn.toy_out = nn.Linear(attn.n_heads * attn.head_dim, attn.n_heads * attn.head_dim)

    def record(self, attn, log_weights, records) -> None:
        records["toy"] = log_weights[:, 0]

    def extra(self, attn, view):
        return self.gain * attn.toy_out(view.x)


@dataclass
class ToyConfig:
    toy_gain: float = option(0.0, ge=0, le=10, help="the toy gate's gain (0: off)")
    toy_layer: int = option(1, ge=1, help="1-based encoder layer of the toy gate")


class Toy(Switch[ToyConfig], name="toy", config=ToyConfig, switched_by=("toy_gain",)):
    """The toy switch: its last encoder head learns to attend to each token's parent (src_parent_first)."""

    @classmethod
    def check(cls, cfg) -> None:
        options = cls.section(cfg)
        if options.toy_gain and options.toy_layer > cfg.sizes.enc_layers:
            raise ValueError(f"toy_layer {options.toy_layer} is not an encoder layer")

    def describe(self) -> str:
        return f"toy gate {self.options.toy_gain}"

    def reads(self, training: bool) -> dict[str, str]:
        return {"src_parent_first": "the toy switch"} if training else {}

    def attention_hooks(self, stack: str, layer: int, kind: str) -> list[AttentionHook]:
        return [Gate(self.options.toy_gain)] if (stack, layer) == ("encoder", self.options.toy_layer - 1) else []

    def loss_weights(self) -> dict[str, float]:
        return {"toy": 0.5}

    def losses(self, model, outputs: Outputs, inputs) -> dict[str, torch.Tensor]:
        head = inputs["src_parent_first"]
        picked = outputs.records["toy"].gather(-1, head.clamp(min=0)[..., None])[..., 0]
        return {"toy": -torch.where(head >= 0, picked, torch.zeros_like(picked)).sum()}


@pytest.fixture
def toy():
    register(Toy)  # the one registration line
    yield Toy
    unregister(Toy.name)


def test_a_switch_defined_here_trains_checkpoints_and_loads(toy, tmp_path):
    model = {"d_model": 32, "d_ff": 64, "enc_layers": 2, "dec_layers": 2, "toy_gain": 0.5, "toy_layer": 2}
    cfg = TrainConfig(data=str(SHARDS / "train"), out=str(tmp_path / "run"), model=model, max_steps=4,
                      max_tokens=300, warmup=2, log_interval=1, eval_interval=4, threads=1, lr=3e-3)
    trained = train(cfg)
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    toy_losses = [r["loss_toy"] for r in records if "loss_toy" in r]
    assert len(toy_losses) == 4 and all(value > 0 for value in toy_losses)
    assert trained.switches.describe() == "toy gate 0.5"
    weight = trained.encoder[1].attn.toy_out.weight
    model_back, _, ckpt = load_checkpoint(str(tmp_path / "run" / "last.pt"))
    assert ckpt["model_config"]["toy_gain"] == 0.5
    assert torch.equal(model_back.encoder[1].attn.toy_out.weight, weight.detach().cpu())  # loaded on the CPU
    assert not hasattr(model_back.encoder[0].attn, "toy_out")


def test_the_toy_switch_options_are_checked(toy):
    with pytest.raises(ValueError, match="toy_gain must be <= 10"):
        ModelConfig.from_dict({"toy_gain": 11.0})
    with pytest.raises(ValueError, match="toy_layer 5 is not an encoder layer"):
        ModelConfig.from_dict({"toy_gain": 1.0, "toy_layer": 5})
    ModelConfig.from_dict({"toy_gain": 1.0, "dbsa_encoder": True})  # both record DBSA's last head: they compose


def test_unregistered_switch_options_are_unknown():
    with pytest.raises(ValueError, match="unknown model option"):
        ModelConfig.from_dict({"toy_gain": 1.0})


class Tags(Switch, name="toy_tags"):
    """A toy decoder target declared in one place: the target tokens' dependency labels (`tgt_labels`); on when
    the model's `decoder_target` names it."""

    decoder_targets = (TargetColumn("toy_tags", "tgt_labels", "labels"),)


@pytest.fixture
def tags():
    register(Tags)
    yield Tags
    unregister(Tags.name)


def test_a_decoder_target_declared_here_is_counted_read_and_trained(tags, tmp_path):
    """The data layer and the trainer name no target: a switch's `TargetColumn` alone makes the decoder
    produce another shard column (vocabulary, ids, training, checkpoint)."""
    table, _ = read_split(str(SHARDS / "train"))
    tagged = ActiveSwitches(ModelConfig.from_dict({"decoder_target": "toy_tags"}))
    assert tagged.decoder_target_name == "toy_tags" and [switch.name for switch in tagged] == ["toy_tags"]
    assert ActiveSwitches(ModelConfig.from_dict({})).decoder_target_name == TEXT
    assert not ActiveSwitches(ModelConfig.from_dict({}))
    vocab = Vocab.build([table], decoder_target=target_column("toy_tags"))
    assert {"nsubj", "det", "root"} <= set(vocab.itos) - set(Vocab.build([table]).itos)
    data = ParallelData(str(SHARDS / "train"), vocab, decoder_target=target_column("toy_tags"))
    for row in (0, len(data) - 1):
        batch = data.collate([row])
        assert vocab.decode(batch.tgt_out[0].tolist()) == table.column("tgt_labels")[row].as_py()
    model = {"d_model": 32, "d_ff": 64, "enc_layers": 1, "dec_layers": 1, "decoder_target": "toy_tags"}
    cfg = TrainConfig(data=str(SHARDS / "train"), out=str(tmp_path / "run"), model=model, max_steps=2,
                      max_tokens=300, warmup=1, log_interval=1, eval_interval=2, threads=1)
    train(cfg)
    model_back, vocab_back, _ = load_checkpoint(str(tmp_path / "run" / "last.pt"))
    assert model_back.switches.decoder_target_name == "toy_tags" and vocab_back.itos == vocab.itos


def test_a_decoder_target_no_switch_declares_is_refused_in_one_line(tags):
    with pytest.raises(ValueError, match="decoder_target 'toy_tag' is not a decoder target: one of text, "
                                         "transitions, toy_tags"):
        ModelConfig.from_dict({"decoder_target": "toy_tag"})
    unregister(Tags.name)
    with pytest.raises(ValueError, match="decoder_target 'toy_tags' is not a decoder target"):
        ModelConfig.from_dict({"decoder_target": "toy_tags"})  # its switch is not registered
    register(Tags)


@pytest.mark.parametrize("name", [TEXT, "transitions"])
def test_a_decoder_target_declared_twice_is_refused(name):
    class Again(Switch, name="toy_again"):
        columns = (BatchColumn("toy_again_heads", "src_heads", "src", "parents"),)
        decoder_targets = (TargetColumn(name, "tgt_labels", "labels"),)

    with pytest.raises(ValueError, match=f"decoder target {name!r} is already declared by"):
        register(Again)
    assert "toy_again_heads" not in declared()  # a refused switch leaves nothing declared
    assert Again.name not in {switch.name for switch in registered()}
