"""`synprep export` read back by tiny readers written from the released trainers' readers, and DBSA's sub-word
heads through convert, validate and the trainer (stored, or made from the trees of shards without them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from synprep import features as F
from synprep.export import export_split
from synprep.shards import open_split
from synprep.trees import is_projective
from syntrain import switches  # noqa: F401 (registers the switches and the batch columns they declare)
from syntrain.data import ParallelData, Vocab, read_split

from .conftest import convert_synth

OLD_SHARDS = Path(__file__).resolve().parent / "data" / "switches" / "shards" / "train"  # format 1, no dbsa_head


def _words(pieces: list[str]) -> list[list[int]]:
    """0-based piece positions of each word: a piece ending in @@ continues it (all three readers group so)."""
    words, current = [], []
    for i, piece in enumerate(pieces):
        current.append(i)
        if not piece.endswith("@@"):
            words.append(current)
            current = []
    return words


def read_dbsa(text_line: str, dep_line: str) -> list[int]:
    """de9uch1/dbsa's loader (tasks/translation_dep.py): pairs [i, int(x) - 1] per piece, 0-based, no BOS (the
    source has EOS appended after the pieces; the target filter keeps heads at or before the piece). Back to
    1-based word heads: a word's last piece points at the first piece of its head word, or at itself (root)."""
    pieces, heads = text_line.split(), [int(x) - 1 for x in dep_line.split()]
    assert len(heads) == len(pieces) and all(0 <= h < len(pieces) for h in heads)  # check_dependency's bound
    words = _words(pieces)
    first = {positions[0]: w for w, positions in enumerate(words)}
    out = []
    for positions in words:
        assert [heads[p] for p in positions[:-1]] == [p + 1 for p in positions[:-1]]  # next piece
        last = positions[-1]
        out.append(0 if heads[last] == last else first[heads[last]] + 1)
    return out


def read_pascal(text_line: str, tags_line: str) -> list[int]:
    """e-bug/pascal's encoder maps each tag string to float(tag), the parent's middle position (0-based, no BOS).
    Back to word heads: the word whose pieces' mean it is (its own: the root)."""
    words = _words(text_line.split())
    tags = [float(t) for t in tags_line.split()]
    assert len(tags) == sum(map(len, words))
    middle = {float(np.mean(positions)): w for w, positions in enumerate(words)}
    out = []
    for w, positions in enumerate(words):
        assert len({tags[p] for p in positions}) == 1
        head = middle[tags[positions[0]]]
        out.append(0 if head == w else head + 1)
    return out


def read_nematus(line: str) -> tuple[list[str], list[int]]:
    """borgr/nematus's data_iterator (convert_text_to_graph, non-split actions): a token ending in `@@|` is an arc
    `<L|R><label>@@|`; L: the last word is the head of the word before it; R: the word before the last is the
    head of the last, and a label with `root` in it with one word left marks the root. (sub-words, word heads)."""
    stack: list[int] = []  # word indices
    pieces, heads, open_word, rooted = [], [], False, False
    for token in line.split():
        if token.endswith("@@|"):
            assert not open_word and not rooted
            if token.startswith("L"):
                head, dependent = stack.pop(), stack.pop()
                heads[dependent] = head + 1
                stack.append(head)
            else:
                assert token.startswith("R")
                if len(stack) == 1:
                    assert "root" in token
                    rooted = True
                    continue
                dependent = stack.pop()
                heads[dependent] = stack[-1] + 1
            continue
        if not open_word:
            stack.append(len(heads))
            heads.append(0)
        pieces.append(token)
        open_word = token.endswith("@@")
    assert rooted and len(stack) == 1  # the released reader needs the final root arc
    return pieces, heads


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_export_reads_back_with_the_released_readers(tmp_path):
    summary = export_split(str(OLD_SHARDS), str(tmp_path))
    table = open_split(str(OLD_SHARDS)).table()
    rows = table.to_pylist()
    assert summary.rows == len(rows) == summary.written["pascal"] == summary.written["dbsa"]
    pascal, dbsa, nematus = tmp_path / "pascal", tmp_path / "dbsa", tmp_path / "nematus"
    assert _lines(pascal / "train.en") == [" ".join(r["src_subwords"]) for r in rows]
    for row, text, tags in zip(rows, _lines(pascal / "train.en"), _lines(pascal / "tags" / "train.en"), strict=True):
        assert read_pascal(text, tags) == row["src_heads"]
    for side, lang in (("src", "en"), ("tgt", "de")):
        texts, deps = _lines(dbsa / f"train.{lang}"), _lines(dbsa / f"train.{lang}.dep")
        for row, text, dep in zip(rows, texts, deps, strict=True):
            assert text == " ".join(row[f"{side}_subwords"]) and read_dbsa(text, dep) == row[f"{side}_heads"]
    ids, sources, targets = (_lines(nematus / name) for name in ("train.ids", "train.en", "train.trns1.de"))
    assert len(ids) == len(sources) == len(targets) == summary.written["nematus"] > 0
    by_id = {row["id"]: row for row in rows}
    lifted = 0
    for index, source, target in zip(ids, sources, targets, strict=True):
        row = by_id[int(index)]
        pieces, heads = read_nematus(target)
        assert source == " ".join(row["src_subwords"]) and pieces == row["tgt_subwords"]
        if is_projective(row["tgt_heads"]):
            assert heads == row["tgt_heads"]
        else:  # the split was converted with non_projective = lift: the lifted tree, as its transitions
            lifted += 1
            assert is_projective(heads)
    assert lifted  # the fixture has non-projective targets


def test_export_needs_the_target_labels_one_line_error(tmp_path):
    split = tmp_path / "split"
    done = subprocess.run([sys.executable, "-m", "synprep.cli", "export", str(split), "-o", str(tmp_path / "o")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith("synprep: error:") and len(done.stderr.splitlines()) == 1
    done = subprocess.run([sys.executable, "-m", "synprep.cli", "export", str(OLD_SHARDS), "-o", str(tmp_path / "o"),
                           "--format", "pascal,fairseq"], capture_output=True, text=True)
    assert done.returncode == 2 and "--format" in done.stderr


@pytest.fixture(scope="module")
def dbsa_split(tmp_path_factory):
    """A synthetic corpus converted with the dbsa feature group on both sides."""
    return convert_synth(tmp_path_factory.mktemp("dbsa"), "dbsa", ["parents", "labels", "dbsa"],
                         ["parents", "labels", "dbsa"])


def test_convert_stores_dbsa_head_and_validate_checks_it(dbsa_split):
    table = open_split(str(dbsa_split)).table()
    assert table.schema.field("tgt_dbsa_head").type == pa.list_(pa.int16())
    for row in table.to_pylist():
        for side in ("src", "tgt"):
            assert row[f"{side}_dbsa_head"] == F.dbsa_heads(row[f"{side}_heads"], row[f"{side}_subword_token"]).tolist()
    done = subprocess.run([sys.executable, "-m", "synprep.cli", "validate", str(dbsa_split)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("stored", [True, False])
def test_trainer_collates_dbsa_heads_stored_or_made_from_the_trees(stored, dbsa_split):
    """The batch's DBSA heads: the stored `*_dbsa_head`, or (shards without it, format 1 ones included) made from
    `*_heads` + `*_subword_token` by the same function; the decoder keeps heads at or before the piece."""
    path = str(dbsa_split if stored else OLD_SHARDS)
    table, _ = read_split(path)
    assert ("tgt_dbsa_head" in table.column_names) == stored
    vocab = Vocab.build([table])
    data = ParallelData(path, vocab, features={"src_dbsa_heads": "DBSA", "tgt_dbsa_heads": "DBSA"})
    rows = list(range(min(len(data), 12)))
    batch = data.collate(rows)
    src_head, tgt_head = batch.named["src_dbsa_head"], batch.named["tgt_head"]
    for b, row in enumerate(table.to_pylist()[: len(rows)]):
        src = F.dbsa_heads(row["src_heads"], row["src_subword_token"])
        tgt = F.dbsa_heads(row["tgt_heads"], row["tgt_subword_token"])
        assert src_head[b, : len(src)].tolist() == src.tolist()
        assert (src_head[b, len(src):] == -1).all()
        position = np.arange(len(tgt))
        expected = np.where(tgt <= position, tgt + 1, -1)  # decoder input positions (BOS shift)
        assert tgt_head[b, 1 : len(tgt) + 1].tolist() == expected.tolist() and tgt_head[b, 0] == -1


def test_older_checkpoints_keep_the_rule_they_were_trained_with():
    """A stored model config without `dbsa_rule` (saved before it existed) loads as parent_first, what that code
    trained; a new config defaults to the released rule; a stored rule is kept."""
    from syntrain.config import stored_model_config
    from syntrain.model import ModelConfig

    new = ModelConfig.from_dict({"dbsa_encoder": True, "dbsa_decoder": True, "vocab_size": 8})
    assert new.section("parse_head").dbsa_rule == "next_piece"
    assert set(new.batch_features(training=True)) == {"src_dbsa_heads", "tgt_dbsa_heads"}
    stored = new.to_dict()
    del stored["dbsa_rule"]
    old = stored_model_config({"model_config": stored}, "old.pt")
    assert old.section("parse_head").dbsa_rule == "parent_first"
    assert set(old.batch_features(training=True)) == {"src_heads", "tgt_heads"}
    stored["dbsa_rule"] = "next_piece"
    assert stored_model_config({"model_config": stored}, "new.pt").section("parse_head").dbsa_rule == "next_piece"
