"""`synprep convert` end to end: accounting, determinism, resume after SIGKILL, readers, bad input, Ray."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pytest

from synprep.features import from_transitions
from synprep.schema import pair_schema

from .conftest import REPO, SAMPLE_DATA, SHARED

BIN = Path(sys.executable).parent
PARALLEL = SAMPLE_DATA / "parallel"


def write_pipeline(tmp_path, models, *, train=None, extra="", shard_size=20, features=None, filter_table=None):
    """A pipeline file over sample data (or given train files) with the session's tiny models."""
    train = train or (PARALLEL / "train.en", PARALLEL / "train.de")
    features = features or 'src = ["parents", "distances", "labels"]\ntgt = ["transitions", "labels"]'
    filter_table = filter_table or 'langid = "py3langid"\nlangid_languages = ["en", "de", "fr"]'
    text = f"""
[pipeline]
name = "t"
src_lang = "en"
tgt_lang = "de"
output = "{tmp_path / 'out'}"
shard_size = {shard_size}
[splits.train]
src = "{train[0]}"
tgt = "{train[1]}"
[splits.test]
src = "{PARALLEL / 'test.en'}"
tgt = "{PARALLEL / 'test.de'}"
[filter]
{filter_table}
[parser.src]
backend = "udpipe"
model = "{models('en')}"
[parser.tgt]
backend = "udpipe"
model = "{models('de')}"
[bpe]
symbols = 200
[features]
{features}
non_projective = "lift"
{extra}
"""
    path = tmp_path / "pipeline.toml"
    path.write_text(text)
    return path


def convert(pipeline, *args, check=True):
    """`synprep convert PIPELINE ARGS`; a finished dataset's accounting is checked (conftest's `assert_accounted`)."""
    result = subprocess.run([str(BIN / "synprep"), "convert", str(pipeline), *map(str, args)],
                            capture_output=True, text=True)
    if check:
        assert result.returncode == 0, result.stderr[-2000:]
    return result


def shard_bytes(out):
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(Path(out).glob("*/part-*.arrow"))}


def read_split(folder):
    tables = [pa.ipc.open_stream(pa.memory_map(str(p))).read_all() for p in sorted(Path(folder).glob("part-*.arrow"))]
    return pa.concat_tables(tables)


def test_sample_pipeline_end_to_end(tmp_path, tiny_udpipe):
    pipeline = write_pipeline(tmp_path, tiny_udpipe)
    result = convert(pipeline, "--workers", "1")
    out = tmp_path / "out"
    manifest = json.loads((out / "train" / "manifest.json").read_text())
    assert manifest["input_lines"] == 50
    assert manifest["rows"] + sum(manifest["rejected"].values()) == 50
    assert manifest["rejected"] == {"empty": 1, "identical": 1, "src_lang": 1}
    assert [s["rows"] for s in manifest["shards"]] == [20, 20, 7]
    assert manifest["signature"]["bpe_codes_sha256"] and manifest["signature"]["parsers"]["src"]["sha256"]
    assert "train" in result.stdout and "src_lang" in result.stdout  # the summary table
    table = read_split(out / "train")
    assert table.schema == pair_schema(("parents", "distances", "labels"), ("transitions", "labels"))
    assert table.num_rows == 47 and table.column("id").to_pylist() == sorted(table.column("id").to_pylist())
    assert 40 not in table.column("id").to_pylist()  # the empty-source pair
    rejected = (out / "train" / "rejected.tsv").read_text().splitlines()
    assert [line.split("\t")[:2] for line in rejected] == [["40", "empty"], ["41", "src_lang"], ["42", "identical"]]
    for row in table.to_pylist():
        n = len(row["src_tokens"])
        assert len(row["src_heads"]) == n and len(row["src_parent_mid"]) == len(row["src_subwords"])
        assert "src_distances" not in row  # made from the heads where used (shard format 2)
        subwords, owner, heads, _ = from_transitions(row["tgt_transitions"])
        assert subwords == row["tgt_subwords"] and owner == row["tgt_subword_token"]
        if row["tgt_projective"]:
            assert heads == row["tgt_heads"]
    test = json.loads((out / "test" / "manifest.json").read_text())
    assert test["rows"] == 6 and test["rejected"] == {}


def test_shards_open_without_synprep(tmp_path, tiny_udpipe):
    pipeline = write_pipeline(tmp_path, tiny_udpipe)
    convert(pipeline, "--workers", "1")
    shard = tmp_path / "out" / "train" / "part-00000.arrow"
    code = f"""
import pyarrow as pa, pandas, datasets, polars
path = {str(shard)!r}
table = pa.ipc.open_stream(pa.memory_map(path)).read_all()
frame = table.to_pandas()
ds = datasets.Dataset.from_file(path)
pl = polars.read_ipc_stream(path)
assert len(frame) == ds.num_rows == pl.height == table.num_rows == 20
assert ds[0]["src_subwords"] == table.column("src_subwords")[0].as_py() == list(pl["src_subwords"][0])
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]


@pytest.mark.slow
def test_deterministic_across_runs_and_workers(tmp_path, tiny_udpipe):
    outputs = []
    for run, workers in enumerate((1, 2, 2)):
        folder = tmp_path / f"run{run}"
        folder.mkdir()
        convert(write_pipeline(folder, tiny_udpipe), "--workers", workers)
        outputs.append(shard_bytes(folder / "out"))
    assert outputs[0] == outputs[1] == outputs[2] and len(outputs[0]) == 4


def _bigger_corpus(tmp_path, copies=12):
    src = (PARALLEL / "train.en").read_text().splitlines() * copies
    tgt = (PARALLEL / "train.de").read_text().splitlines() * copies
    (tmp_path / "big.en").write_text("\n".join(src) + "\n")
    (tmp_path / "big.de").write_text("\n".join(tgt) + "\n")
    return tmp_path / "big.en", tmp_path / "big.de"


@pytest.mark.slow
@pytest.mark.parametrize("kill_when", ["piece", "shard"])
def test_resume_after_sigkill_gives_the_same_shards(tmp_path, tiny_udpipe, kill_when):
    train = _bigger_corpus(tmp_path)
    reference_dir = tmp_path / "reference"
    reference_dir.mkdir()
    convert(write_pipeline(reference_dir, tiny_udpipe, train=train, shard_size=50), "--workers", "1")
    reference = shard_bytes(reference_dir / "out")

    crash_dir = tmp_path / "crash"
    crash_dir.mkdir()
    pipeline = write_pipeline(crash_dir, tiny_udpipe, train=train, shard_size=50)
    out = crash_dir / "out"
    pattern = ".work/train/piece-*.json" if kill_when == "piece" else ".work/splits/train/part-00000.arrow"
    process = subprocess.Popen([str(BIN / "synprep"), "convert", str(pipeline), "--workers", "1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while not list(out.glob(pattern)) and process.poll() is None and time.time() < deadline:
        time.sleep(0.002)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert list(out.glob(pattern)), "the run ended before the kill point"
    assert not (out / ".work" / "splits" / "train" / "manifest.json").exists(), "killed too late to test resuming"
    assert not (out / "train").exists()  # a split folder appears whole (moved into OUT), never while written
    refused = convert(pipeline, check=False)
    assert refused.returncode == 2 and "--resume" in refused.stderr
    convert(pipeline, "--resume", "--workers", "2")
    assert shard_bytes(out) == reference
    assert not (out / ".work").exists()  # removed once nothing is left to resume
    manifest = json.loads((out / "train" / "manifest.json").read_text())
    assert manifest["rows"] + sum(manifest["rejected"].values()) == 600


def test_ctrl_c_says_resume_and_the_workers_print_nothing(tmp_path, tiny_udpipe):
    """Ctrl-C (SIGINT to the terminal's whole process group): one line naming --resume, exit 130, no
    `Process ForkPoolWorker-N:` traceback from the workers; --resume then finishes the run."""
    pipeline = write_pipeline(tmp_path, tiny_udpipe, train=_bigger_corpus(tmp_path, copies=40), shard_size=200)
    out = tmp_path / "out"
    # --no-dedupe: the 40 copies would otherwise be parsed once, and the run could end before the signal lands
    process = subprocess.Popen([str(BIN / "synprep"), "convert", str(pipeline), "--workers", "2", "--no-dedupe"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 300
    while not list(out.glob(".work/train/piece-*.json")) and process.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert not (out / "train" / "manifest.json").exists(), "interrupted too late"
    assert process.returncode == 130 and "Process ForkPoolWorker" not in stderr and "Traceback" not in stderr, stderr
    assert stderr.splitlines() == [f"synprep: interrupted; the finished pieces are kept: continue with synprep convert "
                                   f"{pipeline} --workers 2 --no-dedupe --resume"]
    convert(pipeline, "--workers", "2", "--no-dedupe", "--resume")
    manifest = json.loads((out / "train" / "manifest.json").read_text())
    assert manifest["rows"] + sum(manifest["rejected"].values()) == 2000


def test_overwrite_and_config_change_on_resume(tmp_path, tiny_udpipe):
    pipeline = write_pipeline(tmp_path, tiny_udpipe)
    convert(pipeline, "--workers", "1")
    changed = convert(pipeline, "--resume", "--shard-size", "7", check=False)
    assert changed.returncode == 2 and "different configuration" in changed.stderr
    convert(pipeline, "--overwrite", "--shard-size", "7", "--workers", "1")
    manifest = json.loads((tmp_path / "out" / "train" / "manifest.json").read_text())
    assert [s["rows"] for s in manifest["shards"]][:2] == [7, 7]


def one_line_error(result, *needles):
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in lines[0]


def test_bad_inputs(tmp_path, tiny_udpipe):
    (tmp_path / "short.de").write_text("Ein Satz.\n")
    pipeline = write_pipeline(tmp_path, tiny_udpipe, train=(PARALLEL / "train.en", tmp_path / "short.de"))
    one_line_error(convert(pipeline, check=False), "50 source segments", "1 target segments")
    assert not (tmp_path / "out").exists()  # nothing written

    pipeline = write_pipeline(tmp_path, tiny_udpipe, train=(tmp_path / "missing.en", PARALLEL / "train.de"))
    one_line_error(convert(pipeline, check=False), "missing.en", "not found")

    pipeline = write_pipeline(tmp_path, lambda lang: str(tmp_path / f"nope.{lang}.udpipe"))
    one_line_error(convert(pipeline, check=False), "nope.en.udpipe", "LINDAT")

    pipeline = write_pipeline(tmp_path, tiny_udpipe, extra="[features.typo]\n")
    one_line_error(convert(pipeline, check=False), "pipeline.toml")
    (tmp_path / "x.toml").write_text("[pipeline]\nsrc_lang = 'en'\ntgt_lang = 'de'\nshard_sise = 3\n")
    one_line_error(convert(tmp_path / "x.toml", check=False), "unknown key(s) shard_sise")


def test_a_filter_that_rejects_every_train_pair_stops_right_after_it(tmp_path, tiny_udpipe):
    """Sides swapped (German as the source): one line with the counts per reason and the likely cause, no parse or
    BPE step after it, the rejections report kept where the user can read it; the corrected run needs no flag."""
    pipeline = write_pipeline(tmp_path, tiny_udpipe, train=(PARALLEL / "train.de", PARALLEL / "train.en"))
    out = tmp_path / "out"
    result = convert(pipeline, "--workers", "1", check=False)
    one_line_error(result, "split 'train': all 50 pairs rejected (src_lang 48, empty 1, identical 1): 48 of 50 as "
                   "src_lang: the source looks like de, not en; check src_lang/tgt_lang",
                   str(out / "rejected-train.tsv"))
    assert ".work" not in result.stderr and "BPE" not in result.stderr
    report = [line.split("\t") for line in (out / "rejected-train.tsv").read_text().splitlines()]
    assert len(report) == 50 and report[0][:3] == ["0", "src_lang", "detected de 1.00"]
    assert [name for name in os.listdir(out) if name != ".lock"] == ["rejected-train.tsv"]

    pipeline = write_pipeline(tmp_path, tiny_udpipe)  # the corrected pipeline: same output folder, no --overwrite
    convert(pipeline, "--workers", "1")
    assert not (out / "rejected-train.tsv").exists() and (out / "train" / "manifest.json").is_file()


def test_a_filter_that_keeps_too_few_train_pairs_stops_and_many_rejections_warn(tmp_path, tiny_udpipe):
    """Most pairs rejected and fewer than MIN_TRAIN_PAIRS kept: stop after the filter; over 30% rejected:
    the warning `synprep filter` gives, word for word (one implementation)."""
    from synprep.convert.converter import MIN_TRAIN_PAIRS
    from synprep.filter import FilterSettings, filter_files

    src = (PARALLEL / "train.en").read_text().splitlines()[:30]
    tgt = (PARALLEL / "train.de").read_text().splitlines()[:30]
    long_src = [line + " and so on" * 12 for line in src]  # over max_len 80 tokens... on the source only
    (tmp_path / "few.en").write_text("\n".join(src[:MIN_TRAIN_PAIRS - 2] + long_src[MIN_TRAIN_PAIRS - 2:]) + "\n")
    (tmp_path / "few.de").write_text("\n".join(tgt) + "\n")
    pipeline = write_pipeline(tmp_path, tiny_udpipe, train=(tmp_path / "few.en", tmp_path / "few.de"),
                              filter_table="langid = 'none'\nmax_len = 20")
    result = convert(pipeline, "--workers", "1", check=False)
    one_line_error(result, f"{MIN_TRAIN_PAIRS - 2} of 30 pairs kept, fewer than the {MIN_TRAIN_PAIRS} needed",
                   "as too_long: sentences over max_len = 20 whitespace tokens; raise [filter] max_len")

    half = [line + " and so on" * 12 if i % 5 < 2 else line for i, line in enumerate(src)]  # 40% too long
    (tmp_path / "half.en").write_text("\n".join(half) + "\n")
    pipeline = write_pipeline(tmp_path, tiny_udpipe, train=(tmp_path / "half.en", tmp_path / "few.de"),
                              filter_table="langid = 'none'\nmax_len = 20")
    warned = [line for line in convert(pipeline, "--workers", "1").stderr.splitlines() if "warning" in line]
    settings = FilterSettings("en", "de", max_len=20, langid=None)
    told = []
    filter_files(str(tmp_path / "half.en"), str(tmp_path / "few.de"), str(tmp_path / "f"), settings, workers=1,
                 warn=told.append)
    assert told == ["warning: 40.0% of 30 pairs rejected (too_long 40.0%); check the languages, the settings and "
                    "that the files are parallel"]
    assert warned == [f"synprep convert: split 'train': {told[0]} (OUT/train/rejected.tsv lists them)"]


def test_likely_causes_name_the_setting():
    from synprep.filter import FilterSettings, likely_cause

    settings = FilterSettings("ja", "en", max_ratio=3.0)
    assert "written without spaces" in likely_cause("ratio", [], settings) and "max_ratio = 3.0" in \
        likely_cause("ratio", [], settings)
    assert likely_cause("tgt_lang", ["detected fr 0.91", "detected de 0.80", "detected fr 0.99"], settings) \
        .startswith("the target looks like fr, not en; check src_lang/tgt_lang")


def test_invalid_utf8_empty_lines_and_broken_trees_are_counted(tmp_path, tiny_udpipe):
    src = (PARALLEL / "train.en").read_bytes().splitlines()[:10]
    tgt = (PARALLEL / "train.de").read_bytes().splitlines()[:10]
    src[3] = b"Caf\xe9 au lait is good."  # latin-1 byte
    src[5], tgt[5] = b"", b""
    (tmp_path / "in.en").write_bytes(b"\n".join(src) + b"\n")
    (tmp_path / "in.de").write_bytes(b"\n".join(tgt) + b"\n")
    pipeline = write_pipeline(tmp_path, tiny_udpipe, train=(tmp_path / "in.en", tmp_path / "in.de"))
    convert(pipeline, "--workers", "1")
    manifest = json.loads((tmp_path / "out" / "train" / "manifest.json").read_text())
    assert manifest["rejected"]["invalid_utf8"] == 1 and manifest["rejected"]["empty"] == 1
    assert manifest["rows"] + sum(manifest["rejected"].values()) == 10

    # pre-parsed CoNLL-U target side with a broken tree (two roots): a counted rejection, not a crash
    conllu = tmp_path / "in.de.conllu"
    blocks = []
    for i, line in enumerate(tgt[:4]):
        words = line.decode().split()
        heads = ["0"] + ["1"] * (len(words) - 1)
        if i == 2:
            heads[-1] = "0"
        blocks.append("\n".join(f"{k}\t{w}\t_\t_\t_\t_\t{h}\tdep\t_\t_" for k, (w, h) in
                                enumerate(zip(words, heads), 1)) + "\n")
    conllu.write_text("\n".join(blocks) + "\n")
    (tmp_path / "four.en").write_bytes(b"\n".join(src[:3] + [b"The house is old."]) + b"\n")
    shutil.rmtree(tmp_path / "out")
    pipeline = write_pipeline(tmp_path, tiny_udpipe, train=(tmp_path / "four.en", conllu),
                              filter_table='langid = "none"')
    convert(pipeline, "--workers", "1")
    manifest = json.loads((tmp_path / "out" / "train" / "manifest.json").read_text())
    assert manifest["rejected"] == {"invalid_tree": 1} and manifest["rows"] == 3
    assert f"tgt: {conllu}:18: more than one root" in (tmp_path / "out" / "train" / "rejected.tsv").read_text()


@pytest.mark.slow
def test_ray_engine_gives_the_local_shards(tmp_path, tiny_udpipe):
    pytest.importorskip("ray")
    local, remote = tmp_path / "local", tmp_path / "ray"
    local.mkdir()
    remote.mkdir()
    convert(write_pipeline(local, tiny_udpipe), "--workers", "2")
    short_tmp = tempfile.mkdtemp(prefix="sr")  # Ray's socket paths must stay under 108 bytes
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "SYNPREP_RAY_TMP": short_tmp}
    done = subprocess.run([str(BIN / "synprep"), "convert", str(write_pipeline(remote, tiny_udpipe)),
                           "--engine", "ray", "--workers", "2"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    shutil.rmtree(short_tmp, ignore_errors=True)
    assert shard_bytes(local / "out") == shard_bytes(remote / "out")


MULTI30K = SHARED / "data" / "parallel" / "multi30k"


@pytest.mark.slow
@pytest.mark.skipif(not (MULTI30K / "train.en").exists() or not (SHARED / "models" / "en_ewt.udpipe").exists(),
                    reason="../shared Multi30k or models not present")
def test_multi30k_slice_with_shared_models(tmp_path):
    lines = 1500
    for lang in ("en", "de"):
        with open(MULTI30K / f"train.{lang}", encoding="utf-8") as handle:
            (tmp_path / f"train.{lang}").write_text("".join(next(handle) for _ in range(lines)))
    text = (REPO / "pipelines" / "multi30k-en-de.toml").read_text()
    text = text.replace('src = "data/parallel/multi30k/train.en"', f'src = "{tmp_path / "train.en"}"')
    text = text.replace('tgt = "data/parallel/multi30k/train.de"', f'tgt = "{tmp_path / "train.de"}"')
    text = text.replace('data_root = "../../shared"', f'data_root = "{SHARED}"')
    text = text.replace("symbols = 10000", "symbols = 2000")
    pipeline = tmp_path / "m30k.toml"
    pipeline.write_text(text)
    convert(pipeline, "--output", tmp_path / "out", "--workers", "2")
    for split, expected in (("train", lines), ("valid", 1014), ("test", 1000)):
        manifest = json.loads((tmp_path / "out" / split / "manifest.json").read_text())
        assert manifest["input_lines"] == expected
        assert manifest["rows"] + sum(manifest["rejected"].values()) == expected
        assert manifest["rows"] > 0.95 * expected
    table = read_split(tmp_path / "out" / "test")
    assert table.num_rows == 1000 and table.column("id").to_pylist() == list(range(1000))


@pytest.mark.parametrize("path", sorted((REPO / "pipelines").glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_pipeline_file_loads(path):
    from synprep.convert.pipeline import load_pipeline

    config = load_pipeline(str(path))
    assert {s.name for s in config.splits} == {"train", "valid", "test"}
    assert config.bpe.symbols and config.src_parser is not None and config.source or path.name != "sample.toml"


def test_a_mistyped_pipeline_key_gets_did_you_mean_as_in_recipes(tmp_path):
    """The hint syntrain gives for a recipe key, from the one implementation (synprep.tables.did_you_mean)."""
    from synprep.convert.pipeline import load_pipeline
    from synprep.errors import InputError

    head = "[pipeline]\nsrc_lang = 'en'\ntgt_lang = 'de'\n"
    for text, message in [
        (head + "shard_sise = 3\n", "unknown key(s) shard_sise (did you mean shard_size?) in [pipeline]"),
        (head + "[splits.tran]\nsrc = 'a'\ntgt = 'b'\n", "unknown split [splits.tran] (did you mean train?)"),
        (head + "[splits.train]\nsrc = 'a'\ntgt = 'b'\nfilter = true\nformt = 'text'\n",
         "unknown key(s) formt (did you mean format?) in [splits.train]"),
        (head + "[fliter]\n", "unknown key(s) fliter (did you mean filter?) in [top level]"),
    ]:
        (tmp_path / "p.toml").write_text(text)
        with pytest.raises(InputError) as err:
            load_pipeline(str(tmp_path / "p.toml"))
        assert err.value.message == message


def test_tsv_corpora_read_both_sides_from_columns_and_count_bad_rows(tmp_path, tiny_udpipe):
    """`tsv = FILE` (ParaCrawl, Tatoeba, CCMatrix): src_column / tgt_column (default 0 / 1), .gz too; a row
    without a side's column is a counted rejection (bad_row) naming the file and line."""
    import gzip

    from synprep.convert.pipeline import load_pipeline
    from synprep.errors import InputError

    en, de = ((PARALLEL / f"train.{lang}").read_text().splitlines() for lang in ("en", "de"))
    rows = [f"{s}\t{t}\t0.9" for s, t in zip(en, de)] + ["a row with one column"]
    (tmp_path / "train.tsv.gz").write_bytes(gzip.compress(("\n".join(rows) + "\n").encode()))
    (tmp_path / "test.tsv").write_text("".join(f"{t}\t{s}\n" for s, t in zip(en[:5], de[:5])))
    head = (f"[pipeline]\nsrc_lang = 'en'\ntgt_lang = 'de'\noutput = '{tmp_path / 'out'}'\n"
            "[parser.src]\nmodel = '{}'\n[parser.tgt]\nmodel = '{}'\n[bpe]\nsymbols = 100\n"
            "[filter]\nlangid = 'py3langid'\nlangid_languages = ['en', 'de', 'fr']\n"
            "[normalize]\nsrc = ['romanian']\n").format(tiny_udpipe("en"), tiny_udpipe("de"))  # a bad row stays bad
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(head + f"[splits.train]\ntsv = '{tmp_path / 'train.tsv.gz'}'\n[splits.test]\n"
                        f"tsv = '{tmp_path / 'test.tsv'}'\nsrc_column = 1\ntgt_column = 0\n")
    convert(pipeline, "--workers", "1")
    manifest = json.loads((tmp_path / "out" / "train" / "manifest.json").read_text())
    assert manifest["input_lines"] == 51 and manifest["rows"] == 47
    assert manifest["rejected"] == {"bad_row": 1, "empty": 1, "identical": 1, "src_lang": 1}
    bad = (tmp_path / "out" / "train" / "rejected.tsv").read_text().splitlines()[-1].split("\t")
    assert bad[:3] == ["50", "bad_row", f"{tmp_path / 'train.tsv.gz'}:51: 1 column(s), no column 1"]
    train = read_split(tmp_path / "out" / "train")
    assert train.column("src_text").to_pylist()[:3] == en[:3] and train.column("tgt_text").to_pylist()[:3] == de[:3]
    test = read_split(tmp_path / "out" / "test")
    assert test.column("src_text").to_pylist() == en[:5] and test.column("tgt_text").to_pylist() == de[:5]

    for split, message in [("tsv = 'a.tsv'\nsrc = 'a.en'\n", "[splits.train] tsv and src exclude each other"),
                           ("tsv = 'a.tsv'\ntgt_column = 0\n", "src_column and tgt_column are the same column"),
                           ("src = 'a.en'\n", "needs src and tgt (or tsv = a file with both sides in columns)")]:
        pipeline.write_text(head + "[splits.train]\n" + split)
        with pytest.raises(InputError, match=re.escape(message)):
            load_pipeline(str(pipeline))


def test_sgml_and_xml_test_sets(tmp_path):
    from synprep.convert.corpus import read_side

    sgm = tmp_path / "newstest-src.en.sgm"
    sgm.write_text('<srcset setid="x" srclang="any">\n<doc sysid="ref" docid="1" origlang="en">\n'
                   '<seg id="1">First sentence .</seg>\n<seg id="2"> Second &amp; last </seg>\n</doc>\n</srcset>\n')
    xml = tmp_path / "wmttest.de.xml"
    xml.write_text('<?xml version="1.0"?>\n<dataset id="t"><collection id="c"><doc id="d1" origlang="en">'
                   '<src lang="en"><p><seg id="1">One &amp; two</seg><seg id="2">Three</seg></p></src>'
                   '<ref lang="de" translator="A"><p><seg id="1">Eins</seg></p></ref></doc></collection></dataset>\n')
    assert list(read_side([str(sgm)])) == [b"First sentence .", b"Second &amp; last"]
    assert list(read_side([str(xml)])) == [b"One & two", b"Three"]
    assert list(read_side([str(xml)], lang="de")) == [b"Eins"]


def test_max_pairs_takes_the_first_pairs_of_a_split_and_is_recorded(tmp_path):
    """`max_pairs = N` in [splits.X]: only the split's first N input pairs are read (in order), the manifest
    records it (and leaves it out where unset), and a value that is not a positive integer is one error naming
    the table and the key."""
    from synprep.convert.pipeline import load_pipeline
    from synprep.errors import InputError

    subprocess.run([str(BIN / "synprep"), "synth", "--pairs", "100", "--seed", "3", "-o", str(tmp_path / "s")],
                   check=True, capture_output=True)
    pipeline = tmp_path / "s" / "pipeline.toml"
    text = pipeline.read_text()
    pipeline.write_text(text.replace('tgt = "train.tgt.conllu"\n', 'tgt = "train.tgt.conllu"\nmax_pairs = 25\n'))
    convert(pipeline, "--workers", "1")
    manifest = json.loads((tmp_path / "s" / "shards" / "train" / "manifest.json").read_text())
    assert manifest["input_lines"] == 25
    assert [split.get("max_pairs") for split in manifest["configuration"]["splits"]] == [25, None, None]
    assert not any("max_pairs" in split for split in manifest["configuration"]["splits"][1:])
    written = read_split(tmp_path / "s" / "shards" / "train").column("src_text").to_pylist()
    first = (tmp_path / "s" / "train.src").read_text().splitlines()[:25]
    assert 20 <= len(written) <= 25 and set(written) <= set(first)
    test_manifest = json.loads((tmp_path / "s" / "shards" / "test" / "manifest.json").read_text())
    assert test_manifest["input_lines"] == len((tmp_path / "s" / "test.src").read_text().splitlines())
    for value in ("0", "-3", "2.5", "'10'", "true"):
        line = f'tgt = "train.tgt.conllu"\nmax_pairs = {value}\n'
        pipeline.write_text(text.replace('tgt = "train.tgt.conllu"\n', line))
        with pytest.raises(InputError, match=r"\[splits\.train\].*max_pairs"):
            load_pipeline(str(pipeline))
