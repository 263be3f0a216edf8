"""Attention hooks as operations on the logits (syntrain.transformer_layers): their one order of composition on a
hand-computed case, what cannot compose, and a switch defined here, a learned tree-distance logit bias on every
head of an encoder layer that also has Pascal heads, which gives the same outputs on the math and the flex
kernel, changes the outputs, trains, is checkpointed, loads and translates."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from syntrain.config import option
from syntrain.config.model import ModelConfig
from syntrain.dataset import ParallelData, read_split
from syntrain.model import Transformer
from syntrain.runfolder.checkpoints import load_checkpoint
from syntrain.switches import AttentionHook, Heads, Switch, register, unregister
from syntrain.switches.active import ActiveSwitches
from syntrain.switches.directed import DirectedHeads
from syntrain.switches.parse_head import ParseHead
from syntrain.switches.tree_decoding import ParentHead
from syntrain.transformer_layers import MultiHeadAttention, check_hooks
from syntrain.vocab import Vocab

from .data import make_switch_fixtures as fixtures


class Given(AttentionHook):
    """Operations with fixed values on `heads`; with `record`, their log-weights are kept under `name`."""

    def __init__(self, heads: Heads, name: str = "given", record: bool = False, **values: torch.Tensor) -> None:
        self.heads, self.name, self.values = heads, name, values
        self.ops = (*values, "record") if record else tuple(values)

    def operations(self, attn, view):
        return dict(self.values)

    def record(self, attn, log_weights, records):
        records[self.name] = log_weights


def _identity_attention(n_heads: int = 1, d_model: int = 2, hooks=()) -> MultiHeadAttention:
    """q = x, k = v = memory, output = the contexts: scores are the inputs' dot products."""
    attn = MultiHeadAttention(d_model, n_heads, hooks=hooks).eval()
    with torch.no_grad():
        for linear in (attn.query, attn.key_value, attn.out):
            linear.bias.zero_()
        attn.query.weight.copy_(torch.eye(d_model))
        attn.key_value.weight.copy_(torch.cat([torch.eye(d_model), torch.eye(d_model)]))
        attn.out.weight.copy_(torch.eye(d_model))
    return attn


def test_operations_compose_scale_then_bias_then_masks():
    """One query (1, 0), keys (1, 0), (0, 1), (2, 0): scores q.k / sqrt(2) = (1, 0, 2) / sqrt(2); x 2 (scale),
    + (1, 0, -1) (bias), key 1 masked: softmax over (sqrt(2) + 1, 2 sqrt(2) - 1) -> key 0 gets
    sigmoid(2 - sqrt(2)). Bias before scale would give sigmoid(2 (sqrt(2) + 1 - 2)) instead."""
    x, memory = torch.tensor([[[1.0, 0.0]]]), torch.tensor([[[1.0, 0.0], [0.0, 1.0], [2.0, 0.0]]])
    hooks = [Given(Heads.every(), "bias", bias=torch.tensor([1.0, 0.0, -1.0])),
             Given(Heads.every(), "mask", mask=torch.tensor([True, False, True])),
             Given(Heads.every(), "scale", scale=torch.tensor(2.0))]
    first = 1 / (1 + math.exp(-(2 - math.sqrt(2))))
    expected = torch.tensor([first, 0.0, 1 - first])
    attn = _identity_attention(hooks=hooks)
    for kernel in ("math", "flex"):  # flex: the same order inside the kernel's score_mod
        attn.kernel = kernel
        with torch.no_grad():
            assert attn.uses_flex(x.device) == (kernel == "flex")
            torch.testing.assert_close(attn(x, memory=memory)[0, 0], expected @ memory[0], atol=1e-6, rtol=1e-6)
    records = {}
    recorded = _identity_attention(hooks=[*hooks, Given(Heads.every(), "weights", record=True)])
    recorded(x, memory=memory, records=records)
    torch.testing.assert_close(records["weights"][0, 0, 0].exp(), expected, atol=1e-6, rtol=1e-6)
    assert not recorded.layout.flex  # FlexAttention returns no weights: that layer runs on math


def test_a_head_mask_replaces_the_layer_mask_and_a_mask_narrows_it():
    x = torch.randn(1, 3, 4)
    layer = torch.tensor([True, True, False])[None, None, None, :]  # key 2 is padding
    own = torch.tensor([[False, False, True]] * 3)  # head 0: only key 2
    window = torch.tensor([[True, True, True], [True, True, True], [True, False, True]])  # query 2: not key 1
    hooks = [Given(Heads.of(0), "own", head_mask=own), Given(Heads.every(), "all", record=True, mask=window)]
    records = {}
    _identity_attention(2, 4, hooks)(x, mask=layer, records=records)
    allowed = records["all"].exp() > 0
    assert torch.equal(allowed[0, 0], own & window)
    assert torch.equal(allowed[0, 1], layer[0, 0].expand(3, 3) & window)


def test_what_cannot_compose_is_refused_in_one_line():
    with pytest.raises(ValueError, match="claim the same heads: both give head 3 its query"):
        check_hooks([ParseHead("biaffine", "a"), ParseHead("released", "b")], 4)
    with pytest.raises(ValueError, match="both give head 0 its head mask"):
        check_hooks([ParentHead(), Given(Heads.front(2), head_mask=torch.ones(1, dtype=torch.bool))], 4)
    with pytest.raises(ValueError, match=r"heads \[1, 5\] do not fit in 4 heads"):
        check_hooks([Given(Heads.of(5, 1), bias=torch.zeros(1))], 4)
    check_hooks([ParseHead("dot", "a"), ParseHead("released", "b"), ParentHead(),  # records, biases, masks compose
                 Given(Heads.every(), bias=torch.zeros(1)), Given(Heads.front(3), scale=torch.ones(1))], 4)


def _directed_case():
    """Single-context syntax-directed heads (a scale and a mask) on a padded cross-attention."""
    x, memory = torch.randn(2, 5, 32), torch.randn(2, 6, 32)
    mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    mask[1, ..., 4:] = False
    distances = torch.randint(0, 6, (2, 6, 6), dtype=torch.uint8)
    return [DirectedHeads(2, 2.0, False)], {"memory": memory, "mask": mask, "distances": distances}, x


def _parent_case():
    """A PARENT head (a head mask) on a causal self-attention with padding."""
    x = torch.randn(2, 5, 32)
    valid = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    mask = torch.ones(5, 5, dtype=torch.bool).tril()[None, None] & valid[:, None, None, :]
    parents = (torch.rand(2, 5, 5) < 0.4).tril() | torch.eye(5, dtype=torch.bool)
    return [ParentHead()], {"mask": mask, "parent_mask": parents}, x


@pytest.mark.parametrize("case", [_directed_case, _parent_case])
def test_every_operation_runs_on_the_flex_kernel_like_math(case):
    torch.manual_seed(0)
    hooks, inputs, x = case()
    attn = MultiHeadAttention(32, 4, hooks=hooks).eval()
    out = {}
    with torch.no_grad():
        for kernel in ("math", "flex"):
            attn.kernel = kernel
            assert attn.uses_flex(x.device) == (kernel == "flex")
            out[kernel] = attn(x, **inputs)
    torch.testing.assert_close(out["flex"], out["math"], atol=1e-5, rtol=1e-5)


class DistanceBias(AttentionHook):
    """Every head's logits + a learned scalar per head and clipped tree distance of query and key."""

    heads = Heads.every()
    ops = ("bias",)
    name = "tree-distance bias"

    def __init__(self, max_distance: int) -> None:
        self.max_distance = max_distance

    def attach(self, attn: nn.Module) -> None:
        attn.example_distance_bias = nn.Parameter(torch.zeros(self.max_distance + 1, attn.n_heads))

    def operations(self, attn, view):
        distances = view.inputs["distances"].long().clamp(max=self.max_distance)  # (B, S, S)
        return {"bias": attn.example_distance_bias[distances].permute(0, 3, 1, 2)}  # (B, H, S, S)


@dataclass
class DistanceBiasConfig:
    example_distance_layer: int = option(0, ge=0, help="1-based encoder layer with a tree-distance bias (0: off)")
    example_distance_max: int = option(4, ge=1, help="tree distances clipped to this")


class DistanceBiasSwitch(Switch[DistanceBiasConfig], name="example_distance_bias", config=DistanceBiasConfig,
                         switched_by=("example_distance_layer",)):
    """A tree-distance bias on the encoder self-attention of one layer (reads the shared `distances` column)."""

    def reads(self, training: bool) -> dict[str, str]:
        return {"distances": "the tree-distance bias"}

    def attention_hooks(self, stack: str, layer: int, kind: str) -> list[AttentionHook]:
        if (stack, kind, layer) == ("encoder", "self", self.options.example_distance_layer - 1):
            return [DistanceBias(self.options.example_distance_max)]
        return []


@pytest.fixture
def distance_bias():
    register(DistanceBiasSwitch)
    yield DistanceBiasSwitch
    unregister(DistanceBiasSwitch.name)


MODEL = {**fixtures.TINY, "enc_layers": 2, "dec_layers": 1, "pascal_heads": [2], "example_distance_layer": 1}


def _batch(cfg: ModelConfig):
    table, _ = read_split(str(fixtures.SHARDS / "train"))
    vocab = Vocab.build([table])
    data = ParallelData(str(fixtures.SHARDS / "train"), vocab, batch_columns=ActiveSwitches(cfg).batch_columns(False))
    return len(vocab), data.collate(data.keep[:6])


def test_distance_bias_with_pascal_same_on_math_and_flex_and_it_matters(distance_bias):
    cfg = ModelConfig.from_dict({**MODEL, "vocab_size": 1})
    vocab_size, batch = _batch(cfg)
    torch.manual_seed(0)
    model = Transformer(ModelConfig.from_dict({**MODEL, "vocab_size": vocab_size})).eval()
    attn = model.encoder[0].attn
    assert [type(hook).__name__ for hook in attn.hooks] == ["PascalHeads", "DistanceBias"]
    with torch.no_grad():
        attn.example_distance_bias.normal_(0, 1.0)
        encoded = {}
        for kernel in ("math", "flex"):
            model.set_attention_kernel(kernel)
            assert attn.uses_flex(batch.src.device) == (kernel == "flex")
            encoded[kernel] = model.encode(batch.src, batch.inputs)[0]
        torch.testing.assert_close(encoded["flex"], encoded["math"], atol=1e-5, rtol=1e-5)
        model.set_attention_kernel("math")
        attn.example_distance_bias.zero_()
        assert not torch.allclose(model.encode(batch.src, batch.inputs)[0], encoded["math"], atol=1e-3)


def test_distance_bias_trains_checkpoints_loads_and_translates(distance_bias, tmp_path):
    out = str(tmp_path / "run")
    logged = fixtures.train_run(MODEL, "tiny", out, max_steps=3)
    assert [values["step"] for values in logged] == [1, 2, 3]
    model, _, ckpt = load_checkpoint(f"{out}/last.pt")
    assert ckpt["model_config"]["example_distance_layer"] == 1
    assert model.encoder[0].attn.example_distance_bias.abs().sum() > 0  # learned from zeros
    assert not hasattr(model.encoder[1].attn, "distance_bias")
    result = fixtures.checkpoint_results(f"{out}/last.pt")
    assert len(result["outputs"]) == len(result["pieces"]) > 0
