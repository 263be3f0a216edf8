"""The syntax switches: one module per mechanism, each a `Switch` registered in `base` (see base.py for the
interface and docs/switches-api.md for how to write one). Importing this package imports every module of it, so a
new module registers itself: nothing else to edit. The switches are ordered by their `order` (then registration):
a module's hooks attach their parameters, the losses are summed and the run header lists the switches in it."""

import importlib
import pkgutil

from .base import (
    AttentionHook,
    DecodedOutputs,
    Heads,
    HeadView,
    Inputs,
    Outputs,
    Switch,
    decoded,
    merge_inputs,
    option_names,
    register,
    registered,
    reserve,
    unregister,
)

for _module in sorted(info.name for info in pkgutil.iter_modules(__path__)):
    if _module != "base":
        importlib.import_module(f".{_module}", __name__)

__all__ = ["AttentionHook", "DecodedOutputs", "HeadView", "Heads", "Inputs", "Outputs", "Switch", "decoded",
           "merge_inputs", "option_names", "register", "registered", "reserve", "unregister"]
