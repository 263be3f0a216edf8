"""The checks of a model's options across fields, which need no data: the width fits the heads, the decoder target
is declared, each switch fits
the model (`Switch.check`), the switches that are on fit each other (one changes teacher forcing, one the decoder
mask), the layers and heads they name exist; and the options of a recipe that would do nothing (`idle_options`).
A failed check is a ValueError naming the option."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from ..switches import ModelOptions, registered, target_column
from ..switches.active import ActiveSwitches
from ..transformer_layers import check_hooks
from .core import TEXT


def check_model_config(cfg: ModelOptions) -> None:
    """ValueError naming the option when the switches do not fit the model or each other (`cfg`: a
    `ModelConfig`)."""
    sizes = cfg.sizes
    if sizes.d_model % sizes.n_heads:
        raise ValueError(f"d_model {sizes.d_model} is not a multiple of n_heads {sizes.n_heads}")
    target_column(cfg.output.decoder_target)  # TEXT or a declared decoder target, else the ValueError
    if cfg.architecture.target_prefix and cfg.output.decoder_target != TEXT:
        raise ValueError(f"target_prefix {cfg.architecture.target_prefix}: decoder_target = "
                         f"{cfg.output.decoder_target!r} reads its decoder input from the start token on, with no "
                         "prefix (a target language code fits text decoding only)")
    for switch in registered():
        switch.check(cfg)
    active = ActiveSwitches(cfg)
    for what, changes in (("teacher forcing", "changes_teacher_forcing"), ("the decoder self-attention mask",
                                                                            "changes_decoder_mask")):
        changing = [switch.name for switch in active if getattr(switch, changes)]
        if len(changing) > 1:
            raise ValueError(f"switches {' and '.join(changing)} each change {what}; only one may be on")
    for switch in active:
        outside = [layer for layer in switch.state_layers() if not 1 <= layer <= sizes.dec_layers]
        if outside:
            raise ValueError(f"switch {switch.name!r} reads the states of decoder layer {outside[0]}: the "
                             f"decoder layers are 1..{sizes.dec_layers}")
    for stack, layers, kinds in (("encoder", sizes.enc_layers, ("self",)),
                                 ("decoder", sizes.dec_layers, ("self", "cross"))):
        for layer in range(layers):
            for kind in kinds:
                check_hooks(active.attention_hooks(stack, layer, kind), sizes.n_heads)


def idle_options(cfg: ModelOptions, given: dict[str, Any]) -> list[str]:
    """The options in `given` (a recipe's [model] keys) set to other than their default on a switch that is off
    in `cfg`: they would do nothing (`parent_ignore` without `pascal_heads`). One line per option."""
    idle = []
    for switch in registered():
        if switch.active(cfg) or not switch.switched_by:
            continue
        defaults = switch.Config()
        for spec in fields(switch.Config):
            if spec.name in given and spec.name not in switch.switched_by \
                    and getattr(cfg.section(switch), spec.name) != getattr(defaults, spec.name):
                idle.append(f"{spec.name} = {given[spec.name]!r} does nothing without "
                            f"{' or '.join(switch.switched_by)} (the {switch.name} switch is off)")
    return idle
