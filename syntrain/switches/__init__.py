"""The syntax switches: one module per mechanism, each a `Switch` (base.py: the interface) registered in
`registry` (docs/switches-api.md: how to write one). Importing this package imports every module of it, so a new
module registers itself: nothing else to edit. The switches are ordered by the `priority` each declares, the
others after them by name unless their class places them (`after=` / `before=`), checked once every module has
registered (neither file names nor import order decide it): a module's hooks attach their parameters, the losses
are summed and the run header lists the switches in that order."""

import importlib
import pkgutil

from .base import (
    AttentionHook,
    DecodedOutputs,
    DecoderStates,
    Heads,
    HeadView,
    Inputs,
    ModelOptions,
    Outputs,
    Switch,
    decoded,
    merge_inputs,
)
from .registry import (
    current_names,
    declared,
    declared_targets,
    deferred_order,
    option_names,
    register,
    registered,
    reserve,
    target_column,
    unregister,
)

with deferred_order():
    for _module in sorted(info.name for info in pkgutil.iter_modules(__path__)):
        if _module not in ("base", "registry"):
            importlib.import_module(f".{_module}", __name__)

__all__ = ["AttentionHook", "DecodedOutputs", "DecoderStates", "HeadView", "Heads", "Inputs", "ModelOptions",
           "Outputs", "Switch", "current_names", "declared", "declared_targets", "decoded", "merge_inputs",
           "option_names", "register", "registered", "reserve", "target_column", "unregister"]
