"""A switch that needs a new shard column is one switch module plus its synprep feature (the pure function in
synprep/features.py and its declaration in synprep/schema.py), nothing else: the depth embeddings (the worked
example of docs/switches-api.md) train from shards converted with the `depth` feature group, and no generic
trainer file names a column that a registered switch declares."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch

from synprep import features as F
from synprep.shards import open_split
from syntrain.columns import SHARED
from syntrain.dataset import ParallelData, read_split
from syntrain.switches import declared, registered
from syntrain.vocab import Vocab

from .conftest import REPO, convert_synth
from .data import make_switch_fixtures as fixtures

OLD_SHARDS = Path(__file__).resolve().parent / "data" / "switches" / "shards" / "train"  # no src_depth


@pytest.fixture(scope="module")
def depth_split(tmp_path_factory):
    """A synthetic corpus converted with the depth feature group on the source side."""
    return convert_synth(tmp_path_factory.mktemp("depth"), "depth", ["parents", "labels", "depth"], max_depth=2)


def test_depth_is_the_number_of_arcs_to_the_root():
    # tree 1: 2 is the root, 1 and 3 hang from it, 4 from 3; tree 2: 1 is the root, 2 hangs from it
    heads, sizes = [2, 0, 2, 3, 0, 1], [4, 2]
    owner = [0, 0, 1, 2, 3, 3, 4, 5]  # global token of each sub-word (token 0 and 3: two pieces)
    assert F.forest_subword_depths(heads, sizes, owner).tolist() == [1, 1, 0, 1, 2, 2, 0, 1]
    assert F.forest_subword_depths(heads, sizes, owner).dtype == np.int16


def test_convert_stores_src_depth_from_the_pure_function(depth_split):
    table = open_split(str(depth_split)).table()
    assert table.schema.field("src_depth").type == pa.list_(pa.int16())
    assert "arcs from its token to the root" in table.schema.field("src_depth").metadata[b"description"].decode()
    assert "tgt_depth" not in table.column_names
    rows = table.to_pylist()
    assert any(max(row["src_depth"]) >= 2 for row in rows)  # deep enough to tell depth from a flag
    for row in rows:
        n = len(row["src_heads"])
        assert row["src_depth"] == F.forest_subword_depths(row["src_heads"], [n], row["src_subword_token"]).tolist()
    done = subprocess.run([sys.executable, "-m", "synprep.cli", "validate", str(depth_split)], capture_output=True,
                          text=True)  # validate recomputes every declared per-sub-word feature
    assert done.returncode == 0, done.stdout + done.stderr


def test_validate_recomputes_a_declared_feature():
    from synprep.validate import check_side

    heads, owner = [2, 0, 2], [0, 1, 1, 2]
    record = {"tokens": ["a", "bc", "d"], "heads": heads, "labels": ["x", "root", "y"],
              "subwords": ["a", "b@@", "c", "d"], "subword_token": owner, "projective": True,
              "depth": F.forest_subword_depths(heads, [3], owner).tolist()}
    assert not [field for field, _ in check_side(record, ("depth",), {})]
    record["depth"] = [0, 0, 0, 0]
    assert [field for field, _ in check_side(record, ("depth",), {})] == ["depth"]


def test_depth_column_is_stored_or_made_from_the_heads_alike(depth_split):
    """The batch column: the stored `src_depth`, or (shards without it) made from `src_heads` by the same
    function; EOS and pad are -1."""
    for path in (str(depth_split), str(OLD_SHARDS)):
        table, _ = read_split(path)
        data = ParallelData(path, Vocab.build([table]), batch_columns={declared("src_depth"): "depth embeddings"})
        rows = list(range(min(len(data), 12)))
        batch = data.collate(rows)
        for b, row in enumerate(rows):
            heads, owner = table.column("src_heads")[row].as_py(), table.column("src_subword_token")[row].as_py()
            expected = F.forest_subword_depths(heads, [len(heads)], owner).tolist()
            assert batch.inputs["src_depth"][b, : len(expected)].tolist() == expected
            assert (batch.inputs["src_depth"][b, len(expected):] == -1).all()
        assert "src_depth" in batch.decoding_inputs()  # decoding reads it too


def test_depth_switch_trains_a_step_from_shards_with_the_depth_group(depth_split, tmp_path):
    from syntrain.runfolder.checkpoints import load_checkpoint
    from syntrain.train import TrainConfig, train

    cfg = TrainConfig.from_dict({**fixtures.TRAIN, "max_steps": 1, "data": str(depth_split),
                                 "out": str(tmp_path / "run"), "preset": "tiny",
                                 "model": {**fixtures.TINY, "depth_embedding": True, "depth_max": 3}})
    train(cfg)
    model, _, _ = load_checkpoint(str(tmp_path / "run" / "last.pt"))
    assert model.cfg.section("depth").depth_max == 3 and model.depth_embed.num_embeddings == 5
    src = torch.tensor([[5, 6, 7, 2]])
    deep, flat = torch.tensor([[0, 1, 3, -1]]), torch.tensor([[0, 0, 0, -1]])
    model.eval()
    with torch.no_grad():  # the embedding is read: other depths, other encodings (clamped above depth_max)
        memory = {name: model.encode(src, src_depth=depth)[0] for name, depth in (("deep", deep), ("flat", flat))}
        clamped = model.encode(src, src_depth=torch.tensor([[0, 1, 9, -1]]))[0]
    assert not torch.allclose(memory["deep"], memory["flat"])
    assert torch.equal(memory["deep"], clamped)


# everything but syntrain/switches/ and the column layer (syntrain/columns.py: the shared batch columns)
GENERIC = sorted(path for path in (REPO / "syntrain").glob("*.py") if path.name != "columns.py")


def test_the_guide_quotes_the_depth_switch():
    """docs/switches-api.md quotes syntrain/switches/depth.py without its imports and docstrings."""
    source = (REPO / "syntrain" / "switches" / "depth.py").read_text(encoding="utf-8")
    def docstring(node: ast.AST) -> bool:
        return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)

    dropped = {line for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Import | ast.ImportFrom)
               or docstring(node) for line in range(node.lineno, node.end_lineno + 1)}  # type: ignore[attr-defined]
    lines: list[str] = []
    for number, line in enumerate(source.splitlines(), 1):
        if number not in dropped and not (not line and lines and lines[-1].endswith(":")):  # the docstring's blank
            lines.append(line)
    code = re.sub(r"\n{3,}", "\n\n\n", "\n".join(lines)).strip()
    guide = (REPO / "docs" / "switches-api.md").read_text(encoding="utf-8")
    quoted = guide.split("**3. The switch**", 1)[1].split("```py\n", 1)[1].split("```", 1)[0].strip()
    assert quoted == code


def test_no_generic_trainer_file_names_a_column_or_target_a_switch_declares():
    declared = {name: switch.name for switch in registered() for column in switch.columns
                for name in column.shard_columns()}
    declared.update({name: "the column layer" for column in SHARED for name in column.shard_columns()})
    declared.update({target.column: switch.name for switch in registered() for target in switch.decoder_targets})
    assert {"src_depth", "src_parent_mid", "src_dbsa_head", "tgt_transitions"} <= set(declared)
    for path in GENERIC:
        text = path.read_text(encoding="utf-8")
        named = sorted(name for name in declared if re.search(rf"\b{name}\b", text))
        assert not named, f"{path.name} names {named}: declare them in the switch module instead"


def code_words(source: str) -> set[str]:
    """The identifiers (names, attributes, definitions, imports) and string constants (quoted: `'x'`) of a
    module, read from its syntax tree, leaving out the places that name switches: the `after=` / `before=` of a
    class."""
    tree, skipped = ast.parse(source), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in ("after", "before"):
            skipped |= {id(inner) for inner in ast.walk(node)}
    words = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Name):
            words.add(node.id)
        elif isinstance(node, ast.Attribute):
            words.add(node.attr)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            words.add(node.name)
        elif isinstance(node, ast.alias):
            words.add(node.name.rsplit(".", 1)[-1])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 60:
            words.add(repr(node.value))
    return words


def test_the_depth_feature_is_declared_in_exactly_its_three_files():
    """Its pure function, its schema entry and its switch: nothing else in the source (docs and tests aside).
    Read from the code (identifiers and short strings), so the switch's name in another's place (`after=`) is
    not taken for the feature."""
    names = {"src_depth", "depth_embed", "depth_max", "forest_subword_depths", "forest_depths"}
    words = names | {repr(name) for name in names} | {"'depth'"}
    found = sorted(str(path.relative_to(REPO)) for package in ("synprep", "syntrain")
                   for path in (REPO / package).rglob("*.py") if code_words(path.read_text(encoding="utf-8")) & words)
    assert found == ["synprep/features.py", "synprep/schema.py", "syntrain/switches/depth.py"]
    assert code_words('class X(Switch, after=("depth",)):\n    pass\n') & words == set()
    assert code_words('x = "depth"\ndepth = 1\n') & words == {"'depth'"}
