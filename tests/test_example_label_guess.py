"""The worked auxiliary-loss example of docs/switches-api.md (tests/examples/label_guess.py, quoted there
verbatim): a target-label loss from a decoder layer's states is one file; it needs no teacher-forcing override,
trains through the unchanged trainer, is checkpointed and loads back."""

from __future__ import annotations

import importlib
import json

import pytest
import torch
import torch.nn.functional as F

from syntrain.config.fill import fill_from_data
from syntrain.config.model import ModelConfig
from syntrain.dataset import ParallelData, read_split
from syntrain.runfolder.checkpoints import load_checkpoint
from syntrain.switches import register, registered, unregister
from syntrain.train import TrainConfig, train
from syntrain.vocab import Vocab

from .conftest import REPO
from .data import make_switch_fixtures as fixtures

EXAMPLE = REPO / "tests" / "examples" / "label_guess.py"


@pytest.fixture
def guess():
    module = importlib.import_module("tests.examples.label_guess")
    if module.LabelGuess not in registered():
        register(module.LabelGuess)
    yield module
    unregister(module.LabelGuess.name)


def test_the_guide_quotes_the_example_file():
    code = EXAMPLE.read_text(encoding="utf-8")
    body = code[code.index("@dataclass\nclass GuessConfig") :]
    assert body in (REPO / "docs" / "switches-api.md").read_text(encoding="utf-8")


def test_the_loss_is_the_cross_entropy_of_the_named_layer_states(guess):
    """The switch's loss equals one computed here from the decoder layer's own output (no override, no second
    decoder pass in the switch), and its gradient reaches its classifier and the layers below."""
    path = str(fixtures.SHARDS / "train")
    table, _ = read_split(path)
    vocab = Vocab.build([table])
    cfg = ModelConfig.from_dict({**fixtures.TINY, "enc_layers": 2, "dec_layers": 2, "dropout": 0.0,
                                 "example_guess_lambda": 1.0, "example_guess_layer": 1})
    fill_from_data(cfg, table, None, vocab)
    assert cfg.section("example_guess").example_guess_labels == sorted(
        {label for row in table.column("tgt_labels").to_pylist() for label in row})
    torch.manual_seed(0)
    from syntrain.model import Transformer

    model = Transformer(cfg)
    data = ParallelData(path, vocab, **model.switches.parallel_data_arguments(training=True))
    batch = data.collate([0, 1, 2, 3])
    outputs = model(batch.src, batch.tgt_in, batch.inputs)
    loss = model.auxiliary_losses(outputs, batch.inputs)["example_guess"]
    memory, src_mask = model.encode(batch.src, batch.inputs)
    kept: dict = {}
    model.decode_hidden(batch.tgt_in, memory, src_mask, batch.inputs, None, (1,), kept)
    gold = batch.inputs["tgt_labels"][:, 1:]
    expected = F.cross_entropy(model.example_guess_out(kept[1][:, :-1]).flatten(0, 1), gold.flatten(),
                               ignore_index=0, reduction="sum")
    assert (gold > 1).sum() > 10 and torch.allclose(loss, expected, rtol=1e-5)
    loss.backward()
    assert model.example_guess_out.weight.grad.abs().sum() > 0
    assert model.decoder[0].ff[0].weight.grad.abs().sum() > 0
    assert model.decoder[1].ff[0].weight.grad is None  # above the named layer: untouched by this loss


def test_the_example_trains_checkpoints_and_loads(guess, tmp_path):
    cfg = TrainConfig.from_dict({**fixtures.TRAIN, "max_steps": 2, "data": str(fixtures.SHARDS / "train"),
                                 "out": str(tmp_path / "run"), "preset": "tiny",
                                 "model": {**fixtures.TINY, "example_guess_lambda": 0.5, "example_guess_layer": 2}})
    train(cfg)
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [record["loss_example_guess"] > 0 for record in records if "loss_example_guess" in record] == [True] * 2
    model, _, ckpt = load_checkpoint(str(tmp_path / "run" / "last.pt"))
    assert ckpt["model_config"]["example_guess_layer"] == 2 and model.state_layers == (2,)
    assert model.example_guess_out.out_features == len(ckpt["model_config"]["example_guess_labels"]) + 2


def test_a_layer_outside_the_decoder_is_refused(guess):
    with pytest.raises(ValueError, match=r"^example_guess_layer 4: the decoder layers are 1..3$"):
        ModelConfig.from_dict({"example_guess_lambda": 1.0, "example_guess_layer": 4})
