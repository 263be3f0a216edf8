"""S&H (Sennrich & Haddow, 2016): dependency-label embeddings of the source.

The last `label_embedding` dimensions of each source sub-word's embedding are replaced by the embedding of its
token's dependency label (the shared batch column "src_labels", `syntrain.columns.LabelColumn`: ids 0 = none
(EOS, pad), 1 = a label unseen in training, 2... `source_labels`, the label vocabulary derived from the
training split).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import torch
from torch import nn

from ..config import option
from .base import Inputs, ModelOptions, Switch
from .registry import register

SRC_LABELS = "src_labels"
LABEL_COMBINES = ("replace", "add")


def label_vocabulary(table: pa.Table) -> list[str]:
    """The sorted source dependency labels of a table (S&H; ids 2... in the order returned)."""
    if SRC_LABELS not in table.column_names:
        raise ValueError("S&H label embeddings need src_labels: convert with [features] src = [..., \"labels\"]")
    return sorted(label for label in pc.unique(pc.list_flatten(table.column(SRC_LABELS))).to_pylist()
                  if label is not None)


@dataclass
class LabelConfig:
    """[model] options of the S&H label embeddings."""

    label_embedding: int = option(0, ge=0, help="size of the source label embeddings (0: off)")
    label_combine: str = option("replace", choices=LABEL_COMBINES,
                                help="replace the last label_embedding dimensions of a source embedding by its "
                                     "label's embedding, or add it to them (add: a run from a pretrained model "
                                     "starts at its output, the table at zeros)")
    source_labels: list[str] = option(default_factory=list, filled=True,
                                      help="label vocabulary (from the training data)")


class LabelEmbeddings(Switch[LabelConfig], name="label_embedding", priority=50, config=LabelConfig,
                      switched_by=("label_embedding",)):
    """S&H (Sennrich & Haddow 2016): source dependency-label embeddings in the last `label_embedding` dimensions
    of the source embeddings (10: the baseline).

    As the Pascal paper's baseline: dependency-label embeddings of size `label_embedding` (10) replace the last 10
    dimensions of the source token embeddings (before the sqrt(d_model) scaling and positions). Labels from
    `src_labels`, every piece taking its token's label; the label vocabulary is built from the training split and stored
    in the checkpoint (`source_labels`, filled by the trainer); ids: 0 = none (`</s>`, pad: a zero vector), 1 = a label
    not seen in training.

    Recipe: `pipelines/train/multi30k-sh.toml` (`label_embedding = 10`)."""

    example = {"label_embedding": 4}

    @classmethod
    def check(cls, cfg: ModelOptions) -> None:
        size, d_model = cls.section(cfg).label_embedding, cfg.sizes.d_model
        if size >= d_model:
            raise ValueError(f"label_embedding must be in 0..{d_model - 1}, got {size}")

    @classmethod
    def filled_values(cls, cfg: ModelOptions, table: Any, manifest: Any, vocab: Any) -> dict[str, Any]:
        return {} if cls.section(cfg).source_labels else {"source_labels": label_vocabulary(table)}

    def describe(self) -> str:
        return f"S&H label embeddings {self.options.label_embedding} ({len(self.options.source_labels)} labels)"

    def data_options(self) -> dict[str, Any]:
        return {"source_labels": self.options.source_labels}

    def reads(self, training: bool) -> dict[str, str]:
        return {SRC_LABELS: "S&H label embeddings"}

    def source_modules(self) -> dict[str, nn.Module]:
        options = self.options  # ids: 0 = none (EOS, pad), 1 = a label unseen in training, 2... source_labels
        return {"label_embed": nn.Embedding(len(options.source_labels) + 2, options.label_embedding, padding_idx=0)}

    def embed_source(self, model: nn.Module, x: torch.Tensor, inputs: Inputs) -> torch.Tensor:
        labels = inputs.get(SRC_LABELS)
        if labels is None:
            raise ValueError("S&H label embeddings need the source labels")
        size = self.options.label_embedding
        label = model.label_embed(labels)
        if self.options.label_combine == "add":
            label = x[..., -size:] + label
        return torch.cat([x[..., :-size], label], dim=-1)

    def start_from_pretrained(self, model: nn.Module) -> None:
        if self.options.label_combine == "replace":
            raise ValueError("label_embedding on a pretrained model: its embeddings' last dimensions would be "
                             "replaced; set label_combine = \"add\" (the label embeddings start at zeros)")
        nn.init.zeros_(model.label_embed.weight)


register(LabelEmbeddings)
