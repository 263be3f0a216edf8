"""`synprep export` read back by tiny readers written from the released trainers' readers, and DBSA's sub-word
heads through convert, validate and the trainer (stored, or made from the trees of shards without them)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from synprep import features as F
from synprep.export import DBSA_RELEASES, EXPORT_FORMATS, export_split, summary_line
from synprep.shards import open_split
from synprep.trees import is_projective
from syntrain.dataset import ParallelData, read_split
from syntrain.switches import declared
from syntrain.vocab import Vocab

from .conftest import SHARED, convert_synth
from .test_fidelity import released_arc_std, released_combined, released_pascal

OLD_SHARDS = Path(__file__).resolve().parent / "data" / "switches" / "shards" / "train"  # format 1, no dbsa_head
HANDOFF_TREEBANKS = [path for name in ("UD_English-EWT/en_ewt-ud-test.conllu", "UD_Turkish-IMST/tr_imst-ud-test.conllu")
                     if (path := SHARED / "data" / "ud" / name).is_file()]
MERGES = 500  # few merges: most words split into several pieces


def _words(pieces: list[str]) -> list[list[int]]:
    """0-based piece positions of each word: a piece ending in @@ continues it (all three readers group so)."""
    words, current = [], []
    for i, piece in enumerate(pieces):
        current.append(i)
        if not piece.endswith("@@"):
            words.append(current)
            current = []
    return words


def check_dependency(pairs: list[list[int]], seq_len: int) -> bool:
    """de9uch1/dbsa collate's check_dependency (2020 and master alike): a sentence's pairs are dropped ("dependency
    size mismatch") when a piece index or a head index reaches seq_len - 1; seq_len counts fairseq's </s>."""
    return bool(pairs) and max(i for i, _ in pairs) < seq_len - 1 and max(h for _, h in pairs) < seq_len - 1


def load_dbsa(dep_line: str, pieces: int, release: str) -> list[int] | None:
    """de9uch1/dbsa's tasks/translation_dep.py loader: master (b0cdef6) pairs `[i, int(x)]`, 2020 (0e9dd5c)
    `[i, int(x) - 1]`; then the collate check, seq_len = the pieces + </s> (source: src_len with
    remove_eos_from_source off; target: tgt_len). The 0-based head per piece, or None when dropped."""
    pairs = [[i, int(x) - (release == "2020")] for i, x in enumerate(dep_line.split())]
    assert len(pairs) == pieces
    return [h for _, h in pairs] if check_dependency(pairs, pieces + 1) else None


def dbsa_rule_master(word_heads: list[int], bpe_tokens: list[str]) -> list[int]:
    """master scripts/bpe_dependency.py, incremental_bpe_dependency (0-based): a piece ending in @@ -> i + 1;
    a word's last piece -> the first piece of its head word (word_start_positions[head - 1]), the root's -> i."""
    starts = [0] + [i + 1 for i, piece in enumerate(bpe_tokens[:-1]) if not piece.endswith("@@")]
    out, word = [], 0
    for i, piece in enumerate(bpe_tokens):
        if piece.endswith("@@"):
            out.append(i + 1)
            continue
        out.append(starts[word_heads[word] - 1] if word_heads[word] > 0 else i)
        word += 1
    return out


def dbsa_rule_2020(word_heads: list[int], bpe_tokens: list[str]) -> list[int]:
    """43eef77/0e9dd5c scripts/bpe_dependency.py (1-based): every piece starts at i + 2 (the next piece); a word's
    last piece takes word_head_positions[its word head], [ROOT=0, 1, 1-based first pieces of words 2..], and 0
    (the root) becomes i + 1 (itself)."""
    firsts = [0, 1] + [i + 1 for i, piece in enumerate(bpe_tokens, start=1) if not piece.endswith("@@")][:-1]
    out, word = list(range(2, len(bpe_tokens) + 2)), 0
    for i, piece in enumerate(bpe_tokens):
        if not piece.endswith("@@"):
            head = firsts[word_heads[word]]
            out[i] = i + 1 if head == 0 else head
            word += 1
    return out


FAIRSEQ_SPECIALS = ("<Lua heritage>", "<pad>", "</s>", "<unk>")  # the Pascal fork's Dictionary: indices 0-3


def fairseq_dictionary(path: Path) -> dict[str, int]:
    """Dictionary.load of e-bug/pascal's fairseq fork: the specials, then one `symbol count` line per symbol."""
    symbols = {name: i for i, name in enumerate(FAIRSEQ_SPECIALS)}
    for line in _lines(path):
        symbols.setdefault(line[: line.rfind(" ")], len(symbols))
    return symbols


def tags_numbers(dictionary: dict[str, int]) -> dict[int, float]:
    """PascalTransformerEncoder.__init__'s map_dictionary: index -> float(symbol), for the symbols that are numbers."""
    numbers = {}
    for symbol, index in dictionary.items():
        try:
            numbers[index] = float(symbol)
        except ValueError:
            pass
    return numbers


def read_pascal_released(tags_line: str, dictionary: dict[str, int], numbers: dict[int, float]) -> list[float]:
    """What e-bug/pascal's encoder gets: preprocess.py binarizes the line with the tags dictionary (unknown ->
    <unk>, </s> appended); the encoder maps each index through `numbers` (tags_numbers), any other index (</s>,
    <unk>, <pad>) to maxlen = length - 1 (the last position). One sentence, no padding."""
    ids = [dictionary.get(tag, FAIRSEQ_SPECIALS.index("<unk>")) for tag in tags_line.split()]
    ids.append(FAIRSEQ_SPECIALS.index("</s>"))
    return [numbers.get(index, float(len(ids) - 1)) for index in ids]


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
    head of the last, and a label with `root` in it with one word left attaches the root word to `<GO>` (the
    reader reads a line without it too; synprep exports it, as the released corpus.py writes). (sub-words, heads)"""
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
    assert rooted and len(stack) == 1  # the export keeps the final root arc
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
        texts, deps = _lines(dbsa / f"train.{lang}"), _lines(dbsa / f"train.dep.{lang}")
        for row, text, dep in zip(rows, texts, deps, strict=True):
            pieces = text.split()
            assert pieces == row[f"{side}_subwords"]
            assert load_dbsa(dep, len(pieces), "current") == dbsa_rule_master(row[f"{side}_heads"], pieces)
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
    for fmt in ("pascal", "dbsa", "nematus"):  # the hand-off: references and commands (no codes in this fixture)
        assert _lines(tmp_path / fmt / "train.ref.de") == [r["tgt_text"] for r in rows]
        readme = (tmp_path / fmt / "README.md").read_text(encoding="utf-8")
        assert "Checked against" in readme and "`--name NAME` is written as `NAME.*`" in readme
    assert summary.missing_codes and "BPE codes not found" in summary_line(summary, "x")  # said, not hidden


def _treebank_split(root: Path, treebank: Path) -> Path:
    """A dataset whose both sides are one gold treebank (its test set, as the split `train`: BPE codes of few
    merges are learned on it)."""
    root.mkdir()
    (root / "p.toml").write_text(f"""[pipeline]
name = "handoff-{treebank.parent.name}"
src_lang = "en"
tgt_lang = "de"
data_root = "{treebank.parent}"
[splits.train]
src = "{treebank.name}"
tgt = "{treebank.name}"
filter = false
[bpe]
symbols = {MERGES}
[features]
src = ["parents", "labels"]
tgt = ["parents", "labels"]
root = "drop"
non_projective = "keep"
[filter]
langid = "none"
""", encoding="utf-8")
    subprocess.run([sys.executable, "-m", "synprep.cli", "convert", str(root / "p.toml"), "--output",
                    str(root / "out"), "--workers", "1"], check=True, capture_output=True)
    return root / "out" / "train"


@pytest.mark.slow
@pytest.mark.skipif(not HANDOFF_TREEBANKS, reason="../shared/data/ud not present")
@pytest.mark.parametrize("treebank", HANDOFF_TREEBANKS, ids=lambda p: p.parent.name)
def test_every_sentence_reads_as_the_released_readers_read(treebank, tmp_path):
    """An export of a whole gold treebank read by each released reader as it reads (DBSA master and 2020,
    Pascal's tags through its dictionary, nematus' graph reader) equals the released rule on every sentence,
    nothing dropped; the other DBSA release's reader gets none right (so the check can fail)."""
    split = _treebank_split(tmp_path / "data", treebank)
    rows = open_split(str(split)).table().to_pylist()
    out = {release: tmp_path / release for release in DBSA_RELEASES}
    for release, folder in out.items():
        export_split(str(split), str(folder), ["dbsa"] if release == "2020" else list(EXPORT_FORMATS),
                     dbsa_release=release)
    equal = Counter()
    for side, lang in (("src", "en"), ("tgt", "de")):
        for release, folder in out.items():
            other = "2020" if release == "current" else "current"
            rule = dbsa_rule_master if release == "current" else dbsa_rule_2020
            for row, text, dep in zip(rows, _lines(folder / "dbsa" / f"train.{lang}"),
                                      _lines(folder / "dbsa" / f"train.dep.{lang}"), strict=True):
                pieces = text.split()
                expected = [h - (release == "2020") for h in rule(row[f"{side}_heads"], pieces)]
                equal[release] += load_dbsa(dep, len(pieces), release) == expected
                equal[f"{other} reading {release}"] += load_dbsa(dep, len(pieces), other) == expected
    pascal, nematus = out["current"] / "pascal", out["current"] / "nematus"
    dictionary = fairseq_dictionary(pascal / "tags" / "dict.en.txt")
    numbers = tags_numbers(dictionary)
    for row, text, tags in zip(rows, _lines(pascal / "train.en"), _lines(pascal / "tags" / "train.en"), strict=True):
        parents = read_pascal_released(tags, dictionary, numbers)
        theirs = [float(t) for t in released_pascal(row["src_heads"], text.split(), mean=True).split()]
        equal["pascal"] += parents == theirs + [float(len(theirs))]  # </s>: the last position
    projective = [row for row in rows if is_projective(row["tgt_heads"])]
    for row, line in zip(projective, _lines(nematus / "train.trns1.de"), strict=True):
        pieces, heads = read_nematus(line)
        theirs = released_combined(released_arc_std(row["tgt_heads"], row["tgt_labels"]), row["tgt_subwords"])
        equal["nematus"] += line == theirs and pieces == row["tgt_subwords"] and heads == row["tgt_heads"]
    _check_nematus_vocabularies(nematus)
    for fmt in EXPORT_FORMATS:  # the hand-off: the codes that made the sub-words, the raw references
        assert (out["current"] / fmt / "codes.bpe").read_bytes() == (split.parent / "codes.bpe").read_bytes()
        assert _lines(out["current"] / fmt / "train.ref.de") == [row["tgt_text"] for row in rows]
    print(f"\n{treebank.parent.name}: {len(rows)} sentences x 2 sides; {dict(equal)}; "
          f"nematus {len(projective)} projective")
    assert len(rows) > 1000 and equal["current"] == equal["2020"] == 2 * len(rows)
    assert equal["current reading 2020"] == equal["2020 reading current"] == 0
    assert equal["pascal"] == len(rows) and equal["nematus"] == len(projective) > 0.9 * len(rows)


def _check_nematus_vocabularies(folder: Path) -> None:
    """Every token of the exported lines is in build_dictionary's JSON, and every arc token's label in the
    labels util.parse_transitions derives from it (the reader looks each arc's label up there)."""
    source, target = (json.loads((folder / name).read_text(encoding="utf-8"))
                      for name in ("train.en.json", "train.trns1.de.json"))
    assert list(source)[:3] == list(target)[:3] == ["<EOS>", "<GO>", "<UNK>"]
    assert {t for line in _lines(folder / "train.en") for t in line.split()} <= set(source)
    tokens = {t for line in _lines(folder / "train.trns1.de") for t in line.split()}
    assert tokens <= set(target)
    labels = {key[1:-3] for key in target if "@@|" in key}
    assert {t[1:-3] for t in tokens if t.endswith("@@|")} <= labels
    assert {f"{d}{label}@@|" for label in labels for d in "LR"} <= set(target)


def test_export_needs_the_target_labels_one_line_error(tmp_path):
    split = tmp_path / "split"
    done = subprocess.run([sys.executable, "-m", "synprep.cli", "export", str(split), "-o", str(tmp_path / "o")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith("synprep: error:") and len(done.stderr.splitlines()) == 1
    done = subprocess.run([sys.executable, "-m", "synprep.cli", "export", str(OLD_SHARDS), "-o", str(tmp_path / "o"),
                           "--format", "pascal,fairseq"], capture_output=True, text=True)
    assert done.returncode == 2 and "--format" in done.stderr
    for options, said in ((["--format", "pascal,pascal"], "given twice: pascal"),
                          (["--format", "pascal", "--format", "dbsa,pascal"], "given twice: pascal"),
                          (["--format", "dbsa", "--dbsa-release", "2019"], "--dbsa-release")):
        done = subprocess.run([sys.executable, "-m", "synprep.cli", "export", str(OLD_SHARDS), "-o",
                               str(tmp_path / "o"), *options], capture_output=True, text=True)
        assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and said in done.stderr
    assert not (tmp_path / "o").exists()  # refused before writing anything
    done = subprocess.run([sys.executable, "-m", "synprep.cli", "export", str(OLD_SHARDS), "-o", str(tmp_path / "o"),
                           "--format", "pascal", "--format", "dbsa"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr  # a repeated --format adds formats (it does not replace the first)
    assert sorted(p.name for p in (tmp_path / "o").iterdir() if p.is_dir()) == ["dbsa", "pascal"]


def test_export_writes_whole_files_or_none(tmp_path):
    """A row that fails half-way (a nematus target without labels) leaves no file of the export, not even the
    formats written before it; a second export over a complete one replaces it."""
    table = open_split(str(OLD_SHARDS)).table()
    broken = tmp_path / "broken"
    shutil.copytree(OLD_SHARDS, broken)
    export_split(str(OLD_SHARDS), str(tmp_path / "o"), ["pascal"])
    before = (tmp_path / "o" / "pascal" / "train.en").read_bytes()
    labels = table.column("tgt_labels").to_pylist()
    labels[len(labels) // 2] = labels[len(labels) // 2][:-1]  # one label short: the transitions cannot be made
    field = table.schema.field("tgt_labels")
    _rewrite(broken, table.set_column(table.schema.get_field_index("tgt_labels"), field,
                                      pa.array(labels, field.type)))
    with pytest.raises(IndexError):  # in the middle of the rows (the split itself opens)
        export_split(str(broken), str(tmp_path / "o"), ["pascal", "nematus"])
    left = sorted(p.relative_to(tmp_path / "o").as_posix() for p in (tmp_path / "o").rglob("*") if p.is_file())
    assert left == sorted(["pascal/train.en", "pascal/train.de", "pascal/tags/train.en", "pascal/train.ref.de",
                           "pascal/tags/dict.en.txt", "pascal/README.md", "pascal/export.json"])
    assert (tmp_path / "o" / "pascal" / "train.en").read_bytes() == before


def _rewrite(split: Path, table: pa.Table) -> None:
    """The split's one shard replaced by `table`, its manifest entry updated (so that the split opens)."""
    from synprep.shards import write_shard

    manifest = json.loads((split / "manifest.json").read_text())
    for shard in manifest["shards"]:
        (split / shard["file"]).unlink()
    manifest["shards"] = [write_shard(str(split / "part-00000.arrow"), table.schema, table.to_batches())]
    (split / "manifest.json").write_text(json.dumps(manifest))


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
    columns = {declared(name): "DBSA" for name in ("src_dbsa_head", "tgt_dbsa_head")}
    data = ParallelData(path, vocab, batch_columns=columns)
    rows = list(range(min(len(data), 12)))
    batch = data.collate(rows)
    src_head, tgt_head = batch.inputs["src_dbsa_head"], batch.inputs["tgt_dbsa_head"]
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
    from syntrain.config.model import ModelConfig
    from syntrain.config.recipe import stored_model_config
    from syntrain.switches.active import ActiveSwitches

    new = ModelConfig.from_dict({"dbsa_encoder": True, "dbsa_decoder": True, "vocab_size": 8})
    assert new.section("parse_head").dbsa_rule == "next_piece"
    read = ActiveSwitches(new).batch_columns(training=True)
    assert {column.name for column in read} == {"src_dbsa_head", "tgt_dbsa_head"}
    stored = new.to_dict()
    del stored["dbsa_rule"]
    old = stored_model_config({"model_config": stored}, "old.pt")
    assert old.section("parse_head").dbsa_rule == "parent_first"
    read = ActiveSwitches(old).batch_columns(training=True)
    assert {column.name for column in read} == {"src_parent_first", "tgt_parent_first"}
    stored["dbsa_rule"] = "next_piece"
    assert stored_model_config({"model_config": stored}, "new.pt").section("parse_head").dbsa_rule == "next_piece"
