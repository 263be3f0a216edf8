"""`synprep align` end to end through the installed command."""

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from synprep import features as F
from synprep.schema import align_schema, parse_features

BIN = Path(sys.executable).parent


def row(i, form, head, label):
    return f"{i}\t{form}\t_\t_\t_\t_\t{head}\t{label}\t_\t_"


def sentence(words, sent_id=None):
    lines = [f"# sent_id = {sent_id}"] if sent_id else []
    return "\n".join(lines + [row(i, *w) for i, w in enumerate(words, 1)]) + "\n\n"


JOHN = [("John", 2, "nsubj"), ("put", 0, "root"), ("the", 4, "det"), ("coals", 2, "obj"),
        ("out", 2, "compound:prt")]
# "A hearing is scheduled on the issue today": the classic non-projective example
NONPROJ = [("A", 2, "det"), ("hearing", 4, "nsubj"), ("is", 4, "aux"), ("scheduled", 0, "root"),
           ("on", 7, "case"), ("the", 7, "det"), ("issue", 2, "nmod"), ("today", 4, "obl:tmod")]


@pytest.fixture
def treebank(tmp_path):
    path = tmp_path / "in.conllu"
    path.write_text(sentence(JOHN, "john") + sentence(NONPROJ) + sentence([("10 000", 2, "nummod"),
                                                                           ("Euro", 0, "root")], "n"))
    codes = tmp_path / "codes.bpe"
    codes.write_text("#version: 0.2\nJ o\nJo h\np u\npu t</w>\nt h\nth e</w>\nc o\na l\no u\nou t</w>\n")
    return path, codes


def synprep(*args, stdin=None):
    return subprocess.run([str(BIN / "synprep"), *map(str, args)], capture_output=True, text=True, input=stdin)


def test_jsonl_records(treebank):
    path, codes = treebank
    result = synprep("align", "--conllu", path, "--bpe-codes", codes, "--features",
                     "parents,distances,transitions,labels", "--format", "jsonl", "-o", "-")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["id"] for r in records] == [0, 1, 2] and [r["sent_id"] for r in records] == ["john", None, "n"]
    john = records[0]
    assert john["subwords"] == ["Joh@@", "n", "put", "the", "co@@", "al@@", "s", "out"]
    assert john["subword_token"] == [0, 0, 1, 2, 3, 3, 3, 4]
    assert john["parent_mid"] == [2.0, 2.0, 2.0, 5.0, 2.0, 2.0, 2.0, 2.0]
    assert john["parent_first"] == [2, 2, 2, 4, 2, 2, 2, 2]
    assert john["distances"][:5] == [0, 1, 3, 2, 2] and len(john["distances"]) == 25
    assert " ".join(john["transitions"]) == ("Joh@@ n put LEFT-ARC:nsubj the co@@ al@@ s LEFT-ARC:det "
                                             "RIGHT-ARC:obj out RIGHT-ARC:compound:prt")
    assert john["labels"][-1] == "compound:prt" and john["projective"] is True
    assert records[1]["projective"] is False and records[1]["transitions"] is None  # default policy keep
    assert records[2]["tokens"] == ["10 000", "Euro"]
    number = [p for p, t in zip(records[2]["subwords"], records[2]["subword_token"]) if t == 0]
    assert "".join(number).replace("@@", "") == "10\u2581000" and not any(" " in p for p in number)
    assert "3 written, 1 non-projective kept" in result.stderr


def test_default_features_and_policies(treebank):
    path, _ = treebank
    default = [json.loads(x) for x in synprep("align", "--conllu", path).stdout.splitlines()]
    assert "distances" not in default[0] and {"parent_mid", "transitions", "labels"} <= set(default[0])
    lifted = [json.loads(x) for x in synprep("align", "--conllu", path, "--non-projective", "lift",
                                             "--root", "keep").stdout.splitlines()]
    sequence = lifted[1]["transitions"]
    assert sequence[-1] == "RIGHT-ARC:root"
    _, _, heads, _ = F.from_transitions(sequence, "keep")
    assert heads == [2, 4, 4, 0, 7, 7, 4, 4]  # 'issue' lifted from 'hearing' to 'scheduled'
    assert lifted[1]["heads"] == [h for _, h, _ in NONPROJ]  # heads keep the original tree
    dropped = synprep("align", "--conllu", path, "--non-projective", "drop")
    assert [json.loads(x)["id"] for x in dropped.stdout.splitlines()] == [0, 2]
    assert "1 dropped" in dropped.stderr
    stripped = [json.loads(x) for x in synprep("align", "--conllu", path, "--strip-subtypes").stdout.splitlines()]
    assert stripped[0]["labels"][-1] == "compound" and stripped[0]["transitions"][-1] == "RIGHT-ARC:compound"


def test_arrow_stream_output(treebank, tmp_path):
    path, codes = treebank
    out = tmp_path / "out.arrow"
    result = synprep("align", "--conllu", path, "--bpe-codes", codes, "--features", "parents,distances",
                     "--format", "arrow", "-o", out)
    assert result.returncode == 0, result.stderr
    table = pa.ipc.open_stream(pa.memory_map(str(out))).read_all()
    assert table.schema == align_schema(parse_features("parents,distances"))
    assert table.num_rows == 3
    assert table.column("parent_mid").type == pa.list_(pa.float32())
    assert table.column("distances")[0].as_py()[:5] == [0, 1, 3, 2, 2]
    assert table.column("subword_token")[0].as_py() == [0, 0, 1, 2, 3, 3, 3, 4]


def test_pascal_and_transitions_exports(treebank):
    path, codes = treebank
    pascal = synprep("align", "--conllu", path, "--bpe-codes", codes, "--format", "pascal").stdout.splitlines()
    assert pascal[0] == "2.0 2.0 2.0 5.0 2.0 2.0 2.0 2.0" and len(pascal) == 3
    transitions = synprep("align", "--conllu", path, "--format", "transitions").stdout.splitlines()
    assert transitions[0].startswith("John put LEFT-ARC:nsubj") and transitions[1] == ""


@pytest.mark.parametrize("content, args, message", [
    (sentence(JOHN) + "1\tx\t_\n", [], "in.conllu:7 (sentence #2): expected 10 tab-separated columns, found 3"),
    (sentence([("a", 2, "x"), ("b", 1, "y")]), [], "in.conllu:1 (sentence #1): no root"),
    (sentence(JOHN), ["--features", "parents,syntax"], "unknown feature(s) syntax"),
    (sentence(JOHN), ["--bpe-codes", "/nonexistent/codes"], "/nonexistent/codes: no such file"),
    ("", [], "empty CoNLL-U file"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, content, args, message):
    path = tmp_path / "in.conllu"
    path.write_text(content)
    result = synprep("align", "--conllu", path, *args)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize("fmt", ["jsonl", "arrow"])
def test_workers_give_identical_output_and_errors_keep_line_numbers(tmp_path, fmt):
    from synprep.align import FeatureConfig, align_file
    from synprep.errors import InputError

    path = tmp_path / "many.conllu"
    path.write_text("".join(sentence(JOHN if i % 3 else NONPROJ, f"s{i}") for i in range(11)) + "\n\n")
    config = FeatureConfig(parse_features("parents,distances,transitions,labels"))
    outputs = []
    for workers in (1, 2):
        out = tmp_path / f"out{workers}.{fmt}"
        summary = align_file(str(path), str(out), config, None, fmt, workers=workers, sentences_per_chunk=2)
        assert (summary.sentences, summary.written, summary.non_projective) == (11, 11, 4)
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    if fmt == "jsonl":
        assert [json.loads(x)["id"] for x in outputs[0].decode().splitlines()] == list(range(11))
    broken = tmp_path / "broken.conllu"
    lines = path.read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("# sent_id = s8")]
    bad_line = starts[0] + 3  # 1-based number of the sentence's third line (its 2nd word)
    lines[bad_line - 1] = lines[bad_line - 1].replace("\t0\troot", "\t9\troot")
    broken.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as err:
        align_file(str(broken), str(tmp_path / "x"), config, None, fmt, workers=2, sentences_per_chunk=2)
    assert str(err.value).startswith(f"{broken}:{bad_line} (sentence s8): head 9 out of range")


def test_spawned_workers_rebuild_the_callers_bpe_options(tmp_path, treebank, monkeypatch):
    """Workers started with spawn (macOS, Windows) load the codes themselves, with the caller's merges,
    separator and glossaries: the same output as in-process."""
    import multiprocessing

    import synprep.parallel
    from synprep.align import FeatureConfig, align_file
    from synprep.bpe import Bpe

    path, codes = treebank
    bpe = Bpe(str(codes), merges=6, separator="##", glossaries=["put"])
    config = FeatureConfig(parse_features("parents,labels"))
    monkeypatch.setattr(synprep.parallel, "pool_context", lambda: multiprocessing.get_context("spawn"))
    outputs = []
    for workers in (1, 2):
        out = tmp_path / f"out{workers}.jsonl"
        align_file(str(path), str(out), config, bpe, "jsonl", workers=workers, sentences_per_chunk=1)
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1]
    words = json.loads(outputs[0].splitlines()[0])["subwords"]
    assert "put" in words and any(w.endswith("##") for w in words)  # glossary kept whole, separator used


MULTIWORD = ("# sent_id = mw\n# text = zum Haus\n1-2\tzum\t_\t_\t_\t_\t_\t_\t_\t_\n" + row(1, "zu", 3, "case") + "\n"
             + row(2, "dem", 3, "det") + "\n" + row(3, "Haus", 0, "root") + "\n\n")
EMPTY_NODE = sentence(JOHN).replace("\n" + row(3, "the", 4, "det"),
                                    "\n2.1\tx\t_\t_\t_\t_\t_\t_\t_\t_\n" + row(3, "the", 4, "det"))
CYCLE = sentence([("a", 2, "x"), ("b", 3, "y"), ("c", 2, "z"), ("d", 0, "root")])
BROKEN = [
    sentence(JOHN) + "1\tx\t_\n",  # column count
    sentence(JOHN).replace("\t4\tdet", "\tfour\tdet"),  # head not an integer
    sentence(JOHN).replace("\t4\tdet", "\t+4\tdet"),
    sentence(JOHN).replace("\t4\tdet", "\t9\tdet"),  # out of range
    sentence(JOHN).replace("\t4\tdet", "\t3\tdet"),  # own head
    sentence(JOHN).replace("\t2\tnsubj", "\t0\tnsubj"),  # two roots
    CYCLE,
    sentence(JOHN).replace("3\tthe", "4\tthe"),  # IDs out of sequence
    sentence(JOHN).replace(row(3, "the", 4, "det"), row(3, "the", 4, "det") + "\n# late comment"),
    sentence(JOHN).replace("\t4\tdet\t_\t_", "\t4\tdet\t_\t_\t_"),  # 11 columns on one line ...
    sentence(JOHN).replace("\t2\tobj\t_\t_", "\t2\tobj\t_"),  # ... and 9 on another
    MULTIWORD.replace("1-2\tzum", "1-x\tzum"),  # bad multiword IDs
    MULTIWORD.replace("1-2\tzum", "2-1\tzum"),
    MULTIWORD.replace("1-2\tzum", "2-3\tzum"),
    MULTIWORD.replace("\t3\tdet", "\t7\tdet"),  # multiword sentence with a head out of range ...
    MULTIWORD.replace("\t3\tcase", "\t2\tcase").replace("\t3\tdet", "\t1\tdet"),  # ... with a cycle
    MULTIWORD.replace("1-2\tzum\t_", "1-2\tzum"),  # multiword line with 9 columns
    "# only a comment\n\n",  # a sentence without words
    EMPTY_NODE.replace("2.1\t", "2.x\t"),  # an empty node ID that is not N.M
    sentence(JOHN).replace("\t4\tdet", "\t4\tdet x"),  # a DEPREL with a space ...
    sentence(JOHN).replace("\t4\tdet", "\t4\t"),  # ... an empty one
    sentence(JOHN).replace("\t4\tdet", "\t\u00b2\tdet"),  # a head that str.isdigit() takes and int() refuses
]


def slow_trees(text, first_line=1, first_index=0):
    from synprep.conllu import parse_conllu_lines, to_tree

    return [to_tree(s, "x.conllu") for s in parse_conllu_lines(text.split("\n"), "x.conllu", False,
                                                                  first_line, first_index)]


@pytest.mark.parametrize("bad", range(len(BROKEN)))
def test_chunk_trees_same_trees_and_errors_as_the_line_reader(bad):
    from synprep.conllu import chunk_trees
    from synprep.errors import InputError

    good = sentence(JOHN, "a") + MULTIWORD + EMPTY_NODE + sentence(NONPROJ, "b")
    for text in (good, good + "\n\n" + good, sentence([("x", 0, "root")])):
        assert chunk_trees(text.split("\n"), "x.conllu", 5, 7) == slow_trees(text, 5, 7)
    text = good + BROKEN[bad] + CYCLE  # the first error in the chunk is the one reported
    with pytest.raises(InputError) as expected:
        slow_trees(text, 3, 10)
    with pytest.raises(InputError) as err:
        chunk_trees(text.split("\n"), "x.conllu", 3, 10)
    assert str(err.value) == str(expected.value)


def test_arrow_columns_equal_pyarrow_conversion_of_the_records(treebank):
    """FeatureColumns.to_batch (numpy buffers) = pa.array() on every record's values, byte for byte."""
    from synprep.bpe import Bpe
    from synprep.conllu import read_trees
    from synprep.featurize import FeatureConfig, featurize
    from synprep.schema import records_to_batch

    path, codes = treebank
    trees = list(read_trees(str(path))) * 2 + slow_trees(MULTIWORD)
    features = parse_features("parents,distances,transitions,labels")
    for policy in ("keep", "lift", "drop"):
        columns = featurize(trees, FeatureConfig(features, "keep", policy, True), Bpe(str(codes)).segment_word)
        schema = align_schema(features)
        ids = [7 * i for i in columns.kept]
        records = [{"id": i, "sent_id": columns.sent_id[k], **columns.record(k)} for k, i in enumerate(ids)]
        expected = pa.RecordBatch.from_arrays(
            [pa.array([r[f.name].tolist() if hasattr(r[f.name], "tolist") else r[f.name] for r in records],
                      type=f.type) for f in schema], schema=schema)
        for batch in (columns.to_batch(ids, schema), records_to_batch(records, schema)):
            assert batch.equals(expected)
            assert ipc_bytes(batch) == ipc_bytes(expected)


def ipc_bytes(batch):
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


SHARED_TREEBANKS = sorted((Path(__file__).resolve().parents[2] / "shared" / "data" / "ud").glob("*/*.conllu"))
SAMPLE_TREEBANKS = sorted((Path(__file__).resolve().parents[1] / "sample_data").glob("*.conllu"))


@pytest.mark.slow
@pytest.mark.parametrize("path", SAMPLE_TREEBANKS + SHARED_TREEBANKS, ids=lambda p: p.name)
def test_chunk_trees_on_real_treebanks(path):
    """The column-wise reader gives the line reader's trees on whole treebanks (multiword tokens, ...)."""
    from synprep.conllu import chunk_trees, read_conllu_chunks, read_trees

    chunked = [tree for lines, first_line, first_index in read_conllu_chunks(str(path), 100)
               for tree in chunk_trees(lines, str(path), first_line, first_index)]
    assert chunked == list(read_trees(str(path)))


def test_featurize_drops_by_position_and_sentence_features_raises():
    from synprep.featurize import FeatureConfig, Rejected, featurize, sentence_features
    from synprep.trees import Tree

    trees = [Tree([w for w, _, _ in words], [h for _, h, _ in words], [lab for _, _, lab in words])
             for words in (JOHN, NONPROJ, JOHN)]
    config = FeatureConfig(("parents",), "drop", "drop")
    columns = featurize(trees, config)
    assert columns.kept == [0, 2] and columns.dropped == {1: "non_projective"}
    assert columns.rejected == {"non_projective": 1}
    assert columns.record(1)["parent_mid"].tolist() == sentence_features(trees[2], config)["parent_mid"].tolist()
    with pytest.raises(Rejected) as err:
        sentence_features(trees[1], config)
    assert err.value.reason == "non_projective"
