"""An embedding of a per-sub-word feature is a declaration (`syntrain.switches.embedding.FeatureEmbedding`): its
options, the batch column it reads and the clamp. Here a new one, arity embeddings (each source sub-word gets an
embedding of its word's number of dependents), is declared in this file with a column made from the heads every
shard has, and trains, is checkpointed, reloads and translates through the unchanged trainer; the depth
embeddings are the same declaration."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from synprep.trees import forest_arrays
from syntrain.columns import BatchColumn
from syntrain.config import option
from syntrain.dataset import ParallelData, read_split
from syntrain.switches import register, registered, unregister
from syntrain.switches.embedding import FeatureEmbedding
from syntrain.vocab import Vocab

from .data import make_switch_fixtures as fixtures

TRAIN_SPLIT, VALID_SPLIT = fixtures.SHARDS / "train", fixtures.SHARDS / "valid"  # shards without src_example_arity


def subword_arity(heads, sizes, subword_owner) -> np.ndarray:
    """Per sub-word of several trees, the number of dependents of its word."""
    parent = forest_arrays(heads, sizes)[0]
    child = parent != np.arange(len(parent))
    return np.bincount(parent[child], minlength=len(parent))[np.asarray(subword_owner, dtype=np.int64)]


# the declaration: what a maintainer writes
ARITY = BatchColumn("src_example_arity", "src_example_arity", "src", "arity",
                    made_from=("src_heads", "src_subword_token"), make=subword_arity)


@dataclass
class ArityConfig:
    example_arity_embedding: bool = option(False, help="add an embedding of each source word's number of dependents")
    example_arity_max: int = option(4, ge=1, help="numbers of dependents above this share one embedding")


class ArityEmbeddings(FeatureEmbedding[ArityConfig], name="example_arity", config=ArityConfig,
                      switched_by=("example_arity_embedding",)):
    column = ARITY
    clamp = "example_arity_max"


@pytest.fixture
def arity():
    register(ArityEmbeddings)
    yield ArityEmbeddings
    unregister(ArityEmbeddings.name)


def test_arity_is_the_number_of_dependents():
    # tree 1: 2 is the root, 1 and 3 hang from it, 4 from 3; tree 2: 1 is the root, 2 hangs from it
    heads, sizes, owner = [2, 0, 2, 3, 0, 1], [4, 2], [0, 0, 1, 2, 3, 4, 5]
    assert subword_arity(heads, sizes, owner).tolist() == [0, 0, 2, 1, 0, 1, 0]


def test_the_column_is_made_from_the_heads(arity):
    table, _ = read_split(str(TRAIN_SPLIT))
    assert "src_example_arity" not in table.column_names
    data = ParallelData(str(TRAIN_SPLIT), Vocab.build([table]), batch_columns={ARITY: "example_arity embeddings"})
    rows = list(range(8))
    batch = data.collate(rows)
    for b, row in enumerate(rows):
        heads, owner = table.column("src_heads")[row].as_py(), table.column("src_subword_token")[row].as_py()
        expected = subword_arity(heads, [len(heads)], owner).tolist()
        assert batch.inputs["src_example_arity"][b, : len(expected)].tolist() == expected
        assert (batch.inputs["src_example_arity"][b, len(expected):] == -1).all()
    assert "src_example_arity" in batch.decoding_inputs()  # decoding reads it too


def test_a_declared_embedding_trains_checkpoints_reloads_and_translates(arity, tmp_path, capsys):
    from syntrain.decode import DecodeSettings, decode_split
    from syntrain.runfolder.checkpoints import load_checkpoint
    from syntrain.train import TrainConfig, train

    run = tmp_path / "run"
    train(TrainConfig.from_dict({**fixtures.TRAIN, "max_steps": 2, "data": str(TRAIN_SPLIT), "out": str(run),
                                 "preset": "tiny", "model": {**fixtures.TINY, "example_arity_embedding": True,
                                                             "example_arity_max": 3}}))
    assert "syntax switches: example_arity embeddings (max 3)" in capsys.readouterr().err  # the run header
    model, vocab, ckpt = load_checkpoint(str(run / "last.pt"))
    assert model.cfg.section(ArityEmbeddings).example_arity_max == 3 and ckpt["model_config"]["example_arity_embedding"]
    assert model.example_arity_embed.num_embeddings == 5 and "example_arity_embed.weight" in ckpt["model"]
    assert not torch.equal(model.example_arity_embed.weight[1:], torch.zeros_like(model.example_arity_embed.weight[1:]))
    assert torch.equal(model.example_arity_embed.weight[0], torch.zeros(model.cfg.sizes.d_model))  # EOS, pad: none

    data = ParallelData(str(VALID_SPLIT), vocab, batch_columns=model.switches.batch_columns(training=False),
                        data_options=model.switches.data_options())
    hypotheses = decode_split(model, data, vocab, DecodeSettings(beam=2), rows=range(4))
    assert len(hypotheses) == 4 and all(isinstance(text, str) for text in hypotheses)
    with pytest.raises(ValueError, match="example_arity embeddings need the batch column 'src_example_arity'"):
        model.encode(torch.tensor([[5, 6, 2]]))

    src = torch.tensor([[5, 6, 7, 2]])
    with torch.no_grad():  # the embedding is read: other arities, other encodings (clamped above example_arity_max)
        many, none = (model.encode(src, src_example_arity=torch.tensor([values]))[0]
                      for values in ([0, 1, 3, -1], [0, 0, 0, -1]))
        clamped = model.encode(src, src_example_arity=torch.tensor([[0, 1, 7, -1]]))[0]
    assert not torch.allclose(many, none)
    assert torch.equal(many, clamped)


def test_depth_embeddings_are_a_declaration():
    depth = next(switch for switch in registered() if switch.name == "depth")
    assert issubclass(depth, FeatureEmbedding) and depth.clamp == "depth_max"
    assert [column.name for column in depth.columns] == ["src_depth"]


def test_a_declaration_names_its_column_and_an_option_as_its_clamp():
    with pytest.raises(TypeError, match="`clamp` must name an option of ArityConfig"):
        class NoClamp(FeatureEmbedding[ArityConfig], name="no_clamp", config=ArityConfig,
                      switched_by=("example_arity_embedding",)):
            column = ARITY
            clamp = "arity_limit"
    with pytest.raises(TypeError, match="`column` must be a BatchColumn of the source side"):
        class NoColumn(FeatureEmbedding[ArityConfig], name="no_column", config=ArityConfig,
                       switched_by=("example_arity_embedding",)):
            clamp = "example_arity_max"
