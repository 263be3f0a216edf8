"""The forward hands the switches' losses the model's states: the encoder output, the decoder's final states and
the output of the decoder layers a switch names (`state_layers`), also under BiTran's own teacher forcing; two
switches that would each change teacher forcing are refused in one line."""

from __future__ import annotations

import pytest
import torch

from syntrain.config.model import ModelConfig
from syntrain.model import build_model
from syntrain.switches import Switch, register, unregister
from syntrain.vocab import BOS_ID, PAD_ID, Vocab

from .test_tree_decoding import SENTENCES, SMALL, VOCAB_ITEMS, _inputs


class ReadsLayerOne(Switch, name="example_reads_layer_one", switched_by=()):
    """Reads the output of decoder layer 1 (on in every config while registered; with dec_layers = 1: layer 2)."""

    @classmethod
    def active(cls, cfg) -> bool:
        return True

    def state_layers(self) -> tuple[int, ...]:
        return (1,) if self.cfg.sizes.dec_layers > 1 else (2,)


class OwnForcing(Switch, name="example_own_forcing"):
    """Claims to compute teacher forcing its own way (on in every config while registered)."""

    @classmethod
    def active(cls, cfg) -> bool:
        return True

    changes_teacher_forcing = True


@pytest.fixture
def reads_layer_one():
    register(ReadsLayerOne)
    yield
    unregister(ReadsLayerOne.name)


def _vanilla():
    torch.manual_seed(0)
    return build_model("tiny", vocab_size=40, d_model=32, n_heads=4, d_ff=64, enc_layers=2, dec_layers=3,
                       dropout=0.0).eval()


def test_forward_returns_the_encoder_and_decoder_states():
    model = _vanilla()
    src = torch.tensor([[5, 6, 7, PAD_ID], [8, 9, 10, 11]])
    tgt = torch.tensor([[BOS_ID, 12, 13, PAD_ID], [BOS_ID, 14, 15, 16]])
    with torch.no_grad():
        outputs = model(src, tgt)
        memory, src_mask = model.encode(src)
        final = model.decode_hidden(tgt, memory, src_mask)
    assert torch.equal(outputs.encoder_states, memory)
    assert outputs.source_valid.tolist() == [[True, True, True, False], [True] * 4]
    assert torch.equal(outputs.decoder_states, final)
    assert torch.equal(outputs.logits, model.output(final))
    assert outputs.layer_states == {}  # no switch asked for a layer's states: none kept


def test_a_switch_gets_the_decoder_layers_it_names(reads_layer_one):
    model = _vanilla()
    assert model.state_layers == (1,)
    src, tgt = torch.tensor([[5, 6, 7]]), torch.tensor([[BOS_ID, 12, 13]])
    with torch.no_grad():
        outputs = model(src, tgt)
        memory, src_mask = model.encode(src)
        x = model._embed(model.tgt_embed, tgt)
        causal = torch.ones(3, 3, dtype=torch.bool).tril()[None, None]
        first = model.decoder[0](x, memory, causal, src_mask)
    assert list(outputs.layer_states) == [1]
    assert torch.allclose(outputs.layer_states[1], first, atol=1e-6)
    assert not torch.allclose(outputs.layer_states[1], outputs.decoder_states, atol=1e-3)


def test_bitran_states_are_each_prefix_pass(reads_layer_one):
    """Under BiTran the states at position p are those of the pass over the prefix 0..p (the logits are projected
    from them), for the final states and for a named layer's."""
    vocab = Vocab(VOCAB_ITEMS)
    torch.manual_seed(0)
    model = build_model("tiny", vocab_size=len(vocab), **SMALL, bidirectional=True).eval()
    src, tgt, _ = _inputs(vocab, SENTENCES[:1], uses_graph=False)
    with torch.no_grad():
        outputs = model(src, tgt)
        memory, src_mask = model.encode(src)
        for p in (1, 4):
            kept: dict = {}
            alone = model.decode_hidden(tgt[:, : p + 1], memory, src_mask, layers=(1,), layer_states=kept)
            assert torch.allclose(outputs.decoder_states[0, p], alone[0, p], atol=1e-5)
            assert torch.allclose(outputs.layer_states[1][0, p], kept[1][0, p], atol=1e-5)
    assert torch.equal(outputs.logits, model.output(outputs.decoder_states))


def test_two_switches_changing_teacher_forcing_are_refused():
    ModelConfig.from_dict({"decoder_target": "transitions", "bidirectional": True})
    register(OwnForcing)
    try:
        with pytest.raises(ValueError, match="^switches tree_decoding and example_own_forcing each change teacher "
                                             "forcing; only one may be on$"):
            ModelConfig.from_dict({"decoder_target": "transitions", "bidirectional": True})
        ModelConfig.from_dict({"decoder_target": "transitions"})  # BiTran off: one switch changes it
    finally:
        unregister(OwnForcing.name)


def test_a_state_layer_outside_the_decoder_is_refused(reads_layer_one):
    with pytest.raises(ValueError, match="^switch 'example_reads_layer_one' reads the states of decoder "
                                         "layer 2: the decoder layers are 1..1$"):
        ModelConfig.from_dict({"dec_layers": 1})
