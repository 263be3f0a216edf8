"""The switches that are on in a model (`ActiveSwitches`), in registration order, and what they ask of the generic
code: the attention hooks of each attention module (the model), the batch columns, data options and decoder
target they read (the data layer), the loss weights (the trainer), whether decoding re-reads the prefix, and
their run-header line."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..columns import BatchColumn, TargetColumn
from .base import AttentionHook, ModelHooks, ModelOptions, Switch
from .registry import declared, registered, target_column

# the model's stages a switch may contribute a step to: the `ModelHooks` method a switch overrides to do so
STAGES = ("embed_source", "decoder_self_mask", "decoder_input", "teacher_forcing", "losses")


@dataclass(frozen=True)
class Stages:
    """The switches' steps in each stage of a forward and of the loss, collected once when the model is built
    (`ActiveSwitches.stages`): per stage the bound hooks of the switches that contribute to it (that override it;
    teacher forcing: whose `changes_teacher_forcing`), in the switches' order, so that a batch calls only those;
    and the auxiliary losses' weights."""

    embed_source: tuple[Callable, ...] = ()
    decoder_self_mask: tuple[Callable, ...] = ()
    decoder_input: tuple[Callable, ...] = ()
    teacher_forcing: tuple[Callable, ...] = ()
    losses: tuple[Callable, ...] = ()
    loss_weights: dict[str, float] = field(default_factory=dict)


class ActiveSwitches:
    """The `Switch` instances that are on in the model config `cfg`, in registration order (iterable), and the
    queries that loop over them. The model holds one (`Transformer.switches`)."""

    def __init__(self, cfg: ModelOptions) -> None:
        self.cfg = cfg
        self.switches: tuple[Switch, ...] = tuple(switch(cfg) for switch in registered() if switch.active(cfg))

    def __iter__(self) -> Iterator[Switch]:
        return iter(self.switches)

    def __len__(self) -> int:
        return len(self.switches)

    def attention_hooks(self, stack: str, layer: int, kind: str) -> list[AttentionHook]:
        """The switches' hooks of one attention module (see Switch.attention_hooks)."""
        return [hook for switch in self.switches for hook in switch.attention_hooks(stack, layer, kind)]

    def describe(self) -> str:
        """The syntax switches that are on, in one line (run header, `syntrain env --checkpoint`)."""
        return "; ".join(filter(None, (switch.describe() for switch in self.switches))) or "none (vanilla)"

    def batch_columns(self, training: bool) -> dict[BatchColumn, str]:
        """The batch columns the switches read (the declarations their `reads` name) -> the switch that needs
        each; `training` adds the supervision of the auxiliary losses."""
        return {declared(name): why for switch in self.switches for name, why in switch.reads(training).items()}

    def data_options(self) -> dict[str, Any]:
        """What the switches' batch columns read of the run (their `data_options`: label vocabularies)."""
        return {name: value for switch in self.switches for name, value in switch.data_options().items()}

    @property
    def decoder_target_name(self) -> str:
        """The name of what the decoder produces, the model's `decoder_target`: TEXT (the target sub-words), or a
        decoder target a switch declares (`Switch.decoder_targets`), which turns that switch on."""
        return self.cfg.output.decoder_target

    @property
    def decoder_target(self) -> TargetColumn | None:
        """The decoder target as `ParallelData` and `Vocab.build` take it: its declaration (None: TEXT, the target
        sub-words)."""
        return target_column(self.decoder_target_name)

    def parallel_data_arguments(self, training: bool) -> dict[str, Any]:
        """The keyword arguments of `ParallelData` that come from the model: the `batch_columns` its switches
        read, their `data_options`, the declaration of the decoder target and the `prefixes` of both sides
        (`[model] source_prefix`, `target_prefix`)."""
        from ..dataset import Prefixes

        architecture = self.cfg.architecture
        return {"batch_columns": self.batch_columns(training), "data_options": self.data_options(),
                "decoder_target": self.decoder_target,
                "prefixes": Prefixes(tuple(architecture.source_prefix), tuple(architecture.target_prefix))}

    def decoding_data_arguments(self) -> dict[str, Any]:
        """`parallel_data_arguments` of a split only decoded (translate, compare): no decoder target."""
        return {**self.parallel_data_arguments(training=False), "decoder_target": None}

    def stages(self) -> Stages:
        """The switches' steps per stage (`Stages`), asked once: the model calls only these in a batch."""
        steps = {stage: tuple(getattr(switch, stage) for switch in self.switches
                              if getattr(type(switch), stage) is not getattr(ModelHooks, stage))
                 for stage in STAGES}
        steps["teacher_forcing"] = tuple(switch.teacher_forcing for switch in self.switches
                                         if switch.changes_teacher_forcing)
        return Stages(**steps, loss_weights=self.loss_weights())

    def loss_weights(self) -> dict[str, float]:
        """Auxiliary loss name -> its lambda (names as `Transformer.auxiliary_losses` returns them)."""
        return {name: weight for switch in self.switches for name, weight in switch.loss_weights().items()}

    @property
    def recomputes_prefix(self) -> bool:
        """Decoding re-runs the decoder over the whole prefix at each step (no incremental cache)."""
        return any(switch.recomputes_prefix for switch in self.switches)

    def state_layers(self) -> tuple[int, ...]:
        """The 1-based decoder layers whose output the switches' losses read (`Outputs.layer_states`)."""
        return tuple(sorted({layer for switch in self.switches for layer in switch.state_layers()}))
