"""S&H (Sennrich & Haddow, 2016): dependency-label embeddings of the source.

The last `label_embedding` dimensions of each source sub-word's embedding are replaced by the embedding of its
token's dependency label (batch column "src_labels": ids 0 = none (EOS, pad), 1 = a label unseen in training,
2... `source_labels`, the label vocabulary derived from the training split).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from torch import nn

from synprep.features import per_subword
from synprep.tables import option

from ..arrow import encode_strings, flat_numbers
from ..columns import BatchColumn
from ..dataset import ParallelData
from ..vocab import LABEL_NONE, LABEL_UNKNOWN
from .base import Inputs, ModelOptions, Switch
from .registry import register

SRC_LABELS = "src_labels"


def label_vocabulary(table: pa.Table) -> list[str]:
    """The sorted source dependency labels of a table (S&H; ids 2... in the order returned)."""
    if SRC_LABELS not in table.column_names:
        raise ValueError("S&H label embeddings need src_labels: convert with [features] src = [..., \"labels\"]")
    return sorted(label for label in pc.unique(pc.list_flatten(table.column(SRC_LABELS))).to_pylist()
                  if label is not None)


class LabelColumn(BatchColumn):
    """`labels` (B, S) source label ids (0: EOS/pad, 1: a label unseen in training, 2... the run's
    `source_labels`, from ParallelData's `data_options`), each piece taking its token's label; the label
    strings become ids once per split."""

    def load(self, data: ParallelData) -> tuple:
        known = pa.array(list(data.data_options.get("source_labels") or []), pa.string())
        return (encode_strings(data.table.column(self.column), known, 2, LABEL_UNKNOWN),
                flat_numbers(data.table.column(self.reads[0])))

    def collate(self, loaded: tuple, rows: Sequence[int], s: int, t: int) -> np.ndarray:
        (labels, label_offsets), (owners, owner_offsets) = loaded
        out = np.full((len(rows), s), LABEL_NONE, np.int64)
        for b, row in enumerate(rows):
            owner = owners[owner_offsets[row] : owner_offsets[row + 1]]
            out[b, : len(owner)] = per_subword(labels[label_offsets[row] : label_offsets[row + 1]], owner)
        return out


@dataclass
class LabelConfig:
    """[model] options of the S&H label embeddings."""

    label_embedding: int = option(0, ge=0, help="size of the source label embeddings (0: off)")
    source_labels: list[str] = option(default_factory=list, filled=True,
                                      help="label vocabulary (from the training data)")


class LabelEmbeddings(Switch[LabelConfig], name="labels", config=LabelConfig, switched_by=("label_embedding",),
                      after=("sync",)):
    """Source dependency-label embeddings in the last dimensions of the source embeddings."""

    example = {"label_embedding": 4}

    @classmethod
    def check(cls, cfg: ModelOptions) -> None:
        size, d_model = cls.section(cfg).label_embedding, cfg.sizes.d_model
        if size >= d_model:
            raise ValueError(f"label_embedding must be in 0..{d_model - 1}, got {size}")

    @classmethod
    def prepare(cls, cfg: ModelOptions, table: Any, manifest: Any, vocab: Any) -> dict[str, Any]:
        return {} if cls.section(cfg).source_labels else {"source_labels": label_vocabulary(table)}

    def describe(self) -> str:
        return f"S&H label embeddings {self.options.label_embedding} ({len(self.options.source_labels)} labels)"

    def data_options(self) -> dict[str, Any]:
        return {"source_labels": self.options.source_labels}

    columns = (LabelColumn(SRC_LABELS, SRC_LABELS, "src", "labels", reads=("src_subword_token",)),)

    def batch_columns(self, training: bool) -> dict[str, str]:
        return {SRC_LABELS: "S&H label embeddings"}

    def source_modules(self) -> dict[str, nn.Module]:
        options = self.options  # ids: 0 = none (EOS, pad), 1 = a label unseen in training, 2... source_labels
        return {"label_embed": nn.Embedding(len(options.source_labels) + 2, options.label_embedding, padding_idx=0)}

    def embed_source(self, model: nn.Module, x: torch.Tensor, inputs: Inputs) -> torch.Tensor:
        labels = inputs.get(SRC_LABELS)
        if labels is None:
            raise ValueError("S&H label embeddings need the source labels")
        return torch.cat([x[..., : -self.options.label_embedding], model.label_embed(labels)], dim=-1)


register(LabelEmbeddings)
