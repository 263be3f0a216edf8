"""Batch columns declared per side: one declaration names its side, shape, BOS shift and its values at EOS,
BOS and padding, and serves the source or the target; the columns several switches read are declared once in
the column layer (`syntrain.columns.SHARED`) and named, never imported from another switch."""

from __future__ import annotations

import ast

import numpy as np
import pytest

from synprep.features import per_subword
from syntrain.columns import LABEL_NONE, SHARED, BatchColumn, HeadColumn, LabelColumn
from syntrain.dataset import ParallelData, read_split
from syntrain.switches import Switch, declared, register, registered
from syntrain.vocab import Vocab

from .conftest import REPO
from .data.make_switch_fixtures import SHARDS


def _labels(table, side: str, row: int, vocabulary: list[str]) -> list[int]:
    ids = {label: i + 2 for i, label in enumerate(vocabulary)}
    labels = [ids.get(label, 1) for label in table.column(f"{side}_labels")[row].as_py()]
    return per_subword(labels, table.column(f"{side}_subword_token")[row].as_py()).tolist()


def test_one_label_declaration_serves_either_side():
    """src_labels and tgt_labels are one class (`LabelColumn(side, vocabulary)`): the source's (B, S) from
    position 0 with 0 at EOS and pad, the target's (B, T) shifted one for BOS (0 there), each piece its token's
    label id from its own vocabulary."""
    path = str(SHARDS / "train")
    table, _ = read_split(path)
    src_vocabulary, tgt_vocabulary = ["det", "nsubj", "root"], ["obj", "punct"]
    source, target = declared("src_labels"), declared("tgt_labels")
    assert type(source) is type(target) is LabelColumn
    assert (source.side, target.side) == ("src", "tgt")  # the shift is the collator's: 0 and 1 (BOS) here
    data = ParallelData(path, Vocab.build([table]), batch_columns={source: "test", target: "test"},
                        data_options={"source_labels": src_vocabulary, "target_labels": tgt_vocabulary})
    rows = [0, 1, 2]
    batch = data.collate(rows)
    src, tgt = batch.inputs["src_labels"].numpy(), batch.inputs["tgt_labels"].numpy()
    assert src.shape == tuple(batch.src.shape) and tgt.shape == tuple(batch.tgt_in.shape)
    for b, row in enumerate(rows):
        expected_src, expected_tgt = _labels(table, "src", row, src_vocabulary), _labels(table, "tgt", row,
                                                                                        tgt_vocabulary)
        n, m = len(expected_src), len(expected_tgt)
        assert src[b, :n].tolist() == expected_src and (src[b, n:] == LABEL_NONE).all()  # EOS, pad
        assert tgt[b, 0] == LABEL_NONE and tgt[b, 1 : m + 1].tolist() == expected_tgt  # BOS, shifted
        assert (tgt[b, m + 1 :] == LABEL_NONE).all()
    assert "tgt_labels" not in batch.decoding_inputs()  # supervision: decoding does not read it


def test_a_declaration_names_its_layout_and_its_end_values():
    column = BatchColumn("example_marks", "src_parent_first", "src", "parents", pad=-1, eos=-2)
    loaded = (np.array([3, 4, 5]), np.array([0, 2, 3]))
    assert column.collate(loaded, [0, 1], 4, 0, 0).tolist() == [[3, 4, -2, -1], [5, -2, -1, -1]]
    target = BatchColumn("example_marks", "tgt_parent_first", "tgt", "parents", pad=-1, bos=-3)
    assert target.collate(loaded, [0, 1], 0, 4, 1).tolist() == [[-3, 3, 4, -1], [-3, 5, -1, -1]]
    assert column.layout() == "src (B, S) int64, pad -1, EOS -2"
    assert target.layout() == "tgt (B, T) int64, pad -1, shifted 1 (BOS), BOS -3"
    assert declared("distances").layout() == "src (B, S, S) uint8, pad 0, EOS 0"
    with pytest.raises(ValueError, match="side is src or tgt"):
        BatchColumn("example_marks", "x", "both", "parents")


def test_a_prefix_moves_positions_and_positional_values():
    """A side's prefix (a language code) moves every value right by its length, a positional value (a head) by
    as much, so that it still points at its sub-word; the prefix positions hold `bos`, none of them supervised."""
    loaded = (np.array([1, 0, 0]), np.array([0, 2, 3]))  # row 0: two sub-words, the first's head the second
    plain = BatchColumn("example_marks", "src_parent_first", "src", "parents", pad=-1, eos=-2)
    heads = HeadColumn("example_heads", "src_parent_first", "src", "parents", pad=-1, eos=-2)
    assert plain.collate(loaded, [0, 1], 5, 0, 1).tolist() == [[-1, 1, 0, -2, -1], [-1, 0, -2, -1, -1]]
    assert heads.collate(loaded, [0, 1], 5, 0, 1).tolist() == [[-1, 2, 1, -2, -1], [-1, 1, -2, -1, -1]]
    target = HeadColumn("example_heads", "tgt_parent_first", "tgt", "parents", pad=-1)
    # start + code: the second sub-word's head (the first, position 0) is decoder input position 2
    assert target.collate((np.array([1, 0]), np.array([0, 2])), [0], 0, 5, 2).tolist() == [[-1, -1, -1, 2, -1]]
    distances = declared("distances")
    source = (np.array([0, 1]), np.array([0, 2])), (np.array([0, 1]), np.array([0, 2]))
    shifted, plain_distances = distances.collate(source, [0], 4, 0, 1), distances.collate(source, [0], 3, 0, 0)
    assert (shifted[0, 1:3, 1:3] == plain_distances[0, :2, :2]).all() and plain_distances[0, 0, 1] > 0
    assert (shifted[0, 0] == 0).all() and (shifted[0, :, 0] == 0).all()


def test_a_switch_cannot_declare_a_shared_column_again():
    class Again(Switch, name="example_again"):
        columns = (LabelColumn("src", "source_labels"),)

    with pytest.raises(ValueError, match="batch column 'src_labels' is already declared by the column layer; "
                                         "name it in reads instead"):
        register(Again)
    assert "example_again" not in {switch.name for switch in registered()}


def test_every_shared_column_is_read_by_a_name_and_no_switch_imports_a_column_from_another():
    """The switches name the shared columns (`reads`); none imports a batch column (or anything holding
    one) from a sibling switch module."""
    assert {column.name for column in SHARED} <= set(declared())
    columns_of = {}
    for switch in registered():
        module = switch.__module__.rsplit(".", 1)[-1]
        columns_of[module] = {name for name, value in vars(__import__(switch.__module__, fromlist=["_"])).items()
                              if isinstance(value, BatchColumn) or isinstance(value, tuple) and value
                              and all(isinstance(item, BatchColumn) for item in value)}
    for path in sorted((REPO / "syntrain" / "switches").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module in columns_of:
                imported = {alias.name for alias in node.names} & columns_of[node.module]
                assert not imported, f"{path.name} imports batch columns {imported} from {node.module}.py"
