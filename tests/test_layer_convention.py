"""One convention for layers and heads, one checker: every option of a registered switch that names layers or
heads per layer (`*_layer`, `*_layers`, `*_heads`) is checked by `Switch.check_layers`, whose messages name the
option and the layers the stack has (docs/switches-api.md, "Layers and heads")."""

from __future__ import annotations

import re

import pytest

from syntrain.config.model import ModelConfig
from syntrain.config.pins import layer_options, pinned
from syntrain.switches import registered

from .conftest import REPO

CHECKER = re.compile(r"^(\w+) .*(the (encoder|decoder)( and decoder)? (layers are 1\.\.\d+|has \d+)|"
                     r"layer \d+ asks for \d+ heads, a layer has \d+ \(n_heads\))$")
LAYER_OPTIONS = [(switch.name, name) for switch in registered() for name in layer_options(switch)]


@pytest.mark.parametrize("switch", registered(), ids=lambda switch: switch.name)
def test_the_layer_options_are_the_pinned_ones(switch):
    """Each switch's layer options are pinned in its own file (tests/data/switches/NAME.json)."""
    pin = pinned(switch.name, str(REPO / "tests" / "data" / "switches"))
    assert pin is not None, f"{switch.name}: a new switch: run python -m syntrain.config"
    assert layer_options(switch) == pin["layer_options"]


@pytest.mark.parametrize("switch, name", LAYER_OPTIONS)
def test_every_layer_option_is_refused_by_the_one_checker(switch, name):
    example = next(s for s in registered() if s.name == switch).example
    base = {**example, "enc_layers": 2, "dec_layers": 2, "n_heads": 4, "d_model": 32}
    default = getattr(ModelConfig(**base).section(switch), name)
    tries = [[99], [1] * 9] if isinstance(default, list) else [99]
    messages = []
    for value in tries:
        try:
            ModelConfig.from_dict({**base, name: value})
        except ValueError as refused:
            messages.append(str(refused))
    assert messages and all(CHECKER.match(message) and message.startswith(name) for message in messages), messages


def test_an_old_spelling_still_reads_with_a_note(caplog, tmp_path):
    """`gcn_layers` (a count, not layer numbers) is spelt `gcn_layer_count` now, and `target` (the decoder target,
    not the target side) `decoder_target`: a config, a recipe and a checkpoint that use the old spellings read the
    same, with a note; both spellings at once are refused."""
    from synprep.logs import forget_warnings
    from syntrain.config.resolve import resolve_run
    from syntrain.runfolder.checkpoints import load_checkpoint

    from .data.make_switch_fixtures import HERE

    forget_warnings()  # said once per process: an earlier test may have read an old spelling already
    with caplog.at_level("WARNING", logger="syntrain"):
        cfg = ModelConfig.from_dict({"target": "transitions", "gcn_layers": 2})
    assert cfg.section("tree_decoding").gcn_layer_count == 2 and "gcn_layer_count" in cfg.to_dict()
    assert "gcn_layers is now gcn_layer_count" in caplog.text and "target is now decoder_target" in caplog.text
    assert cfg.output.decoder_target == "transitions" and "target" not in cfg.to_dict()
    with pytest.raises(ValueError, match="gcn_layers \\(its old spelling\\) and gcn_layer_count both given"):
        ModelConfig.from_dict({"target": "transitions", "gcn_layers": 2, "gcn_layer_count": 2})
    recipe = tmp_path / "old.toml"
    recipe.write_text('[data]\ntrain = "x"\n[model]\ntarget = "transitions"\ngcn_layers = 2\n')
    train_cfg = resolve_run(str(recipe), {}, {})[0]
    assert ModelConfig.from_dict(train_cfg.model).section("tree_decoding").gcn_layer_count == 2
    assert ModelConfig.from_dict(train_cfg.model).output.decoder_target == "transitions"
    set_cfg = resolve_run(None, {"data": "x"}, {}, ("model.gcn_layers=3", "model.target=transitions"))[0]
    assert ModelConfig.from_dict(set_cfg.model).section("tree_decoding").gcn_layer_count == 3
    model, _, ckpt = load_checkpoint(str(HERE / "tree.pt"))  # stored with gcn_layers = 1, target = "transitions"
    assert "gcn_layers" in ckpt["model_config"] and model.cfg.section("tree_decoding").gcn_layer_count == 1
    assert ckpt["model_config"]["target"] == "transitions" and model.switches.decoder_target_name == "transitions"
    assert any(key.startswith("gcn.") for key in model.state_dict())
