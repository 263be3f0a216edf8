"""The syntax switches: one module per mechanism, each a `Switch` registered in `base` (see base.py for the
interface and docs/switches-api.md for how to write one). Importing this package registers the built-in
switches in this order: a module's hooks attach their parameters, the losses are summed and the run header
lists the switches in registration order."""

# isort: off
from . import pascal, directed, parse_head, sync, labels, tree  # noqa: F401 (registration, in this order)
# isort: on
from .base import AttentionHook, Features, Outputs, Switch, merge_features, register, registered, unregister

__all__ = ["AttentionHook", "Features", "Outputs", "Switch", "merge_features", "register", "registered", "unregister"]
