"""ParallelData's collaborators each work alone: the split read and encoded (`EncodedSplit`), its token-count
batches (`Bucketing`), their collation (`Collator`) and the scoring lookups (`References`) give what the dataset
built from them gives; and the attention module's decoding cache (`KeyValueCache`) alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from syntrain.batch import Bucketing
from syntrain.dataset import Collator, EncodedSplit, ParallelData, References, data_columns, read_split
from syntrain.shapes import padded_length
from syntrain.switches import declared
from syntrain.transformer_layers import KeyValueCache
from syntrain.vocab import BOS_ID, EOS_ID, PAD_ID, Vocab

from .data.make_switch_fixtures import SHARDS


@pytest.fixture(scope="module")
def split():
    table, _ = read_split(str(SHARDS / "train"))
    return str(SHARDS / "train"), Vocab.build([table])


def test_the_parts_alone_give_what_the_dataset_gives(split):
    path, vocab = split
    columns = {declared("src_parent_first"): "a test", declared("distances"): "a test"}
    data = ParallelData(path, vocab, 40, batch_columns=columns)

    encoded = EncodedSplit(path, vocab, data_columns(columns, None))
    assert np.array_equal(encoded.src_ids, data.encoded.src_ids) and np.array_equal(encoded.tgt_off,
                                                                                  data.encoded.tgt_off)
    bucketing = Bucketing(encoded.src_len, encoded.tgt_len)
    rows = np.flatnonzero((encoded.src_len <= 40) & (encoded.tgt_len <= 40))
    assert np.array_equal(rows, data.keep) and data.skipped_long == len(encoded.src_len) - len(rows)
    batches = bucketing.batches(rows, 300, seed=4, epoch=1)
    assert [list(b) for b in batches] == [list(b) for b in data.batches(300, seed=4, epoch=1)]
    for batch_rows in batches:
        longest = bucketing.shape(batch_rows)
        assert longest[0] * max(longest[1:]) <= 300 or len(batch_rows) == 1

    collator = Collator(encoded, columns)
    alone, through = collator.collate(batches[0], bucketing.shape(batches[0])), data.collate(batches[0])
    for name in ("src", "tgt_in", "tgt_out"):
        assert torch.equal(getattr(alone, name), getattr(through, name)), name
    assert alone.inputs.keys() == through.inputs.keys() == {"src_parent_first", "distances"}
    assert all(torch.equal(alone.inputs[name], through.inputs[name]) for name in alone.inputs)
    row = batches[0][0]  # BOS before the target input, EOS after the source and the target output
    n = encoded.tgt_off[row + 1] - encoded.tgt_off[row]
    assert alone.tgt_in[0, 0] == BOS_ID and alone.tgt_out[0, n] == EOS_ID and alone.tgt_in[0, 1] == alone.tgt_out[0, 0]
    assert alone.src[0, encoded.src_off[row + 1] - encoded.src_off[row]] == EOS_ID

    bucketing.ladder = True  # padded to the shape ladder: the shape grows, the padding is PAD
    padded = collator.collate(batches[0], bucketing.shape(batches[0]))
    width = alone.src.shape[1]
    assert padded.src.shape[1] == padded_length(width, 0) and torch.equal(padded.src[:, :width], alone.src)
    assert (padded.src[:, width:] == PAD_ID).all()

    scoring = References(encoded.table, encoded.configuration)
    assert scoring.references(rows[:3]) == data.references(rows[:3])
    assert scoring.column_values("no such column", rows[:2]) == [None, None]


def test_a_column_the_split_lacks_is_named_by_the_collator(split):
    path, vocab = split
    encoded = EncodedSplit(path, vocab, data_columns({}, None))  # read without the column
    with pytest.raises(ValueError, match="needs src_parent_first: convert with"):
        Collator(encoded, {declared("src_parent_first"): "a test"})


def test_the_key_value_cache_appends_self_attention_steps_and_projects_the_memory_once():
    calls = []

    def project(z):
        calls.append(z.shape[1])
        return z[:, None] * 1.0, z[:, None] * 2.0  # (B, 1, S, C)

    cache = KeyValueCache()
    for step in range(3):
        k, v = cache.keys_values(project, torch.full((2, 1, 4), float(step)), None)
    assert k.shape == (2, 1, 3, 4) and torch.equal(k[0, 0, :, 0], torch.tensor([0.0, 1.0, 2.0]))
    cache.reorder(torch.tensor([1, 1]))
    assert cache.k.shape[0] == 2 and torch.equal(v, k * 2)

    memory, cross = torch.randn(2, 5, 4), KeyValueCache()
    calls.clear()
    for _ in range(3):
        k, _ = cross.keys_values(project, torch.zeros(2, 1, 4), memory)
    assert calls == [5] and torch.equal(k[:, 0], memory)  # projected once
