"""The hand-off commands and files read as the released trainers read them, where a reader could silently lose
supervision: DBSA master's target pairs as its collate and criterion keep them, one DBSA release per export
folder, nematus' label lookup and length limit, Pascal's parents in a generate batch; a SentencePiece dataset's
Pascal and DBSA files read the same way (the readers take one value per piece, whatever marks it). Each reader
re-implements the released rule, citing file and line (the releases' commits: synprep.export_readme.COMMITS)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from synprep.errors import InputError
from synprep.export import DBSA_RELEASES, export_split, summary_line
from synprep.shards import open_split

from .conftest import REPO
from .test_export import (
    HANDOFF_TREEBANKS,
    OLD_SHARDS,
    _lines,
    _rewrite,
    _treebank_split,
    check_dependency,
    dbsa_rule_2020,
    dbsa_rule_master,
    fairseq_dictionary,
    load_dbsa,
    read_pascal_released,
    tags_numbers,
)


def master_target_pairs(dep_line: str, pieces: int, dependency_with_input: bool) -> list[tuple[int, int]] | None:
    """de9uch1/dbsa master b0cdef6 on one target sentence (targets are padded on the right: its place in a batch
    changes nothing): `tasks/translation_dep.py` l.170-178 loads `[[i, int(x)]]`;
    `data/language_pair_dataset_with_dependency.py` `__getitem__` l.328-331 adds 1 to both under
    `dependency_with_input`; `collate` l.205-217 keeps the sentence when `check_dependency(dependency, tgt_len)`
    (l.70-79, on the `__getitem__` pairs; tgt_len counts `</s>`) and adds its offsets, +1 again under
    `dependency_with_input` (l.209-210); the criterion (`criterions/label_smoothed_cross_entropy_with_dependency.py`
    l.127-128) keeps the pairs whose column is at or before the row. The supervised (decoder row, column) pairs
    of the decoder self-attention, or None when the sentence is dropped."""
    pairs = [[i, int(x)] for i, x in enumerate(dep_line.split())]
    if dependency_with_input:
        pairs = [[i + 1, h + 1] for i, h in pairs]
    if not check_dependency(pairs, pieces + 1):
        return None
    shift = 1 if dependency_with_input else 0
    return [(i + shift, h + shift) for i, h in pairs if i + shift >= h + shift]


def with_input_664571d(dep_line: str, pieces: int) -> list[tuple[int, int]] | None:
    """de9uch1/dbsa 664571d (the 2020 format, 1-based) with `--dependency-with-input`: `tasks/translation_dep.py`
    l.145 loads `[i, int(x) - 1]`; `__getitem__` l.285-287 adds 1 to both; `collate` l.189-193 keeps the pairs
    with column <= row when `check_dependency(dependency, tgt_len + 1)` (l.64-70). As master_target_pairs."""
    pairs = [[i + 1, int(x) - 1 + 1] for i, x in enumerate(dep_line.split())]
    if not check_dependency(pairs, pieces + 2):
        return None
    return [(i, h) for i, h in pairs if i >= h]


def test_dbsa_master_gives_target_supervision_without_dependency_with_input(tmp_path):
    """Master's default (`task.dependency_with_input` unset, as `dbsa/configs/transformer_dep.yaml`) keeps every
    target sentence and supervises the pairs whose head is at or before the piece: decoder row i (input: piece
    i - 1, predicting piece i) towards column head(i) (input: piece head(i) - 1). `dependency_with_input=true`
    drops every target sentence: no target loss at all. The 2020 format read by `664571d` with
    `--dependency-with-input` supervises syntrain's rows (row i + 1, input piece i, towards column head(i) + 1)."""
    export_split(str(OLD_SHARDS), str(tmp_path), ["dbsa"])
    rows = open_split(str(OLD_SHARDS)).table().to_pylist()
    kept = {False: 0, True: 0}
    supervised = 0
    for row, text, dep in zip(rows, _lines(tmp_path / "dbsa" / "train.de"), _lines(tmp_path / "dbsa" / "train.dep.de"),
                              strict=True):
        pieces = text.split()
        heads = dbsa_rule_master(row["tgt_heads"], pieces)
        for setting in (False, True):
            pairs = master_target_pairs(dep, len(pieces), setting)
            kept[setting] += pairs is not None
            if pairs is not None and not setting:
                assert pairs == [(i, h) for i, h in enumerate(heads) if h <= i]
                supervised += len(pairs)
    assert kept == {False: len(rows), True: 0} and supervised > len(rows)
    export_split(str(OLD_SHARDS), str(tmp_path / "2020"), ["dbsa"], dbsa_release="2020")
    for row, text, dep in zip(rows, _lines(tmp_path / "2020" / "dbsa" / "train.de"),
                              _lines(tmp_path / "2020" / "dbsa" / "train.dep.de"), strict=True):
        heads = dbsa_rule_master(row["tgt_heads"], text.split())  # syntrain's rows: BOS shift, as syntrain collates
        assert with_input_664571d(dep, len(heads)) == [(i + 1, h + 1) for i, h in enumerate(heads) if h <= i]
    for page in ("handoff.md", "fidelity.md"):  # the pages say which setting supervises the target
        text = (Path(__file__).resolve().parents[1] / "docs" / page).read_text(encoding="utf-8")
        assert "drops every target sentence" in text and "664571d" in text
        assert "--dependency-with-input` (from `664571d`; master: `task.dependency_with_input=true`) shifts" not in text


@pytest.mark.slow
@pytest.mark.skipif(not HANDOFF_TREEBANKS, reason="../shared/data/ud not present")
@pytest.mark.parametrize("treebank", HANDOFF_TREEBANKS, ids=lambda p: p.parent.name)
def test_dbsa_target_supervision_of_whole_treebanks(treebank, tmp_path):
    """Every target sentence of a gold test treebank: kept by master's default, dropped by master's
    `dependency_with_input`, read as syntrain's rows by 664571d's; Pascal's generate batch reads every parent."""
    split = _treebank_split(tmp_path / "data", treebank)
    rows = open_split(str(split)).table().to_pylist()
    for release in ("current", "2020"):
        export_split(str(split), str(tmp_path / release), ["dbsa", "pascal"], dbsa_release=release)
    kept = {"default": 0, "with input": 0, "664571d": 0}
    for row, text, dep, old in zip(rows, _lines(tmp_path / "current" / "dbsa" / "train.de"),
                                   _lines(tmp_path / "current" / "dbsa" / "train.dep.de"),
                                   _lines(tmp_path / "2020" / "dbsa" / "train.dep.de"), strict=True):
        heads = dbsa_rule_master(row["tgt_heads"], text.split())
        kept["default"] += master_target_pairs(dep, len(heads), False) == [(i, h) for i, h in enumerate(heads)
                                                                           if h <= i]
        kept["with input"] += master_target_pairs(dep, len(heads), True) is not None
        kept["664571d"] += with_input_664571d(old, len(heads)) == [(i + 1, h + 1) for i, h in enumerate(heads)
                                                                   if h <= i]
    readme = (tmp_path / "current" / "pascal" / "README.md").read_text(encoding="utf-8")
    batch_size = int(re.search(r"generate\.py .*--batch-size (\d+)", readme).group(1))
    right, total = read_right_in_batches(tmp_path / "current" / "pascal", batch_size)
    print(f"\n{treebank.parent.name}: {len(rows)} target sentences; {kept}; Pascal generate batch {batch_size}: "
          f"{right}/{total} read right, at 128: {read_right_in_batches(tmp_path / 'current' / 'pascal', 128)[0]}")
    assert kept == {"default": len(rows), "with input": 0, "664571d": len(rows)} and right == total == len(rows)


def test_dbsa_2020_readme_exports_every_split_for_2020_and_a_folder_holds_one_release(tmp_path):
    export_split(str(OLD_SHARDS), str(tmp_path / "old"), ["dbsa"], dbsa_release="2020")
    readme = (tmp_path / "old" / "dbsa" / "README.md").read_text(encoding="utf-8")
    loop = next(line for line in readme.splitlines() if line.startswith("for s in"))
    assert "--format dbsa --dbsa-release 2020;" in loop
    export_split(str(OLD_SHARDS), str(tmp_path / "new"), ["dbsa"])
    loop = next(line for line in (tmp_path / "new" / "dbsa" / "README.md").read_text().splitlines()
                if line.startswith("for s in"))
    assert "--dbsa-release" not in loop
    before = {p.name: p.read_bytes() for p in (tmp_path / "old" / "dbsa").iterdir()}
    with pytest.raises(InputError, match="DBSA release '2020', not 'current'"):
        export_split(str(OLD_SHARDS), str(tmp_path / "old"), ["dbsa"], name="valid")
    done = subprocess.run([sys.executable, "-m", "synprep.cli", "export", str(OLD_SHARDS), "-o", str(tmp_path / "old"),
                           "--format", "dbsa", "--name", "valid"], capture_output=True, text=True)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and "--dbsa-release" in done.stderr
    assert {p.name: p.read_bytes() for p in (tmp_path / "old" / "dbsa").iterdir()} == before  # nothing written
    export_split(str(OLD_SHARDS), str(tmp_path / "old"), ["dbsa"], name="valid", dbsa_release="2020")  # same: fine
    export_split(str(OLD_SHARDS), str(tmp_path / "old"), ["pascal"], name="valid")  # other formats: no release


def released_labels(vocabulary: dict[str, int]) -> dict[str, int]:
    """borgr/nematus f629db7 `nematus/util.py` `parse_transitions` l.44-57 (non-split actions): every key holding
    `@@|` -> the index of its label `key[1:-3]`; `data_iterator.py` `convert_text_to_graph` l.429-436 looks each arc
    token up there (`labels_dict[token]`, a KeyError when absent)."""
    actions = [key for key in vocabulary if "@@|" in key]
    labels = {key[1:-3]: i for i, key in enumerate(actions)}
    labels = {label: i for i, label in enumerate(sorted(labels, key=labels.get))}
    return {key: labels[key[1:-3]] for key in actions}


def _with_new_label(tmp_path: Path) -> Path:
    """The fixture split with one target arc relabelled to a label no other row has."""
    split = tmp_path / "renamed"
    shutil.copytree(OLD_SHARDS, split)
    table = open_split(str(OLD_SHARDS)).table()
    labels = table.column("tgt_labels").to_pylist()
    labels[0] = ["nsubj:pass" if label == "nsubj" else label for label in labels[0]]
    assert "nsubj:pass" in labels[0]
    field = table.schema.field("tgt_labels")
    _rewrite(split, table.set_column(table.schema.get_field_index("tgt_labels"), field, pa.array(labels, field.type)))
    return split


@pytest.mark.parametrize("valid_first", [False, True])
def test_nematus_vocabulary_covers_every_split_and_maxlen_keeps_every_row(valid_first, tmp_path):
    """A label of valid that train never has: the train vocabulary gets its arcs (the reader's lookup finds every
    arc of both splits), whichever split is exported first, and the export says so; the README's `--maxlen` keeps
    every exported row (data_iterator.py l.225 skips a row with more tokens than it on either side) and is the
    longest; its extra packages are named."""
    valid, out = _with_new_label(tmp_path), tmp_path / "export"
    exports = [(str(OLD_SHARDS), "train"), (str(valid), "valid")]
    said = [summary_line(export_split(path, str(out), ["nematus"], name=name), str(out))
            for path, name in (exports[::-1] if valid_first else exports)]
    folder = out / "nematus"
    labels = released_labels(json.loads((folder / "train.trns1.de.json").read_text(encoding="utf-8")))
    arcs = [t for name in ("train", "valid") for line in _lines(folder / f"{name}.trns1.de") for t in line.split()
            if t.endswith("@@|")]
    assert "Lnsubj:pass@@|" in arcs or "Rnsubj:pass@@|" in arcs
    assert all(token in labels for token in arcs)
    assert "train.trns1.de.json given the arcs of 1 label(s) of other splits it lacked (nsubj:pass)" in said[-1]
    readme = (folder / "README.md").read_text(encoding="utf-8")
    maxlen = int(re.search(r"--maxlen (\d+) ", readme).group(1))
    lengths = [len(line.split()) for name in ("train", "valid") for suffix in ("en", "trns1.de")
               for line in _lines(folder / f"{name}.{suffix}")]
    assert max(lengths) == maxlen > 100  # the trainer's default (100) would drop rows of this fixture
    assert all(word in readme for word in ("django", "conllu", "'numpy<1.24'"))


def read_right_in_batches(folder: Path, batch_size: int) -> tuple[int, int]:
    """e-bug/pascal 251a9ca's fork as `generate.py` batches the test set: `ordered_indices`
    (`fairseq/fairseq/data/tags_language_pair_dataset.py` l.240-249: by target, then source length), batches of
    `batch_size`; `collate` l.35 pads the source on the left, l.63 the tags on the right (`left_pad_target`);
    `models/pascal_transformer.py` l.250-251 maps each tag index to `float(symbol)`, any other to the row's
    last position. A sentence is read right when each token's centre is its parent's position in the padded row.
    (sentences read right, sentences)."""
    dictionary = fairseq_dictionary(folder / "tags" / "dict.en.txt")
    numbers = tags_numbers(dictionary)
    sources = [line.split() for line in _lines(folder / "train.en")]
    targets = [line.split() for line in _lines(folder / "train.de")]
    tags = [line.split() for line in _lines(folder / "tags" / "train.en")]
    order = sorted(range(len(sources)), key=lambda k: len(targets[k]))
    order = sorted(order, key=lambda k: len(sources[k]))
    right = 0
    for start in range(0, len(order), batch_size):
        batch = order[start:start + batch_size]
        width = max(len(sources[k]) for k in batch) + 1  # </s>
        for k in batch:
            pad = width - len(sources[k]) - 1
            row = [dictionary[t] for t in tags[k]] + [2] + [1] * (width - len(tags[k]) - 1)  # </s>, then <pad>
            read = [numbers.get(row[pad + t], float(width - 1)) for t in range(len(sources[k]))]
            right += read == [pad + float(t) for t in tags[k]]
    return right, len(sources)


def test_pascal_generate_command_reads_every_parent_right(tmp_path):
    export_split(str(OLD_SHARDS), str(tmp_path), ["pascal"])
    readme = (tmp_path / "pascal" / "README.md").read_text(encoding="utf-8")
    generate = next(line for line in readme.splitlines() if line.startswith("python generate.py"))
    batch_size = int(re.search(r"--batch-size (\d+)", generate).group(1))
    right, total = read_right_in_batches(tmp_path / "pascal", batch_size)
    assert right == total
    assert read_right_in_batches(tmp_path / "pascal", 128)[0] < total / 2  # the check can fail


# ------------------------------------------------------------------ a SentencePiece dataset ('▁' at a token's start)


@pytest.fixture(scope="module")
def sentencepiece_split(tmp_path_factory, tiny_udpipe) -> Path:
    """The sample SentencePiece pipeline (pipelines/sample-sentencepiece.toml: its [bpe], a joint unigram model),
    `dbsa` on both sides so that the shards hold each piece's DBSA head; the train split."""
    pytest.importorskip("sentencepiece")

    from .conftest import REPO
    from .test_subwords import _convert_with_parsers, _pipeline

    text = (REPO / "pipelines" / "sample-sentencepiece.toml").read_text(encoding="utf-8")
    bpe = text.partition("[bpe]")[2].partition("[features]")[0].strip()
    assert 'scheme = "sentencepiece"' in bpe
    root = tmp_path_factory.mktemp("sentencepiece")
    path = _pipeline(root, bpe, 'src = ["parents", "dbsa", "labels"]\ntgt = ["parents", "dbsa", "labels"]\n'
                                'root = "drop"\nnon_projective = "lift"')
    _convert_with_parsers(path, tiny_udpipe)
    return root / "out" / "train"


def released_spelling(pieces: list[str], subword_token: list[int]) -> list[str]:
    """The same cut as the released preprocessing scripts (bpe_dependency.py, bpe_tags_mean.py) read a cut: '@@'
    at the end of each piece that its token continues, from the shards' piece -> token map."""
    return [piece + "@@" if i + 1 < len(pieces) and subword_token[i + 1] == subword_token[i] else piece
            for i, piece in enumerate(pieces)]


def word_heads_from_dbsa(piece_heads: list[int], subword_token: list[int]) -> list[int]:
    """Word heads (1-based, 0: the root) back from a DBSA head per piece, the words as the shards group the
    pieces: a piece that its word continues points to the next piece; a word's last piece to the first piece of
    its head word, the root word's to itself."""
    heads = []
    for i, head in enumerate(piece_heads):
        word = subword_token[i]
        if i + 1 < len(subword_token) and subword_token[i + 1] == word:
            assert head == i + 1
            continue
        if head == i:
            heads.append(0)
            continue
        assert 0 <= head < len(subword_token) and subword_token.index(subword_token[head]) == head  # a first piece
        heads.append(subword_token[head] + 1)
    return heads


def word_heads_from_parents(parents: list[float], subword_token: list[int]) -> list[int]:
    """Word heads back from Pascal's parent per piece (the mean position of the head word's pieces; the root
    word's: its own), the words as the shards group the pieces."""
    words: dict[int, list[int]] = {}
    for i, word in enumerate(subword_token):
        words.setdefault(word, []).append(i)
    middle = {sum(positions) / len(positions): word for word, positions in words.items()}
    heads = []
    for word, positions in sorted(words.items()):
        assert len({parents[p] for p in positions}) == 1
        head = middle[parents[positions[0]]]
        heads.append(0 if head == word else head + 1)
    return heads


@pytest.mark.slow
def test_sentencepiece_export_reads_back_with_the_released_readers(sentencepiece_split, tmp_path):
    """A SentencePiece dataset exported by default (pascal and dbsa; nematus refused in one line): the released
    trainers read one value per piece, whatever marks the pieces carry, so every value read back (Pascal's
    parent through its tags dictionary, in its generate batches; DBSA's head, master and 2020, and the target
    pairs master supervises) equals the released preprocessing rule on the same cut spelled with '@@', equals what
    the shards hold (parent_mid, dbsa_head) and gives back the shards' word heads. The released scripts' '@@'
    rule run on the '▁' pieces themselves reads other words (so the check can fail): synprep writes the files."""
    from .test_fidelity import released_pascal

    split = sentencepiece_split
    manifest = json.loads((split / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["configuration"]["bpe"]["scheme"] == "sentencepiece"
    summary = export_split(str(split), str(tmp_path / "current"))
    rows = open_split(str(split)).table().to_pylist()
    assert summary.rows == len(rows) > 20 and summary.written == {"pascal": len(rows), "dbsa": len(rows)}
    assert sorted(p.name for p in (tmp_path / "current").iterdir()) == ["dbsa", "pascal"]
    export_split(str(split), str(tmp_path / "2020"), ["dbsa"], dbsa_release="2020")
    with pytest.raises(InputError, match="'@@'") as refused:
        export_split(str(split), str(tmp_path / "nematus"), ["pascal", "nematus"])
    assert "\n" not in str(refused.value) and not (tmp_path / "nematus").exists()

    pascal = tmp_path / "current" / "pascal"
    dictionary = fairseq_dictionary(pascal / "tags" / "dict.en.txt")
    numbers = tags_numbers(dictionary)
    split_words = 0
    for row, text, tags in zip(rows, _lines(pascal / "train.en"), _lines(pascal / "tags" / "train.en"), strict=True):
        pieces, owner = text.split(), row["src_subword_token"]
        assert pieces == row["src_subwords"] and pieces[0].startswith("\u2581")
        parents = read_pascal_released(tags, dictionary, numbers)
        assert parents[-1] == len(pieces)  # </s>: the last position
        assert parents[:-1] == [float(x) for x in released_pascal(row["src_heads"], released_spelling(pieces, owner),
                                                                  mean=True).split()]
        assert parents[:-1] == [float(x) for x in row["src_parent_mid"]]
        assert word_heads_from_parents(parents[:-1], owner) == row["src_heads"]
        if len(pieces) > len(row["src_heads"]):  # the released script's '@@' rule on the '▁' pieces as written
            split_words += 1
            with pytest.raises(IndexError):  # every piece a word: more words than the tree has
                released_pascal(row["src_heads"], pieces, mean=True)
    readme = (pascal / "README.md").read_text(encoding="utf-8")
    batch_size = int(re.search(r"generate\.py .*--batch-size (\d+)", readme).group(1))
    assert read_right_in_batches(pascal, batch_size) == (len(rows), len(rows))
    assert split_words > len(rows) // 2

    for side, lang in (("src", "en"), ("tgt", "de")):
        for release in DBSA_RELEASES:
            folder = tmp_path / release / "dbsa"
            rule = dbsa_rule_master if release == "current" else dbsa_rule_2020
            for row, text, dep in zip(rows, _lines(folder / f"train.{lang}"), _lines(folder / f"train.dep.{lang}"),
                                      strict=True):
                pieces, owner, heads = text.split(), row[f"{side}_subword_token"], row[f"{side}_heads"]
                assert pieces == row[f"{side}_subwords"]
                read = load_dbsa(dep, len(pieces), release)
                assert read == [h - (release == "2020") for h in rule(heads, released_spelling(pieces, owner))]
                assert read == row[f"{side}_dbsa_head"]
                assert word_heads_from_dbsa(read, owner) == heads
                if side == "tgt" and release == "current":
                    assert master_target_pairs(dep, len(pieces), False) == [(i, h) for i, h in enumerate(read)
                                                                           if h <= i]
                    assert master_target_pairs(dep, len(pieces), True) is None  # as for subword-nmt pieces
                if side == "tgt" and release == "2020":
                    assert with_input_664571d(dep, len(pieces)) == [(i + 1, h + 1) for i, h in enumerate(read)
                                                                    if h <= i]
                if len(pieces) > len(heads):  # the released script's '@@' rule on the '▁' pieces as written
                    with pytest.raises(IndexError):  # every piece a word: more words than the tree has
                        rule(heads, pieces)


# ------------------------------------------------------------------ an hf-tokenizer dataset: its README scores words

HF_TOKENIZERS = {"wordpiece": ("##", "continue"), "bytelevel": ("\u0120", "start"), "metaspace": ("\u2581", "start")}


@pytest.fixture(scope="module", params=sorted(HF_TOKENIZERS))
def hf_tokenizer_dataset(request, tmp_path_factory, tiny_udpipe) -> tuple[str, Path]:
    """The sample pipeline (tests/test_subwords.py `_pipeline`) with an hf-tokenizer model learned here on the
    sample parallel sentences: WordPiece ('##', continue; a small vocabulary, so that words are cut; every
    character alone in its texts too, so that a token the parser splits off ('.') has its piece, not [UNK]),
    ByteLevel ('Ġ', start: German umlauts spelled in its byte alphabet) or Metaspace ('▁', start); converted with
    the features both trainers read. (scheme, the dataset folder)."""
    pytest.importorskip("tokenizers")

    from .conftest import SAMPLE_DATA
    from .test_subwords import _convert_with_parsers, _pipeline
    from .test_transition_schemes import _start_marked, _wordpiece

    scheme = request.param
    root = tmp_path_factory.mktemp(scheme)
    if scheme == "wordpiece":
        texts = [line for name in sorted((SAMPLE_DATA / "parallel").iterdir())
                 for line in name.read_text(encoding="utf-8").splitlines()]
        tokenizer = _wordpiece(texts + [" ".join(sorted(set("".join(texts)) - {" "}))], root / "tokenizer.json",
                               vocab_size=150)
    else:
        tokenizer = _start_marked(scheme, root / "tokenizer.json")
    path = _pipeline(root, f'scheme = "hf-tokenizer"\nmodel = "{tokenizer}"',
                     'src = ["parents", "dbsa", "labels"]\ntgt = ["parents", "dbsa", "labels"]\n'
                     'root = "drop"\nnon_projective = "lift"')
    _convert_with_parsers(path, tiny_udpipe)
    return scheme, root / "out"


def scoring_lines(readme: str) -> str:
    """The README's shell lines after fairseq's hypotheses are cut into `$E/hyp.test.tok`: the scoring."""
    lines = readme.splitlines()
    start = next(i for i, line in enumerate(lines) if line.endswith("cut -f3 > $E/hyp.test.tok")) + 1
    return "\n".join(lines[start:lines.index("```", start)]) + "\n"


def run_scoring(folder: Path, lines: str) -> subprocess.CompletedProcess:
    """`lines` run by bash as a user runs them: E set to the folder; `python`, `sacremoses`, `sacrebleu` the
    environment's (this interpreter's bin folder first on PATH), the synprep under test importable."""
    bin_folder = Path(sys.executable).parent
    assert all((bin_folder / program).exists() for program in ("python", "sacremoses", "sacrebleu"))
    env = {**os.environ, "E": str(folder), "PATH": f"{bin_folder}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run(["bash", "-euo", "pipefail", "-c", lines], env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
def test_hf_tokenizer_readme_scores_the_words_of_the_pieces(hf_tokenizer_dataset, tmp_path):
    """An hf-tokenizer dataset exported as a user exports it (every split; pascal and dbsa), its README's scoring
    lines run by bash on hypotheses that are the exported test targets' own pieces (as `generate` writes them:
    fairseq does not join these pieces): the joining stage gives back the words the parser produced (the shards'
    `tgt_tokens`, German umlauts included: ByteLevel's pieces spell them in its byte alphabet), sacremoses
    detokenizes them, and sacrebleu scores exactly those sentences against the references (its BLEU and chrF
    equal the library's on them, and BLEU exceeds that of the pieces left apart, which the README scored
    before). Then the train split (exported as `test`, the README's names: 50 rows, 20 with an umlaut)."""
    pytest.importorskip("sacremoses")
    sacrebleu = pytest.importorskip("sacrebleu")
    from sacremoses import MosesDetokenizer

    from synprep.subwords import pieces_to_tokens

    scheme, dataset = hf_tokenizer_dataset
    marker, kind = HF_TOKENIZERS[scheme]
    manifest = json.loads((dataset / "test" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["signature"]["subword_marker"]["tgt"] == [marker, kind]
    detokenizer = MosesDetokenizer(lang="de")
    every_split = tmp_path / "export"
    for split in ("train", "valid", "test"):
        export_split(str(dataset / split), str(every_split))
    export_split(str(dataset / "train"), str(tmp_path / "train"), ["pascal"], name="test")
    runs = [(every_split / "pascal", "test"), (every_split / "dbsa", "test"), (tmp_path / "train" / "pascal", "train")]
    umlauts = 0
    for folder, split in runs:
        rows = open_split(str(dataset / split)).table(["tgt_text", "tgt_tokens", "tgt_subwords"]).to_pylist()
        pieces = _lines(folder / "test.de")
        assert pieces == [" ".join(row["tgt_subwords"]) for row in rows] and len(rows) >= 6
        assert not any(piece == "[UNK]" for row in rows for piece in row["tgt_subwords"])
        assert sum(len(row["tgt_subwords"]) > len(row["tgt_tokens"]) for row in rows) >= len(rows) // 2  # cut words
        references = _lines(folder / "test.ref.de")
        assert references == [row["tgt_text"] for row in rows]
        (folder / "hyp.test.tok").write_text("".join(line + "\n" for line in pieces), encoding="utf-8")
        readme = (folder / "README.md").read_text(encoding="utf-8")
        result = run_scoring(folder, scoring_lines(readme))
        assert result.returncode == 0, result.stderr
        words = [detokenizer.detokenize(row["tgt_tokens"]) for row in rows]
        hypotheses = _lines(folder / "hyp.test.de")
        assert hypotheses == words  # the parser's words, detokenized: the pieces were joined
        joined = re.search(r"< \$E/hyp\.test\.tok > \$E/(\S+)", readme).group(1)  # the joining stage's output
        assert [line.split() for line in _lines(folder / joined)] == [row["tgt_tokens"] for row in rows]
        assert [pieces_to_tokens(line.split(), marker, kind) for line in pieces] == [row["tgt_tokens"] for row in rows]
        umlauts += sum(any(c in word for c in "äöüßÄÖÜ") for row in rows for word in row["tgt_tokens"])
        scores = {score["name"]: score["score"] for score in json.loads(result.stdout)}
        bleu = sacrebleu.corpus_bleu(hypotheses, [references])
        assert scores["BLEU"] == round(bleu.score, 1)
        assert scores["chrF2"] == round(sacrebleu.corpus_chrf(hypotheses, [references]).score, 1)
        assert (scores["BLEU"] == 100.0) == (hypotheses == references)
        apart = [detokenizer.detokenize(line.replace("\u2581", " ").split()) for line in pieces]  # not joined
        assert sacrebleu.corpus_bleu(apart, [references]).score < bleu.score
        same = sum(h == r for h, r in zip(hypotheses, references, strict=True))
        print(f"\n{scheme} {folder.name} ({split} rows): {len(rows)} hypotheses, {same} equal to their reference; "
              f"BLEU {scores['BLEU']}, chrF {scores['chrF2']}; the pieces left apart: BLEU "
              f"{sacrebleu.corpus_bleu(apart, [references]).score:.1f}")
    assert umlauts >= 10


@pytest.mark.slow
def test_hf_tokenizer_dataset_without_its_marker_record_is_refused_in_one_line(hf_tokenizer_dataset, tmp_path):
    """A manifest without `signature.subword_marker` (an hf-tokenizer dataset converted before the record): the
    README could not join its pieces, so the export stops in one line naming the split, and writes nothing."""
    _, dataset = hf_tokenizer_dataset
    copy = tmp_path / "dataset"
    shutil.copytree(dataset, copy)
    manifest = json.loads((copy / "test" / "manifest.json").read_text(encoding="utf-8"))
    del manifest["signature"]["subword_marker"]
    (copy / "test" / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(InputError, match="subword_marker") as refused:
        export_split(str(copy / "test"), str(tmp_path / "export"))
    assert "\n" not in str(refused.value) and str(copy / "test") in str(refused.value)
    assert not (tmp_path / "export").exists()
