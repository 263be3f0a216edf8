"""The registry of the syntax switches, which the generic model, config, data and trainer code loop over: the
switches by name in their declared order, the option names they may not take, and the batch columns and decoder
targets they declare (`syntrain.columns.BatchColumn`, `TargetColumn`), by name.

The data layer (`syntrain.dataset`, `syntrain.vocab`) never asks this registry: its callers hand it the
declarations a model reads (`ActiveSwitches.batch_columns`, `ActiveSwitches.parallel_data_arguments`; `declared` and
`target_column` by name).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import fields
from typing import Any

from synprep.logs import warn_once

from ..columns import SHARED, BatchColumn, TargetColumn
from ..config.core import TEXT
from .base import Switch

_REGISTRY: dict[str, type[Switch]] = {}  # name -> switch, in registration order
_ORDER: list[type[Switch]] = []  # the registered switches in their declared order
_DEFERRED = 0  # > 0 while the package imports its modules: the order is checked once they all registered
_RESERVED: dict[str, str] = {}  # option name -> the core config section that declares it
COLUMN_LAYER = "the column layer"  # the declarer of the shared batch columns (syntrain.columns.SHARED)
# name -> (declaration, the switch that declared it, or COLUMN_LAYER)
_COLUMNS: dict[str, tuple[BatchColumn, str]] = {column.name: (column, COLUMN_LAYER) for column in SHARED}
_TARGETS: dict[str, tuple[TargetColumn, str]] = {}  # name -> (declaration, the switch that declared it)


def current_names(values: dict[str, Any], where: str = "") -> dict[str, Any]:
    """`values` ([model] options by name) with the old spellings the switches declare (`Switch.renamed`) under
    their names now; each old spelling found is said once on the log ("<where>: gcn_layers is now
    gcn_layer_count"). A value given under both names is a ValueError."""
    renamed = {old: new for switch in _REGISTRY.values() for old, new in switch.renamed.items()}
    out = dict(values)
    for old in [name for name in values if name in renamed]:
        new = renamed[old]
        if new in values:
            raise ValueError(f"{where + ': ' if where else ''}{old} (its old spelling) and {new} both given: keep "
                             f"{new}")
        out[new] = out.pop(old)
        warn_once(logging.getLogger("syntrain"), (f"{where}: " if where else "") + f"{old} is now {new} (the old "
                  "spelling still reads)", key=("renamed", where, old))
    return out


def option_names(switch: type[Switch]) -> list[str]:
    """The `[model]` option names a switch declares (its config slice's fields)."""
    config = getattr(switch, "Config", None)
    return [spec.name for spec in fields(config)] if config is not None else []


def _clash(switch: type[Switch], name: str) -> str | None:
    """Who else declares option `name` (a core section or another switch), or None."""
    if name in _RESERVED:
        return _RESERVED[name]
    return next((f"switch {other.name!r}" for other in _REGISTRY.values()
                 if other is not switch and name in option_names(other)), None)


def _check_names(switch: type[Switch]) -> None:
    """ValueError when one of the switch's options is declared elsewhere: options share one flat namespace (the
    `[model]` keys, `--set model.X`, checkpoints' model_config), so a clash would silently feed one value to both."""
    for name in option_names(switch):
        owner = _clash(switch, name)
        if owner is not None:
            raise ValueError(f"switch {switch.name!r}: option {name!r} is already declared by {owner}; "
                             "give it another name")


def reserve(section: str, names: Iterable[str]) -> None:
    """Option names of a core config section (e.g. the model sizes) that no switch may declare; checked against
    the switches registered so far and every later registration."""
    for name in names:
        _RESERVED.setdefault(name, section)
    for switch in _REGISTRY.values():
        _check_names(switch)


def register(switch: type[Switch]) -> type[Switch]:
    """Add a switch (its config fields become `[model]` options, its batch columns and decoder targets are
    declared); usable as a class decorator. Modules of this package are found and imported by the package
    itself; a switch defined elsewhere calls this. A refused switch (a name, option, column or target taken, a
    place naming an unknown switch or closing a cycle) leaves nothing registered."""
    if not switch.name or switch.name in _REGISTRY:
        raise ValueError(f"a switch needs a new name, got {switch.name!r}")
    _check_names(switch)
    _REGISTRY[switch.name] = switch
    try:
        _declare(switch.columns, switch.name)
        _declare_targets(switch.decoder_targets, switch.name)
        if not _DEFERRED:
            _ORDER[:] = _ordered(checked=[switch])
    except ValueError:
        unregister(switch.name)
        raise
    return switch


def unregister(name: str) -> None:
    """Remove a registered switch (tests, examples), with the batch columns and decoder targets it declared."""
    _REGISTRY.pop(name, None)
    for registry in (_COLUMNS, _TARGETS):
        for declared_name in [key for key, (_, owner) in registry.items() if owner == name]:
            del registry[declared_name]
    if not _DEFERRED:
        _ORDER[:] = [switch for switch in _ORDER if switch.name != name]


@contextmanager
def deferred_order() -> Iterator[None]:
    """Registrations whose places may name switches registered later in the block (the package's modules, imported
    in any order: the order does not depend on it); the order is checked, and fixed, at the end of the block."""
    global _DEFERRED
    _DEFERRED += 1
    try:
        yield
    finally:
        _DEFERRED -= 1
    if not _DEFERRED:
        _ORDER[:] = _ordered(checked=list(_REGISTRY.values()))


def registered() -> list[type[Switch]]:
    """The registered switches in their declared order (those declaring a `priority` by it, then the others by
    name, each moved after the switches its `after` / `before` say it follows): the order of their hooks in a
    module, of their parameters, losses and run-header parts."""
    return list(_ORDER) if not _DEFERRED else list(_REGISTRY.values())


def _ordered(checked: list[type[Switch]]) -> list[type[Switch]]:
    """The registered switches by their declared `priority` (those declaring none after them, by name), each moved
    after the switches it must follow (its `after`, and those placing themselves `before` it): a stable topological
    order that neither file names nor the order of registration decide; ValueError (one line) for a cycle, or for a
    place of a `checked` switch naming no registered switch (another's place naming one unregistered since is let
    go)."""
    for switch in checked:
        for word, names in (("after", switch.after), ("before", switch.before)):
            unknown = [name for name in names if name not in _REGISTRY]
            if unknown:
                raise ValueError(f"switch {switch.name!r} is placed {word} {unknown[0]!r}, which is no registered "
                                 f"switch (registered: {', '.join(_REGISTRY)})")
    rank = {name: (0, switch.priority, name) if switch.priority is not None else (1, 0, name)
            for name, switch in _REGISTRY.items()}
    preceding: dict[str, set[str]] = {name: set() for name in _REGISTRY}
    listed = sorted((name for name, switch in _REGISTRY.items() if switch.priority is not None), key=rank.__getitem__)
    for first, then in zip(listed, listed[1:]):  # priorities are places too: a switch placed against them is a cycle
        preceding[then].add(first)
    for switch in _REGISTRY.values():
        preceding[switch.name].update(name for name in switch.after if name in _REGISTRY)
        for name in switch.before:
            if name in _REGISTRY:
                preceding[name].add(switch.name)
    order: list[str] = []

    def place(name: str, waiting: list[str]) -> None:
        if name in order:
            return
        if name in waiting:
            loop = waiting[waiting.index(name):] + [name]
            raise ValueError(f"the places of switches {' -> '.join(loop)} (after / before) form a cycle")
        for other in sorted(preceding[name], key=rank.__getitem__):
            place(other, [*waiting, name])
        order.append(name)

    for name in sorted(_REGISTRY, key=rank.__getitem__):
        place(name, [])
    return [_REGISTRY[name] for name in order]


def _declare(columns: Iterable[BatchColumn], by: str) -> None:
    """Add the batch columns switch `by` declares; a name is declared once."""
    for column in columns:
        if column.name in _COLUMNS and _COLUMNS[column.name][1] != by:
            owner = _COLUMNS[column.name][1]
            owner = owner if owner == COLUMN_LAYER else f"switch {owner!r}"
            raise ValueError(f"switch {by!r}: batch column {column.name!r} is already declared by {owner}; "
                             "name it in reads instead")
        _COLUMNS[column.name] = (column, by)


def _declare_targets(targets: Iterable[TargetColumn], by: str) -> None:
    """Add the decoder targets switch `by` declares; a name is declared once, and TEXT is the trainer's."""
    for target in targets:
        name = target.name
        if name == TEXT or name in _TARGETS and _TARGETS[name][1] != by:
            owner = "the trainer" if name == TEXT else f"switch {_TARGETS[name][1]!r}"
            raise ValueError(f"switch {by!r}: decoder target {name!r} is already declared by {owner}")
        _TARGETS[name] = (target, by)


def declared(name: str | None = None) -> BatchColumn | dict[str, BatchColumn]:
    """The declaration of batch column `name` (ValueError when no switch declares it), or all of them by name."""
    if name is None:
        return {key: column for key, (column, _) in _COLUMNS.items()}
    if name not in _COLUMNS:
        raise ValueError(f"no switch declares the batch column {name!r} (declared: {', '.join(sorted(_COLUMNS))})")
    return _COLUMNS[name][0]


def declared_targets() -> dict[str, TargetColumn]:
    """The declared decoder targets by name (TEXT, the target sub-words, is not one of them)."""
    return {name: target for name, (target, _) in _TARGETS.items()}


def target_column(decoder_target: str) -> TargetColumn | None:
    """The declaration of decoder target `decoder_target` (None: TEXT, the target sub-words; ValueError when no
    switch declares it)."""
    if decoder_target == TEXT:
        return None
    if decoder_target not in _TARGETS:
        raise ValueError(f"decoder_target {decoder_target!r} is not a decoder target: one of "
                         f"{', '.join([TEXT, *_TARGETS])} (the trainer's and those the switches declare)")
    return _TARGETS[decoder_target][0]
