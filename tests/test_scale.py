"""Scale: WMT-like synthetic lengths, the work folder after convert, compact shards, flat trainer storage."""

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from synprep.conllu import read_trees
from synprep.synth import WMT_MAX_TOKENS, SynthConfig, write_corpus
from synprep.trees import is_projective

# ------------------------------------------------------------------------------------- synth --lengths wmt


def test_synth_wmt_lengths_are_wmt_like_and_still_the_same_tree(tmp_path):
    write_corpus(str(tmp_path / "wmt"), 3000, 4, SynthConfig(lengths="wmt"))
    write_corpus(str(tmp_path / "short"), 3000, 4, SynthConfig())
    lengths = {}
    for name in ("wmt", "short"):
        src = list(read_trees(str(tmp_path / name / "train.src.conllu")))
        tgt = list(read_trees(str(tmp_path / name / "train.tgt.conllu")))
        lengths[name] = np.array([len(tree) for tree in src])
        for s, t in zip(src, tgt):
            assert len(s) == len(t) and Counter(s.labels) == Counter(t.labels)
            assert is_projective(s.heads) == is_projective(t.heads)
            assert s.heads.count(0) == 1
    wmt, short = lengths["wmt"], lengths["short"]
    assert 22 <= wmt.mean() <= 29 and wmt.max() <= WMT_MAX_TOKENS  # WMT14 En-De: ~25 tokens on average
    assert (wmt >= 60).sum() >= 30 and np.median(wmt) < wmt.mean()  # a long right tail
    assert short.mean() < 15
    config = json.loads((tmp_path / "wmt" / "synth.json").read_text())["config"]
    assert config["lengths"] == "wmt" and "--lengths wmt" in (tmp_path / "wmt" / "pipeline.toml").read_text()


REAL_ENGLISH = ("wmt-news-*/*.en", "europarl10k-enro/train.en", "opennmt-toy-ende/src-*.txt", "kftt30k-enja/train.en")


def _distinct(lines, marks):
    seen, found = set(), {}
    for count, line in enumerate(lines, 1):
        seen.update(line.split())
        if count in marks:
            found[count] = len(seen)
    return found


def test_synth_zipf_vocabulary_grows_as_real_text_and_keeps_the_trees(tmp_path):
    for name in ("a", "b"):
        write_corpus(str(tmp_path / name), 300, 1, SynthConfig(lengths="wmt", vocabulary="zipf"))
    for name in ("train.src", "train.tgt.conllu", "lexicon.tsv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    write_corpus(str(tmp_path / "z"), 3000, 1, SynthConfig(lengths="wmt", vocabulary="zipf"))
    lines = (tmp_path / "z" / "train.src").read_text(encoding="utf-8").splitlines()
    types = _distinct(lines, (900, 2700))
    heaps = np.log(types[2700] / types[900]) / np.log(3)
    assert 0.4 < heaps < 0.65, types  # Heaps' law, as real text (~0.5); the word lists alone stay at ~100 words
    counts = np.array(sorted(Counter(w for line in lines for w in line.split()).values(), reverse=True))
    assert (counts == 1).mean() > 0.4 and counts[0] > 100 * counts[len(counts) // 2]  # Zipf: a long tail of rare words
    src = list(read_trees(str(tmp_path / "z" / "train.src.conllu")))
    tgt = list(read_trees(str(tmp_path / "z" / "train.tgt.conllu")))
    lexicon = dict(line.split("\t")[:2] for line in (tmp_path / "z" / "lexicon.tsv").read_text().splitlines())
    assert len(lexicon) > 5000
    for s, t in zip(src, tgt):
        assert len(s) == len(t) and Counter(s.labels) == Counter(t.labels) and s.heads.count(0) == 1
        assert " ".join(s.tokens) == s.text
    assert sum(sorted(lexicon[w] for w in s.tokens) == sorted(t.tokens) for s, t in zip(src, tgt)) > 0.95 * len(src)
    real = sorted(f for pattern in REAL_ENGLISH for f in (SHARED / "data" / "parallel").glob(pattern))
    if real:  # the fit: distinct words per pairs within 15% of pooled real English
        import random
        import re

        pool = [line.strip() for f in real for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
        random.Random(1).shuffle(pool)
        expected = _distinct((" ".join(re.findall(r"\w+|[^\w\s]", line)) for line in pool[:2700]), (900, 2700))
        for n in (900, 2700):
            assert abs(types[n] / expected[n] - 1) < 0.15, (types, expected)


def test_synth_lengths_choice_is_checked():
    with pytest.raises(Exception, match="--lengths must be one of short, wmt"):
        SynthConfig(lengths="long")


# ------------------------------------------------------------------------------ the work folder after convert

BIN = Path(sys.executable).parent


def synprep(*args, check=True):
    result = subprocess.run([str(BIN / "synprep"), *map(str, args)], capture_output=True, text=True)
    assert not check or result.returncode == 0, result.stderr[-2000:]
    return result


def shard_files(out):
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(Path(out).glob("*/part-*.arrow"))}


@pytest.fixture(scope="module")
def synth_corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("synth")
    synprep("synth", "--pairs", 300, "--seed", 1, "-o", folder)
    return folder / "pipeline.toml"


def test_work_folder_goes_after_a_finished_convert_unless_kept(tmp_path, synth_corpus):
    out, kept = tmp_path / "out", tmp_path / "kept"
    synprep("convert", synth_corpus, "--output", out, "--workers", 2)
    assert not (out / ".work").exists() and not (out / ".work.removing").exists()
    assert json.loads((out / "run.json").read_text())["fingerprint"]
    synprep("convert", synth_corpus, "--output", kept, "--workers", 1, "--keep-work")
    assert list((kept / ".work" / "train").glob("piece-*.src.conllu")) and (kept / ".work" / "config.json").exists()
    assert shard_files(out) == shard_files(kept)
    # a finished output: --resume has nothing to do (same summary, shards untouched), another configuration is
    # refused, --overwrite starts again
    before = {p: p.stat().st_mtime_ns for p in out.glob("*/part-*.arrow")}
    again = synprep("convert", synth_corpus, "--output", out, "--resume")
    assert "train" in again.stdout and not (out / ".work").exists()
    assert before == {p: p.stat().st_mtime_ns for p in out.glob("*/part-*.arrow")}
    changed = synprep("convert", synth_corpus, "--output", out, "--resume", "--shard-size", 7, check=False)
    assert changed.returncode == 2 and "different configuration" in changed.stderr
    synprep("convert", synth_corpus, "--output", out, "--overwrite", "--shard-size", 100)
    assert len(list((out / "train").glob("part-*.arrow"))) == 3 and not (out / ".work").exists()


def test_an_interrupted_removal_is_finished_by_resume(tmp_path, synth_corpus):
    out = tmp_path / "out"
    synprep("convert", synth_corpus, "--output", out, "--workers", 1, "--keep-work")
    reference = shard_files(out)
    os.replace(out / ".work", out / ".work.removing")  # killed while removing: the rename had happened
    shutil.rmtree(out / ".work.removing" / "train")
    synprep("convert", synth_corpus, "--output", out, "--resume")
    assert not (out / ".work.removing").exists() and shard_files(out) == reference


# ------------------------------------------------------------------------------------ compact shards (format 2)

SHARDS_V1 = Path(__file__).parent / "data" / "shards-v1"  # `synprep synth --pairs 60 --seed 1`, tgt distances
# too, shard_size 25, converted by synprep with shard format 1 (strings as strings, distances token x token)


@pytest.fixture(scope="module")
def v2_of_the_v1_corpus(tmp_path_factory):
    """The corpus of tests/data/shards-v1 converted again by this synprep (format 2)."""
    folder = tmp_path_factory.mktemp("v2")
    write_corpus(str(folder / "corpus"), 60, 1)
    path = folder / "corpus" / "pipeline.toml"
    text = path.read_text().replace('tgt = ["parents", "transitions", "labels"]',
                                    'tgt = ["parents", "distances", "transitions", "labels"]')
    path.write_text(text.replace("shard_size = 10000", "shard_size = 25"))
    synprep("convert", path, "--output", folder / "shards", "--workers", 1)
    return folder / "shards"


def decoded(table):
    """A table with its dictionary columns decoded to strings and no field metadata."""
    import pyarrow as pa

    columns, fields = [], []
    for field, column in zip(table.schema, table.columns):
        kind = field.type
        if pa.types.is_list(kind) and pa.types.is_dictionary(kind.value_type):
            kind = pa.list_(pa.string())
            column = column.cast(kind)
        columns.append(column)
        fields.append(pa.field(field.name, kind, field.nullable))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


@pytest.mark.parametrize("split", ["train", "valid", "test"])
def test_format_2_holds_everything_format_1_held(v2_of_the_v1_corpus, split):
    from synprep.features import forest_tree_distances
    from synprep.shards import open_split

    old, new = open_split(str(SHARDS_V1 / split)), open_split(str(v2_of_the_v1_corpus / split))
    assert (old.manifest.schema_version, new.manifest.schema_version) == (1, 2)
    old_table, new_table = old.table(), new.table()
    distances = [c for c in old_table.column_names if c.endswith("_distances")]
    assert distances == ["src_distances", "tgt_distances"] and not set(distances) & set(new_table.column_names)
    assert decoded(new_table).equals(decoded(old_table.drop_columns(distances)))
    for side in ("src", "tgt"):  # the distances, made from the heads by the one implementation
        heads = old_table.column(f"{side}_heads").combine_chunks()
        sizes = np.asarray(heads.value_lengths(), np.int64)
        made = forest_tree_distances(heads.flatten().to_numpy(), sizes)
        assert np.array_equal(made, old_table.column(f"{side}_distances").combine_chunks().flatten().to_numpy())
    assert [r.sides for r in old.rows()] == [
        {side: {**values, **({"distances": old_row.sides[side]["distances"]})} for side, values in r.sides.items()}
        for r, old_row in zip(new.rows(), old.rows())]


def test_the_trainer_reads_both_formats_alike(v2_of_the_v1_corpus):
    from syntrain.dataset import ParallelData, read_split
    from syntrain.switches import declared, target_column
    from syntrain.switches.label_embedding import label_vocabulary
    from syntrain.vocab import Vocab

    tables = {name: read_split(str(root / "train"))[0] for name, root in (("v1", SHARDS_V1), ("v2",
                                                                                   v2_of_the_v1_corpus))}
    vocabs = {name: Vocab.build([table], decoder_target=target_column("transitions"))
              for name, table in tables.items()}
    assert vocabs["v1"].itos == vocabs["v2"].itos
    labels = label_vocabulary(tables["v1"])
    assert labels == label_vocabulary(tables["v2"])
    features = {declared(name): why for name, why in {"distances": "a", "src_labels": "b", "src_parent_first": "c",
                                                      "tgt_parent_first": "d", "src_parent_mid": "e"}.items()}
    batches = {}
    for name, root in (("v1", SHARDS_V1), ("v2", v2_of_the_v1_corpus)):
        for target in ("text", "transitions"):
            data = ParallelData(str(root / "train"), vocabs["v1"], batch_columns=features,
                                decoder_target=target_column(target), data_options={"source_labels": labels})
            batches[name, target] = [data.collate(rows) for rows in data.batches(300, seed=3)]
    for target in ("text", "transitions"):
        for a, b in zip(batches["v1", target], batches["v2", target], strict=True):
            for name in ("src", "tgt_in", "tgt_out"):
                assert np.array_equal(getattr(a, name).numpy(), getattr(b, name).numpy()), name
            for name in ("src_parent_mid", "distances", "src_parent_first", "tgt_parent_first", "src_labels"):
                assert np.array_equal(a.inputs[name].numpy(), b.inputs[name].numpy()), name
    first = batches["v2", "text"][0].inputs
    assert first["src_labels"].max() >= 2 and first["distances"].max() >= 2


def test_third_party_readers_decode_format_2(v2_of_the_v1_corpus):
    import datasets
    import pandas
    import polars
    import pyarrow as pa

    path = v2_of_the_v1_corpus / "train" / "part-00001.arrow"  # the second shard: its own dictionaries
    table = pa.ipc.open_stream(pa.memory_map(str(path))).read_all()
    expected = decoded(table).to_pylist()
    frame = table.to_pandas()
    assert isinstance(frame, pandas.DataFrame) and len(frame) == len(expected)
    assert list(frame["tgt_transitions"][0]) == expected[0]["tgt_transitions"]
    assert list(frame["src_labels"][0]) == expected[0]["src_labels"]
    polar = polars.read_ipc_stream(str(path))
    assert polar["src_labels"].to_list() == [r["src_labels"] for r in expected]
    assert polar["tgt_subwords"].to_list() == [r["tgt_subwords"] for r in expected]
    hf = datasets.Dataset.from_file(str(path))
    assert hf["tgt_transitions"] == [r["tgt_transitions"] for r in expected]
    assert hf["src_tokens"] == [r["src_tokens"] for r in expected]
    duckdb = pytest.importorskip("duckdb")
    rows = duckdb.sql("select src_labels from table").fetchall()
    assert [list(r[0]) for r in rows] == [r["src_labels"] for r in expected]


def test_a_newer_format_is_a_one_line_error_naming_the_version(tmp_path):
    shutil.copytree(SHARDS_V1 / "train", tmp_path / "train")
    manifest = json.loads((tmp_path / "train" / "manifest.json").read_text())
    (tmp_path / "train" / "manifest.json").write_text(json.dumps({**manifest, "schema_version": 3}))
    result = synprep("inspect", tmp_path / "train", check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "shard format version 3: this synprep reads versions 1, 2" in result.stderr


# ------------------------------------------------------------------------------ the trainer's flat storage


def reference_batches(lengths, rows, max_tokens):
    """The row-by-row greedy cut of syntrain.batch.batch_bounds before it was computed per run of equal lengths."""
    batches, start, longest = [], 0, 0
    for i, row in enumerate(rows):
        longest_with = max(longest, int(lengths[row]))
        if i > start and (i - start + 1) * longest_with > max_tokens:
            batches.append(rows[start:i])
            start, longest_with = i, int(lengths[row])
        longest = longest_with
    if start < len(rows):
        batches.append(rows[start:])
    return batches


@pytest.mark.parametrize("seed", range(6))
def test_batches_are_cut_as_before(seed):
    from syntrain.batch import batch_bounds

    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 3000))
    lengths = rng.integers(1, [5, 60, 300, 1000, 20, 200][seed], size=n)
    rows = np.argsort(lengths, kind="stable")
    for max_tokens in (1, 7, 64, 300, 1024, 4096):
        expected = reference_batches(lengths, rows, max_tokens)
        got = np.split(rows, batch_bounds(lengths[rows], max_tokens)) if n else []
        assert [b.tolist() for b in got] == [b.tolist() for b in expected]


def test_same_batch_order_for_the_same_seed(v2_of_the_v1_corpus):
    from syntrain.dataset import ParallelData, read_split
    from syntrain.vocab import Vocab

    vocab = Vocab.build([read_split(str(v2_of_the_v1_corpus / "train"))[0]])
    data = ParallelData(str(v2_of_the_v1_corpus / "train"), vocab)
    length = np.maximum(data.src_len, data.tgt_len)
    for seed, epoch, max_tokens in ((1, 0, 200), (1, 3, 200), (7, 0, 64), (7, 2, 500)):
        rng = np.random.default_rng([seed, epoch])  # as syntrain.dataset.ParallelData.batches shuffles
        rows = rng.permutation(data.keep)
        rows = rows[np.argsort(length[rows], kind="stable")]
        expected = reference_batches(length, rows, max_tokens)
        expected = [expected[i] for i in rng.permutation(len(expected))]
        got = data.batches(max_tokens, seed=seed, epoch=epoch)
        assert [b.tolist() for b in got] == [b.tolist() for b in expected]


def shard_pages_resident(split):
    """KiB resident in this process of the mappings of `split`'s shard files (Linux /proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps", encoding="utf-8") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields[0]) > 8 and ":" not in fields[0]:  # a mapping's header line
                inside = len(fields) >= 6 and fields[-1].startswith(str(split))
            elif inside and fields[0] == "Rss:":
                total += int(fields[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads /proc/self/smaps (Linux)")
def test_the_trainer_holds_its_arrays_not_the_shards(v2_of_the_v1_corpus, monkeypatch):
    import syntrain.arrow as arrow_module
    from syntrain.dataset import ParallelData, read_split
    from syntrain.switches import declared, target_column
    from syntrain.vocab import Vocab

    split = v2_of_the_v1_corpus / "train"
    features = {declared(name): why for name, why in {"distances": "a", "src_labels": "b", "src_parent_first": "c",
                                                      "tgt_parent_first": "d", "src_parent_mid": "e"}.items()}
    made = {}
    for every in (1, 10**6):  # pages given back after each chunk, or only at the end of each column
        monkeypatch.setattr(arrow_module, "RELEASE_EVERY", every)
        table, manifest = read_split(str(split))
        vocab = Vocab.build([table], decoder_target=target_column("transitions"))
        made[every] = ParallelData(str(split), vocab, batch_columns=features, split=(table, manifest),
                                   data_options={"source_labels": ["nsubj", "obj"]})
        assert shard_pages_resident(split) == 0  # every column read was copied out, its pages given back
        assert made[every].table.num_rows > 0 and shard_pages_resident(split) == 0
    one, other = made.values()
    for name in ("src_ids", "src_off", "tgt_ids", "tgt_off"):
        assert np.array_equal(getattr(one.encoded, name), getattr(other.encoded, name)), name
    def arrays(loaded):  # the numpy arrays a batch column loaded, nested tuples flattened
        return [loaded] if isinstance(loaded, np.ndarray) else [a for part in loaded for a in arrays(part)]

    for name, (_, loaded) in one.collator.loaded.items():
        mine, theirs = arrays(loaded), arrays(other.collator.loaded[name][1])
        assert len(mine) == len(theirs) and all(np.array_equal(a, b) for a, b in zip(mine, theirs)), name
    subwords = table.column("src_subwords").to_pylist()
    encoded = one.encoded
    assert [vocab.itos[i] for i in encoded.src_ids[encoded.src_off[3] : encoded.src_off[4]]] == subwords[3]
    assert shard_pages_resident(split) > 0  # the check can see pages: reading the texts mapped some


# ------------------------------------------------------------------------- BPE learned from workers' counts

SHARED = Path(os.environ.get("SYNPREP_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))
MULTI30K = SHARED / "data" / "parallel" / "multi30k"


def subword_nmt_learn(tmp, inputs, symbols):
    subprocess.run([str(BIN / "subword-nmt"), "learn-joint-bpe-and-vocab", "-i", *map(str, inputs), "-s",
                    str(symbols), "-o", str(tmp / "ref.codes"), "--write-vocabulary",
                    *(str(tmp / f"ref.vocab{i}") for i in range(len(inputs)))], check=True, capture_output=True)
    return [(tmp / "ref.codes").read_bytes()] + [(tmp / f"ref.vocab{i}").read_bytes() for i in range(len(inputs))]


def test_convert_learns_subword_nmt_codes_from_the_workers_counts(tmp_path):
    write_corpus(str(tmp_path / "corpus"), 4000, 3, SynthConfig(lengths="wmt"))
    synprep("convert", tmp_path / "corpus" / "pipeline.toml", "--output", tmp_path / "out", "--workers", 2)
    ours = [(tmp_path / "out" / name).read_bytes() for name in ("codes.bpe", "vocab.src", "vocab.tgt")]
    # every pair is kept: the token files subword-nmt would read are the corpus' tokenized text
    assert ours == subword_nmt_learn(tmp_path, [tmp_path / "corpus" / "train.src",
                                                tmp_path / "corpus" / "train.tgt"], 300)


@pytest.mark.skipif(not (MULTI30K / "train.en").exists(), reason="../shared Multi30k not present")
def test_counts_merged_from_pieces_learn_subword_nmt_codes_on_real_text(tmp_path):
    from synprep.bpe_learn import count_words, learn_joint_from_counts, merge_counts

    inputs = []
    for lang in ("en", "de"):
        with open(MULTI30K / f"train.{lang}", encoding="utf-8") as handle:
            text = "".join(line for _, line in zip(range(3000), handle))
        (tmp_path / f"train.{lang}").write_text(text, encoding="utf-8")
        inputs.append(tmp_path / f"train.{lang}")
    per_input = []
    for path in inputs:  # counted in pieces of uneven size, as the workers do, then merged once
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        cuts = [0, 1, 17, 400, 1000, 2999, len(lines)]
        per_input.append(merge_counts(count_words("".join(lines[a:b])) for a, b in zip(cuts, cuts[1:])))
    learn_joint_from_counts(per_input, str(tmp_path / "codes"), 2000, [str(tmp_path / "v0"), str(tmp_path / "v1")])
    ours = [(tmp_path / name).read_bytes() for name in ("codes", "v0", "v1")]
    assert ours == subword_nmt_learn(tmp_path, inputs, 2000)


def test_pairs_over_max_len_are_counted():
    from syntrain.dataset import ParallelData, read_split
    from syntrain.vocab import Vocab

    split = str(SHARDS_V1 / "train")
    vocab = Vocab.build([read_split(split)[0]])
    every = ParallelData(split, vocab)
    longest = np.maximum(every.src_len, every.tgt_len)
    limit = int(np.median(longest))
    data = ParallelData(split, vocab, max_len=limit)
    assert every.skipped_long == 0 and 0 < data.skipped_long == int((longest > limit).sum())
    assert len(data) + data.skipped_long == len(every)


# ------------------------------------------------------------------------------------ progress on a terminal


def _on_terminal(command, interrupt_at=None):
    """Run `command` with stderr a terminal (160 columns): its exit code and what it wrote there; with
    `interrupt_at`, Ctrl-C (SIGINT to its process group) once that pattern has been written."""
    import fcntl
    import pty
    import re
    import signal
    import struct
    import termios

    terminal, stderr = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
    os.close(stderr)
    written, sent = b"", False
    while True:
        try:
            chunk = os.read(terminal, 65536)
        except OSError:  # the command has exited
            break
        if not chunk:
            break
        written += chunk
        if interrupt_at and not sent and re.search(interrupt_at.encode(), written):
            os.killpg(process.pid, signal.SIGINT)
            sent = True
    os.close(terminal)
    return process.wait(timeout=120), written.decode("utf-8", "replace")


def test_convert_on_a_terminal_shows_the_merges_and_nothing_after_ctrl_c(tmp_path):
    write_corpus(str(tmp_path / "s"), 1200, 3, bpe_symbols=200)
    code, shown = _on_terminal([str(BIN / "synprep"), "convert", str(tmp_path / "s" / "pipeline.toml"),
                                "--output", str(tmp_path / "out"), "--workers", "1"])
    assert code == 0 and "learn BPE: 100%" in shown and "200/200 [" in shown and "features+shards train" in shown
    write_corpus(str(tmp_path / "big"), 6000, 3)
    code, shown = _on_terminal([str(BIN / "synprep"), "convert", str(tmp_path / "big" / "pipeline.toml"),
                                "--output", str(tmp_path / "out2"), "--workers", "1", "--shard-size", "500"],
                               interrupt_at=r"filter\+parse: [1-9]")
    assert code == 130, shown
    last = shown.rstrip("\r\n").splitlines()[-1]
    assert last.startswith("synprep: interrupted; the finished pieces are kept"), shown[-500:]


def test_bpe_is_learned_apart_with_its_errors_raised_here(tmp_path):
    """convert learns BPE in a spawned process: the codes come back as the driver's would, and a bad count file
    is the driver's one-line InputError, naming the file."""
    from synprep.convert.bpe_codes import _learn, apart
    from synprep.errors import InputError

    piece = tmp_path / "piece.json"
    piece.write_text(json.dumps({"src_counts": {"low": 5, "lower": 2}, "tgt_counts": {"newest": 6, "wider": 3}}))
    apart(_learn, [str(piece)], None, str(tmp_path / "codes.bpe"), 10,
          [str(tmp_path / "vocab.src"), str(tmp_path / "vocab.tgt")], 2, False, "train")
    from synprep.bpe_learn import learn_joint_from_counts

    learn_joint_from_counts([Counter({"low": 5, "lower": 2}), Counter({"newest": 6, "wider": 3})],
                            str(tmp_path / "here.bpe"), 10, reference=True)
    assert (tmp_path / "codes.bpe").read_bytes() == (tmp_path / "here.bpe").read_bytes()
    assert (tmp_path / "vocab.src").read_text() and (tmp_path / "vocab.tgt").read_text()
    piece.write_text(json.dumps({"counts": {}}))
    with pytest.raises(InputError, match="older synprep") as raised:
        apart(_learn, [str(piece)], None, str(tmp_path / "again.bpe"), 10, [], 2, False, "train")
    assert raised.value.path == str(piece)

