"""Dependency-depth embeddings of the source: each source sub-word's embedding gets the embedding of its word's
depth in the dependency tree (the number of arcs from the word to the root; the root word: 0) added, the depth
clamped to `depth_max`.

The batch column "src_depth" (B, S) reads the shard column `src_depth` (pipeline `[features] src = [..., "depth"]`,
made by `synprep.features.forest_subword_depths`); shards converted without it get it made from `src_heads` and
`src_subword_token` by the same function. EOS and pad: -1 (embedding id 0, a zero vector).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from synprep.features import forest_subword_depths
from synprep.tables import option

from ..columns import BatchColumn
from .base import Inputs, Switch
from .registry import register

DEPTH = BatchColumn("src_depth", "src_depth", "src", "depth", made_from=("src_heads", "src_subword_token"),
                    make=forest_subword_depths)


@dataclass
class DepthConfig:
    """[model] options of the source dependency-depth embeddings."""

    depth_embedding: bool = option(False, help="add an embedding of each source word's tree depth to its sub-words")
    depth_max: int = option(8, ge=1, help="depths above this share one embedding (the clamp)")


class DepthEmbeddings(Switch[DepthConfig], name="depth", config=DepthConfig, switched_by=("depth_embedding",),
                      after=("labels",), before=("tree",)):
    """Source dependency-depth embeddings added to the source token embeddings."""

    example = {"depth_embedding": True, "depth_max": 4}
    columns = (DEPTH,)

    def describe(self) -> str:
        return f"depth embeddings (max {self.options.depth_max})"

    def batch_columns(self, training: bool) -> dict[str, str]:
        return {"src_depth": "depth embeddings"}

    def source_modules(self) -> dict[str, nn.Module]:  # ids: 0 = none (EOS, pad), 1 + depth (clamped)
        return {"depth_embed": nn.Embedding(self.options.depth_max + 2, self.cfg.sizes.d_model, padding_idx=0)}

    def embed_source(self, model: nn.Module, x: torch.Tensor, inputs: Inputs) -> torch.Tensor:
        depth = inputs.get("src_depth")
        if depth is None:
            raise ValueError("depth embeddings need the source depths (batch column \"src_depth\")")
        return x + model.depth_embed(depth.clamp(max=self.options.depth_max) + 1)


register(DepthEmbeddings)
