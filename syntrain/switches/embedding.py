"""Embeddings of a declared per-sub-word feature: a switch that adds to each source sub-word's embedding the
embedding of one number of its, read from a batch column (a tree depth, a number of children, ...).

A declaration is a subclass of `FeatureEmbedding` with its options (a dataclass with the option that turns it
on and the clamp, an integer option >= 0), the batch column it reads and the name of the clamp; nothing else
(syntrain/switches/depth.py is one; tests/test_declared_embedding.py declares another, the number of each
word's dependents, in 15 lines; docs/switches-api.md walks through it).

The model gets `nn.Embedding(clamp + 2, d_model, padding_idx=0)` named `<name>_embed` (the checkpoints' name);
a sub-word of value v gets row min(v, clamp) + 1 added to its embedding, EOS and pad (-1) row 0, a zero vector.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, ClassVar, TypeVar

import torch
from torch import nn

from ..columns import BatchColumn
from .base import Inputs, Switch

C = TypeVar("C")  # the declaration's config section


class FeatureEmbedding(Switch[C]):
    """A source embedding of the per-sub-word feature in batch column `column`, its values clamped to the option
    named `clamp` (see the module docstring)."""

    column: ClassVar[BatchColumn]  # the source batch column it reads (-1: EOS, pad)
    clamp: ClassVar[str]  # the option of its config: values above it share one embedding
    OFFSET: ClassVar[int] = 1  # row of value 0 (row 0: EOS and pad, -1)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        column, clamp = getattr(cls, "column", None), getattr(cls, "clamp", None)
        if not isinstance(column, BatchColumn) or column.side != "src":
            raise TypeError(f"{cls.__name__}: `column` must be a BatchColumn of the source side, got {column!r}")
        if clamp not in [spec.name for spec in fields(cls.Config)]:
            raise TypeError(f"{cls.__name__}: `clamp` must name an option of {cls.Config.__name__}, got {clamp!r}")
        if not cls.switched_by:
            raise TypeError(f"{cls.__name__}: name the option that turns it on (`switched_by`)")
        cls.columns = (column,)
        cls.example = cls.example or {cls.switched_by[0]: True}

    @property
    def largest(self) -> int:
        """The clamp: the largest value with an embedding of its own."""
        return getattr(self.options, self.clamp)

    @property
    def module_name(self) -> str:
        """The embedding's name on the model (and in checkpoints)."""
        return f"{self.name}_embed"

    def describe(self) -> str:
        return f"{self.name} embeddings (max {self.largest})"

    def reads(self, training: bool) -> dict[str, str]:
        return {self.column.name: f"{self.name} embeddings"}

    def source_modules(self) -> dict[str, nn.Module]:
        rows = self.largest + 1 + self.OFFSET
        return {self.module_name: nn.Embedding(rows, self.cfg.sizes.d_model, padding_idx=self.OFFSET - 1)}

    def start_from_pretrained(self, model: nn.Module) -> None:
        nn.init.zeros_(getattr(model, self.module_name).weight)  # adds nothing until trained

    def embed_source(self, model: nn.Module, x: torch.Tensor, inputs: Inputs) -> torch.Tensor:
        values = inputs.get(self.column.name)
        if values is None:
            raise ValueError(f"{self.name} embeddings need the batch column {self.column.name!r}")
        return x + getattr(model, self.module_name)(values.clamp(max=self.largest) + self.OFFSET)
