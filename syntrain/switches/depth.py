"""Dependency-depth embeddings of the source: each source sub-word's embedding gets the embedding of its word's
depth in the dependency tree (the number of arcs from the word to the root; the root word: 0) added, the depth
clamped to `depth_max`: a declared feature embedding (`FeatureEmbedding`).

The batch column "src_depth" (B, S) reads the shard column `src_depth` (pipeline `[features] src = [..., "depth"]`,
made by `synprep.features.forest_subword_depths`); shards converted without it get it made from `src_heads` and
`src_subword_token` by the same function. EOS and pad: -1 (embedding row 0, a zero vector).
"""

from __future__ import annotations

from dataclasses import dataclass

from synprep.features import forest_subword_depths

from ..columns import BatchColumn
from ..config import option
from .embedding import FeatureEmbedding
from .registry import register

DEPTH = BatchColumn("src_depth", "src_depth", "src", "depth", made_from=("src_heads", "src_subword_token"),
                    make=forest_subword_depths)


@dataclass
class DepthConfig:
    """[model] options of the source dependency-depth embeddings."""

    depth_embedding: bool = option(False, help="add an embedding of each source word's tree depth to its sub-words")
    depth_max: int = option(8, ge=1, help="depths above this share one embedding (the clamp)")


class DepthEmbeddings(FeatureEmbedding[DepthConfig], name="depth", priority=60, config=DepthConfig,
                      switched_by=("depth_embedding",)):
    """Source dependency-depth embeddings added to the source token embeddings (parameters: `depth_embed`).

    With `depth_embedding = true` each source sub-word's embedding gets an embedding (size `d_model`) of its word's
    depth in the dependency tree added (the number of arcs from the word to the root; the root word 0), before the
    sqrt(d_model) scaling and positions; depths above `depth_max` share one embedding, `</s>` and pad get a zero vector.
    Depths from `src_depth` (pipeline `[features] src = [..., "depth"]`, `synprep.features.forest_subword_depths`), or
    made from `src_heads` by the same function for shards converted without it. No recipe; docs/switches-api.md builds
    this switch as its worked example."""

    example = {"depth_embedding": True, "depth_max": 4}
    column = DEPTH
    clamp = "depth_max"


register(DepthEmbeddings)
