"""Parsers that say how good they are: the held-out scores `synprep parser train` records beside a model (with
its digest), and what `synprep convert` says about each side's parser (scores or unscored, below the floor,
degenerate trees), in its summary, on stderr and in the manifest. Tiny models trained in seconds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from synprep.conllu import read_trees
from synprep.parse.quality import (
    LABEL_SHARE,
    LAS_FLOOR,
    SHAPE_WORDS,
    UAS_FLOOR,
    TreeShapes,
    read_record,
    record_path,
    write_record,
)
from synprep.textio import path_sha256

from .conftest import SAMPLE_DATA

EN, DE = str(SAMPLE_DATA / "en.conllu"), str(SAMPLE_DATA / "de.conllu")
PARALLEL = SAMPLE_DATA / "parallel"


def synprep(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "synprep.cli", *map(str, args)], capture_output=True, text=True)


def test_tree_shapes_pass_a_treebank_and_flag_degenerate_trees():
    """The gold trees of a real treebank pass; the same sentences with one label everywhere, flat trees (every
    word on the root) or chains (every word on the next) are each flagged."""
    trees = list(read_trees(EN))
    gold, one_label, flat, chain = TreeShapes(), TreeShapes(), TreeShapes(), TreeShapes()
    for tree in trees:
        n, root = len(tree.heads), tree.heads.index(0) + 1
        gold.add(tree.heads, tree.labels)
        one_label.add(tree.heads, ["dep"] * n)
        flat.add([0 if i == root else root for i in range(1, n + 1)], tree.labels)
        chain.add([i + 1 for i in range(1, n)] + [0], tree.labels)
    assert gold.problems() == [] and gold.long > 10
    assert max(gold.labels.values()) < LABEL_SHARE * gold.arcs < gold.arcs
    assert one_label.problems() == ["`dep` on 100% of arcs"]
    assert flat.problems() == [f"100% of the sentences of {SHAPE_WORDS}+ words flat (every word on one head)"]
    assert chain.problems() == [f"100% of the sentences of {SHAPE_WORDS}+ words chains"]


def test_a_record_is_believed_only_for_the_model_it_was_made_for(tmp_path):
    """Files and folders alike: the digest is over the folder's files; changed bytes make the record stale."""
    from synprep.parse.evaluate import Scores

    folder = tmp_path / "model"
    (folder / "parser").mkdir(parents=True)
    (folder / "parser" / "weights").write_bytes(b"\0\1\2")
    (folder / "meta.json").write_text("{}")
    scores = Scores("gold", sentences=1, gold_words=10, system_words=10, aligned=10, upos=9, uas=8, las=7)
    write_record(str(folder), "spacy", "tiny", "held.conllu", [scores], 1.0)
    record, why = read_record(str(folder))
    assert why == "" and record["scores"]["gold"] == {"upos": 90.0, "uas": 80.0, "las": 70.0}
    assert record["sha256"] == path_sha256(str(folder)) and Path(record_path(str(folder))).is_file()
    (folder / "parser" / "weights").write_bytes(b"\0\1\3")
    assert read_record(str(folder)) == (None, f"its score record {record_path(str(folder))} is for other model files")
    write_record(str(folder), "spacy", "tiny", None, [], 1.0)
    assert read_record(str(folder)) == (None, "trained without --heldout")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny UDPipe model (en, held-out scores above the floor) and a tiny spaCy pipeline (de, below it), each
    trained through the CLI with --heldout."""
    pytest.importorskip("spacy")
    root = tmp_path_factory.mktemp("quality")
    udpipe = synprep("parser", "train", "--conllu", EN, "--heldout", EN, "-o", root / "en.udpipe", "--preset", "tiny")
    assert udpipe.returncode == 0, udpipe.stderr
    spacy = synprep("parser", "train", "--backend", "spacy", "--conllu", DE, "--heldout", DE, "-o", root / "de_spacy",
                    "--preset", "tiny", "--lang", "de")
    assert spacy.returncode == 0, spacy.stderr[-3000:]
    return root, udpipe.stderr, spacy.stderr


def test_parser_train_records_scores_and_says_when_below_the_floor(trained):
    root, udpipe, spacy = trained
    for model, stderr, low in ((root / "en.udpipe", udpipe, False), (root / "de_spacy", spacy, True)):
        record, why = read_record(str(model))
        assert why == "" and record["sha256"] == path_sha256(str(model)) and record["heldout"] in (EN, DE)
        gold = record["scores"]["gold"]
        said = next(line for line in stderr.splitlines() if line.startswith("held-out ") and "gold" in line)
        assert f"UAS {gold['uas']:5.2f}  LAS {gold['las']:5.2f}" in said
        assert (gold["uas"] < UAS_FLOOR or gold["las"] < LAS_FLOOR) == low
        assert ("below the floor" in stderr) == low


def test_convert_names_each_parser_scores_and_warns_below_the_floor(trained, tmp_path):
    """The summary names each side's recorded scores; the tgt parser below the floor is one warning line on
    stderr and in every split's manifest; a folder parser's digest is in the signature."""
    root, _, _ = trained
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(f"""[pipeline]
name = "q"
src_lang = "en"
tgt_lang = "de"
[splits.train]
src = "{PARALLEL / 'train.en'}"
tgt = "{PARALLEL / 'train.de'}"
[splits.test]
src = "{PARALLEL / 'test.en'}"
tgt = "{PARALLEL / 'test.de'}"
[filter]
langid = "none"
[parser.src]
backend = "udpipe"
model = "{root / 'en.udpipe'}"
[parser.tgt]
backend = "spacy"
model = "{root / 'de_spacy'}"
[bpe]
symbols = 100
[features]
src = ["parents", "labels"]
tgt = ["parents", "labels"]
non_projective = "lift"
""")
    done = subprocess.run([sys.executable, "-m", "synprep.cli", "convert", str(pipeline), "--output",
                           str(tmp_path / "out"), "--workers", "1"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    src, tgt = read_record(str(root / "en.udpipe"))[0], read_record(str(root / "de_spacy"))[0]
    assert tgt["scores"]["gold"]["uas"] < UAS_FLOOR or tgt["scores"]["gold"]["las"] < LAS_FLOOR
    summary = done.stdout.splitlines()
    assert (f"parser src (udpipe en.udpipe): held-out UAS {src['scores']['gold']['uas']:.1f} "
            f"LAS {src['scores']['gold']['las']:.1f} (gold tokens, en.conllu)") in summary
    assert any(line.startswith("parser tgt (spacy de_spacy): held-out UAS ") and "(below the floor)" in line
               for line in summary)
    warned = [line for line in done.stderr.splitlines() if line.startswith("synprep: warning: parser tgt")]
    assert len(warned) == 1 and "below the floor" in warned[0] and "train it longer" in warned[0]
    for split in ("train", "test"):
        manifest = json.loads((tmp_path / "out" / split / "manifest.json").read_text())
        assert manifest["parsers"]["src"]["scores"] == src["scores"] and "warnings" not in manifest["parsers"]["src"]
        assert warned[0].removeprefix("synprep: ") in manifest["parsers"]["tgt"]["warnings"]
        assert manifest["signature"]["parsers"]["tgt"]["sha256"] == path_sha256(str(root / "de_spacy"))
        for warning in manifest["parsers"]["tgt"]["warnings"][1:]:  # degenerate trees: said on stderr too
            assert f"synprep: {warning}" in done.stderr.splitlines()
    assert "the src trees" not in done.stderr  # the udpipe model's trees pass


def test_raw_text_is_refused_with_a_folder_parser_whose_files_changed(trained, tmp_path):
    """The signature's digest of a folder parser is checked where raw text is prepared (syntrain translate):
    the same files pass, a changed file is one error naming the folder."""
    import shutil

    from synprep.errors import InputError
    from synprep.prepare import prepare_source
    from synprep.shards import SourcePreparation

    root, _, _ = trained
    folder = tmp_path / "de_spacy"
    shutil.copytree(root / "de_spacy", folder)
    preparation = SourcePreparation({"backend": "spacy", "model": str(folder)}, path_sha256(str(root / "de_spacy")),
                                    None, None, None, None, ("parents",), {})
    assert prepare_source(["Der Hund schläft ."], preparation).num_rows == 1
    with open(folder / "meta.json", "a", encoding="utf-8") as handle:
        handle.write("\n")
    with pytest.raises(InputError, match="not the source parser model of the dataset") as refused:
        prepare_source(["Der Hund schläft ."], preparation)
    assert str(folder) in str(refused.value)
