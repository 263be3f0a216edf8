"""Tests that follow the registry: every registered switch (built-in or added later) trains, is checkpointed,
loads, decodes and is listed by `syntrain env` and docs/recipe-fields.md; a new module in syntrain/switches/ is
found without editing any other file; option names that clash are refused at registration."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass

import pytest
from click.testing import CliRunner

from syntrain.cli import cli
from syntrain.config import option
from syntrain.config.model import ModelConfig
from syntrain.switches import Switch, deferred_order, option_names, register, registered, unregister

from .conftest import REPO
from .data import make_switch_fixtures as fixtures

SWITCHES = {switch.name: switch for switch in registered()}


def test_each_switch_declares_its_own_place():
    """No shared list orders the switches: the package's modules each declare a `priority` (so a new one is placed
    by its own file) and come in that order; what the order decides (parameter initialization, so first-step
    losses) is pinned per switch and per recipe (tests/test_state_dict_keys.py, tests/test_switch_compat.py)."""
    from syntrain.switches import registry

    built_in = [switch for switch in SWITCHES.values() if switch.__module__.startswith("syntrain.switches.")]
    assert built_in and all(switch.priority is not None for switch in built_in)
    assert built_in == sorted(built_in, key=lambda switch: switch.priority)
    assert not hasattr(registry, "ORDER")


def test_switches_outside_the_list_are_placed_by_name_never_by_registration_order():
    """`after` / `before` name other switches; a switch that declares no priority comes after those that do, by
    name (not in registration order), unless it must come before one."""
    class Zeta(Switch, name="placed_zeta"):
        pass

    class Last(Switch, name="placed_last"):
        pass

    class First(Switch, name="placed_first", before=("pascal",)):
        pass

    class Middle(Switch, name="placed_middle", after=("sync",), before=("label_embedding",)):
        pass

    try:
        for switch in (Zeta, Last, First, Middle):
            register(switch)
        built_in = list(SWITCHES)
        assert [switch.name for switch in registered()] == [
            "placed_first", *built_in[:4], "placed_middle", *built_in[4:], "placed_last", "placed_zeta"]
    finally:
        for name in ("placed_zeta", "placed_last", "placed_first", "placed_middle"):
            unregister(name)
    assert list(SWITCHES) == [switch.name for switch in registered()]


def test_the_order_does_not_depend_on_the_order_of_registration():
    """The package's modules registered in the reverse order come out in the same order."""
    switches = registered()
    for switch in switches:
        unregister(switch.name)
    try:
        with deferred_order():
            for switch in reversed(switches):
                register(switch)
        assert registered() == switches
    finally:
        for switch in registered():
            unregister(switch.name)
        with deferred_order():
            for switch in switches:
                register(switch)
    assert registered() == switches


@pytest.mark.parametrize("place, error", [
    ({"after": ("nowhere",)}, "^switch 'misplaced' is placed after 'nowhere', which is no registered switch"),
    ({"before": ("pascal",), "after": ("tree_decoding",)},
     r"^the places of switches .*misplaced.* \(after / before\) form a cycle$"),
])
def test_a_place_naming_no_switch_or_closing_a_cycle_is_refused_at_registration(place, error):
    class Misplaced(Switch, name="misplaced", **place):
        pass

    with pytest.raises(ValueError, match=error) as refused:
        register(Misplaced)
    assert "\n" not in str(refused.value)
    assert [switch.name for switch in registered()] == list(SWITCHES)  # nothing left registered


@pytest.mark.parametrize("name", sorted(SWITCHES))
def test_every_switch_has_an_example_that_turns_it_on(name):
    switch = SWITCHES[name]
    assert switch.example, f"{name}: declare `example`, the [model] options that turn it on"
    cfg = ModelConfig(**{**switch.example, "vocab_size": 10, "source_labels": ["root"], "arc_labels": ["nsubj"]})
    assert switch.active(cfg)


@pytest.mark.parametrize("name", sorted(SWITCHES))
def test_every_switch_trains_saves_loads_and_decodes(name, tmp_path):
    from syntrain.runfolder.checkpoints import load_checkpoint

    out = str(tmp_path / "run")
    logged = fixtures.train_run({**SWITCHES[name].example, **fixtures.TINY}, "tiny", out, max_steps=2)
    assert [record["step"] for record in logged] == [1, 2]
    model, _, _ = load_checkpoint(f"{out}/last.pt")
    assert SWITCHES[name].active(model.cfg)
    result = fixtures.checkpoint_results(f"{out}/last.pt")
    assert len(result["outputs"]) == len(result["pieces"]) > 0
    env = CliRunner().invoke(cli, ["env", "--checkpoint", f"{out}/last.pt"])
    assert env.exit_code == 0, env.output
    assert f"{name}: " in env.output


@pytest.mark.parametrize("name", sorted(SWITCHES))
def test_every_switch_option_is_in_the_recipe_fields_page(name):
    page = (REPO / "docs" / "recipe-fields.md").read_text()
    for option_name in option_names(SWITCHES[name]):
        assert f"`{option_name}`" in page, option_name


@dataclass
class ClashWithCore:
    max_len: int = option(100, ge=1, help="a name the model sizes already have")


@dataclass
class ClashWithTrain:
    lr: float = option(0.1, ge=0, help="a name the [train] options already have")


@dataclass
class ClashWithSwitch:
    pascal_heads: list[int] = option(default_factory=list, help="a name the Pascal switch already has")


@pytest.mark.parametrize("config, owner", [(ClashWithCore, "model sizes"), (ClashWithTrain, "training options"),
                                           (ClashWithSwitch, "switch 'pascal'")])
def test_an_option_name_declared_elsewhere_is_refused_at_registration(config, owner):
    from syntrain.config.sections import model_keys

    model_keys()  # the [train] names are reserved when the config is first composed (config.py imports no torch)

    class Clashing(Switch, name="clashing", config=config):
        pass

    with pytest.raises(ValueError, match=f"option '{list(config.__dataclass_fields__)[0]}' is already declared by "
                                         f".*{owner}"):
        register(Clashing)
    assert "clashing" not in {switch.name for switch in registered()}
    unregister("clashing")


NEW_MODULE = '''
from dataclasses import dataclass

from syntrain.config import option

from .base import Switch
from .registry import register


@dataclass
class DepthConfig:
    depth_probe: int = option(0, ge=0, help="a switch found without an import line")


class DepthProbe(Switch, name="depth_probe", config=DepthConfig, switched_by=("depth_probe",),
                 after=("tree_decoding",)):
    example = {"depth_probe": 1}


register(DepthProbe)
'''


def test_a_new_module_in_the_switches_package_is_found_with_no_other_edit(tmp_path):
    code = tmp_path / "code"
    shutil.copytree(REPO / "syntrain", code / "syntrain", ignore=shutil.ignore_patterns("__pycache__"))
    (code / "syntrain" / "switches" / "depth_probe.py").write_text(NEW_MODULE)
    script = ("import syntrain.model; from syntrain.switches import registered; "
              "print(' '.join(s.name for s in registered()))")
    env = {"PYTHONPATH": f"{code}:{REPO}", "PATH": ""}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [*SWITCHES, "depth_probe"]
